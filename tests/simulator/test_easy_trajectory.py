"""The EASY estimate read off one simulation of a snapshot's queue: the same as simulating each probe.

:func:`~elastic.simulator.snapshot.estimate_start` under ``easy`` answers from the passes of one
simulation of the queue without a probe (``_Trajectory``), cached per snapshot; every answer must be the
one the simulation with the probe in it gives, on any queue and any probe.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.errors import GeometryError
from elastic.simulator.snapshot import (
    PendingJob,
    QueueSnapshot,
    RunningJob,
    _easy_trajectory,
    _simulated_start,
    estimate_start,
)

NOW = 1000.0


def _simulated(
    snapshot: QueueSnapshot, cores: int, walltime: float, nodes: int | None = None, priority: str = "basic"
) -> float | None:
    """The estimate by simulating the queue with the probe in it (as before the trajectory)."""
    return _simulated_start(
        snapshot,
        cores=cores,
        walltime=walltime,
        nodes=nodes,
        begin=None,
        after=(),
        policy="easy",
        priority=priority,
    )


@st.composite
def snapshots(draw: st.DrawFn) -> QueueSnapshot:
    nodes = draw(st.integers(1, 6))
    cpn = draw(st.sampled_from([1, 1, 4]))
    total = nodes * cpn
    running: list[RunningJob] = []
    held = 0
    for i in range(draw(st.integers(0, 6))):
        cores = draw(st.integers(1, total))
        if held + cores > total:
            break
        held += cores
        end = NOW + draw(st.sampled_from([0.0, 30.0, 60.0, 90.0, 300.0, 1200.0, 3600.0]))
        running.append(RunningJob(f"r{i}", cores, end))
    pending: list[PendingJob] = []
    for i in range(draw(st.integers(0, 12))):
        whole = draw(st.integers(1, nodes)) if cpn > 1 and draw(st.booleans()) else 0
        cores = whole * cpn if whole else draw(st.integers(1, total))
        walltime = draw(st.sampled_from([30.0, 60.0, 120.0, 600.0, 1800.0, 7200.0]))
        pending.append(PendingJob(f"p{i}", cores, walltime, whole))
    return QueueSnapshot(NOW, nodes, cpn, tuple(running), tuple(pending))


def _probe(snapshot: QueueSnapshot, data: st.DataObject) -> tuple[int, float, int | None]:
    """Draw a probe the snapshot's partition can hold: cores, walltime, and whole nodes (or None)."""
    nodes = (
        data.draw(st.integers(1, snapshot.nodes))
        if snapshot.cores_per_node > 1 and data.draw(st.booleans())
        else None
    )
    total = snapshot.nodes * snapshot.cores_per_node
    cores = nodes * snapshot.cores_per_node if nodes else data.draw(st.integers(1, total))
    walltime = data.draw(st.sampled_from([1.0, 30.0, 60.0, 89.0, 90.0, 600.0, 3000.0, 10_000.0]))
    return cores, walltime, nodes


@settings(max_examples=300, deadline=None)
@given(snapshots(), st.data())
def test_every_probe_starts_when_the_simulation_with_it_says(
    snapshot: QueueSnapshot, data: st.DataObject
) -> None:
    assert _easy_trajectory(snapshot, "basic") is not None  # nothing held: read off the trajectory
    for _ in range(6):
        cores, walltime, nodes = _probe(snapshot, data)
        got = estimate_start(snapshot, cores=cores, walltime=walltime, nodes=nodes)
        assert got == _simulated(snapshot, cores, walltime, nodes), (cores, nodes, walltime)


@settings(max_examples=300, deadline=None)
@given(snapshots(), st.data())
def test_the_same_queue_read_later_starts_every_probe_as_its_simulation_says(
    snapshot: QueueSnapshot, data: st.DataObject
) -> None:
    # the trajectory of the queue read at NOW, reused for the same jobs read up to the first end
    first = _easy_trajectory(snapshot, "basic")
    assert first is not None
    ends = [r.end for r in snapshot.running]
    later = NOW + data.draw(st.sampled_from([0.0, 1.0, 29.0, 59.5, 89.0, 299.0, 1199.0, 5000.0]))
    shifted = first.shifted(later)
    # where the pass at NOW started no job and no job ended by ``later``, the passes are the same
    if shifted is None:
        assert any(e <= later for e in ends) or not first._settled
        return
    assert all(e > later for e in ends)
    read_later = dataclasses.replace(snapshot, now=later)
    estimate_start(snapshot, cores=1, walltime=1.0)  # the last trajectory: the next one is shifted from it
    for _ in range(6):
        cores, walltime, nodes = _probe(snapshot, data)
        want = _simulated(read_later, cores, walltime, nodes)
        assert shifted.start(cores, walltime, nodes) == want, (cores, nodes, walltime)
        assert estimate_start(read_later, cores=cores, walltime=walltime, nodes=nodes) == want


