"""A stage idle for ``idle_timeout`` completes then, not at run control's next poll.

Found trying the front door: with ``idle_timeout=5`` and the default 30-s poll, a stage whose one task
ended at 1.7 s completed, and its allocation was released, at 32 s.
"""

from __future__ import annotations

import time

import pytest

from elastic import Elastic


def _inc(x: int) -> int:
    return x + 1


@pytest.mark.timeout(120)
def test_an_idle_stage_completes_at_its_idle_timeout_not_the_next_poll() -> None:
    with Elastic(
        "local", "perstage", idle_timeout=3.0, poll_interval=60.0, progress=False, store=False
    ) as el:
        assert el.submit(_inc, 1).result(timeout=60) == 2
        done = time.monotonic()
        while not el.view().stages[0].complete and time.monotonic() - done < 50:
            time.sleep(0.1)
        took = time.monotonic() - done
        assert el.view().stages[0].complete
    assert 2.0 < took < 20.0, f"the stage completed {took:.1f} s after its last task (idle_timeout 3 s)"
