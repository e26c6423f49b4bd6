"""The pool's bookkeeping without sockets or threads: allocations, agents, tasks, placement, events.

:class:`PoolState` holds what :class:`elastic.pool.Pool` knows and applies every change to it: agent
messages (:meth:`PoolState.handle`), the periodic checks (:meth:`PoolState.tick`: heartbeats, lost
agents, draining, placement) and the pool's synchronous API. It never touches the network: messages for
agents collect in :attr:`PoolState.outbox` (tasks for one agent in one :class:`RunTasks` per tick) and
future resolutions in :attr:`PoolState.resolve`; events for subscribers in :attr:`PoolState.pending`. The
pool sends, runs and delivers them outside its lock (:meth:`PoolState.take_pending`, then
:meth:`PoolState.deliver`), so that no subscriber ever runs under it. It is not thread-safe: the pool calls
every method but :meth:`PoolState.deliver` with its lock held.

Built for many small tasks: the queue is indexed by the cores tasks need (placement looks only at the
oldest tasks of the classes that fit the free cores, and stops once they are taken), placement runs only
when the queue, the offers or the time changed, a resolved task's record is dropped, and the event history
is a ring buffer (subscribers see every event).

Prefetch, for short tasks only: beyond its free cores, a busy agent is sent up to ``prefetch_seconds`` of
expected work per core ahead (:attr:`~elastic.pool.tasks.TaskState.ASSIGNED`), so that a worker that
finishes starts the next task at once instead of waiting a round trip to the pool, and tasks and results
travel in batches. A task's expected duration is the running mean of its stage's finished tasks (after
:data:`_PREFETCH_AFTER` of them), else its estimate; a task with neither, or longer than the budget, is
never sent ahead, so long tasks never queue behind others on a busy agent while another has free cores. The
agent says which tasks it started in its next :class:`~elastic.pool.messages.Report` (with the results),
and gives back the ones it will not start when it drains or stops
(:class:`~elastic.pool.messages.TasksReturned`); an assigned task whose agent dies is queued again without
counting as a lost attempt (it never started).

Over 500 lines because :class:`PoolState` is one state machine: each transition of a task, an agent or an
allocation reads and changes the other two's records under the pool's one lock (a lost agent re-queues
its tasks and may end its allocation; placement reads all three; a drained allocation returns its agents'
assigned tasks), so its methods share invariants that a split across modules would have to re-check. The
pure parts are apart already: the placement rule (:mod:`~elastic.pool.placement`), messages, events and
tasks.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic.allocations import Allocation, AllocationEvent, AllocationState
from elastic.errors import ConfigError
from elastic.pool import spool as _spool
from elastic.pool.events import AgentEvent, AgentEventKind, PoolEvent
from elastic.pool.messages import (
    Bye,
    Drain,
    Heartbeat,
    KillTasks,
    Message,
    Register,
    Report,
    RunTasks,
    Stop,
    TaskLost,
    TasksReturned,
    Welcome,
)
from elastic.pool.placement import (
    Offer,
    admits,
    counts_against_retries,
    estimate_after_loss,
    has_room,
    plan_placement,
    usable,
)
from elastic.pool.protocol import batches
from elastic.pool.tasks import Task, TaskEvent, TaskKilledError, TaskLostError, TaskResult, TaskState

__all__ = ["DEFAULT_EVENTS_KEPT", "AgentRecord", "AgentView", "PoolState", "TaskRecord"]

logger = logging.getLogger(__name__)

DEFAULT_EVENTS_KEPT = 10_000
"""Events :attr:`PoolState.events` keeps (the newest); subscribers see every one."""

_PLACE_EVERY = 0.25
"""Seconds between placements when nothing changed but the time (walltime left shrinks as it passes)."""

_CHECK_EVERY = 0.1
"""Seconds between checks of heartbeats and walltimes (a tick may come for every message)."""

_PREFETCH_AFTER = 3
"""Finished tasks of a stage before their mean duration is trusted for prefetch."""

_MAX_AHEAD = 256
"""Tasks sent ahead to one agent at most, however short."""

_REFUSAL_WINDOW = 10.0
"""Seconds over which at most :data:`_REFUSALS_RECORDED` refusals are logged and recorded."""

_REFUSALS_RECORDED = 5
"""Refusals logged and recorded per :data:`_REFUSAL_WINDOW`; the others are only counted."""


_DRAINING = AllocationState.DRAINING


def _stopping(alloc: Allocation) -> bool:
    """Whether ``alloc`` takes no new task: draining, or ended."""
    return alloc.state is _DRAINING or alloc.state.is_final


def _task_bytes(task: Task) -> int:
    """Roughly the bytes ``task`` takes in a message."""
    return 256 + len(task.payload) + len(task.task_id) + len(task.stage)


@dataclass(slots=True)
class TaskRecord:
    """A task submitted to the pool and not resolved yet, with its future and where it runs (mutable)."""

    task: Task
    future: Future[Any]
    seq: int
    state: TaskState = TaskState.QUEUED
    attempt: int = 1
    losses: list[tuple[str, str]] = field(default_factory=list)
    agent: bytes | None = None
    alloc_id: str | None = None
    future_running: bool = False
    killed: str | None = None
    """Why it is being killed (:meth:`PoolState.kill`), once asked."""
    started: float | None = None
    """When its current attempt started running (pool clock), if it did."""
    ran: list[float] = field(default_factory=list)
    """How long each of its lost attempts that started ran, oldest first."""
    counted: int = 0
    """Its losses counted against ``max_retries`` (:func:`~elastic.pool.placement.counts_against_retries`)."""


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
    assigned: dict[str, float] = field(default_factory=dict)
    """Tasks sent ahead, not started yet (in the order sent), with the seconds each was expected to take."""
    assigned_cores: int = 0
    assigned_work: float = 0.0
    """Expected seconds of the tasks sent ahead."""


@dataclass(frozen=True, slots=True)
class AgentView:
    """One agent as :meth:`elastic.pool.Pool.agents` shows it (a read-only copy).

    Attributes
    ----------
    name : str
        Its name, ``"<allocation>/<host>/<pid>"`` (what :attr:`elastic.pool.tasks.Task.agent` names).
    alloc_id : str
        Its allocation.
    hostname : str
        The host it runs on.
    cores : int
        Cores it offered when it joined.
    free : int
        Cores running nothing and not promised to a task sent ahead.
    draining : bool
        It takes no new task (its allocation drains, is stopping or ended).
    remaining : float
        Seconds of walltime its allocation has left.
    """

    name: str
    alloc_id: str
    hostname: str
    cores: int
    free: int
    draining: bool
    remaining: float


class PoolState:
    """Allocations, agents and tasks of one pool, and the rules that change them.

    Parameters
    ----------
    heartbeat_interval, heartbeat_timeout, pool_timeout, max_retries, drain_margin
        As for :class:`elastic.pool.Pool` (validated there).
    clock : callable
        Epoch seconds; every event and walltime computation uses it.
    events_kept : int, default DEFAULT_EVENTS_KEPT
        Length of the event history.
    prefetch_seconds : float, default 0.1
        Expected seconds of short tasks sent ahead to a busy agent, per core; 0: none.
    spool : Path or None, default None
        The pool run's spool directory (:mod:`elastic.pool.spool`): values that came through files are
        read from it, and a task's call file is removed from it once the task is resolved.

    Attributes
    ----------
    allocs : dict of str to Allocation
        Every allocation ever added, in the order added.
    agents : dict of bytes to AgentRecord
        Registered agents not yet gone, by identity.
    tasks : dict of str to TaskRecord
        Tasks submitted and not resolved yet.
    outbox : list of (bytes, Message)
        Messages to send to agents.
    resolve : list of callable
        Future resolutions to run outside the lock (their callbacks may block).
    events : deque of PoolEvent
        The newest events, oldest first.
    subscribers : tuple of callable
        Called with each new event (by :meth:`deliver`, outside the pool's lock); replaced, never changed
        in place, so a recorded event keeps the subscribers it had when it happened.
    pending : list of (PoolEvent, tuple of callable)
        Events recorded and not delivered yet, oldest first, each with the subscribers it goes to.
    refused : int
        Connections and messages refused so far (wrong secret, malformed, replayed, unknown allocation).
        Each is counted; at most :data:`_REFUSALS_RECORDED` per :data:`_REFUSAL_WINDOW` seconds are logged
        and recorded as events, so a flood of them neither fills the log nor pushes other events out.
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
        events_kept: int = DEFAULT_EVENTS_KEPT,
        prefetch_seconds: float = 0.1,
        spool: Path | None = None,
    ) -> None:
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self.pool_timeout = pool_timeout
        self.max_retries = max_retries
        self.drain_margin = drain_margin
        self.prefetch_seconds = prefetch_seconds
        self._durations: dict[str, tuple[int, float]] = {}  # stage -> (finished tasks, mean seconds)
        self._clock = clock
        self.allocs: dict[str, Allocation] = {}
        self.agents: dict[bytes, AgentRecord] = {}
        self._seen: set[bytes] = set()  # every agent identity that ever registered
        self._drain_on_start: dict[str, str] = {}  # drained before their owner told their start: why
        self._joined: dict[str, float] = {}  # allocation -> when its first agent joined (pool clock)
        self.tasks: dict[str, TaskRecord] = {}
        self._queue: dict[int, dict[str, None]] = {}  # cores -> ordered set of queued task ids
        self._seq = itertools.count()
        self._dispatch: dict[bytes, list[Task]] = {}
        self._dirty = False
        self._last_place = float("-inf")
        self.outbox: list[tuple[bytes, Message]] = []
        self.resolve: list[Callable[[], None]] = []
        self.events: deque[PoolEvent] = deque(maxlen=events_kept)
        self.subscribers: tuple[Callable[[PoolEvent], None], ...] = ()
        self.pending: list[tuple[PoolEvent, tuple[Callable[[PoolEvent], None], ...]]] = []
        self._last_beat = 0.0
        self._last_check = float("-inf")
        self.refused = 0
        self._refusal_window = float("-inf")
        self._refusals_recorded = 0
        self._refusals_unrecorded = 0
        self.spool = spool
        self.owned = False
        """Whether an owner (a run's allocation control) tells each allocation's start
        (:meth:`allocation_started`) and decides on allocations after each loss (:meth:`decided`); without
        one, an agent's join is taken as its allocation's start."""
        self._awaiting_owner: set[str] = set()  # re-queued after a loss the owner has not decided on yet

    # ------------------------------------------------------------------------------------ synchronous API

    def add_allocation(self, allocation: Allocation) -> None:
        """Register an allocation (see :meth:`elastic.pool.Pool.add_allocation`)."""
        if allocation.alloc_id in self.allocs:
            raise ConfigError(f"add_allocation: allocation id {allocation.alloc_id!r} is already in the pool")
        if allocation.state.is_final or allocation.state is AllocationState.DRAINING:
            raise ConfigError(
                f"add_allocation: allocation {allocation.alloc_id!r} is {allocation.state.value}; "
                "add it when REQUESTED or RUNNING"
            )
        self.allocs[allocation.alloc_id] = allocation
        self._dirty = True
        self._alloc_event(allocation, "added")

    def allocation_submitted(self, alloc_id: str, backend_job_id: str) -> None:
        """Record the batch job id of an allocation once the backend gave it."""
        alloc = self.allocation(alloc_id)
        self.allocs[alloc_id] = dataclasses.replace(alloc, backend_job_id=backend_job_id)

    def allocation_started(
        self, alloc_id: str, started_ago: float, walltime: float, detail: str = "batch job started"
    ) -> None:
        """Record that an allocation's batch job started ``started_ago`` seconds ago with ``walltime``.

        The one way an allocation becomes RUNNING in the pool: its owner (the run's controller) says so
        when it learns it from the batch system; a pool with no owner says so itself as the first agent
        joins (:meth:`_register`). A RUNNING one only takes the walltime granted; one that ended or drains
        is left as it is. One drained before (:meth:`drain`) goes on to DRAINING at once.
        """
        alloc = self.allocation(alloc_id)
        if alloc.state is AllocationState.REQUESTED:
            start = self._clock() - max(0.0, started_ago)
            alloc = dataclasses.replace(alloc.transition(AllocationState.RUNNING, start), walltime=walltime)
            self.allocs[alloc_id] = alloc
            self._dirty = True
            self._alloc_event(alloc, detail)
            reason = self._drain_on_start.pop(alloc_id, None)
            if reason is not None:  # drained before: its agents that joined were told then, once each
                self._set_state(alloc, AllocationState.DRAINING, reason)
                for agent in self.agents.values():
                    if agent.alloc_id == alloc_id and not agent.draining:
                        agent.draining = True
                        self.outbox.append((agent.ident, Drain(reason)))
        elif alloc.state is AllocationState.RUNNING and alloc.walltime != walltime:
            self.allocs[alloc_id] = dataclasses.replace(alloc, walltime=walltime)

    def allocation_ended(
        self, alloc_id: str, new: AllocationState, detail: str, started_ago: float | None = None
    ) -> None:
        """Record that an allocation ended in the final state ``new`` (see :class:`elastic.pool.Pool`).

        Every final state is reachable from every live or requested one
        (:data:`~elastic.allocations.LEGAL_TRANSITIONS`). An allocation still REQUESTED whose start comes
        with its end (``started_ago``: its owner learned both at once, e.g. a job that started just before
        its cancel) is recorded RUNNING from that start first; without one it ends straight from
        REQUESTED, with no start time (none was seen). Ending an ended allocation again does nothing (its
        first end stands).
        """
        alloc = self.allocation(alloc_id)
        if alloc.state.is_final:
            return
        self._drain_on_start.pop(alloc_id, None)
        if alloc.state is AllocationState.REQUESTED and started_ago is not None:
            self.allocation_started(
                alloc_id, started_ago, alloc.walltime, "batch job started (told with its end)"
            )
            alloc = self.allocs[alloc_id]
        self._set_state(alloc, new, detail or f"batch job ended {new.value}")
        self._dirty = True
        for agent in [a for a in self.agents.values() if a.alloc_id == alloc_id]:
            self._lose_agent(agent, f"allocation {alloc_id} ended {new.value}")
            self.outbox.append((agent.ident, Stop.ended(new.value)))

    def drain(self, alloc_id: str, reason: str) -> None:
        """Place no new task on an allocation; its agents leave once their running tasks end.

        An allocation still REQUESTED (its start not told yet) is DRAINING from its start on; its agents
        that joined meanwhile, or join later, are drained at once (its job may start before the cancel
        that usually follows a drain takes effect).
        """
        self._drain(self.allocation(alloc_id), reason)

    def allocation(self, alloc_id: str) -> Allocation:
        """Return the current record of one allocation (raises ConfigError for unknown ids)."""
        try:
            return self.allocs[alloc_id]
        except KeyError:
            raise ConfigError(
                f"no allocation {alloc_id!r} in the pool; known: {sorted(self.allocs)}"
            ) from None

    def submit(self, task: Task, future: Future[Any] | None = None) -> Future[Any]:
        """Queue a task (the pool checked it is open); return its future (``future``, or a new one).

        A task for an agent that has already gone is lost at once (it may run nowhere else).
        """
        if task.task_id in self.tasks:
            raise ConfigError(f"submit: task id {task.task_id!r} is already used in this pool")
        rec = TaskRecord(task, future if future is not None else Future(), next(self._seq))
        self.tasks[task.task_id] = rec
        self._queue.setdefault(task.cores, {})[task.task_id] = None
        self._dirty = True
        self._task_event(rec, TaskState.QUEUED, "submitted")
        if task.agent is not None:
            ident = task.agent.encode()
            if ident in self._seen and ident not in self.agents:
                del self._queue[task.cores][task.task_id]
                self._task_lost(rec, task.agent.rsplit("/", 2)[0], f"agent {task.agent} has gone")
        return rec.future

    def kill(self, task_id: str, reason: str) -> bool:
        """Kill a task: drop it if no agent has it yet, else tell its agent to kill it.

        Its future fails with :class:`~elastic.pool.tasks.TaskKilledError`; the task ends CANCELLED when
        it had not started and FAILED when it ran (a task that finishes before its agent hears of the kill
        keeps its result). Returns False when the pool does not know the task (it ended already).
        """
        rec = self.tasks.get(task_id)
        if rec is None:
            return False
        if rec.killed is None:
            rec.killed = reason or "asked to"
            if rec.state is TaskState.QUEUED:
                del self._queue[rec.task.cores][task_id]
                self._end_killed(rec)
            elif rec.agent is not None:
                self.outbox.append((rec.agent, KillTasks((task_id,), rec.killed)))
        return True

    def agent_views(self, now: float) -> tuple[AgentView, ...]:
        """Return every registered agent, in the order they joined (see :class:`AgentView`)."""
        out = []
        for a in self.agents.values():
            alloc = self.allocs[a.alloc_id]
            host = a.name[len(a.alloc_id) + 1 :].rsplit("/", 1)[0]  # the name is checked at registration
            free = max(0, a.free - a.assigned_cores)
            stopping = a.draining or _stopping(alloc)
            out.append(
                AgentView(a.name, a.alloc_id, host, a.cores, free, stopping, self._remaining(a.alloc_id, now))
            )
        return tuple(out)

    def queued(self) -> list[str]:
        """Ids of the queued tasks, oldest first."""
        return [rec.task.task_id for rec in self._queued_records()]

    def running(self) -> dict[str, tuple[Task, ...]]:
        """Return the running tasks by allocation id."""
        out: dict[str, list[Task]] = {}
        for agent in self.agents.values():
            out.setdefault(agent.alloc_id, []).extend(self.tasks[t].task for t in agent.running)
        return {k: tuple(v) for k, v in out.items()}

    def busy_cores(self) -> dict[str, int]:
        """Cores running tasks, by allocation id (allocations with none are left out)."""
        out: dict[str, int] = {}
        for agent in self.agents.values():
            busy = agent.cores - agent.free
            if busy:
                out[agent.alloc_id] = out.get(agent.alloc_id, 0) + busy
        return out

    def free_cores(self) -> dict[str, int]:
        """Offered but unused cores by allocation id (agents that joined and are not draining)."""
        out: dict[str, int] = {}
        for agent in self.agents.values():
            if not agent.draining:
                out[agent.alloc_id] = out.get(agent.alloc_id, 0) + agent.free
        return out

    # ------------------------------------------------------------------------------ messages and checks

    def refuse(self, peer: str, why: str, alloc_id: str | None = None, level: int = logging.WARNING) -> None:
        """Count a refused connection or message from ``peer``; log and record it unless too many came.

        It is logged at ``level``. Nothing of the message is kept: at most :data:`_REFUSALS_RECORDED`
        refusals per :data:`_REFUSAL_WINDOW` seconds are logged and recorded as events, the next recorded
        one says how many were not.
        """
        self.refused += 1
        now = self._clock()
        if now - self._refusal_window >= _REFUSAL_WINDOW:
            self._refusal_window = now
            self._refusals_recorded = 0
        if self._refusals_recorded >= _REFUSALS_RECORDED:
            self._refusals_unrecorded += 1
            return
        self._refusals_recorded += 1
        if self._refusals_unrecorded:
            why += f" (and {self._refusals_unrecorded:,} refusals before this one not recorded)"
            self._refusals_unrecorded = 0
        logger.log(level, "pool: %s", why)
        alloc = peer.split("/")[0] if alloc_id is None else alloc_id
        self.emit(AgentEvent(now, alloc, peer, AgentEventKind.REFUSED, why))

    def handle(self, ident: bytes, msg: Message) -> None:
        """Apply one authenticated message from the agent ``ident``."""
        agent = self.agents.get(ident)
        if isinstance(msg, Register):
            self._register(ident, msg)
            return
        if agent is None:
            # Unknown or already declared lost: its tasks were re-queued, so it must not report any more.
            # A Bye from an agent whose allocation ended is the normal end of a released allocation.
            name = ident.decode(errors="replace")
            if isinstance(msg, Bye):
                logger.info("pool: Bye from unregistered agent %r", name)
            else:  # counted, and logged at a bounded rate: anyone holding the secret can send these
                self.refuse(name, f"{type(msg).__name__} from unregistered agent {name!r}, told to stop")
            self.outbox.append((ident, Stop("not registered (declared lost?)")))
            return
        agent.last_seen = self._clock()
        if isinstance(msg, Report):
            # starts first: a task may start and end between two reports
            for task_id in msg.started:
                self._started(agent, task_id)
            for result in msg.done:
                self._task_done(agent, result)
        elif isinstance(msg, TasksReturned):
            for task_id in msg.task_ids:
                self._returned(agent, task_id, msg.reason)
        elif isinstance(msg, TaskLost):
            agent.draining = True  # it is stopping: place nothing more there, not even this task again
            rec = self._release(agent, msg.task_id)
            if rec is not None:
                self._task_lost(rec, agent.alloc_id, f"{msg.cause} (agent {agent.name})")
        elif isinstance(msg, Bye):
            del self.agents[ident]
            self._dirty = True
            why = f"agent {agent.name} left: {msg.reason}"
            self._give_back(agent, why)
            for task_id in list(agent.running):
                self._task_lost(self.tasks[task_id], agent.alloc_id, why)
            self._lose_queued_for(agent, why)
            self.emit(AgentEvent(self._clock(), agent.alloc_id, agent.name, AgentEventKind.LEFT, msg.reason))

    def tick(self, now: float, heard_until: float | None = None) -> None:
        """Check agents and walltimes, place queued tasks, and send heartbeats when due.

        ``heard_until`` is the time up to which every message from the agents was read (default ``now``):
        an agent is lost when it sent nothing for ``heartbeat_timeout`` before that time, so that messages
        still waiting to be read (a flood, a slow step) never make a live agent look silent.
        """
        if now - self._last_check >= _CHECK_EVERY:
            self._last_check = now
            self._check_agents(now, now if heard_until is None else min(now, heard_until))
        if self._dirty or now - self._last_place >= _PLACE_EVERY:
            self._place(now)
        if self._dispatch:
            for ident, tasks in self._dispatch.items():  # a few MiB per message at most
                self.outbox.extend((ident, RunTasks(tuple(b))) for b in batches(tasks, _task_bytes))
            self._dispatch = {}
        if now - self._last_beat >= self.heartbeat_interval:
            self._last_beat = now
            self.outbox.extend((a, Heartbeat()) for a in self.agents)

    def next_tick(self, now: float) -> float:
        """Seconds until :meth:`tick` has something to do by itself (a check, a heartbeat, a placement)."""
        due = min(
            self._last_check + _CHECK_EVERY,
            self._last_beat + self.heartbeat_interval,
            self._last_place + _PLACE_EVERY if self.tasks else float("inf"),
        )
        return max(0.0, due - now)

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
        elif alloc.state.is_final:
            # an authenticated agent of ours whose job started as its allocation was cancelled, or after
            # it ended otherwise: its normal end, told as to the agents the allocation had (a replayed
            # registration gets the same answer, rate-limited as any refusal)
            self.refuse(
                name,
                f"agent {name} came after allocation {msg.alloc_id!r} ended {alloc.state.value}: sent away",
                msg.alloc_id,
                level=logging.INFO,
            )
            self.outbox.append((ident, Stop.ended(alloc.state.value)))
            return
        if alloc is None or why is not None:
            self.refuse(name, f"refused agent {name}: {why}", msg.alloc_id)
            self.outbox.append((ident, Stop(str(why))))
            return
        now = self._clock()
        self._seen.add(ident)
        self._joined.setdefault(msg.alloc_id, now)
        agent = self.agents[ident] = AgentRecord(
            ident, name, msg.alloc_id, msg.cores, msg.cores, msg.walltime_end, now
        )
        self._dirty = True
        self.outbox.append((ident, Welcome(self.heartbeat_interval, self.pool_timeout)))
        # The allocation's state is its owner's: with one, the join changes nothing of it (the JOINED event
        # below prompts the owner to ask the batch system for the start, and tell it); placement offers the
        # agent's cores at once all the same, an agent's join being proof enough its job runs. A pool used
        # on its own has no owner: the join is the start, told through the owner's own entry.
        if not self.owned and alloc.state is AllocationState.REQUESTED:
            self.allocation_started(msg.alloc_id, 0.0, alloc.walltime, f"agent {name} joined")
        self.emit(AgentEvent(now, msg.alloc_id, name, AgentEventKind.JOINED, f"{msg.cores} cores"))
        logger.info("pool: agent %s joined allocation %s with %d cores", name, msg.alloc_id, msg.cores)
        pending = self._drain_on_start.get(msg.alloc_id)
        if not agent.draining and (pending is not None or self.allocs[msg.alloc_id].state is _DRAINING):
            # drained before this agent joined (while its job was pending, or since its start)
            agent.draining = True
            self.outbox.append((ident, Drain(pending or "allocation draining")))

    def _started(self, agent: AgentRecord, task_id: str) -> None:
        """Take an agent's report that a task started: an assigned one now runs and takes its cores."""
        rec = self.tasks.get(task_id)
        if rec is None or rec.agent != agent.ident or rec.state is not TaskState.ASSIGNED:
            return  # started on a free core (already RUNNING), or a stale report
        self._unassign(agent, rec)
        agent.free -= rec.task.cores
        agent.running.add(task_id)
        self._task_event(rec, TaskState.RUNNING, f"on agent {agent.name}")

    def _returned(self, agent: AgentRecord, task_id: str, reason: str) -> None:
        """Queue again a task an agent gives back (it will not start it), not as a lost attempt.

        An agent gives back tasks it was not asked to kill only when it drains or stops: nothing more is
        placed there. A task the pool took as started (sent to free cores) ends that attempt with a LOST
        event, so the run's timeline never shows it started twice on one allocation; its next start is
        the next attempt, not counted against ``max_retries``.
        """
        rec = self.tasks.get(task_id)
        if rec is None or rec.agent != agent.ident:
            return
        if rec.killed is None:
            agent.draining = True
        if rec.state is TaskState.ASSIGNED:
            self._unassign(agent, rec)
        elif rec.state is TaskState.RUNNING and task_id in agent.running:
            agent.running.discard(task_id)
            agent.free += rec.task.cores
            self._task_event(
                rec, TaskState.LOST, f"given back before it started by agent {agent.name}: {reason}"
            )
            rec.attempt += 1  # the next start is another attempt on the timeline, not counted to retries
            rec.started = None
        else:
            return
        self._back_to_queue(rec, agent.alloc_id, f"given back by agent {agent.name}: {reason}")

    def _give_back(self, agent: AgentRecord, why: str) -> None:
        """Queue again the tasks assigned to a gone agent (never started: not lost attempts)."""
        for task_id in list(agent.assigned):
            self._back_to_queue(self.tasks[task_id], agent.alloc_id, why)
        agent.assigned.clear()
        agent.assigned_cores = 0
        agent.assigned_work = 0.0

    def _back_to_queue(self, rec: TaskRecord, alloc_id: str, detail: str) -> None:
        """Queue again a task an agent did not start; one being killed ends, one for that agent is lost."""
        if rec.killed is not None:
            self._end_killed(rec)
        elif rec.task.agent is not None:
            self._task_lost(rec, alloc_id, detail)
        else:
            self._requeue(rec, detail)

    def _lose_queued_for(self, agent: AgentRecord, cause: str) -> None:
        """Lose the queued tasks that name a gone agent: no other agent may run them."""
        pinned = [t for ids in self._queue.values() for t in ids if self.tasks[t].task.agent == agent.name]
        for task_id in pinned:
            del self._queue[self.tasks[task_id].task.cores][task_id]
            self._task_lost(self.tasks[task_id], agent.alloc_id, cause)

    def _end_killed(self, rec: TaskRecord) -> None:
        """End a task whose kill was asked for: FAILED if it ran (as the pool's users saw), else CANCELLED."""
        error = TaskKilledError(rec.task.task_id, rec.killed or "")
        future = rec.future
        rec.agent = None
        if rec.state is TaskState.RUNNING:
            self._finish(rec, TaskState.FAILED, str(error))
        else:
            self._finish(rec, TaskState.CANCELLED, f"{error} before it started")
        self.resolve.append(lambda: future.set_exception(error))

    def _unassign(self, agent: AgentRecord, rec: TaskRecord) -> None:
        agent.assigned_cores -= rec.task.cores
        cost = agent.assigned.pop(rec.task.task_id)
        agent.assigned_work = max(0.0, agent.assigned_work - cost)

    def _expected(self, task: Task) -> float | None:
        """Return the expected seconds of ``task``: its stage's mean so far, else its estimate, else None."""
        n, mean = self._durations.get(task.stage, (0, 0.0))
        return mean if n >= _PREFETCH_AFTER else task.estimate

    def _learn_duration(self, stage: str, seconds: float) -> None:
        n, mean = self._durations.get(stage, (0, 0.0))
        self._durations[stage] = (n + 1, mean + (seconds - mean) / min(n + 1, 50))  # mean, then moving

    def _requeue(self, rec: TaskRecord, detail: str) -> None:
        rec.agent = None
        queue = self._queue.setdefault(rec.task.cores, {})
        self._queue[rec.task.cores] = {rec.task.task_id: None, **queue}  # older than every queued task
        self._dirty = True
        self._task_event(rec, TaskState.QUEUED, detail)

    def _release(self, agent: AgentRecord, task_id: str) -> TaskRecord | None:
        """Take a task that ended off ``agent``; None (logged) when it does not run there."""
        rec = self.tasks.get(task_id)
        if rec is None or rec.agent != agent.ident or rec.state is not TaskState.RUNNING:
            logger.warning("pool: ignoring a stale report of task %s from %s", task_id, agent.name)
            return None
        agent.running.discard(task_id)
        agent.free += rec.task.cores
        rec.agent = None
        self._dirty = True
        return rec

    def _task_done(self, agent: AgentRecord, result: TaskResult) -> None:
        rec = self._release(agent, result.task_id)
        if rec is None:
            if result.value_file and self.spool is not None:
                _spool.remove(self.spool, result.value_file)
            return
        if rec.killed is not None and not result.ok:  # it ran until its agent killed it
            self._end_killed(rec)
            return
        alloc = self.allocs[agent.alloc_id]
        if result.signal is not None and (agent.draining or _stopping(alloc)):
            # The batch system signals every process of an allocation it stops (walltime, scancel); a task
            # killed by a signal there was interrupted, not failed by its own doing.
            why = "draining" if agent.draining else alloc.state.value
            cause = f"killed by {result.signal_name} while allocation {alloc.alloc_id} was {why}"
            self._task_lost(rec, agent.alloc_id, cause)
            return
        future, spool = rec.future, self.spool
        self._learn_duration(rec.task.stage, max(0.0, result.ended - result.started))
        if result.ok:
            self._finish(rec, TaskState.DONE, f"ran {result.ended - result.started:.3f} s")
        else:
            self._finish(rec, TaskState.FAILED, f"{result.error_type}: {result.error_message}")

        def resolve() -> None:
            try:
                future.set_result(result.outcome(spool))
            except BaseException as exc:  # the task's own exception, re-raised by outcome()
                future.set_exception(exc)

        self.resolve.append(resolve)

    def _finish(self, rec: TaskRecord, state: TaskState, detail: str, at: float | None = None) -> None:
        """Record the task's last event (at ``at``, default now) and forget it (and its call's spool file)."""
        self._task_event(rec, state, detail, at)
        self.tasks.pop(rec.task.task_id, None)
        self._awaiting_owner.discard(rec.task.task_id)
        if rec.task.payload_file and self.spool is not None:
            _spool.remove(self.spool, rec.task.payload_file)

    def _check_agents(self, now: float, heard_until: float) -> None:
        for agent in list(self.agents.values()):
            silent = heard_until - agent.last_seen
            if silent > self.heartbeat_timeout:
                self._lose_agent(agent, f"agent {agent.name} sent no heartbeat for {silent:.1f} s")
        for alloc in list(self.allocs.values()):
            # RUNNING, or running by its agents' word before its owner told the start (not drained yet)
            if alloc.state is AllocationState.RUNNING or (
                alloc.alloc_id in self._joined
                and alloc.state is AllocationState.REQUESTED
                and alloc.alloc_id not in self._drain_on_start
            ):
                left = self._remaining(alloc.alloc_id, now)
                if not usable(left, self.drain_margin):
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
        self._dirty = True
        self._give_back(agent, cause)
        for task_id in list(agent.running):
            self._task_lost(self.tasks[task_id], agent.alloc_id, cause)
        agent.running.clear()
        self._lose_queued_for(agent, cause)
        self.emit(AgentEvent(self._clock(), agent.alloc_id, agent.name, AgentEventKind.LOST, cause))

    def _task_lost(self, rec: TaskRecord, alloc_id: str, cause: str) -> None:
        if rec.killed is not None:
            self._end_killed(rec)
            return
        rec.losses.append((alloc_id, cause))
        rec.agent = None
        at = self._clock()  # a loss that ends the task is one instant: its LOST and FAILED share the time
        ran = 0.0 if rec.started is None else at - rec.started
        if counts_against_retries(ran, rec.ran, rec.task.estimate):
            rec.counted += 1
        if rec.started is not None:
            rec.ran.append(ran)
        if rec.state is TaskState.RUNNING:  # a task for a gone agent that never started just fails
            self._task_event(rec, TaskState.LOST, cause, at)
        if rec.counted > self.max_retries or rec.task.agent is not None:  # no other agent may run it
            limit = 0 if rec.task.agent is not None else self.max_retries
            error = TaskLostError(rec.task.task_id, rec.task.stage, tuple(rec.losses), limit)
            self._finish(rec, TaskState.FAILED, str(error), at)
            self.resolve.append(lambda: rec.future.set_exception(error))
            return
        rec.attempt += 1
        if rec.started is not None:
            rec.task = dataclasses.replace(rec.task, estimate=estimate_after_loss(rec.task.estimate, ran))
            rec.started = None
        if self.owned and rec.state is TaskState.LOST:
            # its owner hears of the loss and may ask for an allocation with the time to re-run it: until it
            # has decided, the task is not started where it cannot end (that would burn a retry)
            self._awaiting_owner.add(rec.task.task_id)
        self._requeue(
            rec, f"re-queued after loss {len(rec.losses)} ({rec.counted}/{self.max_retries} retries used)"
        )

    def _drain(self, alloc: Allocation, reason: str) -> None:
        if alloc.state is AllocationState.RUNNING:
            self._set_state(alloc, AllocationState.DRAINING, reason)
        elif alloc.state is AllocationState.REQUESTED and alloc.alloc_id not in self._drain_on_start:
            # its start is not told yet (its agents may have joined, or join before the cancel that follows
            # takes effect): none of them takes a task, and it is DRAINING from its start on
            self._drain_on_start[alloc.alloc_id] = reason
        else:
            return
        self._dirty = True
        for agent in self.agents.values():
            if agent.alloc_id == alloc.alloc_id:
                agent.draining = True
                self.outbox.append((agent.ident, Drain(reason)))

    def _remaining(self, alloc_id: str, now: float) -> float:
        """Walltime left: the earliest end an agent reported, else start + walltime, else all of it.

        The start is the owner's; before it is told, an allocation an agent joined counts from that join.
        """
        ends = [a.walltime_end for a in self.agents.values() if a.alloc_id == alloc_id and a.walltime_end]
        if ends:
            return max(0.0, min(ends) - now)
        alloc = self.allocs[alloc_id]
        joined = self._joined.get(alloc_id)
        if alloc.state is AllocationState.REQUESTED and joined is not None:
            return max(0.0, joined + alloc.walltime - now)
        return alloc.remaining(now)

    # ------------------------------------------------------------------------------------------ placement

    def _queued_records(self, max_cores: int | None = None) -> Iterator[TaskRecord]:
        """Queued tasks oldest first (re-queued ones first in their class), of at most ``max_cores``."""
        classes = [
            (self.tasks[t] for t in ids)
            for cores, ids in self._queue.items()
            if ids and (max_cores is None or cores <= max_cores)
        ]
        return heapq.merge(*classes, key=lambda rec: (rec.attempt == 1, rec.seq))

    def _place(self, now: float) -> None:
        """Start queued tasks on free cores; then send short ones ahead to busy agents (prefetch)."""
        self._dirty = False
        self._last_place = now
        if not self.tasks:
            return
        # an agent that joined runs in a started job, told to the pool or not yet
        live = [a for a in self.agents.values() if not a.draining and not _stopping(self.allocs[a.alloc_id])]
        remaining = {a.alloc_id: self._remaining(a.alloc_id, now) for a in live}
        # agents still holding tasks sent ahead start those first: they are not offered free cores
        offers = [
            Offer(a.ident, a.alloc_id, a.free, remaining[a.alloc_id], self.allocs[a.alloc_id].stage)
            for a in live
            if a.free > 0 and not a.assigned
        ]
        if offers:
            largest = max(o.free for o in offers)
            tasks = (rec.task for rec in self._queued_records(largest))
            placed = plan_placement(
                tasks,
                offers,
                lambda t: self._may_wait(t, now),
                lambda t, need: self._another_could_take(t, now, need),
            )
            for task, offer in placed:
                self._send(self.tasks[task.task_id], self.agents[offer.agent], offer, TaskState.RUNNING)
        if self.prefetch_seconds > 0 and live:
            self._prefetch(live, remaining)

    def _prefetch(self, live: list[AgentRecord], remaining: dict[str, float]) -> None:
        """Send short queued tasks ahead to busy agents, within ``prefetch_seconds`` of work per core."""
        budget = {a.ident: self.prefetch_seconds * a.cores for a in live}
        work = {a.ident: a.assigned_work for a in live}
        ahead = {a.ident: len(a.assigned) for a in live}
        open_ = [a for a in live if work[a.ident] < budget[a.ident] and ahead[a.ident] < _MAX_AHEAD]
        if not open_:
            return
        shortest_budget = min(budget.values())
        chosen: list[tuple[TaskRecord, AgentRecord]] = []
        for scanned, rec in enumerate(self._queued_records(max(a.cores for a in live))):
            if not open_ or scanned >= 4 * _MAX_AHEAD * len(live):
                break
            task = rec.task
            cost = self._expected(task)
            if cost is None or cost > shortest_budget:
                continue  # unknown or long: never queued behind others
            need = task.estimate or 0.0
            fits = [
                a
                for a in open_
                if task.cores <= a.cores
                and remaining[a.alloc_id] >= need
                and work[a.ident] + cost <= budget[a.ident]
                and admits(task, a.ident)
            ]
            if not fits:
                continue
            agent = min(fits, key=lambda a: work[a.ident])
            chosen.append((rec, agent))
            work[agent.ident] += cost
            ahead[agent.ident] += 1
            if work[agent.ident] >= budget[agent.ident] or ahead[agent.ident] >= _MAX_AHEAD:
                open_.remove(agent)
        for rec, agent in chosen:  # sending takes the tasks out of the queue: not while reading it
            self._send(
                rec,
                agent,
                Offer(agent.ident, agent.alloc_id, 0, remaining[agent.alloc_id]),
                TaskState.ASSIGNED,
            )

    def _send(self, rec: TaskRecord, agent: AgentRecord, offer: Offer, state: TaskState) -> None:
        task = rec.task
        if (task.estimate or 0.0) > offer.remaining:
            logger.info(
                "pool: no allocation has %.0f s left for task %s; starting it on %s (%.0f s left)",
                task.estimate,
                task.task_id,
                agent.alloc_id,
                offer.remaining,
            )
        del self._queue[task.cores][task.task_id]
        if not rec.future_running:
            if not rec.future.set_running_or_notify_cancel():
                self._finish(rec, TaskState.CANCELLED, "future cancelled before it started")
                return
            rec.future_running = True
        if state is TaskState.RUNNING:
            agent.free -= task.cores
            agent.running.add(task.task_id)
        else:
            cost = self._expected(task) or 0.0
            agent.assigned[task.task_id] = cost
            agent.assigned_cores += task.cores
            agent.assigned_work += cost
        rec.agent = agent.ident
        rec.alloc_id = agent.alloc_id
        self._task_event(rec, state, f"on agent {agent.name}")
        self._dispatch.setdefault(agent.ident, []).append(task)

    def _may_wait(self, task: Task, now: float) -> bool:
        """Whether ``task``, which no offer has the time for, waits rather than starting where it cannot end.

        It waits while another allocation could take it (:meth:`_another_could_take`), and, when an owner
        decides on allocations, while that owner has not decided since the loss that re-queued it (its
        follow-up may be asked for in that decision).
        """
        return task.task_id in self._awaiting_owner or self._another_could_take(task, now)

    def decided(self, task_ids: Iterable[str]) -> None:
        """Take the owner's word that it decided on allocations after these tasks' losses.

        Those of them re-queued are placed by the usual rule from now on: they wait for an allocation with
        the time to run them if one exists (one the decision asked for included), else take the most time
        left there is (and the log says so).
        """
        for task_id in task_ids:
            if task_id in self._awaiting_owner:
                self._awaiting_owner.discard(task_id)
                self._dirty = True

    def _another_could_take(self, task: Task, now: float, need: float | None = None) -> bool:
        """Whether a not-draining allocation (live or requested) has the cores and ``need`` s for ``task``.

        ``need`` defaults to the task's estimate.
        """
        capacities = [
            (alloc.cores // (alloc.nodes or 1), self._remaining(alloc.alloc_id, now))
            for alloc in self.allocs.values()
            if alloc.state in (AllocationState.REQUESTED, AllocationState.RUNNING)
        ]
        return has_room(task, capacities, need)

    # ------------------------------------------------------------------------------------------- events

    def _set_state(self, alloc: Allocation, new: AllocationState, detail: str) -> None:
        alloc = alloc.transition(new, self._clock())
        self.allocs[alloc.alloc_id] = alloc
        self._alloc_event(alloc, detail)

    def _alloc_event(self, alloc: Allocation, detail: str) -> None:
        logger.info("pool: allocation %s %s (%s)", alloc.alloc_id, alloc.state.value, detail)
        event = AllocationEvent(self._clock(), alloc.alloc_id, alloc.state, alloc.cores, alloc.stage, detail)
        self.emit(event)

    def _task_event(self, rec: TaskRecord, state: TaskState, detail: str, at: float | None = None) -> None:
        now = self._clock() if at is None else at
        if state is TaskState.RUNNING and rec.state is not TaskState.RUNNING:
            rec.started = now
        rec.state = state
        task = rec.task
        event = TaskEvent(now, task.task_id, task.stage, state, task.cores, rec.alloc_id, rec.attempt, detail)
        self.emit(event)

    def emit(self, event: PoolEvent) -> None:
        """Record ``event``: into the history, and for delivery to the current subscribers later."""
        self.events.append(event)
        if self.subscribers:
            self.pending.append((event, self.subscribers))

    def subscribe(self, callback: Callable[[PoolEvent], None]) -> None:
        """Add a subscriber: it gets every event recorded from now on."""
        self.subscribers = (*self.subscribers, callback)

    def unsubscribe(self, callback: Callable[[PoolEvent], None]) -> None:
        """Remove a subscriber (once); it gets no event :meth:`deliver` has not started on."""
        subs = list(self.subscribers)
        if callback in subs:
            subs.remove(callback)
            self.subscribers = tuple(subs)

    def take_pending(self) -> list[tuple[PoolEvent, tuple[Callable[[PoolEvent], None], ...]]]:
        """Return the events waiting for delivery, oldest first, and forget them."""
        pending, self.pending = self.pending, []
        return pending

    def deliver(self, event: PoolEvent, callbacks: tuple[Callable[[PoolEvent], None], ...]) -> None:
        """Call ``callbacks`` (of one entry of :attr:`pending`) with ``event``; failures are logged.

        Called WITHOUT the pool's lock: a subscriber may call the pool, or take locks of its own. A
        subscriber removed since the event was recorded is skipped.
        """
        for callback in callbacks:
            if callback not in self.subscribers:
                continue
            try:
                callback(event)
            except Exception:
                logger.exception("pool: event subscriber %r failed", callback)