def test_a_queue_read_later_is_simulated_again_once_its_first_pass_started_a_job() -> None:
    # a 2-core job fits the idle core pair at NOW: the pass at NOW starts it, so NOW+10's queue (the same
    # jobs, the job still pending) starts it at NOW+10 and ends it later: not the same passes
    snapshot = QueueSnapshot(NOW, 4, 1, (RunningJob("r", 2, NOW + 100.0),), (PendingJob("p", 2, 95.0),))
    first = _easy_trajectory(snapshot, "basic")
    assert first is not None and not first._settled
    assert first.shifted(NOW + 10.0) is None
    read_later = dataclasses.replace(snapshot, now=NOW + 10.0)
    assert estimate_start(snapshot, cores=4, walltime=60.0) == NOW + 100.0
    assert estimate_start(read_later, cores=4, walltime=60.0) == NOW + 105.0
    assert _simulated(read_later, 4, 60.0) == NOW + 105.0


def test_a_queue_read_after_its_first_end_is_simulated_again() -> None:
    snapshot = QueueSnapshot(NOW, 4, 1, (RunningJob("r", 4, NOW + 100.0),), (PendingJob("p", 4, 50.0),))
    first = _easy_trajectory(snapshot, "basic")
    assert first is not None and first._settled
    assert first.shifted(NOW + 99.0) is not None
    assert first.shifted(NOW + 100.0) is None
    assert first.shifted(NOW - 1.0) is None


def test_a_queue_with_a_held_job_is_simulated_with_the_probe() -> None:
    # a job held by its begin time joins the queue later, maybe behind the probe: no trajectory
    held = QueueSnapshot(
        NOW, 4, 1, (RunningJob("r", 4, NOW + 60.0),), (PendingJob("p", 2, 600.0, begin=NOW + 30.0),)
    )
    assert _easy_trajectory(held, "age") is None
    assert estimate_start(held, cores=2, walltime=60.0, priority="age") == _simulated(
        held, 2, 60.0, priority="age"
    )


def test_a_probe_the_partition_cannot_hold_is_refused_as_before() -> None:
    snapshot = QueueSnapshot(NOW, 2, 1, (), ())
    with pytest.raises(GeometryError):
        estimate_start(snapshot, cores=3, walltime=60.0)


def test_a_backfill_that_ends_by_the_shadow_starts_now_and_one_that_does_not_waits() -> None:
    # 4 cores; 3 busy for 100 s; a 4-core job waits at the head (shadow at 100 s): a 1-core probe of
    # 100 s backfills now, one of 101 s starts after the head (at 100 s the head takes every core)
    snapshot = QueueSnapshot(NOW, 4, 1, (RunningJob("r", 3, NOW + 100.0),), (PendingJob("h", 4, 50.0),))
    assert estimate_start(snapshot, cores=1, walltime=100.0) == NOW
    assert estimate_start(snapshot, cores=1, walltime=101.0) == NOW + 150.0


ops = st.lists(
    st.tuples(
        st.sampled_from(["submit", "cancel", "shorten", "run", "probe", "wait"]),
        st.integers(1, 8),
        st.sampled_from([30.0, 60.0, 300.0, 1200.0]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops, st.sampled_from([(8, 1), (2, 4)]))
def test_the_mock_estimate_follows_every_change_of_the_engine(
    steps: list[tuple[str, int, float]], shape: tuple[int, int]
) -> None:
    from elastic.simulator.engine import Engine
    from elastic.simulator.expected import expected_start
    from elastic.simulator.snapshot import snapshot_of

    nodes, cpn = shape
    engine = Engine(nodes=nodes, cores_per_node=cpn)
    total = nodes * cpn
    jobs: list[int] = []
    for op, n, seconds in steps:
        if op == "submit":
            jobs.append(engine.submit(cores=min(n, total), walltime=seconds, runtime=seconds / 2))
        elif op == "cancel" and jobs:
            engine.cancel(jobs[n % len(jobs)])
        elif op == "shorten" and jobs:
            engine.shorten(jobs[n % len(jobs)], seconds / 4)
        elif op == "run":
            engine.run(until=engine.now + seconds)
        elif op == "wait":  # a few seconds: mostly no event, the same queue read later
            engine.run(until=engine.now + n)
        cores = min(n, total)
        got = expected_start(engine, cores=cores, walltime=seconds)  # cached per engine version and time
        assert got == _simulated(snapshot_of(engine), cores, seconds, priority=engine.ranking.name), (
            op,
            n,
            seconds,
        )
