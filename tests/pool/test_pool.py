"""The pool with real agents: each agent is started as ``bash -c <agent script>``, as a backend does."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq

from elastic.allocations import Allocation, AllocationEvent, AllocationState
from elastic.batch import JobState
from elastic.errors import ConfigError
from elastic.pool.agent import EXIT_NO_POOL
from elastic.pool.agent_command import AgentCommand
from elastic.pool.events import AgentEvent, AgentEventKind
from elastic.pool.pool import Pool, PoolClosedError
from elastic.pool.protocol import write_secret_file
from elastic.pool.tasks import (
    RemoteTraceback,
    ShellResult,
    ShellTaskError,
    Task,
    TaskCrashedError,
    TaskEvent,
    TaskLostError,
    TaskState,
)
from tests.pool.conftest import AgentStarter, signal_job, start_allocation, wait_for


def square(x: int) -> int:
    return x * x


def divide(a: float, b: float) -> float:
    return a / b


def slow_pid(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def running_on(pool: Pool, task_id: str) -> list[str | None]:
    return [
        e.alloc_id
        for e in pool.events
        if isinstance(e, TaskEvent) and e.task_id == task_id and e.state is TaskState.RUNNING
    ]


def test_callable_and_shell_tasks_return_results(pool: Pool, start_agent: AgentStarter) -> None:
    start_allocation(pool, start_agent, Allocation("a1", cores=2, walltime=600.0, stage="s1"))
    calls = [pool.submit(Task.call(square, (i,), stage="s1")) for i in range(4)]
    shell = pool.submit(Task.shell("echo hello; echo warn >&2", stage="s1"))
    assert [f.result(timeout=20) for f in calls] == [0, 1, 4, 9]
    assert shell.result(timeout=20) == ShellResult(0, "hello\n", "warn\n")
    alloc = pool.allocation("a1")
    assert alloc.state is AllocationState.RUNNING and alloc.start_time is not None
    kinds = [(type(e).__name__, getattr(e, "state", getattr(e, "kind", None))) for e in pool.events]
    assert kinds[:3] == [
        ("AllocationEvent", AllocationState.REQUESTED),
        ("TaskEvent", TaskState.QUEUED),
        ("TaskEvent", TaskState.QUEUED),
    ]
    assert ("AgentEvent", AgentEventKind.JOINED) in kinds
    done = [e for e in pool.events if isinstance(e, TaskEvent) and e.state is TaskState.DONE]
    assert len(done) == 5 and all(e.alloc_id == "a1" and e.attempt == 1 for e in done)


def test_exception_carries_the_remote_traceback(pool: Pool, start_agent: AgentStarter) -> None:
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    future = pool.submit(Task.call(divide, (1, 0), task_id="div"))
    with pytest.raises(ZeroDivisionError) as info:
        future.result(timeout=20)
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback) and "in divide" in cause.tb
    failed = [e for e in pool.events if isinstance(e, TaskEvent) and e.state is TaskState.FAILED]
    assert [(e.task_id, e.detail) for e in failed] == [("div", "ZeroDivisionError: division by zero")]


def test_several_agents_share_one_queue(pool: Pool, start_agent: AgentStarter) -> None:
    for name in ("a1", "a2"):
        start_allocation(pool, start_agent, Allocation(name, cores=1, walltime=600.0))
    futures = [pool.submit(Task.call(slow_pid, (0.3,), task_id=f"t{i}")) for i in range(6)]
    # one warm worker per one-core agent runs its tasks back to back
    assert len({f.result(timeout=30) for f in futures}) == 2
    used = {alloc for i in range(6) for alloc in running_on(pool, f"t{i}")}
    assert used == {"a1", "a2"}
    isolated = [pool.submit(Task.call(slow_pid, (0.1,), task_id=f"i{i}", isolate=True)) for i in range(4)]
    pids = {f.result(timeout=30) for f in isolated}
    assert len(pids) == 4 and not pids & {f.result() for f in futures}  # a fresh process each


def test_killed_agent_task_reruns_elsewhere(pool: Pool, start_agent: AgentStarter, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    pool.add_allocation(Allocation("a2", cores=1, walltime=600.0))
    future = pool.submit(Task.shell(f"sleep 1; echo ran >> {out}", task_id="t"))
    wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.RUNNING)
    os.kill(first.pid, signal.SIGKILL)  # the agent (the script exec'd it), not its task's process
    start_agent(pool.agent_script(pool.allocation("a2")), name="a2")
    assert future.result(timeout=20).returncode == 0
    time.sleep(1.2)  # long enough for an orphaned first attempt to have written too
    assert out.read_text() == "ran\n", "the first attempt survived its agent"
    assert running_on(pool, "t") == ["a1", "a2"]
    lost = [e for e in pool.events if isinstance(e, TaskEvent) and e.state is TaskState.LOST]
    assert len(lost) == 1 and lost[0].alloc_id == "a1" and "sent no heartbeat" in lost[0].detail
    assert any(isinstance(e, AgentEvent) and e.kind is AgentEventKind.LOST for e in pool.events)


def task_states(pool: Pool, task_id: str) -> list[tuple[TaskState, str | None]]:
    return [(e.state, e.alloc_id) for e in pool.events if isinstance(e, TaskEvent) and e.task_id == task_id]


def kill_self(sig: int) -> None:
    os.kill(os.getpid(), sig)


@pytest.mark.parametrize("agent_delay", [0.0, 0.4], ids=["together", "tasks-first"])
def test_sigterm_to_the_whole_job_requeues_the_task_elsewhere(
    pool: Pool, start_agent: AgentStarter, tmp_path: Path, agent_delay: float
) -> None:
    """Slurm's walltime kill or scancel: SIGTERM to every process of the job, the task's too (regression,
    H12: the task's death by SIGTERM was reported as its failure and aborted the run)."""
    out = tmp_path / "out"
    first = start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    pool.add_allocation(Allocation("a2", cores=1, walltime=600.0))
    future = pool.submit(Task.shell(f"sleep 1.5; echo ran >> {out}", task_id="t"))
    wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.RUNNING)
    time.sleep(0.5)  # the task's child and its bash are up
    signal_job(first, signal.SIGTERM, agent_delay=agent_delay)
    assert first.wait(timeout=10) == 0  # the agent left cleanly
    start_agent(pool.agent_script(pool.allocation("a2")), name="a2")
    assert future.result(timeout=20).returncode == 0
    assert out.read_text() == "ran\n"
    assert task_states(pool, "t") == [
        (TaskState.QUEUED, None),
        (TaskState.RUNNING, "a1"),
        (TaskState.LOST, "a1"),
        (TaskState.QUEUED, "a1"),
        (TaskState.RUNNING, "a2"),
        (TaskState.DONE, "a2"),
    ]
    (lost,) = [e for e in pool.events if isinstance(e, TaskEvent) and e.state is TaskState.LOST]
    assert "SIGTERM" in lost.detail and lost.attempt == 1


