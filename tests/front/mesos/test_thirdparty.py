"""Third-party pymesos frameworks, unmodified, against the front door on the local backend.

Each runs as its authors wrote it (the files in ``thirdparty/`` are copies): no credentials, no ``elastic.*``
labels. What each needed from the front door:

- pymesos' ``examples/scheduler.py`` + ``executor.py``: custom executors (the v1 executor API), the task's
  ``data`` relayed to the executor, fractional ``cpus`` (0.1 task + 0.1 executor: one core). Its executor
  sleeps 30 s per task; a ``sitecustomize`` on the agents' ``PYTHONPATH`` scales that sleep (the file is not
  changed). It never stops by itself: SIGINT (its documented way out) makes it exit 0.
- ``pymesos.subprocess`` (``check_output`` and ``call`` on an agent): custom executors, ``TaskStatus.data``
  relayed to the scheduler (the remote exit status), the agent reaching back to the scheduler's host for
  the standard streams. Two things: pymesos 0.3.15 (the latest) writes a ``str`` to a pipe in
  ``Redirector._wakeup``, a ``TypeError`` on Python 3 at the first ``Popen``: the test's script replaces
  that one method (pymesos' file is not changed); and its default task (1 cpu, 1024 MB, plus 0.01 cpu and
  32 MB for its executor) needs two cores of an offer while a framework that says nothing of its size gets
  one: the script passes ``cpus=0.5, mem=256``, arguments of pymesos' own API.
- TFMesos' ``tfrun`` (a gang: one parameter server and two workers that wait for one another): its gang
  learned (it says nothing of its size and launches on offers as they come, so it would wait forever on its
  first core), a stand-in ``tensorflow`` module (``tfmesos.server`` imports it; a task with a command does
  not use it), and a heartbeat interval longer than the run: TFMesos' ``processHeartBeat(self)`` takes no
  driver while pymesos 0.3.15 passes one, so it dies at its first HEARTBEAT (a server option, not a change
  to TFMesos).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent / "thirdparty"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[MesosServer]:
    # the agents (and the executors they start) inherit this environment
    path = os.pathsep.join(p for p in (str(HERE / "sleepscale"), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("ELASTIC_TEST_SLEEP_SCALE", "0.02")
    monkeypatch.setenv("ELASTIC_TEST_SLEEP_SCRIPTS", "executor.py")
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=1.0) as server,
    ):
        yield server


@pytest.mark.timeout(120)
def test_the_pymesos_example_scheduler_and_executor_run_unmodified(server: MesosServer) -> None:
    scheduler = subprocess.Popen(
        [sys.executable, str(HERE / "pymesos_example" / "scheduler.py"), server.address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert scheduler.stderr is not None
    seen: Counter[tuple[str, str]] = Counter()
    lines = []
    deadline = time.monotonic() + 60
    try:
        while sum(1 for _, s in seen if s == "TASK_FINISHED") < 3 and time.monotonic() < deadline:
            line = scheduler.stderr.readline()
            if not line:
                break
            lines.append(line)
            found = re.search(r"Status update TID (\S+) (TASK_\w+)", line)
            if found:
                seen[(found[1], found[2])] += 1
    finally:
        scheduler.send_signal(signal.SIGINT)
        rest, _ = scheduler.communicate(timeout=30)
    finished = {t for t, s in seen if s == "TASK_FINISHED"}
    assert len(finished) >= 3, "".join(lines[-30:])
    for task in finished:  # each once, after it ran
        assert seen[(task, "TASK_RUNNING")] == 1 and seen[(task, "TASK_FINISHED")] == 1
    assert not {s for _, s in seen} - {"TASK_STAGING", "TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"}
    assert scheduler.returncode == 0, rest[-2000:]


@pytest.mark.timeout(120)
def test_pymesos_subprocess_runs_remote_commands(server: MesosServer) -> None:
    script = (
        "import os, sys\n"
        "from pymesos import subprocess as mesos\n"
        "from pymesos.subprocess.popen import Redirector\n"
        "Redirector._wakeup = lambda self: os.write(self._wakeup_fd, b'\\0')  # pymesos' Python 3 bug\n"
        "out = mesos.check_output(['sh', '-c', 'echo remote-$((6 * 7))'], cpus=0.5, mem=256)\n"
        "sys.stdout.write(out.decode())\n"
        "print(mesos.call(['sh', '-c', 'exit 3'], cpus=0.5, mem=256))\n"
    )
    env = {**os.environ, "MESOS_MASTER": server.address}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["remote-42", "3"]


@pytest.mark.timeout(120)
def test_tfmesos_tfrun_gets_its_gang_of_three_cores(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # tfrun's tasks get its PYTHONPATH (TFMesos passes its own sys.path on), hence tfmesos and the stand-in
    path = [str(HERE / "tfmesos"), str(HERE / "tfstub"), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in path if p))
    out = tmp_path / "ran"
    command = f"echo {{job_name}}:{{task_index}} >> {out}"  # tfrun fills in each task's job and index
    with (
        LocalBackend(cores=3) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=300.0, gang_wait=2.0) as server,
    ):
        done = subprocess.run(
            [sys.executable, str(HERE / "tfmesos" / "tfrun"), "-w", "2", "-s", "1", "-m", server.address,
             "--", command],
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        gang = [a for a in el.view().allocations if "+gang" in (a.stage or "")]
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(out.read_text().split()) == ["ps:0", "worker:0", "worker:1"]
    assert "Out of 3 tasks 3 tasks have been registered" in done.stderr
    assert len(gang) == 2, "two cores were learned one at a time, each on an allocation of its own"
