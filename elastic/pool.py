"""The pool: live allocations, their agents' core offers, the task queue and placement.

Every allocation's agents connect to one :class:`Pool` and offer their cores; any agent may take any ready
task (one pool). A background I/O thread owns the ZeroMQ socket: it authenticates messages, places tasks,
checks heartbeats, re-queues the tasks of agents that die or allocations that end (at most
``max_retries`` times), and drains allocations whose walltime is about to end. Strategies call the
synchronous API (:meth:`Pool.add_allocation`, :meth:`Pool.allocation_ended`, :meth:`Pool.submit`...)
from any thread.

Placement is walltime-aware, like HyperQueue's time request: a task with a runtime estimate is not
started on an agent whose allocation has less walltime left than the estimate while another allocation
(live or still requested) with enough time and cores exists; if none exists, it goes to the agent with the
most time left. Among agents with enough time the one with the least time left is chosen, keeping long
allocations for long tasks. An allocation with ``drain_margin`` seconds or less left gets no new task and
its agents leave once their tasks end.

Every task, allocation and agent transition is recorded as a frozen event (:attr:`Pool.events`);
:meth:`Pool.subscribe` calls a function on each new one.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from elastic.agent import AgentCommand
from elastic.allocations import Allocation, AllocationEvent, AllocationState
from elastic.backends.base import JobState
from elastic.errors import ConfigError, PoolError
from elastic.protocol import (
    AuthenticationError,
    Bye,
    Drain,
    Heartbeat,
    Message,
    PoolSocket,
    ProtocolError,
    Register,
    RunTask,
    Stop,
    TaskDone,
    Welcome,
    new_secret,
    write_secret_file,
)
from elastic.tasks import Task, TaskEvent, TaskLostError, TaskState

__all__ = [
    "AgentEvent",
    "AgentEventKind",
    "Offer",
    "Pool",
    "PoolClosedError",
    "PoolEvent",
    "plan_placement",
]

logger = logging.getLogger(__name__)


class AgentEventKind(str, enum.Enum):
    """What happened to an agent."""

    JOINED = "JOINED"
    """Registered and offered its cores."""
    LEFT = "LEFT"
    """Said goodbye (drained, stopped, signalled)."""
    LOST = "LOST"
    """Stopped sending heartbeats, or its allocation ended under it."""
    REFUSED = "REFUSED"
    """A connection or message was refused (wrong secret, unknown allocation); nothing was run."""


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """An agent joined, left, was lost or was refused."""

    time: float
    alloc_id: str
    agent: str
    kind: AgentEventKind
    detail: str = ""


PoolEvent = Union[TaskEvent, AllocationEvent, AgentEvent]  # noqa: UP007
"""Any event the pool records."""


class PoolClosedError(PoolError, RuntimeError):
    """The pool was closed before the task could finish, or a task was submitted to a closed pool."""


@dataclass(slots=True)
class _TaskRec:
    task: Task
    future: Future[Any]
    state: TaskState = TaskState.QUEUED
    attempt: int = 1
    losses: list[tuple[str, str]] = field(default_factory=list)
    agent: bytes | None = None
    alloc_id: str | None = None
    future_running: bool = False


@dataclass(slots=True)
class _AgentRec:
    ident: bytes
    name: str
    alloc_id: str
    cores: int
    free: int
    walltime_end: float | None
    last_seen: float
    running: set[str] = field(default_factory=set)
    draining: bool = False


@dataclass(frozen=True, slots=True)
class Offer:
    """Free cores an agent offers, with the walltime its allocation has left.

    Attributes
    ----------
    agent : bytes
        The agent's identity.
    alloc_id : str
        Its allocation.
    free : int
        Cores not running a task.
    remaining : float
        Seconds of walltime the allocation has left.
    """

    agent: bytes
    alloc_id: str
    free: int
    remaining: float


def plan_placement(
    tasks: Sequence[Task], offers: Sequence[Offer], can_wait: Callable[[Task], bool]
) -> list[tuple[Task, Offer]]:
    """Decide which queued tasks start now, and where; the pool's placement rule as a pure function.

    Tasks are taken oldest first; one that cannot start now does not hold back younger ones. A task
    goes to an offer with enough free cores and at least ``task.estimate`` seconds left, choosing the
    least time left (then the most free cores). When no offer has the time, the task waits if
    ``can_wait(task)`` (another allocation, live or requested, could take it), and otherwise goes to the
    fitting offer with the most time left.

    Parameters
    ----------
    tasks : sequence of Task
        Queued tasks, oldest first.
    offers : sequence of Offer
        Current offers (each agent at most once).
    can_wait : callable
        Whether a task may wait for another allocation with enough walltime.

    Returns
    -------
    list of (Task, Offer)
        Placements in order; the offers are the ones given (their ``free`` is not updated).

    Examples
    --------
    >>> short, long = Offer(b"s", "a1", 1, 20.0), Offer(b"l", "a2", 1, 600.0)
    >>> t = Task.shell("true", estimate=60.0, task_id="t")
    >>> [(task.task_id, o.alloc_id) for task, o in plan_placement([t], [short, long], lambda t: True)]
    [('t', 'a2')]
    """
    free = {o.agent: o.free for o in offers}
    plan: list[tuple[Task, Offer]] = []
    for task in tasks:
        if max(free.values(), default=0) == 0:
            break
        fits = [o for o in offers if free[o.agent] >= task.cores]
        if not fits:
            continue
        need = task.estimate or 0.0
        in_time = [o for o in fits if o.remaining >= need]
        if in_time:
            offer = min(in_time, key=lambda o: (o.remaining, -free[o.agent]))
        elif can_wait(task):
            continue
        else:
            offer = max(fits, key=lambda o: o.remaining)
        free[offer.agent] -= task.cores
        plan.append((task, offer))
    return plan


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"Pool({name}=...) must be > 0 seconds, got {value}")


class Pool:
    """All live allocations of a run as one pool of cores.

    Parameters
    ----------
    secret : bytes or None, default None
        The run's secret; ``None`` draws a fresh random one. It is written to :attr:`secret_file`.
    bind : str, default "127.0.0.1"
        Interface to listen on; ``"0.0.0.0"`` for all (needed when agents run on other hosts).
    port : int, default 0
        TCP port, 0 for any free one.
    advertise : str or None, default None
        Host agents connect to; default ``bind``, or this host's name when binding all interfaces.
    secret_dir : str, Path or None, default None
        Where to write the secret file (must be visible to the agents, e.g. a shared home on Slurm);
        default a fresh private temporary directory.
    heartbeat_interval : float, default 1.0
        Seconds between heartbeats, both ways.
    heartbeat_timeout : float, default 10.0
        An agent silent this long is lost, and its tasks re-queued.
    pool_timeout : float, default 60.0
        Agents leave when the pool is silent this long.
    max_retries : int, default 2
        How often a task may be lost and re-run before its future fails with :class:`TaskLostError`.
    drain_margin : float, default 30.0
        An allocation with this much walltime left or less gets no new task and is drained.
    python : str, default sys.executable
        Interpreter in agent scripts.
    clock : callable, default time.time
        Epoch seconds; every event and walltime computation uses it.
    """

    def __init__(
        self,
        secret: bytes | None = None,
        bind: str = "127.0.0.1",
        *,
        port: int = 0,
        advertise: str | None = None,
        secret_dir: str | Path | None = None,
        heartbeat_interval: float = 1.0,
        heartbeat_timeout: float = 10.0,
        pool_timeout: float = 60.0,
        max_retries: int = 2,
        drain_margin: float = 30.0,
        python: str = sys.executable,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _positive("heartbeat_interval", heartbeat_interval)
        _positive("pool_timeout", pool_timeout)
        if not heartbeat_timeout > heartbeat_interval:
            raise ConfigError(
                f"Pool(heartbeat_timeout=...) must exceed heartbeat_interval={heartbeat_interval}, "
                f"got {heartbeat_timeout}"
            )
        if max_retries < 0:
            raise ConfigError(f"Pool(max_retries=...) must be >= 0, got {max_retries}")
        if drain_margin < 0:
            raise ConfigError(f"Pool(drain_margin=...) must be >= 0 seconds, got {drain_margin}")
        if secret is not None and len(secret) < 16:
            raise ConfigError(f"Pool(secret=...) must have at least 16 bytes, got {len(secret)}")
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self.pool_timeout = pool_timeout
        self.max_retries = max_retries
        self.drain_margin = drain_margin
        self._python = python
        self._clock = clock
        self._secret = secret if secret is not None else new_secret()
        self._own_dir = secret_dir is None
        directory = Path(tempfile.mkdtemp(prefix="elastic-pool-")) if secret_dir is None else Path(secret_dir)
        self.secret_file = write_secret_file(self._secret, directory)
        self._sock = PoolSocket(self._secret, bind, port)
        host = advertise or (socket.gethostname() if bind in ("0.0.0.0", "*") else bind)
        self.address = f"tcp://{host}:{self._sock.port}"
        self._lock = threading.RLock()
        self._allocs: dict[str, Allocation] = {}
        self._agents: dict[bytes, _AgentRec] = {}
        self._seen: set[bytes] = set()  # every agent identity that ever registered
        self._tasks: dict[str, _TaskRec] = {}
        self._queue: dict[str, None] = {}  # ordered set of queued task ids, oldest first
        self._outbox: list[tuple[bytes, Message]] = []
        self._resolve: list[Callable[[], None]] = []
        self._events: list[PoolEvent] = []
        self._subscribers: list[Callable[[PoolEvent], None]] = []
        self._last_beat = 0.0
        self._closing = threading.Event()
        self.refused = 0
        """Messages refused so far (wrong secret, malformed, unknown allocation)."""
        self._thread = threading.Thread(target=self._loop, name="elastic-pool", daemon=True)
        self._thread.start()
        logger.info("pool: listening at %s, secret in %s", self.address, self.secret_file)

    # ---------------------------------------------------------------------------------------------- API

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def agent_script(self, allocation: Allocation) -> str:
        """Return the job script body that starts ``allocation``'s agent(s) (``JobSpec.script``)."""
        multi = allocation.nodes is not None and allocation.nodes > 1
        return AgentCommand(
            pool=self.address,
            allocation=allocation.alloc_id,
            secret_file=str(self.secret_file),
            cores=None if multi else allocation.cores,
            cores_env="SLURM_CPUS_ON_NODE" if multi else None,
            walltime=allocation.walltime,
            nodes=allocation.nodes,
            python=self._python,
        ).to_script()

    def add_allocation(self, allocation: Allocation) -> None:
        """Register an allocation (REQUESTED or RUNNING) so its agents may join.

        Raises
        ------
        ConfigError
            Its id is already used, or it has ended.
        """
        with self._lock:
            if allocation.alloc_id in self._allocs:
                raise ConfigError(
                    f"add_allocation: allocation id {allocation.alloc_id!r} is already in the pool"
                )
            if allocation.state.is_final or allocation.state is AllocationState.DRAINING:
                raise ConfigError(
                    f"add_allocation: allocation {allocation.alloc_id!r} is {allocation.state.value}; "
                    "add it when REQUESTED or RUNNING"
                )
            self._allocs[allocation.alloc_id] = allocation
            self._alloc_event(allocation, "added")

    def allocation_submitted(self, alloc_id: str, backend_job_id: str) -> None:
        """Record the batch job id of an allocation once the backend gave it."""
        with self._lock:
            alloc = self.allocation(alloc_id)
            self._allocs[alloc_id] = dataclasses.replace(alloc, backend_job_id=backend_job_id)

    def allocation_ended(self, alloc_id: str, state: AllocationState | JobState, detail: str = "") -> None:
        """Record that an allocation's batch job ended; its running tasks are re-queued or failed.

        Ending an allocation twice in the same final state does nothing.

        Raises
        ------
        IllegalTransitionError
            ``state`` is not a final state reachable from the current one.
        """
        new = AllocationState.from_job_state(state) if isinstance(state, JobState) else state
        if not new.is_final:
            raise ConfigError(f"allocation_ended: state must be final, got {new.value}")
        with self._lock:
            alloc = self.allocation(alloc_id)
            if alloc.state is new:
                return
            self._set_state(alloc, new, detail or f"batch job ended {new.value}")
            for agent in [a for a in self._agents.values() if a.alloc_id == alloc_id]:
                self._lose_agent(agent, f"allocation {alloc_id} ended {new.value}")
                self._outbox.append((agent.ident, Stop(f"allocation ended {new.value}")))

    def drain(self, alloc_id: str, reason: str = "asked to drain") -> None:
        """Place no new task on an allocation; its agents leave once their running tasks end."""
        with self._lock:
            self._drain(self.allocation(alloc_id), reason)

    def allocation(self, alloc_id: str) -> Allocation:
        """Return the current record of one allocation (raises ConfigError for unknown ids)."""
        with self._lock:
            try:
                return self._allocs[alloc_id]
            except KeyError:
                raise ConfigError(
                    f"no allocation {alloc_id!r} in the pool; known: {sorted(self._allocs)}"
                ) from None

    def allocations(self) -> tuple[Allocation, ...]:
        """Return every allocation ever added, in the order added."""
        with self._lock:
            return tuple(self._allocs.values())

    def submit(self, task: Task) -> Future[Any]:
        """Queue a task; the future gets its value or its exception (remote traceback as ``__cause__``)."""
        with self._lock:
            if self._closing.is_set():
                raise PoolClosedError(f"cannot submit task {task.task_id!r}: the pool is closed")
            if task.task_id in self._tasks:
                raise ConfigError(f"submit: task id {task.task_id!r} is already used in this pool")
            future: Future[Any] = Future()
            self._tasks[task.task_id] = _TaskRec(task, future)
            self._queue[task.task_id] = None
            self._task_event(self._tasks[task.task_id], TaskState.QUEUED, "submitted")
            return future

    def queued(self) -> tuple[Task, ...]:
        """Tasks waiting for cores, oldest first."""
        with self._lock:
            return tuple(self._tasks[t].task for t in self._queue)

    def running(self) -> dict[str, tuple[Task, ...]]:
        """Return the running tasks by allocation id."""
        with self._lock:
            out: dict[str, list[Task]] = {}
            for agent in self._agents.values():
                out.setdefault(agent.alloc_id, []).extend(self._tasks[t].task for t in agent.running)
            return {k: tuple(v) for k, v in out.items()}

    def free_cores(self) -> dict[str, int]:
        """Offered but unused cores by allocation id (agents that joined and are not draining)."""
        with self._lock:
            out: dict[str, int] = {}
            for agent in self._agents.values():
                if not agent.draining:
                    out[agent.alloc_id] = out.get(agent.alloc_id, 0) + agent.free
            return out

    @property
    def events(self) -> tuple[PoolEvent, ...]:
        """Every event so far, oldest first."""
        with self._lock:
            return tuple(self._events)

    def subscribe(self, callback: Callable[[PoolEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for each new event (from the thread that caused it; keep it quick).

        Returns a function that unsubscribes.
        """
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def close(self) -> None:
        """Stop every agent, fail unfinished futures with :class:`PoolClosedError`, delete the secret file."""
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
        self._thread.join()
        # The I/O thread is gone: this thread may use the socket now.
        for ident, message in self._outbox:
            self._sock.send(ident, message)
        for agent in self._agents.values():
            self._sock.send(agent.ident, Stop("pool closed"))
        self._sock.close()
        for fn in self._resolve:
            fn()
        for rec in self._tasks.values():
            if not rec.future.done() and (rec.future_running or not rec.future.cancel()):
                rec.future.set_exception(PoolClosedError(f"task {rec.task.task_id!r}: the pool was closed"))
        self.secret_file.unlink(missing_ok=True)
        if self._own_dir:
            self.secret_file.parent.rmdir()
        logger.info("pool: closed")

    # ---------------------------------------------------------------------------------------- I/O thread

    def _loop(self) -> None:
        while not self._closing.is_set():
            try:
                self._step()
            except Exception:  # a bug must not silently stop every future of the run
                logger.exception("pool: I/O loop step failed; continuing")

    def _step(self) -> None:
        """Receive at most one message, then check agents, place tasks, send and resolve."""
        try:
            got = self._sock.recv(0.02)
        except AuthenticationError as exc:
            self._refuse(exc.peer, str(exc))
            got = None
        except ProtocolError as exc:
            self._refuse("?", str(exc))
            got = None
        with self._lock:
            if got is not None:
                self._handle(*got)
            now = self._clock()
            self._check_agents(now)
            self._place(now)
            if now - self._last_beat >= self.heartbeat_interval:
                self._last_beat = now
                self._outbox.extend((a, Heartbeat()) for a in self._agents)
            outbox, self._outbox = self._outbox, []
            resolve, self._resolve = self._resolve, []
        for ident, message in outbox:
            self._sock.send(ident, message)
        for fn in resolve:  # futures are resolved outside the lock: their callbacks may block
            fn()

    def _refuse(self, peer: str, why: str) -> None:
        logger.warning("pool: %s", why)
        with self._lock:
            self.refused += 1
            alloc = peer.split("/")[0]
            self._emit(AgentEvent(self._clock(), alloc, peer, AgentEventKind.REFUSED, why))

    def _handle(self, ident: bytes, msg: Message) -> None:
        agent = self._agents.get(ident)
        if isinstance(msg, Register):
            self._register(ident, msg)
            return
        if agent is None:
            # Unknown or already declared lost: its tasks were re-queued, so it must not report any more.
            logger.warning(
                "pool: %s from unregistered agent %r, telling it to stop", type(msg).__name__, ident
            )
            self._outbox.append((ident, Stop("not registered (declared lost?)")))
            return
        agent.last_seen = self._clock()
        if isinstance(msg, TaskDone):
            self._task_done(agent, msg)
        elif isinstance(msg, Bye):
            del self._agents[ident]
            for task_id in list(agent.running):
                self._task_lost(
                    self._tasks[task_id], agent.alloc_id, f"agent {agent.name} left: {msg.reason}"
                )
            self._emit(AgentEvent(self._clock(), agent.alloc_id, agent.name, AgentEventKind.LEFT, msg.reason))

    def _register(self, ident: bytes, msg: Register) -> None:
        name = ident.decode(errors="replace")
        alloc = self._allocs.get(msg.alloc_id)
        why = None
        if ident in self._agents:
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
            self._emit(AgentEvent(self._clock(), msg.alloc_id, name, AgentEventKind.REFUSED, str(why)))
            self._outbox.append((ident, Stop(str(why))))
            return
        now = self._clock()
        self._seen.add(ident)
        self._agents[ident] = _AgentRec(
            ident, name, msg.alloc_id, msg.cores, msg.cores, msg.walltime_end, now
        )
        if alloc.state is AllocationState.REQUESTED:
            self._set_state(alloc, AllocationState.RUNNING, f"agent {name} joined")
        self._emit(AgentEvent(now, msg.alloc_id, name, AgentEventKind.JOINED, f"{msg.cores} cores"))
        self._outbox.append((ident, Welcome(self.heartbeat_interval, self.pool_timeout)))
        logger.info("pool: agent %s joined allocation %s with %d cores", name, msg.alloc_id, msg.cores)

    def _task_done(self, agent: _AgentRec, msg: TaskDone) -> None:
        result = msg.result
        rec = self._tasks.get(result.task_id)
        if rec is None or rec.agent != agent.ident or rec.state is not TaskState.RUNNING:
            logger.warning("pool: ignoring a stale result of task %s from %s", result.task_id, agent.name)
            return
        agent.running.discard(result.task_id)
        agent.free += rec.task.cores
        rec.agent = None
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

        self._resolve.append(resolve)

    def _check_agents(self, now: float) -> None:
        for agent in list(self._agents.values()):
            silent = now - agent.last_seen
            if silent > self.heartbeat_timeout:
                self._lose_agent(agent, f"agent {agent.name} sent no heartbeat for {silent:.1f} s")
        for alloc in list(self._allocs.values()):
            if alloc.state is AllocationState.RUNNING:
                left = self._remaining(alloc.alloc_id, now)
                if left <= self.drain_margin:
                    self._drain(alloc, f"{left:.1f} s of walltime left <= drain_margin={self.drain_margin}")

    def _lose_agent(self, agent: _AgentRec, cause: str) -> None:
        logger.warning("pool: lost agent %s: %s", agent.name, cause)
        self._agents.pop(agent.ident, None)
        for task_id in list(agent.running):
            self._task_lost(self._tasks[task_id], agent.alloc_id, cause)
        agent.running.clear()
        self._emit(AgentEvent(self._clock(), agent.alloc_id, agent.name, AgentEventKind.LOST, cause))

    def _task_lost(self, rec: _TaskRec, alloc_id: str, cause: str) -> None:
        rec.losses.append((alloc_id, cause))
        rec.agent = None
        self._task_event(rec, TaskState.LOST, cause)
        if len(rec.losses) > self.max_retries:
            error = TaskLostError(rec.task.task_id, rec.task.stage, tuple(rec.losses), self.max_retries)
            self._task_event(rec, TaskState.FAILED, str(error))
            self._resolve.append(lambda: rec.future.set_exception(error))
            return
        rec.attempt += 1
        self._queue = {rec.task.task_id: None, **self._queue}  # it is older than every queued task
        self._task_event(rec, TaskState.QUEUED, f"re-queued after loss {len(rec.losses)}/{self.max_retries}")

    def _drain(self, alloc: Allocation, reason: str) -> None:
        if alloc.state is not AllocationState.RUNNING:
            return
        self._set_state(alloc, AllocationState.DRAINING, reason)
        for agent in self._agents.values():
            if agent.alloc_id == alloc.alloc_id:
                agent.draining = True
                self._outbox.append((agent.ident, Drain(reason)))

    def _remaining(self, alloc_id: str, now: float) -> float:
        """Walltime left: the earliest end an agent reported, else start + walltime, else all of it."""
        ends = [a.walltime_end for a in self._agents.values() if a.alloc_id == alloc_id and a.walltime_end]
        alloc = self._allocs[alloc_id]
        return max(0.0, min(ends) - now) if ends else alloc.remaining(now)

    def _place(self, now: float) -> None:
        if not self._queue:
            return
        offers = [
            Offer(a.ident, a.alloc_id, a.free, self._remaining(a.alloc_id, now))
            for a in self._agents.values()
            if not a.draining and a.free > 0 and self._allocs[a.alloc_id].state.is_live
        ]
        if not offers:
            return
        tasks = [self._tasks[t].task for t in self._queue]
        for task, offer in plan_placement(tasks, offers, lambda t: self._another_could_take(t, now)):
            rec = self._tasks[task.task_id]
            agent = self._agents[offer.agent]
            if (task.estimate or 0.0) > offer.remaining:
                logger.info(
                    "pool: no allocation has %.0f s left for task %s; starting it on %s (%.0f s left)",
                    task.estimate,
                    task.task_id,
                    agent.alloc_id,
                    offer.remaining,
                )
            del self._queue[task.task_id]
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
            self._outbox.append((agent.ident, RunTask(task)))

    def _another_could_take(self, task: Task, now: float) -> bool:
        """Whether a not-draining allocation (live or requested) has enough cores and time for ``task``."""
        need = task.estimate or 0.0
        for alloc in self._allocs.values():
            if alloc.state not in (AllocationState.REQUESTED, AllocationState.RUNNING):
                continue
            per_agent = alloc.cores // (alloc.nodes or 1)
            if per_agent >= task.cores and self._remaining(alloc.alloc_id, now) >= need:
                return True
        return False

    # ------------------------------------------------------------------------------------------- events

    def _set_state(self, alloc: Allocation, new: AllocationState, detail: str) -> None:
        alloc = alloc.transition(new, self._clock())
        self._allocs[alloc.alloc_id] = alloc
        self._alloc_event(alloc, detail)

    def _alloc_event(self, alloc: Allocation, detail: str) -> None:
        logger.info("pool: allocation %s %s (%s)", alloc.alloc_id, alloc.state.value, detail)
        event = AllocationEvent(self._clock(), alloc.alloc_id, alloc.state, alloc.cores, alloc.stage, detail)
        self._emit(event)

    def _task_event(self, rec: _TaskRec, state: TaskState, detail: str) -> None:
        rec.state = state
        task = rec.task
        event = TaskEvent(
            self._clock(), task.task_id, task.stage, state, task.cores, rec.alloc_id, rec.attempt, detail
        )
        self._emit(event)

    def _emit(self, event: PoolEvent) -> None:
        self._events.append(event)
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:
                logger.exception("pool: event subscriber %r failed", callback)
