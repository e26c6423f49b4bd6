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
  that one method (pymesos' file is not changed). Its default task (1 cpu, 1024 MB, plus 0.01 cpu and
  32 MB for its executor) needs two cores of an offer while a framework that says nothing of its size is
  first given one: it declines every offer while it runs nothing, so the front door takes its tasks as two
  cores wide (``gang_wait`` later, 1 s here) and every strategy requests a 2-core allocation, whose offer
  carries 2,048 MB (see :mod:`elastic.front.mesos.frameworks`). Run under Per-Stage, ASA and Big-Job.
- TFMesos' ``tfrun`` (a gang: one parameter server and two workers that wait for one another): its gang
  learned (it says nothing of its size and launches on offers as they come, so it would wait forever on its
  first core), a stand-in ``tensorflow`` module (``tfmesos.server`` imports it; a task with a command does
  not use it), and a heartbeat interval longer than the run: TFMesos' ``processHeartBeat(self)`` takes no
  driver while pymesos 0.3.15 passes one, so it dies at its first HEARTBEAT (a server option, not a change
  to TFMesos).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.thirdparty_runs import (
    UpdateLog,
    run_example,
    run_subprocess,
    run_tfrun,
    thirdparty_environment,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[MesosServer]:
    for name, value in thirdparty_environment().items():  # the agents (and their executors) inherit it
        monkeypatch.setenv(name, value)
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=1.0) as server,
    ):
        yield server


@pytest.mark.timeout(120)
def test_the_pymesos_example_scheduler_and_executor_run_unmodified(server: MesosServer) -> None:
    with UpdateLog().watching() as log:
        outcome = run_example(server.address, tasks=3)
    assert outcome.ok, (outcome.problems, outcome.output)
    assert outcome.finished >= 3
    assert not log.problems(every=False), log.problems(every=False)  # it is stopped with tasks running


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy", ["perstage", "asa", "bigjob"])
def test_pymesos_subprocess_runs_remote_commands_of_its_default_size(
    strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in thirdparty_environment().items():
        monkeypatch.setenv(name, value)
    with (
        LocalBackend(cores=3) as backend,  # its first 1-core allocation, and the 2-core one it runs on
        Elastic(backend, strategy, store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=1.0, gang_wait=1.0) as server,
        UpdateLog().watching() as log,
    ):
        outcome = run_subprocess(server.address)
        widths = [a.cores for a in el.view().allocations]
    assert outcome.ok, (outcome.problems, outcome.output)
    assert not log.problems() and len(log.sent) >= 4, (log.problems(), log.sent)
    assert max(widths) == 2, f"a 2-core allocation, learned from its declines: {widths}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy", ["perstage", "bigjob"])
def test_tfmesos_tfrun_gets_its_gang_of_three_cores(
    strategy: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # tfrun's tasks get its PYTHONPATH (TFMesos passes its own sys.path on), hence tfmesos and the stand-in
    for name, value in thirdparty_environment().items():
        monkeypatch.setenv(name, value)
    with (
        LocalBackend(cores=3) as backend,
        Elastic(backend, strategy, store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=300.0, gang_wait=2.0) as server,
    ):
        outcome = run_tfrun(server.address, tmp_path, timeout=90)
        gang = [a for a in el.view().allocations if "+gang" in (a.stage or "")]
    assert outcome.ok, (outcome.problems, outcome.output)
    assert len(gang) == 2, "two cores were learned one at a time, each on an allocation of its own"
