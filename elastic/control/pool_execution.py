"""The real pool behind the run driver's :class:`~elastic.control.execution.Execution` contract.

:class:`PoolExecution` adapts :class:`~elastic.pool.pool.Pool` (agents in allocations, ZeroMQ, real
processes) to the same small contract as :class:`~elastic.control.sim_execution.SimExecution`, so
:class:`~elastic.control.runner.Runner` and the strategies run unchanged on the mock backend's scaled
clock and on Slurm.

Clocks. The pool keeps real time (heartbeats, walltime left); the driver keeps backend time (simulated
seconds on the scaled mock clock, epoch seconds on Slurm). With a clock ``speedup`` K, an allocation of
walltime ``w`` backend seconds is registered in the pool with ``w / K`` real seconds, a task's runtime
estimate is divided by K, and a task without a command sleeps its sampled duration / K. Task events are
stamped with the backend clock when the pool reports them.
"""

from __future__ import annotations

import logging
import queue
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from elastic.allocations import Allocation, AllocationState
from elastic.backends.base import BatchBackend
from elastic.control.execution import TaskFailedError, TaskSpec
from elastic.control.scheduler import job_nodes
from elastic.errors import ConfigError
from elastic.metrics import Event, EventKind
from elastic.pool.events import AgentEvent, AgentEventKind, PoolEvent
from elastic.pool.tasks import Task, TaskEvent, TaskState
from elastic.site import SiteConfig

if TYPE_CHECKING:
    from elastic.pool.pool import Pool

__all__ = ["PoolExecution", "TaskFailedError"]

logger = logging.getLogger(__name__)


