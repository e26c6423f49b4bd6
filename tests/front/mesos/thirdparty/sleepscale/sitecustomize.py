"""Scale ``time.sleep`` in the processes of chosen scripts (tests only; see ../README.md)."""

import os
import sys
import time

_sleep = time.sleep
_scale = float(os.environ.get("ELASTIC_TEST_SLEEP_SCALE", "1"))
_scripts = set(os.environ.get("ELASTIC_TEST_SLEEP_SCRIPTS", "").split(","))


def _scaled(seconds: float) -> None:
    argv = getattr(sys, "argv", None) or [""]
    _sleep(seconds * _scale if os.path.basename(argv[0]) in _scripts else seconds)


time.sleep = _scaled
