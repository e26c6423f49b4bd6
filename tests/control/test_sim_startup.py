"""SimExecution's ``startup``: an allocation takes tasks only that long after its start."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.control.execution import TaskSpec
from elastic.control.sim_execution import SimExecution
from elastic.errors import ConfigError
from elastic.timeline import EventKind


def _task(i: int, duration: float = 10.0) -> TaskSpec:
    return TaskSpec(f"s.{i}", "s", i, cores=1, estimate=duration, duration=duration)


def test_first_task_waits_for_startup_and_walltime_still_runs_from_the_start() -> None:
    ex = SimExecution(startup=7.0, drain_margin=0.0)
    ex.submit(_task(0))
    ex.add_allocation("a1", cores=1, walltime_end=100.0, at=5.0)
    assert ex.advance(11.9) == []  # not ready before 5 + 7
    assert ex.next_event_time() == 12.0  # the driver wakes when it becomes ready
    events = ex.advance(30.0)
    assert [(e.kind, e.time) for e in events] == [(EventKind.TASK_START, 12.0), (EventKind.TASK_END, 22.0)]
    # a second task on the same allocation goes at once: startup is paid once per allocation
    ex.submit(_task(1))
    assert [(e.kind, e.time) for e in ex.advance(30.0)] == [(EventKind.TASK_START, 30.0)]


def test_startup_zero_is_the_old_behaviour() -> None:
    ex = SimExecution()
    ex.submit(_task(0))
    ex.add_allocation("a1", cores=1, walltime_end=100.0, at=5.0)
    assert [(e.kind, e.time) for e in ex.advance(20.0)] == [
        (EventKind.TASK_START, 5.0),
        (EventKind.TASK_END, 15.0),
    ]


def test_task_ends_on_a_ready_allocation_are_kept_in_time_order_with_a_later_one_becoming_ready() -> None:
    ex = SimExecution(startup=3.0, drain_margin=0.0)
    for i in range(3):
        ex.submit(_task(i, duration=2.0))
    ex.add_allocation("a1", cores=1, walltime_end=100.0, at=0.0)  # ready at 3
    ex.add_allocation("a2", cores=1, walltime_end=100.0, at=1.0)  # ready at 4
    starts = [(e.time, e.allocation) for e in ex.advance(50.0) if e.kind is EventKind.TASK_START]
    assert starts == [(3.0, "a1"), (4.0, "a2"), (5.0, "a1")]


@given(startup=st.floats(0.0, 50.0), at=st.floats(0.0, 100.0))
def test_no_task_starts_before_its_allocation_is_ready(startup: float, at: float) -> None:
    ex = SimExecution(startup=startup, drain_margin=0.0)
    for i in range(3):
        ex.submit(_task(i, duration=1.0))
    ex.add_allocation("a", cores=2, walltime_end=at + 1000.0, at=at)
    events = ex.advance(at + startup + 10.0)
    starts = [e.time for e in events if e.kind is EventKind.TASK_START]
    assert len(starts) == 3
    assert min(starts) == pytest.approx(at + startup)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "7"])
def test_bad_startup_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="startup"):
        SimExecution(startup=bad)  # type: ignore[arg-type]


def test_task_overhead_lengthens_every_attempt_on_its_core() -> None:
    ex = SimExecution(task_overhead=1.5, drain_margin=0.0)
    for i in range(2):
        ex.submit(_task(i, duration=4.0))
    ex.add_allocation("a1", cores=1, walltime_end=100.0, at=0.0)
    got = [(e.kind, e.time) for e in ex.advance(50.0)]
    assert got == [
        (EventKind.TASK_START, 0.0),
        (EventKind.TASK_END, 5.5),
        (EventKind.TASK_START, 5.5),
        (EventKind.TASK_END, 11.0),
    ]


def test_bad_task_overhead_is_refused() -> None:
    with pytest.raises(ConfigError, match="task_overhead"):
        SimExecution(task_overhead=-0.5)
