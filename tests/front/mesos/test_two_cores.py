"""Third-party frameworks on a local backend of 2 cores, as many as this machine has: nothing waits silently.

- ``pymesos.subprocess`` (a 2-core task learned from its declines): its first, 1-core allocation is idle
  and too narrow for it, and the 2-core one the never-stall rule asks could not start beside it on 2 cores.
  The rule releases the narrow one (:func:`elastic.control.liveness.unserved`), the wide one starts, and
  the remote commands run.
- TFMesos ``tfrun`` with a gang of 3 cannot run on 2 cores: once it holds both and still waits, the master
  logs a WARNING saying so, instead of asking for a core the partition does not have.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.thirdparty_runs import HERE, UpdateLog, run_subprocess, thirdparty_environment

pytestmark = pytest.mark.slow


@pytest.mark.timeout(90)
@pytest.mark.parametrize("strategy", ["perstage", "bigjob"])
def test_pymesos_subprocess_runs_on_two_cores(strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in thirdparty_environment().items():
        monkeypatch.setenv(name, value)
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, strategy, store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=1.0, gang_wait=1.0) as server,
        UpdateLog().watching() as log,
    ):
        outcome = run_subprocess(server.address, timeout=60)
        allocations = el.view().allocations
    assert outcome.ok, (outcome.problems, outcome.output)
    assert not log.problems() and len(log.sent) >= 4, (log.problems(), log.sent)
    narrow = [a for a in allocations if a.cores == 1]
    assert narrow and all(a.cancelled for a in narrow), "the idle 1-core allocation was released"
    assert max(a.cores for a in allocations) == 2


@pytest.mark.timeout(90)
def test_a_gang_wider_than_the_machine_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for name, value in thirdparty_environment().items():
        monkeypatch.setenv(name, value)
    caplog.set_level(logging.WARNING, logger="elastic.front.mesos")
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=300.0, gang_wait=1.0) as server,
    ):
        tfrun = subprocess.Popen(
            [sys.executable, str(HERE / "tfmesos" / "tfrun"), "-w", "2", "-s", "1", "-m", server.address,
             "--", f"echo {{job_name}} >> {tmp_path / 'ran'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "never runs here" not in caplog.text:
                time.sleep(0.2)
        finally:
            tfrun.kill()
            tfrun.wait()
        gang = [a for a in el.view().allocations if "+gang" in (a.stage or "")]
    assert "waits with all its 2 cores (a gang?) and the partition has 2" in caplog.text, caplog.text
    assert len(gang) == 1, f"one step (its second core), none asked beyond the partition: {gang}"
