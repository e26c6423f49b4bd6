"""Known-answer tests of the engine and the FCFS/EASY policies (start times computed by hand)."""

from __future__ import annotations

import math

import pytest

from elastic.batch import DependencyKind, PendingReason
from elastic.errors import ConfigError, DependencyError, GeometryError, UnknownNameError
from elastic.simulator.engine import Engine
from elastic.simulator.jobs import CANCELLED, COMPLETED, PENDING, TIMEOUT

# Partition of 4 cores. Rows: (submit, cores, walltime, runtime).
#   J0 t=0 2c w10 r10 ; J1 t=0 4c w10 r10 ; J2 t=1 2c w5 r5 ; J3 t=2 1c w20 r20
ROWS = [(0, 2, 10, 10), (0, 4, 10, 10), (1, 2, 5, 5), (2, 1, 20, 20)]


def starts(eng: Engine) -> list[float]:
    return list(eng.records()["start"])


def test_easy_known_answer(make_workload):
    # EASY: J0 starts at 0 (2 free left). J1 (4c) blocks: shadow = 10 (J0's walltime end), extra = 0.
    # t=1: J2 (2c, ends 6 <= 10) backfills. t=2: J3 (1c) finds 0 cores free.
    # t=6: J2 ends, 2 free; J3 would end at 26 > 10 and 1 > extra 0 -> stays.
    # t=10: J0 ends, J1 starts (ends 20); J3 blocked again; t=20: J3 starts.
    eng = Engine(nodes=4, policy="easy", workload=make_workload(ROWS, 4))
    eng.run()
    assert starts(eng) == [0.0, 10.0, 1.0, 20.0]
    assert eng.policy.reservations[1] == 10.0
    assert eng.policy.reservations[3] == 20.0


def test_fcfs_known_answer(make_workload):
    # FCFS: J0 at 0; J1 blocks until J0 ends at 10 and runs 10..20; J2 and J3 wait behind it and both
    # start at 20 (2 + 1 <= 4 cores).
    eng = Engine(nodes=4, policy="fcfs", workload=make_workload(ROWS, 4))
    eng.run()
    assert starts(eng) == [0.0, 10.0, 20.0, 20.0]


def test_easy_uses_extra_cores(make_workload):
    # 4 cores. J0 3c w10 r10 at 0. J1 2c at 0 blocks: shadow 10, extra = 1 + 3 - 2 = 2.
    # J2 1c w100 at 1: does not end by 10 but 1 <= extra -> starts at 1 (extra left 1... and free 0).
    # At 10 J0 ends: free 3, J1 starts at 10.
    eng = Engine(nodes=4, workload=make_workload([(0, 3, 10, 10), (0, 2, 10, 10), (1, 1, 100, 100)], 4))
    eng.run()
    assert starts(eng) == [0.0, 10.0, 1.0]


def test_timeout_exactly_at_walltime_and_completed_at_runtime():
    eng = Engine(nodes=2)
    a = eng.submit(cores=1, walltime=10.0, runtime=25.0)
    b = eng.submit(cores=1, walltime=10.0, runtime=10.0)
    eng.run()
    assert eng.jobs.state[a] == TIMEOUT and eng.jobs.end[a] == 10.0
    assert eng.jobs.state[b] == COMPLETED and eng.jobs.end[b] == 10.0


def test_hold_without_runtime_until_cancel():
    eng = Engine(nodes=2)
    a = eng.submit(cores=2, walltime=100.0)
    b = eng.submit(cores=1, walltime=5.0, runtime=5.0)
    eng.run(until=30.0)
    assert eng.reason(b) is PendingReason.RESOURCES
    eng.cancel(a)
    assert eng.jobs.state[a] == CANCELLED and eng.jobs.end[a] == 30.0
    assert eng.jobs.start[b] == 30.0


@pytest.mark.parametrize(
    ("kind", "parent_runtime", "child_start"),
    [
        # Parent: 1 core, walltime 10, starts at 0; it completes (runtime 4) or times out (runtime 50).
        (DependencyKind.AFTER, 4.0, 0.0),  # after = parent started
        (DependencyKind.AFTEROK, 4.0, 4.0),
        (DependencyKind.AFTERANY, 50.0, 10.0),
        (DependencyKind.AFTERNOTOK, 50.0, 10.0),
    ],
)
def test_dependencies_satisfied(kind, parent_runtime, child_start):
    eng = Engine(nodes=4)
    p = eng.submit(cores=1, walltime=10.0, runtime=parent_runtime)
    c = eng.submit(cores=1, walltime=10.0, runtime=1.0, dependencies=[(kind, p)])
    eng.run()
    assert eng.jobs.start[c] == child_start


