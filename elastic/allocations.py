"""The :class:`Allocation` record: one pilot batch job, and its legal state transitions.

An allocation is requested from a batch backend (``REQUESTED``), starts and runs worker agents
(``RUNNING``), may be drained before its walltime ends (``DRAINING``: no new tasks are placed on it),
and ends in one of the final states, which mirror :class:`~elastic.batch.JobState` (translated at the edge
by :meth:`AllocationState.from_job_state`).

It is the one record of an allocation everywhere: run control keeps one per allocation it requested (on
the backend's clock, with why it was requested and what it depends on), strategies read those, and the
pool keeps the copy it is told for placement (on its real-time clock: run control tells it each request,
batch job id, start and end; the pool itself only drains).

The record is immutable: every transition returns a new record through :meth:`Allocation.transition`,
which raises :class:`IllegalTransitionError` naming both states when the move is not allowed.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from elastic.batch import DependencyKind, JobState
from elastic.errors import ConfigError, PoolError

__all__ = [
    "LEGAL_TRANSITIONS",
    "Allocation",
    "AllocationEvent",
    "AllocationState",
    "IllegalTransitionError",
]


class AllocationState(str, enum.Enum):
    """Life cycle of one allocation, as the pool sees it."""

    REQUESTED = "REQUESTED"
    """Submitted to the backend, not started yet."""
    RUNNING = "RUNNING"
    """Started; its agents may take tasks."""
    DRAINING = "DRAINING"
    """Still running, but no new task is placed on it (its walltime is close or it was asked to drain)."""
    COMPLETED = "COMPLETED"
    """Ended by itself (its agents exited)."""
    FAILED = "FAILED"
    """Ended with an error (the job script failed, or the backend refused it)."""
    TIMEOUT = "TIMEOUT"
    """Killed by the backend at its walltime limit."""
    CANCELLED = "CANCELLED"
    """Cancelled (before or after it started)."""

    @property
    def is_final(self) -> bool:
        """Whether the allocation has ended (it will never change state again)."""
        return self in _FINAL

    @property
    def is_live(self) -> bool:
        """Whether the allocation holds cores now (RUNNING or DRAINING)."""
        return self in _LIVE

    @classmethod
    def from_job_state(cls, state: JobState) -> AllocationState:
        """Translate a backend :class:`JobState` into an allocation state.

        Raises
        ------
        ConfigError
            ``state`` is ``UNKNOWN``: the caller must decide what an unknown job state means.
        """
        table = {
            JobState.PENDING: cls.REQUESTED,
            JobState.RUNNING: cls.RUNNING,
            JobState.COMPLETED: cls.COMPLETED,
            JobState.FAILED: cls.FAILED,
            JobState.TIMEOUT: cls.TIMEOUT,
            JobState.CANCELLED: cls.CANCELLED,
        }
        if state not in table:
            raise ConfigError(f"job state {state.value} has no allocation state; allowed: {sorted(table)}")
        return table[state]


_FINAL = frozenset(
    {AllocationState.COMPLETED, AllocationState.FAILED, AllocationState.TIMEOUT, AllocationState.CANCELLED}
)

LEGAL_TRANSITIONS: dict[AllocationState, frozenset[AllocationState]] = {
    # any end straight from REQUESTED: a job may end before whoever holds this record saw it start (its
    # start is then recorded only if told: ``start_time`` stays None), rather than a made-up RUNNING step
    AllocationState.REQUESTED: frozenset({AllocationState.RUNNING} | _FINAL),
    AllocationState.RUNNING: frozenset({AllocationState.DRAINING} | _FINAL),
    AllocationState.DRAINING: _FINAL,
    AllocationState.COMPLETED: frozenset(),
    AllocationState.FAILED: frozenset(),
    AllocationState.TIMEOUT: frozenset(),
    AllocationState.CANCELLED: frozenset(),
}
"""For each state, the states an allocation may move to next.