def test_task_killed_by_a_signal_on_a_healthy_allocation_fails(pool: Pool, start_agent: AgentStarter) -> None:
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    future = pool.submit(Task.call(kill_self, (signal.SIGKILL,), task_id="suicide"))
    with pytest.raises(TaskCrashedError, match=r"task 'suicide' failed: .* was killed by SIGKILL"):
        future.result(timeout=20)
    assert task_states(pool, "suicide") == [
        (TaskState.QUEUED, None),
        (TaskState.RUNNING, "a1"),
        (TaskState.FAILED, "a1"),
    ]
    # a shell command killed by a signal, too: a checked shell task fails with ShellTaskError
    shell = pool.submit(Task.shell("kill -TERM $$", task_id="sh"))
    with pytest.raises(ShellTaskError, match="shell task 'sh' was killed by SIGTERM"):
        shell.result(timeout=20)
    assert pool.allocation("a1").state is AllocationState.RUNNING


def test_task_killed_by_a_signal_while_draining_is_lost(
    pool: Pool, start_agent: AgentStarter, tmp_path: Path
) -> None:
    """A strategy drains an allocation, then cancels it: the signal is the batch system's, not the task's."""
    pidfile = tmp_path / "pid"
    first = start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    future = pool.submit(Task.shell(f"echo $$ > {pidfile}; sleep 1; echo second-try", task_id="t"))
    wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.RUNNING)
    while not pidfile.exists() or not pidfile.read_text().strip():
        time.sleep(0.02)
    pool.drain("a1", "released by the strategy")
    os.kill(int(pidfile.read_text()), signal.SIGKILL)  # only the task's shell; the agent stays up
    wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.LOST)
    assert first.wait(timeout=10) == 0  # nothing left to run: the drained agent leaves
    start_allocation(pool, start_agent, Allocation("a2", cores=1, walltime=600.0))
    assert future.result(timeout=20).stdout.endswith("second-try\n")
    (lost,) = [e for e in pool.events if isinstance(e, TaskEvent) and e.state is TaskState.LOST]
    assert lost.detail == "killed by SIGKILL while allocation a1 was draining"


