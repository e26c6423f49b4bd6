"""What the run driver hands to an execution and gets back: TaskSpec, the Execution contract, RunResult.

An execution runs tasks on live allocations: :class:`~elastic.control.sim_execution.SimExecution`
simulates them in backend time (pure simulation), :class:`~elastic.control.pool_execution.PoolExecution`
runs them on the real pool. The driver (:class:`~elastic.control.runner.Runner`) cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from elastic.allocations import AllocationState
from elastic.errors import ElasticError
from elastic.metrics import Event, RunMetrics

__all__ = ["Execution", "ReportsBusyChanges", "ReportsClaims", "RunResult", "TaskFailedError", "TaskSpec"]


class TaskFailedError(ElasticError, RuntimeError):
    """A workflow task failed (its command exited non-zero, or it was lost too often).

    A declared workflow cannot complete without every task: an execution that fails fast raises it as
    soon as it hears of the failure, and the declared demand raises it at its next update otherwise.

    Parameters
    ----------
    task_id : str
        The task.
    detail : str
        What the execution reported.
    """

    def __init__(self, task_id: str, detail: str) -> None:
        self.task_id = task_id
        self.detail = detail
        super().__init__(f"task {task_id!r} failed: {detail}; the run is stopped (see the agent's output)")


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task handed to an executor.

    Attributes
    ----------
    task_id : str
        ``"<stage>.<index>"``.
    stage : str
        Its stage.
    order : int
        Queue order (earlier stages first): executors place lower values first.
    cores : int
        Cores it needs.
    estimate : float
        Runtime estimate in seconds (expected stage duration), for walltime-aware placement.
    duration : float
        Sampled duration in backend seconds: what a simulated task takes, what a sleep task sleeps.
    command : str or None
        Shell command for real execution, if the stage has one.
    """

    task_id: str
    stage: str
    order: int
    cores: int
    estimate: float
    duration: float
    command: str | None = None


class Execution(Protocol):
    """Runs tasks on live allocations: :class:`~elastic.control.sim_execution.SimExecution` or the pool.

    Task events (TASK_START, TASK_END, TASK_LOST) are returned by :meth:`advance` with their own times.

    The allocations are the controller's (:class:`~elastic.control.controller.AllocationController`): it
    tells the execution, in this order and once each, that one is requested (:meth:`register`, before its
    batch job is submitted, so that an agent starting at once is expected), its batch job id
    (:meth:`submitted`), its start (:meth:`add_allocation`, with the walltime granted), that it is to take no
    more tasks (:meth:`release`) and its end (:meth:`allocation_ended`). :meth:`job_script` only builds text.
    After each decision it calls :meth:`decided`.
    """

    def register(self, alloc_id: str, cores: int, walltime: float, stage: str) -> None:
        """Take note that an allocation of ``cores`` x ``walltime`` for ``stage`` is being requested."""
        ...

    def submitted(self, alloc_id: str, job_id: str) -> None:
        """Take note of the batch job id of a registered allocation."""
        ...

    def add_allocation(self, alloc_id: str, cores: int, walltime_end: float, at: float) -> None:
        """Take note that an allocation started at ``at``; it may run tasks until ``walltime_end``."""
        ...

    def allocation_ended(
        self, alloc_id: str, at: float, state: AllocationState, start: float | None = None
    ) -> None:
        """Take note that the allocation ended at ``at`` in ``state``; its running tasks are lost.

        Also called for allocations that never started (cancelled while pending: ``start`` None), and
        for one whose start the controller learned with its end (``start``: the backend's start time;
        :meth:`add_allocation` was not called for it).
        """
        ...

    def job_script(self, alloc_id: str, cores: int, walltime: float, stage: str) -> str | None:
        """Return the job script that starts the allocation's agents, or None (simulated allocations).

        Pure: it registers nothing (:meth:`register` does).
        """
        ...

    def decided(self) -> None:
        """Take note that the driver decided on allocations after the task events :meth:`advance` gave.

        A task lost and re-queued waits for this before it may start on an allocation that cannot run it
        to its end: the decision may have asked for one that can.
        """
        ...

    def release(self, alloc_id: str) -> None:
        """Place no new task on ``alloc_id``: the driver is about to cancel it (its tasks may still end)."""
        ...

    def submit(self, task: TaskSpec) -> None:
        """Queue a task."""
        ...

    def advance(self, now: float) -> list[Event]:
        """Bring the executor up to ``now``; return task events since the last call, in time order."""
        ...

    def next_event_time(self) -> float | None:
        """Earliest time something will happen by itself (a simulated task ends), if known."""
        ...

    def busy_cores(self, alloc_id: str) -> int:
        """Cores of ``alloc_id`` running tasks now."""
        ...

    def close(self) -> None:
        """Release resources (threads, sockets)."""
        ...


@runtime_checkable
class ReportsBusyChanges(Protocol):
    """An execution that can say cheaply whether any allocation's busy cores may have changed (simulated).

    Run control reads every running allocation's busy cores at every step (twice, with a live view of
    the run); where the execution gives this, it reads them again only when the value changed.
    """

    def busy_version(self) -> int:
        """Return a value that changes whenever :meth:`Execution.busy_cores` of any allocation may have."""
        ...


@runtime_checkable
class ReportsClaims(Protocol):
    """An execution whose idle cores a front-end may have promised to a placement it makes itself (live).

    A Mesos framework launches only on the cores it is offered: from the launch of its task until it has
    heard that the task ended, and while its cores are offered to it again, they are the framework's, as
    the Mesos allocator counts offered resources as allocated, even where the pool sees them run nothing.
    """

    def claimed_cores(self) -> Mapping[str, int]:
        """Return the cores promised to a front-end's placement now, by allocation id (absent: none)."""
        ...


@dataclass(frozen=True, slots=True)
class RunResult:
    """Outcome of one run: its status, timeline and metrics."""

    workflow: str
    strategy: str
    status: str
    """``completed``, ``timeout`` (gave up at ``max_duration``), ``interrupted`` or ``failed``."""
    events: tuple[Event, ...]
    metrics: RunMetrics
    detail: str = ""
    """Why a run did not complete, in words."""