A REQUESTED allocation may end in any final state: a batch job can start and end between two looks (or
its pool may never hear an agent of it), and its record then says so (no start time) instead of
inventing a start.
"""

# the members looked up once: reading ``AllocationState.X`` costs microseconds on Python 3.11 (an enum
# member is a class property there), and the controller asks every allocation's state at every step
_LIVE = frozenset({AllocationState.RUNNING, AllocationState.DRAINING})
_REQUESTED = AllocationState.REQUESTED


class IllegalTransitionError(PoolError, ValueError):
    """An allocation was asked to make a state change that is not in :data:`LEGAL_TRANSITIONS`.

    Parameters
    ----------
    alloc_id : str
        The allocation.
    old, new : AllocationState
        Its current state and the state asked for.
    """

    def __init__(self, alloc_id: str, old: AllocationState, new: AllocationState) -> None:
        self.alloc_id = alloc_id
        self.old = old
        self.new = new
        allowed = ", ".join(sorted(s.value for s in LEGAL_TRANSITIONS[old])) or "none (it has ended)"
        super().__init__(
            f"allocation {alloc_id!r}: illegal transition {old.value} -> {new.value}; "
            f"from {old.value} it may go to: {allowed}"
        )


@dataclass(frozen=True, slots=True)
class Allocation:
    """One pilot batch job of the pool.

    Parameters
    ----------
    alloc_id : str
        Our id for the allocation (unique in one pool run).
    cores : int
        Cores requested.
    walltime : float
        Requested walltime limit, seconds.
    stage : str or None, default None
        The workflow stage it was requested for (a label for metrics; any task may run on it).
    nodes : int or None, default None
        Whole nodes, when requested in nodes; more than one node starts one agent per node (``srun``).
    state : AllocationState, default REQUESTED
        Current state.
    backend_job_id : str or None, default None
        The batch job id, once submitted.
    submit_time, start_time, end_time : float or None
        Submission, start and end, on the keeper's clock (the backend's for run control, epoch seconds for
        the pool).
    reason : str, default "initial"
        Why it was requested: ``"initial"``, ``"walltime"`` (follow-up of a walltime), ``"lost"``
        (replacement of an allocation that ended under us) or ``"resubmit"``.
    predicted_wait : float or None, default None
        The queue wait the strategy planned with, if any.
    dependencies : tuple of (str, DependencyKind), default ()
        Allocations (by id) it must wait for, and how (batch dependencies).
    begin : float or None, default None
        Not to start before this time (``--begin``).
    cancelled : bool, default False
        We cancelled it (as opposed to the backend ending it: walltime, failure, ``scancel`` by someone).
    serves : tuple of str, default ()
        The stages it is kept for (run control: a planner may let one allocation serve several
        consecutive stages); ``()`` means its ``stage`` only. See :attr:`labels`.
    eligible_time : float or None, default None
        When its dependencies and begin time were satisfied, once they are (run control); its queue
        wait counts from then.
    piece_of : str or None, default None
        Set when run control split one request into several batch jobs (its ``job_cores``): the id of
        the request's first job, shared by all of them. Each such job is released on its own, idle, once
        the other running jobs have idle cores for every task of its stages still waiting
        (:func:`~elastic.strategies.base.release_idle`).
    waves : int, default 1
        Waves of its stages' tasks its walltime was asked for (the request's
        :attr:`~elastic.strategies.actions.Submit.waves`).

    Examples
    --------
    >>> a = Allocation("a1", cores=4, walltime=600.0, submit_time=100.0)
    >>> b = a.transition(AllocationState.RUNNING, at=130.0)
    >>> (b.state.value, b.start_time, b.remaining(430.0))
    ('RUNNING', 130.0, 300.0)
    """

    alloc_id: str
    cores: int
    walltime: float
    stage: str | None = None
    nodes: int | None = None
    state: AllocationState = AllocationState.REQUESTED
    backend_job_id: str | None = None
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    reason: str = "initial"
    predicted_wait: float | None = None
    dependencies: tuple[tuple[str, DependencyKind], ...] = ()
    begin: float | None = None
    cancelled: bool = False
    serves: tuple[str, ...] = ()
    eligible_time: float | None = None
    piece_of: str | None = None
    waves: int = 1

    def __post_init__(self) -> None:
        if not self.alloc_id:
            raise ConfigError("Allocation.alloc_id must be a non-empty string")
        if self.cores < 1:
            raise ConfigError(f"Allocation.cores must be >= 1, got {self.cores}")
        if not self.walltime > 0:
            raise ConfigError(f"Allocation.walltime must be > 0 seconds, got {self.walltime}")
        if self.nodes is not None and not 1 <= self.nodes <= self.cores:
            raise ConfigError(f"Allocation.nodes must be None or 1..cores={self.cores}, got {self.nodes}")

    @property
    def labels(self) -> tuple[str, ...]:
        """The stages it is kept for: :attr:`serves`, else its ``stage`` (none without one)."""
        if self.serves:
            return self.serves
        return () if self.stage is None else (self.stage,)

    @property
    def request(self) -> str:
        """The request it was submitted for: :attr:`piece_of` for a batch job split from one, else its id."""
        return self.piece_of or self.alloc_id

    @property
    def pending(self) -> bool:
        """Requested, not started yet."""
        return self.state is _REQUESTED

    @property
    def running(self) -> bool:
        """Holding its cores (RUNNING or DRAINING)."""
        return self.state.is_live

    @property
    def ended(self) -> bool:
        """In a final state."""
        return self.state.is_final

    @property
    def queue_wait(self) -> float | None:
        """Seconds it waited in the queue once eligible (its dependency released it, else its submission).

        None until it starts (or without a submit time).
        """
        since = self.eligible_time if self.eligible_time is not None else self.submit_time
        if self.start_time is None or since is None:
            return None
        return max(0.0, self.start_time - since)

    @property
    def walltime_end(self) -> float | None:
        """When the backend will kill it (start + walltime), once started."""
        return None if self.start_time is None else self.start_time + self.walltime

    def remaining(self, now: float) -> float:
        """Seconds of walltime left at ``now``; the whole walltime before it starts, 0 once ended."""
        if self.state.is_final:
            return 0.0
        end = self.walltime_end
        return self.walltime if end is None else max(0.0, end - now)

    def transition(self, new: AllocationState, at: float) -> Allocation:
        """Return a copy in state ``new``, stamping start/end times at ``at`` (the keeper's clock).

        Raises
        ------
        IllegalTransitionError
            ``new`` is not reachable from the current state.
        """
        if new not in LEGAL_TRANSITIONS[self.state]:
            raise IllegalTransitionError(self.alloc_id, self.state, new)
        start = self.start_time
        if new is AllocationState.RUNNING and start is None:
            start = at
        end = at if new.is_final else self.end_time
        return dataclasses.replace(self, state=new, start_time=start, end_time=end)

    def core_seconds(self, now: float) -> float:
        """Cores x seconds held so far (charged), 0 before it starts."""
        if self.start_time is None:
            return 0.0
        end = self.end_time if self.end_time is not None else now
        return self.cores * max(0.0, end - self.start_time)


@dataclass(frozen=True, slots=True)
class AllocationEvent:
    """An allocation changed state (recorded by the pool for metrics and plots).

    Attributes
    ----------
    time : float
        Epoch seconds (pool clock).
    alloc_id : str
        The allocation.
    state : AllocationState
        The state it entered.
    cores : int
        Its cores.
    stage : str or None
        Its stage label.
    detail : str
        Why, in words (e.g. ``"agent n1:4242 joined"``).
    """

    time: float
    alloc_id: str
    state: AllocationState
    cores: int
    stage: str | None = None
    detail: str = ""
