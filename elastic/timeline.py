"""The timeline of a run: one :class:`Event` per thing that happens, of an :class:`EventKind`.

The run driver (:mod:`elastic.control.runner`) and the front door record them, all in backend seconds;
:mod:`elastic.metrics` computes every figure of a run from that list alone.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Event", "EventKind"]


class EventKind(str, enum.Enum):
    """What an :class:`Event` records."""

    RUN_START = "run_start"
    """The workflow was started."""
    RUN_END = "run_end"
    """The workflow finished (``note``: ``"completed"`` or why not)."""
    STAGE_READY = "stage_ready"
    """Every dependency of ``stage`` is done; its tasks were handed to the executor."""
    STAGE_END = "stage_end"
    """The last task of ``stage`` completed."""
    ALLOC_SUBMIT = "alloc_submit"
    """Allocation requested (``cores``, ``walltime``, ``predicted_wait``, ``note`` = reason)."""
    ALLOC_START = "alloc_start"
    """The allocation started (seen by the driver)."""
    ALLOC_END = "alloc_end"
    """The allocation ended (``note`` = final state) or was cancelled before starting."""
    TASK_START = "task_start"
    """A task attempt started on ``allocation``."""
    TASK_END = "task_end"
    """A task attempt completed."""
    TASK_LOST = "task_lost"
    """A task attempt was lost (its allocation ended); the task is re-queued."""
    TASK_FAILED = "task_failed"
    """A task attempt failed (raised, exited non-zero, or was killed); its cores were used."""
    TASK_DROPPED = "task_dropped"
    """A queued task will not run any more: its future was cancelled, or it was lost too often."""


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a run's timeline; fields not meaningful for ``kind`` stay at their defaults.

    Attributes
    ----------
    time : float
        Backend seconds.
    kind : EventKind
        What happened.
    stage : str or None
        Stage (for allocations: the stage it was requested for, ``"*"`` for the whole workflow).
    allocation : str or None
        Our allocation id.
    task : str or None
        Task id.
    cores : int
        Cores of the allocation or task.
    walltime : float or None
        Requested walltime (ALLOC_SUBMIT).
    predicted_wait : float or None
        Queue wait the strategy predicted when submitting (ALLOC_SUBMIT), if any.
    note : str
        Reason or final state, in words.
    eligible : float or None
        ALLOC_START only: when the allocation became eligible to start (its dependencies and begin time
        satisfied); ``None`` = at submit. The queue wait is ``start - eligible``.
    job_id : str or None
        ALLOC_SUBMIT only: the backend's batch job id.
    request : str or None
        ALLOC_SUBMIT only: the request this batch job is a piece of (the id shared by the pieces run
        control split one request into, :attr:`~elastic.allocations.Allocation.request`); ``None`` = a
        request of its own, under its ``allocation`` id.
    """

    time: float
    kind: EventKind
    stage: str | None = None
    allocation: str | None = None
    task: str | None = None
    cores: int = 0
    walltime: float | None = None
    predicted_wait: float | None = None
    note: str = ""
    eligible: float | None = None
    job_id: str | None = None
    request: str | None = None