def test_retries_exhausted_fail_with_every_cause(start_agent: AgentStarter) -> None:
    with Pool(heartbeat_interval=0.2, heartbeat_timeout=2.0, max_retries=1) as pool:
        first = start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
        future = pool.submit(Task.call(time.sleep, (30,), task_id="doomed", stage="s2"))
        wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.RUNNING)
        os.kill(first.pid, signal.SIGKILL)
        wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.LOST)
        start_allocation(pool, start_agent, Allocation("a2", cores=1, walltime=600.0))
        wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.RUNNING and e.attempt == 2)
        pool.allocation_ended("a2", JobState.TIMEOUT)
        with pytest.raises(TaskLostError) as info:
            future.result(timeout=10)
    err = info.value
    assert (err.task_id, err.stage, err.max_retries) == ("doomed", "s2", 1)
    assert [a for a, _ in err.losses] == ["a1", "a2"]
    assert "sent no heartbeat" in err.losses[0][1] and "ended TIMEOUT" in err.losses[1][1]
    assert "task 'doomed' (stage 's2') was lost 2 times, more than max_retries=1" in str(err)


def test_wrong_secret_is_refused_logged_and_never_runs(
    pool: Pool, start_agent: AgentStarter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="elastic.pool")
    marker = tmp_path / "ran"
    pool.add_allocation(Allocation("a1", cores=1, walltime=600.0))
    future = pool.submit(Task.shell(f"touch {marker}"))
    forged = write_secret_file(b"not-the-pool-secret-at-all!!", tmp_path)
    cmd = AgentCommand(pool.address, "a1", str(forged), cores=1, register_timeout=1.5)
    agent = start_agent(cmd.to_script())
    assert agent.wait(timeout=15) == EXIT_NO_POOL
    wait_for(pool, lambda e: isinstance(e, AgentEvent) and "the peer's key is wrong" in e.detail)
    before = pool.refused  # the agent's every reconnection was refused too
    with zmq.Context() as ctx, ctx.socket(zmq.DEALER) as raw:  # a stranger speaking no protocol at all
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(pool.address)
        raw.send_multipart([b"hello", b"run rm -rf /"])
        deadline = time.monotonic() + 5
        while pool.refused == before and time.monotonic() < deadline:
            time.sleep(0.02)
    assert pool.refused > before
    assert not marker.exists() and not future.done()
    assert pool.allocation("a1").state is AllocationState.REQUESTED
    assert not any(isinstance(e, AgentEvent) and e.kind is AgentEventKind.JOINED for e in pool.events)
    assert any("refused a connection at the handshake" in r.getMessage() for r in caplog.records)


def test_agent_of_unknown_allocation_is_sent_away(pool: Pool, start_agent: AgentStarter) -> None:
    cmd = AgentCommand(pool.address, "ghost", str(pool.secret_file), cores=1)
    assert start_agent(cmd.to_script()).wait(timeout=15) == EXIT_NO_POOL
    event = wait_for(pool, lambda e: isinstance(e, AgentEvent) and e.kind is AgentEventKind.REFUSED)
    assert "unknown allocation 'ghost'" in event.detail