class PoolExecution:
    """Execution running tasks on a real :class:`~elastic.pool.pool.Pool`.

    Parameters
    ----------
    backend : BatchBackend
        The backend whose clock stamps task events.
    speedup : float, default 1.0
        Backend seconds per real second (the mock backend's scaled clock; 1 on Slurm).
    pool : Pool or None, default None
        The pool agents connect to; ``None`` creates one (loopback, drain margin scaled to real time,
        agents on the interpreter of the backend's site configuration, ``backend.site.python``, if it
        names one). It is closed by :meth:`close`.
    drain_margin : float, default 30.0
        Backend seconds before an allocation's walltime end when the created pool stops placing tasks on
        it (``drain_margin / speedup`` real seconds).
    bind : str, default "127.0.0.1"
        Interface the created pool listens on.
    fail_fast : bool, default False
        A failed task raises :class:`TaskFailedError` from :meth:`advance` (a declared workflow's run
        stops); otherwise it is a TASK_FAILED event and its own future's failure.
    on_event : callable or None, default None
        Called (from a thread delivering the pool's events, outside the pool's lock, quickly) whenever a
        task event arrives or an agent joins (its batch job started), e.g. to wake a waiting driver, whose
        next step then learns the start from the batch system.
    node_cores : int or None, default None
        Cores per node where the caller's partition allocates in nodes
        (:attr:`~elastic.batch.PartitionInfo.node_cores`): on Slurm, a job of whole nodes then starts
        one agent per node. The caller reads the partition once; ``None`` means one agent per job.
    """

    def __init__(
        self,
        backend: BatchBackend,
        *,
        speedup: float = 1.0,
        pool: Pool | None = None,
        drain_margin: float = 30.0,
        bind: str = "127.0.0.1",
        fail_fast: bool = False,
        on_event: Callable[[], None] | None = None,
        node_cores: int | None = None,
    ) -> None:
        if not speedup > 0:
            raise ConfigError(f"PoolExecution: speedup must be > 0, got {speedup!r}")
        if pool is None:
            from elastic.pool.pool import Pool

            site = getattr(backend, "site", None)  # the Slurm backend's (elastic.site)
            python = site.python if isinstance(site, SiteConfig) and site.python else sys.executable
            pool = Pool(bind=bind, drain_margin=drain_margin / speedup, python=python)
        self.pool = pool
        self.backend = backend
        self.speedup = speedup
        self.fail_fast = fail_fast
        self._notify = on_event
        self._running: set[str] = set()
        self._inbox: queue.SimpleQueue[tuple[float, TaskEvent]] = queue.SimpleQueue()
        self._stamped = (float("nan"), 0.0)
        """The pool time of the last task event delivered, and the backend time it was stamped with."""
        self._held: tuple[float, TaskEvent] | None = None
        """The oldest event taken from the inbox and not handed over yet (stamped after the step's now)."""
        self._lost_seen: set[str] = set()
        """Tasks whose lost attempt :meth:`advance` handed over since the last :meth:`decided`."""
        # A job of several whole nodes runs one agent per node, started with srun: on Slurm. Elsewhere (the
        # mock backend's local processes) one agent offers the job's cores.
        self._node_cores = node_cores if getattr(backend, "name", None) == "slurm" else None
        """Cores per node where jobs are whole nodes (:attr:`~elastic.batch.PartitionInfo.node_cores`)."""
        # the controller owns the allocations: the pool changes one's state only when told (register,
        # submitted, add_allocation, release, allocation_ended), and a lost task waits for its next decision
        pool.expect_owner()
        self._unsubscribe = pool.subscribe(self._on_event)
        self._claims: list[Callable[[], Mapping[str, int]]] = []
        """Sources of cores a front-end promised to its own placement (:meth:`claim`)."""

    def _on_event(self, event: PoolEvent) -> None:
        # called by a thread delivering the pool's events, without the pool's lock (the backend's clock may
        # take the backend's own lock): stamp with the backend clock, hand over to the driver thread
        if isinstance(event, AgentEvent):
            if event.kind is AgentEventKind.JOINED and self._notify is not None:
                # an agent's Register: its batch job runs. The driver is woken to ask the batch system at
                # once for the start (its time and the walltime granted, on the backend's clock), rather
                # than at its next poll; the pool offers the agent's cores meanwhile
                self._notify()
            return
        if isinstance(event, TaskEvent):
            if event.time != self._stamped[0]:
                # events the pool recorded at one instant (a lost task's LOST and FAILED when it may not run
                # again) get one stamp, so that one step sees them all: never the loss without its end
                self._stamped = (event.time, self.backend.now())
            self._inbox.put((self._stamped[1], event))
            if self._notify is not None:
                self._notify()

    # -- the Execution contract -----------------------------------------------------------------------

    def register(self, alloc_id: str, cores: int, walltime: float, stage: str) -> None:
        """Tell the pool the allocation exists (REQUESTED), so that its agents may join."""
        self.pool.add_allocation(self._allocation(alloc_id, cores, walltime, stage))

    def submitted(self, alloc_id: str, job_id: str) -> None:
        """Tell the pool the allocation's batch job id."""
        self.pool.allocation_submitted(alloc_id, job_id)

    def job_script(self, alloc_id: str, cores: int, walltime: float, stage: str) -> str | None:
        """Return the script starting the allocation's agent (registers nothing: see :meth:`register`)."""
        return self.pool.agent_script(self._allocation(alloc_id, cores, walltime, stage))

    def _allocation(self, alloc_id: str, cores: int, walltime: float, stage: str) -> Allocation:
        """Return the pool's view of an allocation: its walltime in real seconds, its whole nodes if any.

        On Slurm, a job of whole nodes is asked as such (:func:`~elastic.control.scheduler.job_nodes`): its
        script starts one agent per node.
        """
        nodes = job_nodes(cores, self._node_cores)
        return Allocation(alloc_id, cores=cores, walltime=walltime / self.speedup, stage=stage, nodes=nodes)

    def add_allocation(self, alloc_id: str, cores: int, walltime_end: float, at: float) -> None:
        """Tell the pool the allocation's job started at ``at`` (backend time) with the walltime granted."""
        self.pool.allocation_started(alloc_id, self._pool_seconds_ago(at), (walltime_end - at) / self.speedup)
        logger.debug("pool executor: allocation %s started at %.0f", alloc_id, at)

    def _pool_seconds_ago(self, at: float) -> float:
        """How long before now backend time ``at`` was, in the pool's (real) seconds; 0 if not past."""
        return max(0.0, self.backend.now() - at) / self.speedup

    def allocation_ended(
        self,
        alloc_id: str,
        at: float,
        state: AllocationState = AllocationState.CANCELLED,
        start: float | None = None,
    ) -> None:
        """Tell the pool, with the start the backend reported if any; it re-queues the tasks running there.

        The pool takes ``start`` only for an allocation whose start it was not told (the controller
        learned the start with the end); it ends one that never started straight from REQUESTED.
        """
        started_ago = None if start is None else self._pool_seconds_ago(start)
        self.pool.allocation_ended(alloc_id, state, f"batch job ended {state.value}", started_ago)

    def decided(self) -> None:
        """Tell the pool the driver decided after the losses it was handed: those tasks may be placed."""
        if self._lost_seen:
            self.pool.decided(self._lost_seen)
            self._lost_seen = set()

    def release(self, alloc_id: str) -> None:
        """Drain the allocation in the pool before it is cancelled.

        A batch system takes a moment to end a cancelled job; until the pool hears of it, it would keep
        placing tasks on the job's agent, and those tasks would die with the job (Slurm's SIGTERM).
        """
        self.pool.drain(alloc_id, "released by the strategy")

    def submit(self, task: TaskSpec) -> None:
        """Submit the task to the pool (a sleep of its sampled duration unless its stage has a command)."""
        command = task.command or f"exec sleep {task.duration / self.speedup:.3f}"
        self.pool.submit(
            Task.shell(
                command,
                cores=task.cores,
                estimate=task.estimate / self.speedup,
                stage=task.stage,
                task_id=task.task_id,
            )
        )
        logger.debug("pool executor: submitted %s: %s", task.task_id, command)

    def advance(self, now: float) -> list[Event]:
        """Return the task events the pool reported since the last call, up to ``now``.

        Raises
        ------
        TaskFailedError
            With ``fail_fast``: a task failed (the run is to stop).
        """
        out: list[Event] = []
        while True:
            if self._held is None:
                try:
                    self._held = self._inbox.get_nowait()
                except queue.Empty:
                    return out
            at, e = self._held
            if at > now:
                # Stamped after the caller read its clock (the pool's thread runs meanwhile): it belongs
                # to the next step, so that what a step does at ``now`` never precedes what it has seen.
                return out
            self._held = None
            if self.fail_fast and e.state is TaskState.FAILED:
                raise TaskFailedError(e.task_id, e.detail)
            kind = _KINDS.get(e.state)
            if e.state is TaskState.RUNNING:
                self._running.add(e.task_id)
            elif e.state in (TaskState.DONE, TaskState.LOST, TaskState.FAILED):
                if e.task_id not in self._running:  # failed while queued: lost too often
                    kind = EventKind.TASK_DROPPED
                self._running.discard(e.task_id)
                if e.state is TaskState.LOST:
                    self._lost_seen.add(e.task_id)
            if kind is not None:
                out.append(
                    Event(
                        at,
                        kind,
                        stage=e.stage,
                        allocation=e.alloc_id,
                        task=e.task_id,
                        cores=e.cores,
                        note=e.detail,
                    )
                )

    def next_event_time(self) -> float | None:
        """When a task event already received but stamped after the last step happened, else None.

        Otherwise unknown: real tasks end when they end.
        """
        return None if self._held is None else self._held[0]

    def busy_cores(self, alloc_id: str) -> int:
        """Cores of ``alloc_id`` running tasks now."""
        return self.pool.busy_cores().get(alloc_id, 0)

    def claim(self, source: Callable[[], Mapping[str, int]]) -> Callable[[], None]:
        """Count ``source()`` (cores by allocation id) as promised to a front-end's own placement.

        A Mesos framework places its tasks itself, on the cores it is offered: they are its own from the
        launch of a task until it heard that the task ended, and while they are offered to it again
        (:class:`~elastic.control.execution.ReportsClaims`). ``source`` is called from run control's
        thread, with no lock of the pool held; keep it quick. Returns a function that stops counting it.
        """
        self._claims.append(source)

        def unclaim() -> None:
            if source in self._claims:
                self._claims.remove(source)

        return unclaim

    def claimed_cores(self) -> Mapping[str, int]:
        """Cores promised to a front-end's placement now, by allocation id (absent: none)."""
        out: dict[str, int] = {}
        for source in list(self._claims):
            for alloc_id, cores in source().items():
                if cores > 0:
                    out[alloc_id] = out.get(alloc_id, 0) + cores
        return out

    def close(self) -> None:
        """Stop listening and close the pool (its agents are told to stop)."""
        self._unsubscribe()
        self.pool.close()


_KINDS = {
    TaskState.RUNNING: EventKind.TASK_START,
    TaskState.DONE: EventKind.TASK_END,
    TaskState.LOST: EventKind.TASK_LOST,
    TaskState.FAILED: EventKind.TASK_FAILED,
    TaskState.CANCELLED: EventKind.TASK_DROPPED,
}
"""Pool task states as run events (QUEUED and ASSIGNED are not attempts: no event)."""
