"""How the run driver takes the pool's task events: stamped with the backend clock, one instant at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elastic.allocations import AllocationState
from elastic.control.live import LiveDemand
from elastic.control.pool_execution import PoolExecution
from elastic.metrics import EventKind
from elastic.pool.events import PoolEvent
from elastic.pool.tasks import TaskEvent, TaskState


class _Backend:
    """A backend clock that moves on at every reading (as a real one does between two readings)."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        self.t += 1.0
        return self.t


class _Pool:
    """Only what PoolExecution subscribes to; the test delivers the events itself."""

    def expect_owner(self) -> None:
        pass

    def subscribe(self, callback: Callable[[PoolEvent], None]) -> Callable[[], None]:
        self.deliver = callback
        return lambda: None


def test_a_task_lost_with_no_retry_left_never_looks_queued_again_to_the_strategy() -> None:
    """Its LOST and FAILED reach one step together: no re-run to wait for, nothing queued, no follow-up."""
    backend, pool = _Backend(), _Pool()
    execution = PoolExecution(backend, pool=pool)  # type: ignore[arg-type]
    pool.deliver(TaskEvent(10.0, "t", "s", TaskState.RUNNING, 1, "a1", 1, "on agent a1/h/1"))
    pool.deliver(TaskEvent(50.0, "t", "s", TaskState.LOST, 1, "a1", 1, "allocation a1 ended TIMEOUT"))
    pool.deliver(TaskEvent(50.0, "t", "s", TaskState.FAILED, 1, "a1", 1, "lost 1 time(s), limit 0"))
    events = execution.advance(2.0)  # the step read its clock after the loss was stamped
    assert [e.kind for e in events] == [EventKind.TASK_START, EventKind.TASK_LOST, EventKind.TASK_DROPPED]
    recorded: list[Any] = []
    demand = LiveDemand("w", record=recorded.append, clock=lambda: 0.0)
    demand.queued("s", 1, 100.0, task="t")
    for e in events:
        demand.observe(e)
    (stage,) = demand.stages()
    assert stage.rerun_end is None and stage.queued == 0 and stage.running == 0 and stage.done == 1


class _EndPool(_Pool):
    """Records the ends it is told."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, AllocationState, float | None]] = []

    def allocation_ended(
        self, alloc_id: str, state: AllocationState, detail: str = "", started_ago: float | None = None
    ) -> None:
        self.ended.append((alloc_id, state, started_ago))


def test_an_end_learned_with_its_start_tells_the_pool_that_start_in_pool_seconds() -> None:
    """The cancel found a job started and ended: the pool gets the backend's start with the end."""
    backend, pool = _Backend(), _EndPool()
    backend.t = 599.0  # the next reading is 600 s
    execution = PoolExecution(backend, speedup=10.0, pool=pool)  # type: ignore[arg-type]
    execution.allocation_ended("a1", 600.0, AllocationState.CANCELLED, start=400.0)
    execution.allocation_ended("a2", 600.0, AllocationState.CANCELLED)
    assert pool.ended == [
        ("a1", AllocationState.CANCELLED, 20.0),  # 200 backend seconds at speedup 10
        ("a2", AllocationState.CANCELLED, None),
    ]