def test_agent_of_a_cancelled_allocation_is_sent_away_quietly(
    pool: Pool, start_agent: AgentStarter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A job that starts as its allocation is cancelled: its agent leaves, with no warning or error."""
    caplog.set_level(logging.INFO, logger="elastic.pool")
    alloc = Allocation("a1", cores=1, walltime=600.0)
    pool.add_allocation(alloc)
    pool.allocation_ended("a1", AllocationState.CANCELLED, "cancelled while pending")
    agent = start_agent(pool.agent_script(alloc), name="late")
    assert agent.wait(timeout=15) == EXIT_NO_POOL
    event = wait_for(pool, lambda e: isinstance(e, AgentEvent) and e.kind is AgentEventKind.REFUSED)
    assert "came after allocation 'a1' ended CANCELLED" in event.detail
    records = [r for r in caplog.records if "came after allocation" in r.getMessage()]
    assert records and all(r.levelno == logging.INFO for r in records)
    log = (tmp_path / "late-0.log").read_text()
    assert "sent away: allocation ended CANCELLED" in log
    # the agent's own lines (its start-up may clean cgroups other tests' agents left, at INFO or WARNING)
    mine = [line for line in log.splitlines() if "elastic.pool.agent" in line]
    assert mine and not any(" ERROR " in line or " WARNING " in line for line in mine), log


def test_walltime_aware_placement(pool: Pool, start_agent: AgentStarter) -> None:
    start_allocation(pool, start_agent, Allocation("short", cores=1, walltime=20.0))
    pool.add_allocation(Allocation("long", cores=1, walltime=600.0))  # requested, not started yet
    wait_for(pool, lambda e: isinstance(e, AgentEvent) and e.kind is AgentEventKind.JOINED)
    long_task = pool.submit(Task.call(square, (3,), estimate=60.0, task_id="long-task"))
    time.sleep(0.5)
    assert not long_task.running(), "started on an allocation with 20 s left while one with 600 s is coming"
    quick = pool.submit(Task.call(square, (2,), estimate=1.0, task_id="quick"))
    assert quick.result(timeout=20) == 4
    start_agent(pool.agent_script(pool.allocation("long")), name="long")
    assert long_task.result(timeout=20) == 9
    assert running_on(pool, "long-task") == ["long"]
    assert running_on(pool, "quick") == ["short"]
    # No allocation has time for it: it runs anyway, on the one with the most time left.
    pool.allocation_ended("long", AllocationState.CANCELLED)
    assert pool.submit(Task.call(square, (5,), estimate=900.0, task_id="huge")).result(timeout=20) == 25
    assert running_on(pool, "huge") == ["short"]


def test_drain_finishes_running_tasks_then_agents_leave(pool: Pool, start_agent: AgentStarter) -> None:
    agent = start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    running = pool.submit(Task.call(square, (4,), task_id="r"))
    wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.RUNNING)
    pool.drain("a1")
    later = pool.submit(Task.call(square, (5,), task_id="later"))
    assert running.result(timeout=20) == 16
    assert agent.wait(timeout=10) == 0
    left = wait_for(pool, lambda e: isinstance(e, AgentEvent) and e.kind is AgentEventKind.LEFT)
    assert left.detail == "drained"
    assert not later.running() and [t.task_id for t in pool.queued()] == ["later"]
    assert pool.allocation("a1").state is AllocationState.DRAINING
    pool.allocation_ended("a1", JobState.COMPLETED)
    states = [e.state for e in pool.events if isinstance(e, AllocationEvent)]
    assert states == [
        AllocationState.REQUESTED,
        AllocationState.RUNNING,
        AllocationState.DRAINING,
        AllocationState.COMPLETED,
    ]


def test_allocation_near_its_walltime_is_drained(pool: Pool, start_agent: AgentStarter) -> None:
    agent = start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=2.5))
    event = wait_for(
        pool, lambda e: isinstance(e, AllocationEvent) and e.state is AllocationState.DRAINING, timeout=8
    )
    assert "walltime left <= drain_margin=1.0" in event.detail
    assert agent.wait(timeout=10) == 0


def test_ended_allocation_requeues_its_running_task(pool: Pool, start_agent: AgentStarter) -> None:
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    future = pool.submit(Task.call(slow_pid, (1.0,), task_id="t"))
    wait_for(pool, lambda e: isinstance(e, TaskEvent) and e.state is TaskState.RUNNING)
    pool.allocation_ended("a1", AllocationState.CANCELLED, "scancel")
    start_allocation(pool, start_agent, Allocation("a2", cores=1, walltime=600.0))
    assert future.result(timeout=20) > 0
    assert running_on(pool, "t") == ["a1", "a2"]


def test_subscribe_and_api_errors(start_agent: AgentStarter) -> None:
    seen: list[object] = []
    pool = Pool(heartbeat_interval=0.2, heartbeat_timeout=1.0)
    unsubscribe = pool.subscribe(seen.append)
    pool.add_allocation(Allocation("a1", cores=1, walltime=60.0))
    with pytest.raises(ConfigError, match="'a1' is already in the pool"):
        pool.add_allocation(Allocation("a1", cores=1, walltime=60.0))
    with pytest.raises(ConfigError, match=r"no allocation 'zz' in the pool; known: \['a1'\]"):
        pool.drain("zz")
    queued = pool.submit(Task.shell("true", task_id="q"))
    with pytest.raises(ConfigError, match="task id 'q' is already used"):
        pool.submit(Task.shell("true", task_id="q"))
    unsubscribe()
    pool.allocation_ended("a1", JobState.CANCELLED)
    secret = pool.secret_file
    pool.close()
    assert len(seen) == 2 and len(pool.events) == 3
    assert queued.cancelled() and not secret.exists()
    with pytest.raises(PoolClosedError, match="the pool is closed"):
        pool.submit(Task.shell("true"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"heartbeat_timeout": 0.5, "heartbeat_interval": 1.0}, "heartbeat_timeout"),
        ({"max_retries": -1}, r"max_retries=...\) must be >= 0"),
        ({"secret": b"short"}, "at least 16 bytes"),
    ],
)
def test_bad_pool_parameters(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Pool(**kwargs)  # type: ignore[arg-type]


def test_a_missing_secret_dir_is_created_private(tmp_path: Path) -> None:
    # issue 29: ElasticExecutor(backend="slurm") passes <run_dir>/elastic, which nothing had created
    where = tmp_path / "runinfo" / "000" / "elastic"
    with Pool(secret_dir=where) as pool:
        assert pool.secret_file.parent == where.resolve()
        assert where.stat().st_mode & 0o777 == 0o700
        assert pool.secret_file.stat().st_mode & 0o777 == 0o600


def test_an_unwritable_secret_dir_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=r"Pool\(secret_dir='.*a-file/sub'\): cannot write the secret"):
        Pool(secret_dir=blocker / "sub")


def test_agent_module_runs_as_a_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "elastic.pool.agent", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "--secret-file" in done.stdout


def test_replayed_registration_is_refused(pool: Pool) -> None:
    """Identities are not signed: a captured Register must not work from another connection or twice."""
    from elastic.pool.messages import Register, Stop
    from elastic.pool.protocol import read_secret_file
    from elastic.pool.sockets import AgentSocket

    secret = read_secret_file(pool.secret_file)
    pool.add_allocation(Allocation("a1", cores=1, walltime=600.0))
    register = Register("a1", 1, "h", 7)
    honest = AgentSocket(secret, pool.address, b"a1/h/7")
    replay = AgentSocket(secret, pool.address, b"a1/evil/8")  # same signed bytes, other identity
    try:
        honest.send(register)
        assert type(honest.recv(timeout=5.0)).__name__ == "Welcome"
        replay.send(register)
        refusal = replay.recv(timeout=5.0)
        assert isinstance(refusal, Stop) and "does not match the signed registration" in refusal.reason
        pool.allocation_ended("a1", JobState.CANCELLED)  # the honest agent is gone ...
        pool.add_allocation(Allocation("a2", cores=1, walltime=600.0))
        honest.send(register)  # ... and its registration cannot be played again
        while not isinstance(msg := honest.recv(timeout=5.0), Stop) or "registered before" not in msg.reason:
            assert msg is not None
    finally:
        honest.close()
        replay.close()
    assert [
        e.agent for e in pool.events if isinstance(e, AgentEvent) and e.kind is AgentEventKind.JOINED
    ] == ["a1/h/7"]
