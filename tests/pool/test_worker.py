"""Warm workers: long-lived processes of an agent running Python tasks back to back (real agents)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from elastic.allocations import Allocation, AllocationState
from elastic.pool.pool import Pool
from elastic.pool.tasks import ResultPicklingError, Task, TaskCrashedError, TaskEvent, TaskState
from tests.pool.conftest import AgentStarter, descendants, start_allocation, wait_for


def pid() -> int:
    return os.getpid()


def sleep_then_pid(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def sleep_first_time_then_pid(marker: str, seconds: float) -> int:
    """Sleep ``seconds`` the first time (leaving ``marker``); return at once when run again."""
    path = Path(marker)
    if not path.exists():
        path.touch()
        time.sleep(seconds)
    return os.getpid()


def unpicklable() -> object:
    return threading.Lock()


def hog_memory() -> int:
    chunks = []
    while True:  # until the worker's address-space limit says no
        chunks.append(bytearray(64 * 2**20))


def read_stdin() -> str:
    return sys.stdin.read() + "eof"


def test_tasks_run_back_to_back_in_one_worker_per_core(pool: Pool, start_agent: AgentStarter) -> None:
    agent = start_allocation(pool, start_agent, Allocation("a1", cores=2, walltime=600.0))
    pids = {pool.submit(Task.call(pid)).result(timeout=30) for _ in range(40)}
    assert len(pids) <= 2, "a fresh process per task"
    workers = [
        p for p in descendants(agent.pid) if "elastic.pool.worker" in Path(f"/proc/{p}/cmdline").read_text()
    ]
    assert pids <= set(workers) and len(workers) == 2


def test_a_worker_killed_mid_task_fails_its_task_and_is_replaced(
    pool: Pool, start_agent: AgentStarter
) -> None:
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    first = pool.submit(Task.call(pid)).result(timeout=30)
    doomed = pool.submit(Task.call(sleep_then_pid, (30.0,), task_id="doomed"))
    wait_for(
        pool, lambda e: isinstance(e, TaskEvent) and e.task_id == "doomed" and e.state is TaskState.RUNNING
    )
    time.sleep(0.3)
    os.kill(first, signal.SIGKILL)  # the worker, not the agent: the allocation stays healthy
    with pytest.raises(TaskCrashedError, match="the worker process running it was killed by SIGKILL"):
        doomed.result(timeout=20)
    later = pool.submit(Task.call(pid)).result(timeout=30)
    assert later != first, "the dead worker was not replaced"
    assert pool.allocation("a1").state is AllocationState.RUNNING


def test_a_worker_killed_while_its_allocation_drains_loses_the_task_not_fails_it(
    pool: Pool, start_agent: AgentStarter, tmp_path: Path
) -> None:
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    worker = pool.submit(Task.call(pid)).result(timeout=30)
    marker = str(tmp_path / "started")  # the rerun on a2 returns at once
    task = pool.submit(Task.call(sleep_first_time_then_pid, (marker, 60.0), task_id="t"))
    wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.task_id == "t" and e.state is TaskState.RUNNING)
    # RUNNING is sent when the worker takes the task, maybe before its body left the marker: a kill before
    # that would make the rerun sleep too (the rare flake this wait removes)
    deadline = time.monotonic() + 30
    while not Path(marker).exists():
        assert time.monotonic() < deadline, "the task never started its body"
        time.sleep(0.02)
    pool.drain("a1", "released by the strategy")
    os.kill(worker, signal.SIGKILL)
    lost = wait_for(
        pool, lambda e: isinstance(e, TaskEvent) and e.task_id == "t" and e.state is TaskState.LOST
    )
    assert "killed by SIGKILL while allocation a1 was draining" in lost.detail
    start_allocation(pool, start_agent, Allocation("a2", cores=1, walltime=600.0))
    assert task.result(timeout=60) != worker


def test_an_unpicklable_result_fails_its_future_and_the_worker_survives(
    pool: Pool, start_agent: AgentStarter
) -> None:
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    before = pool.submit(Task.call(pid)).result(timeout=30)
    with pytest.raises(ResultPicklingError, match="returned a lock that cannot be pickled"):
        pool.submit(Task.call(unpicklable)).result(timeout=30)
    assert pool.submit(Task.call(pid)).result(timeout=30) == before


def test_a_task_that_exhausts_memory_fails_and_the_agent_survives(start_agent: AgentStarter) -> None:
    with Pool(heartbeat_interval=0.2, heartbeat_timeout=5.0, worker_memory=1 * 2**30) as pool:
        agent = start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
        with pytest.raises(MemoryError):
            pool.submit(Task.call(hog_memory)).result(timeout=60)
        assert pool.submit(Task.call(pid)).result(timeout=30) > 0  # later tasks still run
        assert agent.poll() is None and pool.allocation("a1").state is AllocationState.RUNNING


def test_a_task_reading_stdin_gets_eof(pool: Pool, start_agent: AgentStarter) -> None:
    """Regression (issue 10): a task's stdin was the agent's control pipe, so reading it never ended."""
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    assert pool.submit(Task.call(read_stdin)).result(timeout=20) == "eof"
    assert pool.submit(Task.shell("cat; echo done")).result(timeout=20).stdout == "done\n"


def test_a_killed_agent_leaves_no_worker_or_task_process(pool: Pool, start_agent: AgentStarter) -> None:
    agent = start_allocation(pool, start_agent, Allocation("a1", cores=2, walltime=600.0))
    pool.submit(Task.call(pid)).result(timeout=30)
    pool.submit(Task.shell("sleep 60 & sleep 60; wait"))
    pool.submit(Task.call(sleep_then_pid, (60.0,)))
    wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.RUNNING and e.cores == 1)
    deadline = time.monotonic() + 10  # the shell task's child may start later than the call's event
    while len(family := descendants(agent.pid)) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(family) >= 4  # two workers, the shell task's child and its sleeps
    os.kill(agent.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in family):
        time.sleep(0.1)
    alive = [p for p in family if Path(f"/proc/{p}").exists() and "zombie" not in _state(p)]
    assert not alive, f"orphans survived their agent: {alive}"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"
