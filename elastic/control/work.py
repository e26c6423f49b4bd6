"""Where run control's work comes from: the :class:`Demand` contract, and where events are recorded.

The :class:`~elastic.control.controller.AllocationController` reads the stages a strategy plans for from
a :class:`Demand`: :class:`~elastic.control.demand.DeclaredDemand` (a declared workflow, its tasks made by
the driver: a :class:`MakesTasks`) or :class:`~elastic.control.live.LiveDemand` (tasks from user code).
Both record STAGE_READY/STAGE_END events into an :data:`EventSink`, as the controller records allocation
and task events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from elastic.metrics import Event
from elastic.strategies.base import StageView
from elastic.workflow import Workflow

__all__ = ["CompletesWhenIdle", "Demand", "EventSink", "MakesTasks"]

EventSink = Callable[[Event], None]
"""Where the controller and the demand record what happens (a list's ``append``, a metrics recorder)."""


class Demand(Protocol):
    """Where the work comes from: the stages a strategy plans for, and their progress."""

    @property
    def plan(self) -> Workflow:
        """The stages known now (declared, learned from earlier runs, or seen so far), in order."""
        ...

    @property
    def done(self) -> bool:
        """Whether all the work is complete (a live demand is never done by itself)."""
        ...

    def observe(self, event: Event) -> None:
        """Take one task event (TASK_START, TASK_END, TASK_LOST) of the execution."""
        ...

    def update(self, now: float) -> None:
        """Bring the stages up to ``now`` (ready, complete), recording STAGE_READY/STAGE_END events."""
        ...

    def stages(self) -> tuple[StageView, ...]:
        """Progress of every stage of :attr:`plan`, in plan order."""
        ...


@runtime_checkable
class MakesTasks(Protocol):
    """A demand that makes its own tasks and hands them to the execution (a declared workflow's).

    A live demand has none to hand: user code submits its tasks to the pool itself.
    """

    def dispatch(self, now: float) -> None:
        """Hand work that became ready to the execution (called after the strategy acted)."""
        ...


@runtime_checkable
class CompletesWhenIdle(Protocol):
    """A demand whose stages complete after a time with nothing outstanding (``idle_timeout``).

    Run control steps again by then at the latest, not at its next poll.
    """

    def next_idle_end(self) -> float | None:
        """When the earliest idle stage completes (None: no stage is idle)."""
        ...
