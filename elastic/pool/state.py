"""The pool's bookkeeping without sockets or threads: allocations, agents, tasks, placement, events.

:class:`PoolState` holds what :class:`elastic.pool.pool.Pool` knows and applies every change to it: agent
messages (:meth:`PoolState.handle`), the periodic checks (:meth:`PoolState.tick`: heartbeats, lost
agents, draining, placement) and the pool's synchronous API. It never touches the network: messages for
agents collect in :attr:`PoolState.outbox` and future resolutions in :attr:`PoolState.resolve`; the pool
sends and runs them outside its lock. It is not thread-safe: the pool calls every method with its lock
held.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from elastic.allocations import Allocation, AllocationEvent, AllocationState
from elastic.errors import ConfigError
from elastic.pool.events import AgentEvent, AgentEventKind, PoolEvent
from elastic.pool.placement import Offer, plan_placement
from elastic.pool.protocol import (
    Bye,
    Drain,
    Heartbeat,
    Message,
    Register,
    RunTask,
    Stop,
    TaskDone,
    TaskLost,
    Welcome,
)
from elastic.pool.tasks import Task, TaskEvent, TaskLostError, TaskState

__all__ = ["AgentRecord", "PoolState", "TaskRecord"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class TaskRecord:
    """A task submitted to the pool, with its future and where it runs (mutable)."""

    task: Task
    future: Future[Any]
    state: TaskState = TaskState.QUEUED
    attempt: int = 1
    losses: list[tuple[str, str]] = field(default_factory=list)
    agent: bytes | None = None
    alloc_id: str | None = None
    future_running: bool = False


@dataclass(slots=True)
class AgentRecord:
    """An agent that registered with the pool: its cores, the tasks it runs, when it was last heard."""

    ident: bytes
    name: str
    alloc_id: str
    cores: int
    free: int
    walltime_end: float | None
    last_seen: float
    running: set[str] = field(default_factory=set)
    draining: bool = False


class PoolState:
    """Allocations, agents and tasks of one pool, and the rules that change them.

    Parameters
    ----------
    heartbeat_interval, heartbeat_timeout, pool_timeout, max_retries, drain_margin
        As for :class:`elastic.pool.pool.Pool` (validated there).
    clock : callable
        Epoch seconds; every event and walltime computation uses it.

    Attributes
    ----------
    allocs : dict of str to Allocation
        Every allocation ever added, in the order added.
    agents : dict of bytes to AgentRecord
        Registered agents not yet gone, by identity.
    tasks : dict of str to TaskRecord
        Every task submitted.
    queue : dict of str to None
        Ordered set of queued task ids, oldest first.
    outbox : list of (bytes, Message)
        Messages to send to agents.
    resolve : list of callable
        Future resolutions to run outside the lock (their callbacks may block).
    events : list of PoolEvent
        Every event so far, oldest first.
    subscribers : list of callable
        Called with each new event.
    refused : int
        Messages refused so far (wrong secret, malformed, unknown allocation).
    """

    def __init__(
        self,
        *,
        heartbeat_interval: float,
        heartbeat_timeout: float,
        pool_timeout: float,
        max_retries: int,
        drain_margin: float,
        clock: Callable[[], float],
    ) -> None:
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self.pool_timeout = pool_timeout
        self.max_retries = max_retries
        self.drain_margin = drain_margin
        self._clock = clock
        self.allocs: dict[str, Allocation] = {}
        self.agents: dict[bytes, AgentRecord] = {}
        self._seen: set[bytes] = set()  # every agent identity that ever registered
        self.tasks: dict[str, TaskRecord] = {}
        self.queue: dict[str, None] = {}
        self.outbox: list[tuple[bytes, Message]] = []
        self.resolve: list[Callable[[], None]] = []
        self.events: list[PoolEvent] = []
        self.subscribers: list[Callable[[PoolEvent], None]] = []
        self._last_beat = 0.0
        self.refused = 0

    # ------------------------------------------------------------------------------------ synchronous API

    def add_allocation(self, allocation: Allocation) -> None:
        """Register an allocation (see :meth:`elastic.pool.pool.Pool.add_allocation`)."""
        if allocation.alloc_id in self.allocs:
            raise ConfigError(f"add_allocation: allocation id {allocation.alloc_id!r} is already in the pool")
        if allocation.state.is_final or allocation.state is AllocationState.DRAINING:
            raise ConfigError(
                f"add_allocation: allocation {allocation.alloc_id!r} is {allocation.state.value}; "
                "add it when REQUESTED or RUNNING"
            )
        self.allocs[allocation.alloc_id] = allocation
        self._alloc_event(allocation, "added")

    def allocation_submitted(self, alloc_id: str, backend_job_id: str) -> None:
        """Record the batch job id of an allocation once the backend gave it."""
        alloc = self.allocation(alloc_id)
        self.allocs[alloc_id] = dataclasses.replace(alloc, backend_job_id=backend_job_id)

    def allocation_ended(self, alloc_id: str, new: AllocationState, detail: str) -> None:
        """Record that an allocation ended in the final state ``new`` (see :class:`elastic.pool.Pool`)."""
        alloc = self.allocation(alloc_id)
        if alloc.state is new:
            return
        self._set_state(alloc, new, detail or f"batch job ended {new.value}")
        for agent in [a for a in self.agents.values() if a.alloc_id == alloc_id]:
            self._lose_agent(agent, f"allocation {alloc_id} ended {new.value}")
            self.outbox.append((agent.ident, Stop(f"allocation ended {new.value}")))

    def drain(self, alloc_id: str, reason: str) -> None:
        """Place no new task on an allocation; its agents leave once their running tasks end."""
        self._drain(self.allocation(alloc_id), reason)

    def allocation(self, alloc_id: str) -> Allocation:
        """Return the current record of one allocation (raises ConfigError for unknown ids)."""
        try:
            return self.allocs[alloc_id]
        except KeyError:
            raise ConfigError(
                f"no allocation {alloc_id!r} in the pool; known: {sorted(self.allocs)}"
            ) from None

    def submit(self, task: Task) -> Future[Any]:
        """Queue a task (the pool checked it is open); return its future."""
        if task.task_id in self.tasks:
            raise ConfigError(f"submit: task id {task.task_id!r} is already used in this pool")
        future: Future[Any] = Future()
        self.tasks[task.task_id] = TaskRecord(task, future)
        self.queue[task.task_id] = None
        self._task_event(self.tasks[task.task_id], TaskState.QUEUED, "submitted")
        return future

    def running(self) -> dict[str, tuple[Task, ...]]:
        """Return the running tasks by allocation id."""
        out: dict[str, list[Task]] = {}
        for agent in self.agents.values():
            out.setdefault(agent.alloc_id, []).extend(self.tasks[t].task for t in agent.running)
        return {k: tuple(v) for k, v in out.items()}

    def free_cores(self) -> dict[str, int]:
        """Offered but unused cores by allocation id (agents that joined and are not draining)."""
        out: dict[str, int] = {}
        for agent in self.agents.values():
            if not agent.draining:
                out[agent.alloc_id] = out.get(agent.alloc_id, 0) + agent.free
        return out

    # ------------------------------------------------------------------------------ messages and checks

    def refuse(self, peer: str, why: str) -> None:
        """Count and record a refused connection or message from ``peer``."""
        self.refused += 1
        alloc = peer.split("/")[0]
        self.emit(AgentEvent(self._clock(), alloc, peer, AgentEventKind.REFUSED, why))

    def handle(self, ident: bytes, msg: Message) -> None:
        """Apply one authenticated message from the agent ``ident``."""
        agent = self.agents.get(ident)
        if isinstance(msg, Register):
            self._register(ident, msg)
            return
        if agent is None:
            # Unknown or already declared lost: its tasks were re-queued, so it must not report any more.
            # A Bye from an agent whose allocation ended is the normal end of a released allocation.
            log = logger.info if isinstance(msg, Bye) else logger.warning
            log("pool: %s from unregistered agent %r, telling it to stop", type(msg).__name__, ident)
            self.outbox.append((ident, Stop("not registered (declared lost?)")))
            return
        agent.last_seen = self._clock()
        if isinstance(msg, TaskDone):
            self._task_done(agent, msg)
        elif isinstance(msg, TaskLost):
            agent.draining = True  # it is stopping: place nothing more there, not even this task again
            rec = self._release(agent, msg.task_id)
            if rec is not None:
                self._task_lost(rec, agent.alloc_id, f"{msg.cause} (agent {agent.name})")
        elif isinstance(msg, Bye):
            del self.agents[ident]
            for task_id in list(agent.running):
                self._task_lost(self.tasks[task_id], agent.alloc_id, f"agent {agent.name} left: {msg.reason}")
            self.emit(AgentEvent(self._clock(), agent.alloc_id, agent.name, AgentEventKind.LEFT, msg.reason))

    def tick(self, now: float) -> None:
        """Check agents and walltimes, place queued tasks, and send heartbeats when due."""
        self._check_agents(now)
        self._place(now)
        if now - self._last_beat >= self.heartbeat_interval:
            self._last_beat = now
            self.outbox.extend((a, Heartbeat()) for a in self.agents)

    def _register(self, ident: bytes, msg: Register) -> None:
        name = ident.decode(errors="replace")
        alloc = self.allocs.get(msg.alloc_id)
        why = None
        if ident in self.agents:
            return  # a repeated registration of a live agent
        if name != f"{msg.alloc_id}/{msg.hostname}/{msg.pid}":
            # The identity is not under the MAC: tie it to the signed fields, so a captured Register
            # cannot be replayed from another connection ...
            why = f"identity {name!r} does not match the signed registration"
        elif ident in self._seen:
            # ... nor again from this identity once its agent was lost or left.
            why = f"agent {name!r} registered before (replayed or restarted registration)"
        elif alloc is None:
            why = f"unknown allocation {msg.alloc_id!r}"
        elif not (alloc.state is AllocationState.REQUESTED or alloc.state is AllocationState.RUNNING):
            why = f"allocation {msg.alloc_id!r} is {alloc.state.value}"
        if alloc is None or why is not None:
            self.refused += 1
            logger.warning("pool: refused agent %s: %s", name, why)
            self.emit(AgentEvent(self._clock(), msg.alloc_id, name, AgentEventKind.REFUSED, str(why)))
            self.outbox.append((ident, Stop(str(why))))
            return
        now = self._clock()
        self._seen.add(ident)
        self.agents[ident] = AgentRecord(
            ident, name, msg.alloc_id, msg.cores, msg.cores, msg.walltime_end, now
        )
        if alloc.state is AllocationState.REQUESTED:
            self._set_state(alloc, AllocationState.RUNNING, f"agent {name} joined")
        self.emit(AgentEvent(now, msg.alloc_id, name, AgentEventKind.JOINED, f"{msg.cores} cores"))
        self.outbox.append((ident, Welcome(self.heartbeat_interval, self.pool_timeout)))
        logger.info("pool: agent %s joined allocation %s with %d cores", name, msg.alloc_id, msg.cores)

    def _release(self, agent: AgentRecord, task_id: str) -> TaskRecord | None:
        """Take a task that ended off ``agent``; None (logged) when it does not run there."""
        rec = self.tasks.get(task_id)
        if rec is None or rec.agent != agent.ident or rec.state is not TaskState.RUNNING:
            logger.warning("pool: ignoring a stale report of task %s from %s", task_id, agent.name)
            return None
        agent.running.discard(task_id)
        agent.free += rec.task.cores
        rec.agent = None
        return rec

    def _task_done(self, agent: AgentRecord, msg: TaskDone) -> None:
        result = msg.result
        rec = self._release(agent, result.task_id)
        if rec is None:
            return
        alloc = self.allocs[agent.alloc_id]
        if result.signal is not None and (agent.draining or alloc.state is not AllocationState.RUNNING):
            # The batch system signals every process of an allocation it stops (walltime, scancel); a task
            # killed by a signal there was interrupted, not failed by its own doing.
            why = "draining" if agent.draining else alloc.state.value
            cause = f"killed by {result.signal_name} while allocation {alloc.alloc_id} was {why}"
            self._task_lost(rec, agent.alloc_id, cause)
            return
        future = rec.future
        if result.ok:
            self._task_event(rec, TaskState.DONE, f"ran {result.ended - result.started:.3f} s")
        else:
            self._task_event(rec, TaskState.FAILED, f"{result.error_type}: {result.error_message}")

        def resolve() -> None:
            try:
                future.set_result(result.outcome())
            except BaseException as exc:  # the task's own exception, re-raised by outcome()
                future.set_exception(exc)

        self.resolve.append(resolve)

    def _check_agents(self, now: float) -> None:
        for agent in list(self.agents.values()):
            silent = now - agent.last_seen
            if silent > self.heartbeat_timeout:
                self._lose_agent(agent, f"agent {agent.name} sent no heartbeat for {silent:.1f} s")
        for alloc in list(self.allocs.values()):
            if alloc.state is AllocationState.RUNNING:
                left = self._remaining(alloc.alloc_id, now)
                if left <= self.drain_margin:
                    self._drain(alloc, f"{left:.1f} s of walltime left <= drain_margin={self.drain_margin}")

    def _lose_agent(self, agent: AgentRecord, cause: str) -> None:
        # A warning only when work is lost; an idle agent of an allocation that ended is routine
        # (every allocation a strategy releases ends that way).
        if agent.running:
            logger.warning(
                "pool: lost agent %s with %d running task(s): %s", agent.name, len(agent.running), cause
            )
        else:
            logger.info("pool: agent %s gone: %s", agent.name, cause)
        self.agents.pop(agent.ident, None)
        for task_id in list(agent.running):
            self._task_lost(self.tasks[task_id], agent.alloc_id, cause)
        agent.running.clear()
        self.emit(AgentEvent(self._clock(), agent.alloc_id, agent.name, AgentEventKind.LOST, cause))

    def _task_lost(self, rec: TaskRecord, alloc_id: str, cause: str) -> None:
        rec.losses.append((alloc_id, cause))
        rec.agent = None
        self._task_event(rec, TaskState.LOST, cause)
        if len(rec.losses) > self.max_retries:
            error = TaskLostError(rec.task.task_id, rec.task.stage, tuple(rec.losses), self.max_retries)
            self._task_event(rec, TaskState.FAILED, str(error))
            self.resolve.append(lambda: rec.future.set_exception(error))
            return
        rec.attempt += 1
        self.queue = {rec.task.task_id: None, **self.queue}  # it is older than every queued task
        self._task_event(rec, TaskState.QUEUED, f"re-queued after loss {len(rec.losses)}/{self.max_retries}")

    def _drain(self, alloc: Allocation, reason: str) -> None:
        if alloc.state is not AllocationState.RUNNING:
            return
        self._set_state(alloc, AllocationState.DRAINING, reason)
        for agent in self.agents.values():
            if agent.alloc_id == alloc.alloc_id:
                agent.draining = True
                self.outbox.append((agent.ident, Drain(reason)))

    def _remaining(self, alloc_id: str, now: float) -> float:
        """Walltime left: the earliest end an agent reported, else start + walltime, else all of it."""
        ends = [a.walltime_end for a in self.agents.values() if a.alloc_id == alloc_id and a.walltime_end]
        alloc = self.allocs[alloc_id]
        return max(0.0, min(ends) - now) if ends else alloc.remaining(now)

    def _place(self, now: float) -> None:
        if not self.queue:
            return
        offers = [
            Offer(a.ident, a.alloc_id, a.free, self._remaining(a.alloc_id, now))
            for a in self.agents.values()
            if not a.draining and a.free > 0 and self.allocs[a.alloc_id].state.is_live
        ]
        if not offers:
            return
        tasks = [self.tasks[t].task for t in self.queue]
        for task, offer in plan_placement(tasks, offers, lambda t: self._another_could_take(t, now)):
            rec = self.tasks[task.task_id]
            agent = self.agents[offer.agent]
            if (task.estimate or 0.0) > offer.remaining:
                logger.info(
                    "pool: no allocation has %.0f s left for task %s; starting it on %s (%.0f s left)",
                    task.estimate,
                    task.task_id,
                    agent.alloc_id,
                    offer.remaining,
                )
            del self.queue[task.task_id]
            if not rec.future_running:
                if not rec.future.set_running_or_notify_cancel():
                    self._task_event(rec, TaskState.CANCELLED, "future cancelled before it started")
                    continue
                rec.future_running = True
            agent.free -= task.cores
            agent.running.add(task.task_id)
            rec.agent = agent.ident
            rec.alloc_id = agent.alloc_id
            self._task_event(rec, TaskState.RUNNING, f"on agent {agent.name}")
            self.outbox.append((agent.ident, RunTask(task)))

    def _another_could_take(self, task: Task, now: float) -> bool:
        """Whether a not-draining allocation (live or requested) has enough cores and time for ``task``."""
        need = task.estimate or 0.0
        for alloc in self.allocs.values():
            if alloc.state not in (AllocationState.REQUESTED, AllocationState.RUNNING):
                continue
            per_agent = alloc.cores // (alloc.nodes or 1)
            if per_agent >= task.cores and self._remaining(alloc.alloc_id, now) >= need:
                return True
        return False

    # ------------------------------------------------------------------------------------------- events

    def _set_state(self, alloc: Allocation, new: AllocationState, detail: str) -> None:
        alloc = alloc.transition(new, self._clock())
        self.allocs[alloc.alloc_id] = alloc
        self._alloc_event(alloc, detail)

    def _alloc_event(self, alloc: Allocation, detail: str) -> None:
        logger.info("pool: allocation %s %s (%s)", alloc.alloc_id, alloc.state.value, detail)
        event = AllocationEvent(self._clock(), alloc.alloc_id, alloc.state, alloc.cores, alloc.stage, detail)
        self.emit(event)

    def _task_event(self, rec: TaskRecord, state: TaskState, detail: str) -> None:
        rec.state = state
        task = rec.task
        event = TaskEvent(
            self._clock(), task.task_id, task.stage, state, task.cores, rec.alloc_id, rec.attempt, detail
        )
        self.emit(event)

    def emit(self, event: PoolEvent) -> None:
        """Record ``event`` and call every subscriber (a failing one is logged, not raised)."""
        self.events.append(event)
        for callback in list(self.subscribers):
            try:
                callback(event)
            except Exception:
                logger.exception("pool: event subscriber %r failed", callback)