@pytest.mark.parametrize(
    ("kind", "parent_runtime"), [(DependencyKind.AFTEROK, 50.0), (DependencyKind.AFTERNOTOK, 4.0)]
)
@pytest.mark.parametrize("kill", [False, True])
def test_dependency_never_satisfied(kind, parent_runtime, kill):
    eng = Engine(nodes=4, kill_invalid_dep=kill)
    p = eng.submit(cores=1, walltime=10.0, runtime=parent_runtime)
    c = eng.submit(cores=1, walltime=10.0, runtime=1.0, dependencies=[(kind, p)])
    assert eng.reason(c) is PendingReason.DEPENDENCY
    eng.run()
    if kill:
        assert eng.jobs.state[c] == CANCELLED
        assert eng.jobs.end[c] == min(parent_runtime, 10.0)  # when the parent ended
    else:
        assert eng.jobs.state[c] == PENDING
        assert eng.reason(c) is PendingReason.DEPENDENCY_NEVER_SATISFIED
    assert math.isnan(eng.jobs.start[c])


def test_after_dependency_on_cancelled_pending_parent():
    eng = Engine(nodes=1)
    eng.submit(cores=1, walltime=10.0, runtime=10.0)
    p = eng.submit(cores=1, walltime=10.0, runtime=10.0)
    c = eng.submit(cores=1, walltime=10.0, runtime=1.0, dependencies=[(DependencyKind.AFTER, p)])
    eng.run(until=3.0)
    eng.cancel(p)
    eng.run()
    assert eng.jobs.start[c] == 10.0


def test_begin_time():
    eng = Engine(nodes=4)
    j = eng.submit(cores=1, walltime=10.0, runtime=1.0, begin=50.0)
    assert eng.reason(j) is PendingReason.BEGIN_TIME
    eng.run()
    assert eng.jobs.start[j] == 50.0


def test_bad_input():
    eng = Engine(nodes=2, cores_per_node=4)
    with pytest.raises(GeometryError, match="9 cores but the partition has 8"):
        eng.submit(cores=9, walltime=1.0)
    with pytest.raises(GeometryError, match="3 nodes but the partition has 2"):
        eng.submit(cores=1, nodes=3, walltime=1.0)
    # Like Slurm's --nodes=1 --ntasks=5 on 4-core nodes: the nodes cannot hold the cores.
    with pytest.raises(GeometryError, match="5 cores on 1 whole nodes of 4 cores; ask for at most 4"):
        eng.submit(cores=5, nodes=1, walltime=1.0)
    with pytest.raises(DependencyError, match="index 7"):
        eng.submit(cores=1, walltime=1.0, dependencies=[(DependencyKind.AFTEROK, 7)])
    with pytest.raises(UnknownNameError, match=r"unknown policy 'nope'; choose one of: .*easy"):
        Engine(nodes=1, policy="nope")
    with pytest.raises(ConfigError, match="nodes must be >= 1"):
        Engine(nodes=0)


def test_whole_nodes_wait_for_idle_nodes():
    # 2 nodes x 2 cores. A 1-core job on one node; a 2-core job packs... cores jobs take partly used
    # nodes first: J0 (1c) on node0, J1 (1c) also on node0 -> node1 idle; J2 (1 node) starts at once.
    eng = Engine(nodes=2, cores_per_node=2)
    a = eng.submit(cores=1, walltime=10.0, runtime=10.0)
    b = eng.submit(cores=1, walltime=10.0, runtime=5.0)
    n1 = eng.submit(cores=1, nodes=1, walltime=10.0, runtime=10.0)
    assert eng.jobs.start[n1] == 0.0 and eng.jobs.cores[n1] == 2
    # Another 1-node job must wait for node0 to become fully idle at 10 (not at 5, when b ends).
    n2 = eng.submit(cores=1, nodes=1, walltime=10.0, runtime=10.0)
    eng.run()
    assert (eng.jobs.start[a], eng.jobs.start[b], eng.jobs.start[n2]) == (0.0, 0.0, 10.0)


