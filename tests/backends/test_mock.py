"""Contract tests of MockBackend: the BatchBackend protocol on both clocks, pilots on the scaled clock."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from elastic.backends.base import BatchBackend, EstimatesReleasing
from elastic.backends.mock import MockBackend
from elastic.batch import Dependency, DependencyKind, JobSpec, JobState, PendingReason
from elastic.errors import ConfigError, DependencyError, GeometryError, SubmitError, UnknownJobError
from elastic.simulator.workload import Workload


def test_is_a_batch_backend():
    b = MockBackend(nodes=2)
    assert isinstance(b, BatchBackend)
    assert b.name == "mock"
    p = b.partition()
    assert (p.nodes, p.cores_per_node, p.cores) == (2, 1, 2)


def test_submit_state_queue_cancel_virtual():
    b = MockBackend(nodes=4)
    a = b.submit(JobSpec(cores=4, walltime=100.0, runtime=40.0, name="big", user="ann"))
    c = b.submit(JobSpec(cores=2, walltime=10.0, runtime=10.0, name="small"))
    info = b.state(a)
    assert (info.state, info.start_time, info.name, info.user) == (JobState.RUNNING, 0.0, "big", "ann")
    assert b.state(c).reason is PendingReason.RESOURCES
    assert [i.job_id for i in b.queue()] == [a, c]
    b.sleep(30.0)
    assert b.now() == 30.0
    b.cancel(a)
    assert b.state(a).state is JobState.CANCELLED and b.state(a).end_time == 30.0
    assert b.state(c).state is JobState.RUNNING and b.state(c).wait == 30.0
    b.sleep(100.0)
    done = b.state(c)
    assert (done.state, done.end_time, done.exit_code) == (JobState.COMPLETED, 40.0, 0)
    assert b.queue() == []
    b.cancel(a)  # cancelling an ended job does nothing
    assert b.state(a).state is JobState.CANCELLED


def test_errors():
    b = MockBackend(nodes=2, cores_per_node=2, max_walltime=3600.0)
    with pytest.raises(GeometryError, match="5 cores but the partition has 4"):
        b.submit(JobSpec(cores=5, walltime=10.0))
    with pytest.raises(GeometryError, match="3 nodes"):
        b.submit(JobSpec(cores=1, nodes=3, walltime=10.0))
    with pytest.raises(SubmitError, match=r"exceeds the partition limit 3600\.0 s"):
        b.submit(JobSpec(cores=1, walltime=7200.0))
    with pytest.raises(SubmitError, match="exceeds the partition limit"):
        b.expected_start(JobSpec(cores=1, walltime=7200.0))
    with pytest.raises(GeometryError, match="5 cores"):
        b.expected_start(JobSpec(cores=5, walltime=10.0))
    with pytest.raises(DependencyError, match="'99'"):
        b.submit(JobSpec(cores=1, walltime=10.0, dependencies=(Dependency(DependencyKind.AFTEROK, "99"),)))
    with pytest.raises(UnknownJobError, match="'42'"):
        b.state("42")
    with pytest.raises(ConfigError, match="clock='scaled'"):
        b.submit(JobSpec(cores=1, walltime=10.0, script="true"))


def test_dependencies_and_begin_time():
    b = MockBackend(nodes=4, kill_invalid_dep=False)
    p = b.submit(JobSpec(cores=1, walltime=10.0, runtime=50.0))  # will TIMEOUT at 10
    ok = b.submit(
        JobSpec(cores=1, walltime=10.0, runtime=1.0, dependencies=(Dependency(DependencyKind.AFTEROK, p),))
    )
    notok = b.submit(
        JobSpec(cores=1, walltime=10.0, runtime=1.0, dependencies=(Dependency(DependencyKind.AFTERNOTOK, p),))
    )
    later = b.submit(JobSpec(cores=1, walltime=10.0, runtime=1.0, begin=25.0))
    assert b.state(ok).reason is PendingReason.DEPENDENCY
    assert b.state(later).reason is PendingReason.BEGIN_TIME
    assert b.expected_start(JobSpec(cores=1, walltime=5.0, begin=25.0)) == 25.0
    b.sleep(12.0)
    assert b.state(p).state is JobState.TIMEOUT and b.state(p).end_time == 10.0
    assert b.state(ok).reason is PendingReason.DEPENDENCY_NEVER_SATISFIED
    assert b.state(notok).start_time == 10.0
    b.sleep(20.0)
    assert b.state(later).start_time == 25.0
    k = MockBackend(nodes=4)  # default: like the Slurm backend, cancel what can never start
    p = k.submit(JobSpec(cores=1, walltime=10.0, runtime=50.0))
    ok = k.submit(JobSpec(cores=1, walltime=10.0, dependencies=(Dependency(DependencyKind.AFTEROK, p),)))
    k.sleep(11.0)
    assert k.state(ok).state is JobState.CANCELLED


def test_expected_start_follows_the_queue():
    # 4 cores: A 4c (walltime 100, really 30) runs; B 4c w50 waits. By requested walltimes A ends at
    # 100 and B runs 100..150, so any probe (even 1c w10: 0 cores free to backfill) starts at 150.
    # Once A really ends at 30, B runs 30..80 and the probe starts at 80.
    b = MockBackend(nodes=4)
    b.submit(JobSpec(cores=4, walltime=100.0, runtime=30.0))
    b.submit(JobSpec(cores=4, walltime=50.0, runtime=50.0))
    assert b.expected_start(JobSpec(cores=2, walltime=200.0)) == 150.0
    assert b.expected_start(JobSpec(cores=4, walltime=10.0)) == 150.0
    b.sleep(10.0)
    assert b.expected_start(JobSpec(cores=1, walltime=10.0)) == 150.0
    b.sleep(25.0)  # A really ended at 30: B runs 30..80
    assert b.expected_start(JobSpec(cores=1, walltime=10.0)) == 80.0
    assert len(b.queue()) == 1


def test_expected_start_holds_every_job_to_its_time_limit():
    # 4 cores: our job A (4 cores, walltime 1000, really done at 100) runs; B (2 cores, w50) waits.
    # Slurm cannot know A's true runtime, nor that we mean to release it: neither does the estimate.
    b = MockBackend(nodes=4)
    b.submit(JobSpec(cores=4, walltime=1000.0, runtime=100.0))
    b.submit(JobSpec(cores=2, walltime=50.0, runtime=50.0))
    assert b.expected_start(JobSpec(cores=2, walltime=10.0)) == 1000.0
    assert not isinstance(b, EstimatesReleasing)
    with pytest.raises(TypeError):
        b.expected_start(JobSpec(cores=2, walltime=10.0), releasing={"1": 0.0})  # type: ignore[call-arg]


def test_background_workload_and_warmup():
    n = 50
    wl = Workload(
        job_id=np.arange(1, n + 1),
        submit=np.arange(n, dtype=float) * 10.0,
        cores=np.full(n, 4),
        runtime=np.full(n, 30.0),
        walltime=np.full(n, 60.0),
        user=np.full(n, 7),
        recorded_wait=np.full(n, np.nan),
        processors=4,
        source="test",
    )
    b = MockBackend(nodes=4, workload=wl, start=100.0)
    assert b.now() == 100.0
    q = b.queue()
    assert q and all(i.name.startswith("background-") for i in q)
    mine = b.submit(JobSpec(cores=1, walltime=10.0, runtime=1.0))
    assert b.state(mine).reason in (PendingReason.PRIORITY, PendingReason.RESOURCES)
    b.sleep(10_000.0)
    assert b.state(mine).state is JobState.COMPLETED
    rec = b.engine.records()
    assert len(rec) == n + 1 and rec["background"].sum() == n


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


@pytest.fixture
def scaled():
    with MockBackend(nodes=4, clock="scaled", speedup=100.0, grace=0.5) as b:
        yield b


def test_scaled_clock_runs_faster_than_real_time(scaled):
    # Simulated time advanced by K x the real time between the two calls (K = 100), whatever the load.
    before = time.monotonic()
    t0 = scaled.now()
    time.sleep(0.2)
    t1 = scaled.now()
    real = time.monotonic() - before
    assert 100.0 * 0.2 <= t1 - t0 <= 100.0 * real
    j = scaled.submit(JobSpec(cores=1, walltime=100.0, runtime=5.0))
    scaled.sleep(10.0)  # 0.1 real seconds
    assert scaled.state(j).state is JobState.COMPLETED


@pytest.mark.parametrize(("code", "state"), [(0, JobState.COMPLETED), (3, JobState.FAILED)])
def test_pilot_exit_code(scaled, tmp_path: Path, code, state):
    out = tmp_path / "env"
    script = f'echo "$ELASTIC_JOB_ID $ELASTIC_JOB_CORES $EXTRA" > {out}; exit {code}'
    j = scaled.submit(JobSpec(cores=2, walltime=3600.0, script=script, env={"EXTRA": "x"}))
    _wait_for(lambda: scaled.state(j).state.is_final)
    info = scaled.state(j)
    assert (info.state, info.exit_code) == (state, code)
    assert out.read_text().split() == [j, "2", "x"]


def test_pilot_timeout_kills_process_group(scaled, tmp_path: Path):
    pidfile = tmp_path / "pid"
    # The script's child sleeps in the background too: the whole group must go.
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    j = scaled.submit(JobSpec(cores=1, walltime=50.0, script=script))  # 0.5 real seconds
    child = _read_pid(pidfile)
    _wait_for(lambda: scaled.state(j).state.is_final)
    info = scaled.state(j)
    assert info.state is JobState.TIMEOUT
    assert info.end_time == pytest.approx(info.start_time + 50.0)
    _wait_for(lambda: not _alive(child))


def test_pilot_cancel_kills_process(scaled, tmp_path: Path):
    pidfile = tmp_path / "pid"
    j = scaled.submit(JobSpec(cores=1, walltime=3600.0, script=f"echo $$ > {pidfile}; exec sleep 300"))
    pid = _read_pid(pidfile)
    scaled.cancel(j)
    assert scaled.state(j).state is JobState.CANCELLED
    _wait_for(lambda: not _alive(pid))


@pytest.mark.parametrize("end", ["cancel", "timeout", "close"])
def test_pilot_end_kills_processes_that_left_its_group(tmp_path: Path, end: str):
    # Regression (pool robustness, issue 4): the agent starts each task with setsid, so a task is not
    # in the pilot's process group. Slurm (proctrack) still signals it when the job ends; the mock must
    # too, or a task outlives its allocation on the mock only. Here a grandchild in its own session
    # must die at cancel and at timeout, and one that ignores SIGTERM must get SIGKILL after the grace.
    pidfile = tmp_path / "pid"
    stubborn = tmp_path / "stubborn"
    script = (
        f"setsid sleep 300 & echo $! > {pidfile}; "
        f"setsid bash -c 'trap \"\" TERM; echo $$ > {stubborn}; while true; do sleep 0.05; done' & "
        "wait"
    )
    # ``close``: the backend closed (the run is over) while the pilot still runs.
    with MockBackend(nodes=1, clock="scaled", speedup=100.0, grace=1.0) as b:
        j = b.submit(JobSpec(cores=1, walltime=60.0 if end == "timeout" else 3600.0, script=script))
        child, hard = _read_pid(pidfile), _read_pid(stubborn)
        # really outside the pilot's session and group, once setsid(1) has run (its pid is known first)
        _wait_for(lambda: os.getsid(child) == child)
        if end == "cancel":
            b.cancel(j)
        if end == "close":
            b.close()
        else:
            _wait_for(lambda: b.state(j).state.is_final)
            assert b.state(j).state is (JobState.CANCELLED if end == "cancel" else JobState.TIMEOUT)
        _wait_for(lambda: not _alive(child))
        _wait_for(lambda: not _alive(hard))


def _read_pid(path: Path) -> int:
    # The script writes the file while we poll: wait for the whole line.
    _wait_for(lambda: path.exists() and path.read_text().endswith("\n"))
    return int(path.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose only once reaped; check /proc state. A process reaped between
    # the kill above and this read makes the read fail with ESRCH (ProcessLookupError), not ENOENT: that
    # race failed CI once (test_pilot_end_kills_processes_that_left_its_group[cancel]).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_pilot_ignoring_sigterm_is_killed_after_grace(tmp_path: Path):
    pidfile = tmp_path / "pid"
    script = f"trap '' TERM; echo $$ > {pidfile}; while true; do sleep 0.05; done"
    with MockBackend(nodes=1, clock="scaled", speedup=100.0, grace=2.0) as b:
        j = b.submit(JobSpec(cores=1, walltime=30.0, script=script))  # 0.3 real seconds
        pid = _read_pid(pidfile)
        _wait_for(lambda: b.state(j).state.is_final)
        assert b.state(j).state is JobState.TIMEOUT
        assert _alive(pid)  # SIGTERM ignored...
        _wait_for(lambda: not _alive(pid))  # ...SIGKILL after the 2 s grace
        rec = b.records()
        assert list(rec["state"]) == ["TIMEOUT"] and not rec["background"].any()


def test_scaled_clock_is_thread_safe():
    import threading

    errors: list[BaseException] = []
    ids: list[str] = []
    with MockBackend(nodes=4, clock="scaled", speedup=1000.0) as b:

        def client(k: int) -> None:
            try:
                for i in range(15):
                    ids.append(b.submit(JobSpec(cores=1 + (i + k) % 4, walltime=20.0, runtime=5.0)))
                    b.queue()
                    b.expected_start(JobSpec(cores=2, walltime=10.0))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        _wait_for(lambda: all(b.state(i).state is JobState.COMPLETED for i in ids), timeout=30.0)
        rec = b.records()
    assert len(rec) == 60
    events = sorted([(s, c) for s, c in zip(rec["start"], rec["cores"], strict=True)])
    events += [(e, -c) for e, c in zip(rec["end"], rec["cores"], strict=True)]
    used = 0
    for _, delta in sorted(events, key=lambda x: (x[0], x[1])):
        used += delta
        assert used <= 4


def test_forgotten_close_leaves_no_pilot_behind(tmp_path: Path):
    import subprocess
    import sys

    pidfile = tmp_path / "pid"
    # The program exits without close() once the pilot runs; atexit must kill the pilot.
    program = (
        "import os, time\n"
        "from elastic.backends.base import JobSpec\n"
        "from elastic.backends.mock import MockBackend\n"
        "b = MockBackend(nodes=1, clock='scaled', speedup=10.0)\n"
        f"b.submit(JobSpec(cores=1, walltime=3600.0, script='echo $$ > {pidfile}; exec sleep 300'))\n"
        f"while not (os.path.exists('{pidfile}') and open('{pidfile}').read().endswith('\\n')):\n"
        "    time.sleep(0.02)\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True, timeout=60)
    pid = _read_pid(pidfile)
    _wait_for(lambda: not _alive(pid))


def _held_job_order(backend: MockBackend) -> dict[str, float | None]:
    """4 cores: A holds them 0-100; H (submitted at 0) waits for A, B arrives at 10 and waits for cores."""
    a = backend.submit(JobSpec(cores=4, walltime=100.0, runtime=100.0))
    h = backend.submit(
        JobSpec(cores=4, walltime=50.0, runtime=50.0, dependencies=(Dependency(DependencyKind.AFTERANY, a),))
    )
    backend.sleep(10.0)
    b = backend.submit(JobSpec(cores=4, walltime=50.0, runtime=50.0))
    backend.sleep(300.0)
    return {"H": backend.state(h).start_time, "B": backend.state(b).start_time}


def test_priority_model_decides_where_a_released_job_queues():
    # Issue 9: multifactor age counts from eligibility, so H (eligible at 100) goes behind B (waiting
    # since 10); FIFO and ACCRUE_ALWAYS keep H's submit place.
    assert MockBackend(nodes=4).priority == "age"
    assert _held_job_order(MockBackend(nodes=4)) == {"B": 100.0, "H": 150.0}
    assert _held_job_order(MockBackend(nodes=4, priority="basic")) == {"H": 100.0, "B": 150.0}
    assert _held_job_order(MockBackend(nodes=4, priority="accrue-always")) == {"H": 100.0, "B": 150.0}
    # capped age (PriorityMaxAge 60 s): B has waited 90 s at 100, H 0 s: still B first
    assert _held_job_order(MockBackend(nodes=4, priority_max_age=60.0)) == {"B": 100.0, "H": 150.0}


def test_priority_default_is_age_and_bad_names_are_refused():
    assert MockBackend(nodes=1).priority == "age"
    assert MockBackend(nodes=1, priority="basic").priority == "basic"
    with pytest.raises(ConfigError, match=r"unknown priority model 'fifo'; choose one of: accrue-always"):
        MockBackend(nodes=1, priority="fifo")
    with pytest.raises(ConfigError, match="max_age must be > 0"):
        MockBackend(nodes=1, priority_max_age=-1.0)
