"""SimExecution's ``drop_exhausted``: a task lost too often is dropped (front door) or fails the run."""

from __future__ import annotations

import pytest

from elastic.allocations import AllocationState
from elastic.control.execution import TaskSpec
from elastic.control.sim_execution import SimExecution, TaskRetriesExhaustedError
from elastic.timeline import EventKind


def _lose_twice(ex: SimExecution) -> list[tuple[EventKind, str]]:
    ex.submit(TaskSpec("s.0", "s", 0, cores=1, estimate=0.0, duration=100.0))
    ex.submit(TaskSpec("s.1", "s", 1, cores=1, estimate=0.0, duration=5.0))
    ex.add_allocation("a1", cores=1, walltime_end=1000.0, at=0.0)
    ex.allocation_ended("a1", 10.0, AllocationState.CANCELLED)  # s.0 lost once: queued again
    ex.add_allocation("a2", cores=1, walltime_end=1000.0, at=10.0)
    ex.allocation_ended("a2", 20.0, AllocationState.CANCELLED)  # lost twice: one retry allowed
    ex.add_allocation("a3", cores=1, walltime_end=1000.0, at=20.0)
    return [(e.kind, e.task or "") for e in ex.advance(100.0)]


def test_a_task_lost_too_often_fails_the_run_by_default() -> None:
    with pytest.raises(TaskRetriesExhaustedError, match=r"'s\.0' was lost 2 times \(allocations a1, a2\)"):
        _lose_twice(SimExecution(max_retries=1))


def test_a_task_lost_too_often_is_dropped_and_the_others_run() -> None:
    ex = SimExecution(max_retries=1, drop_exhausted=True)
    events = _lose_twice(ex)
    assert events[:4] == [
        (EventKind.TASK_START, "s.0"),
        (EventKind.TASK_LOST, "s.0"),
        (EventKind.TASK_START, "s.0"),
        (EventKind.TASK_LOST, "s.0"),
    ]
    assert events[4] == (EventKind.TASK_DROPPED, "s.0")
    assert events[5:] == [(EventKind.TASK_START, "s.1"), (EventKind.TASK_END, "s.1")]  # not queued again
    assert list(ex.dropped) == ["s.0"] and "lost 2 times" in str(ex.dropped["s.0"])
    assert ex.busy_cores("a3") == 0


def test_losses_at_walltimes_that_grow_past_the_estimate_do_not_exhaust_the_retries() -> None:
    # the pool's rule (placement.counts_against_retries): BWA's cat_bwa on the CTC SP2 replay, run 3,
    # lost at 717 s, 1,458 s, 2,916 s and 5,832 s, failed the run under every strategy but Big-Job
    ex = SimExecution(max_retries=1)
    ex.submit(TaskSpec("s.0", "s", 0, cores=1, estimate=700.0, duration=9000.0))
    at = 0.0
    for n, ran in enumerate((717.0, 1458.0, 2916.0, 5832.0), 1):
        ex.add_allocation(f"a{n}", cores=1, walltime_end=at + ran, at=at)
        at += ran
        ex.allocation_ended(f"a{n}", at, AllocationState.TIMEOUT)
        ex.decided()
    ex.add_allocation("a5", cores=1, walltime_end=at + 11727.0, at=at)
    events = [(e.kind, e.allocation) for e in ex.advance(at + 11727.0) if e.task == "s.0"]
    assert events[-2:] == [(EventKind.TASK_START, "a5"), (EventKind.TASK_END, "a5")]


def test_losses_that_come_no_later_than_before_exhaust_the_retries() -> None:
    ex = SimExecution(max_retries=1)
    ex.submit(TaskSpec("s.0", "s", 0, cores=1, estimate=700.0, duration=9000.0))
    ex.add_allocation("a1", cores=1, walltime_end=800.0, at=0.0)
    ex.allocation_ended("a1", 800.0, AllocationState.TIMEOUT)  # outlived its estimate: not counted
    ex.decided()
    ex.add_allocation("a2", cores=1, walltime_end=1600.0, at=800.0)
    ex.allocation_ended("a2", 1600.0, AllocationState.CANCELLED)  # no longer than before: counted
    ex.decided()
    ex.add_allocation("a3", cores=1, walltime_end=5000.0, at=1600.0)
    with pytest.raises(TaskRetriesExhaustedError, match=r"was lost 3 times \(allocations a1, a2, a3\)"):
        ex.allocation_ended("a3", 1700.0, AllocationState.CANCELLED)