def test_replay_is_deterministic(make_workload):
    rows = [(float(i // 3), 1 + (i * 7) % 4, 5.0 + (i * 13) % 17, (i * 11) % 23) for i in range(60)]
    frames = []
    for _ in range(2):
        eng = Engine(nodes=4, workload=make_workload(rows, 4))
        eng.run()
        frames.append(eng.records())
    assert frames[0].equals(frames[1])


def test_step_and_progress(make_workload):
    rows = [(float(i), 1, 10.0, 5.0) for i in range(9000)]
    eng = Engine(nodes=2, workload=make_workload(rows, 2))
    seen: list[int] = []
    eng.run(until=8500.0, progress=seen.append)  # one call per 4096 event batches
    assert eng.now == 8500.0 and len(seen) == 2 and seen[0] < seen[1] <= 8501
    assert eng.next_event_time() == 8501.0
    assert eng.step() and eng.now == 8501.0
    eng.run()
    assert not eng.step()
    assert (eng.records()["state"] == "COMPLETED").all()


@pytest.mark.parametrize("policy", ["easy", "conservative", "fcfs"])
def test_shorten_lets_a_pending_job_backfill_a_gap_it_did_not_fit(policy: str) -> None:
    # 4 cores. J0 3c w10 runs 0..10; J1 4c waits for J0's end (reserved at 10); J2 1c w20 at 0 would end
    # at 20 > 10 and so waits (for FCFS it waits behind J1 anyway). Lowered to w5 at t=2, it fits before
    # 10 and backfills at once (EASY, conservative); FCFS never backfills.
    eng = Engine(nodes=4, policy=policy)
    j0 = eng.submit(cores=3, walltime=10.0, runtime=10.0)
    j1 = eng.submit(cores=4, walltime=10.0, runtime=10.0)
    j2 = eng.submit(cores=1, walltime=20.0, runtime=3.0)
    eng.run(until=2.0)
    assert eng.jobs.state[j2] == PENDING
    assert eng.shorten(j2, 5.0)
    eng.run()
    assert eng.jobs.walltime[j2] == 5.0
    assert eng.jobs.start[j2] == (20.0 if policy == "fcfs" else 2.0)
    assert (eng.jobs.start[j0], eng.jobs.start[j1]) == (0.0, 10.0)  # nobody is delayed by it


def test_shorten_never_raises_a_walltime_nor_touches_a_started_job() -> None:
    eng = Engine(nodes=1)
    running = eng.submit(cores=1, walltime=10.0)
    waiting = eng.submit(cores=1, walltime=10.0)
    assert not eng.shorten(waiting, 10.0) and not eng.shorten(waiting, 30.0) and not eng.shorten(waiting, 0.0)
    assert not eng.shorten(running, 5.0)
    assert list(eng.jobs.walltime) == [10.0, 10.0]
    eng.run()
    assert eng.jobs.end[running] == 10.0 and eng.jobs.start[waiting] == 10.0


def test_a_submission_from_job_ended_with_defer_pass_is_seen_by_the_same_pass() -> None:
    """A runtime system resubmitting a killed job at the kill: the freed cores go to the rerun."""

    class Resubmit:
        def __init__(self) -> None:
            self.engine: Engine | None = None

        def job_started(self, job: int) -> None:
            pass

        def job_ended(self, job: int) -> None:
            assert self.engine is not None
            if self.engine.jobs.state[job] == TIMEOUT:
                self.engine.submit(cores=4, walltime=20.0, runtime=10.0, defer_pass=True)

    obs = Resubmit()
    eng = Engine(nodes=4, policy="lejf", observer=obs)
    obs.engine = eng
    eng.submit(cores=4, walltime=5.0, runtime=10.0, notify=True)
    eng.run(until=1.0)
    other = eng.submit(cores=4, walltime=3.0, runtime=3.0)
    eng.run()
    rerun = len(eng.jobs) - 1
    assert eng.jobs.start[rerun] == 5.0  # the pass at t = 5 saw both: longest request first
    assert eng.jobs.start[other] == 15.0
