"""The pool: live allocations, their agents' core offers, the task queue and placement.

Every allocation's agents connect to one :class:`Pool` and offer their cores; any agent may take any ready
task (one pool). A background I/O thread owns the ZeroMQ socket: it authenticates messages, places tasks,
checks heartbeats, re-queues the tasks of agents that die or allocations that end (at most
``max_retries`` times), and drains allocations whose walltime is about to end. A task killed by a signal
is re-queued when its allocation was being stopped (SIGTERM at the walltime or on ``scancel``, draining,
ended) and failed when the allocation was healthy. Strategies call the
synchronous API (:meth:`Pool.add_allocation`, :meth:`Pool.allocation_ended`, :meth:`Pool.submit`...)
from any thread.

Allocations are told, not learned. Their registry entries (:meth:`Pool.add_allocation`,
:meth:`Pool.allocation_submitted`, :meth:`Pool.allocation_started`, :meth:`Pool.drain`,
:meth:`Pool.allocation_ended`) are the only way an allocation's record changes, but for the drain of one
whose walltime is about to end. With an owner (:meth:`Pool.expect_owner`: a run's allocation control) an
agent's join leaves its allocation as it is, until the owner tells its start; its cores are offered at
once all the same. A pool used alone takes the first agent's join as the start, through
:meth:`Pool.allocation_started` too.

Placement is walltime-aware (the rule: :func:`elastic.pool.placement.plan_placement`): a task is not started
on an allocation with less walltime left than its estimate while another one could take it. An
allocation with ``drain_margin`` seconds or less left gets no new task and its agents leave once their
tasks end.

Every task, allocation and agent transition is recorded as a frozen event (:attr:`Pool.events`, the
newest ``events_kept``; records in :mod:`elastic.pool.events`); :meth:`Pool.subscribe` calls a function on
each new one. The bookkeeping behind it, without sockets or threads, is
:class:`elastic.pool.state.PoolState`.

Events flow up without the lock held. The state records each event under the pool's lock (in the order
the changes happened); the thread that caused it delivers it once it has released the lock. One thread at
a time delivers, in recorded order; a thread that finds another one delivering leaves its events to it. So
a subscriber may call the pool (from its own thread or another), take locks of its own or read a clock
that advances a backend, without ever holding the pool's lock.

The I/O thread sleeps in one poll on the socket, its monitor (connections refused at the handshake) and a
wake-up eventfd: a submitted task, a message from an agent or a due heartbeat wakes it at once; several
tasks for one agent go out in one message, and the messages waiting are read (at most :data:`_MAX_BATCH`)
before the checks and placement run again. An agent is declared lost only for silence up to the last time
every waiting message was read, so a flood of messages cannot make a live agent look silent.

Large calls and values go through files in the run's spool directory, beside the secret file
(:mod:`elastic.pool.spool`): :meth:`Pool.submit` writes a call larger than
:data:`~elastic.pool.spool.INLINE_LIMIT` there; when an allocation ends its agents' working directories
there are removed; :meth:`Pool.close` removes the spool but the whole outputs of cut shell output.

Over 500 lines because :class:`Pool` is the pool's whole public API and its I/O thread: each public method
is a short documented entry that takes the lock, calls :class:`~elastic.pool.state.PoolState` and wakes
the I/O loop, which owns the socket; the bookkeeping is in :mod:`elastic.pool.state`, the wire in
:mod:`elastic.pool.sockets` and :mod:`elastic.pool.protocol`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import zmq

from elastic.allocations import Allocation, AllocationState
from elastic.batch import JobState
from elastic.errors import ConfigError, PoolError
from elastic.pool import spool
from elastic.pool.agent_command import AgentCommand
from elastic.pool.events import PoolEvent
from elastic.pool.messages import Message, Stop
from elastic.pool.protocol import AuthenticationError, ProtocolError, new_secret, write_secret_file
from elastic.pool.sockets import PoolSocket
from elastic.pool.state import DEFAULT_EVENTS_KEPT, AgentView, PoolState
from elastic.pool.tasks import Task, TaskKind

__all__ = ["Pool", "PoolClosedError"]

logger = logging.getLogger(__name__)


class PoolClosedError(PoolError, RuntimeError):
    """The pool was closed before the task could finish, or a task was submitted to a closed pool."""


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
        Where to write the secret file and the spool directory beside it (both must be visible to the
        agents, e.g. a shared home on Slurm); created with mode 0700 if missing (an existing directory is
        left as it is); default a fresh private temporary directory.
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
    workers : int or None, default None
        Warm worker processes per agent (``None``: one per core).
    worker_memory : int or None, default None
        Bytes of address space per worker process (``RLIMIT_AS``); ``None``: no limit.
    events_kept : int, default 10000
        How many of the newest events :attr:`events` keeps (subscribers see all).
    prefetch_seconds : float, default 0.1
        Expected seconds of short tasks sent ahead to each busy agent, per core, so its workers never wait
        a round trip for the next one (see :mod:`elastic.pool.state`); 0 sends nothing ahead.
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
        workers: int | None = None,
        worker_memory: int | None = None,
        events_kept: int = DEFAULT_EVENTS_KEPT,
        prefetch_seconds: float = 0.1,
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
        if not (prefetch_seconds >= 0 and prefetch_seconds != float("inf")):
            raise ConfigError(
                f"Pool(prefetch_seconds=...) must be finite seconds >= 0, got {prefetch_seconds}"
            )
        if events_kept < 1:
            raise ConfigError(f"Pool(events_kept=...) must be >= 1, got {events_kept}")
        # checked here, before any socket is opened, with the agent's own rules
        AgentCommand("tcp://x:1", "-", "-", cores=1, workers=workers, worker_memory=worker_memory)
        self._workers = workers
        self._worker_memory = worker_memory
        self._state = PoolState(
            heartbeat_interval=heartbeat_interval,
            heartbeat_timeout=heartbeat_timeout,
            pool_timeout=pool_timeout,
            max_retries=max_retries,
            drain_margin=drain_margin,
            clock=clock,
            events_kept=events_kept,
            prefetch_seconds=prefetch_seconds,
        )
        self._python = python
        self._clock = clock
        self._secret = secret if secret is not None else new_secret()
        self._own_dir = secret_dir is None
        directory = Path(tempfile.mkdtemp(prefix="elastic-pool-")) if secret_dir is None else Path(secret_dir)
        try:
            # a directory that does not exist yet (a run directory's subfolder) is created private
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.secret_file = write_secret_file(self._secret, directory)
        except OSError as exc:
            raise ConfigError(
                f"Pool(secret_dir={str(directory)!r}): cannot write the secret there ({exc})"
            ) from exc
        self.spool_dir = spool.spool_dir(self.secret_file)
        """The run's spool directory (:mod:`elastic.pool.spool`), beside :attr:`secret_file`."""
        self._state.spool = self.spool_dir
        try:
            self._sock = PoolSocket(self._secret, bind, port)
        except ConfigError:
            self._remove_files()
            raise
        host = advertise or (socket.gethostname() if bind in ("0.0.0.0", "*") else bind)
        self.address = f"tcp://{host}:{self._sock.port}"
        self._lock = threading.RLock()
        self._delivering = False  # a thread is handing events to subscribers (guarded by the lock)
        self._closing = threading.Event()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._woken = False
        self._heard_until = self._clock()
        self._thread = threading.Thread(target=self._loop, name="elastic-pool", daemon=True)
        self._thread.start()
        logger.info("pool: listening at %s, secret in %s", self.address, self.secret_file)

    # ------------------------------------------------------------------------------------------ settings

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between heartbeats, both ways."""
        return self._state.heartbeat_interval

    @property
    def heartbeat_timeout(self) -> float:
        """An agent silent this long is lost, and its tasks re-queued (seconds)."""
        return self._state.heartbeat_timeout

    @property
    def pool_timeout(self) -> float:
        """Agents leave when the pool is silent this long (seconds)."""
        return self._state.pool_timeout

    @property
    def max_retries(self) -> int:
        """How often a task may be lost and re-run before its future fails."""
        return self._state.max_retries

    @property
    def drain_margin(self) -> float:
        """An allocation with this much walltime left or less (seconds) gets no new task."""
        return self._state.drain_margin

    @property
    def refused(self) -> int:
        """Connections and messages refused so far (wrong secret, malformed, replayed, unknown allocation)."""
        return self._state.refused

    # ---------------------------------------------------------------------------------------------- API

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def in_io_thread(self) -> bool:
        """Tell whether the calling thread is the pool's I/O thread (the one that resolves futures).

        Done callbacks of the pool's futures run there: such code must not wait for other futures of the
        pool, nor close it (:meth:`close` joins that thread).
        """
        return threading.current_thread() is self._thread

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
            workers=self._workers,
            worker_memory=self._worker_memory,
        ).to_script()

    def add_allocation(self, allocation: Allocation) -> None:
        """Register an allocation (REQUESTED or RUNNING) so its agents may join.

        Raises
        ------
        ConfigError
            Its id is already used, or it has ended.
        """
        with self._lock:
            self._state.add_allocation(allocation)
        self._wake()
        self._deliver()

    def allocation_submitted(self, alloc_id: str, backend_job_id: str) -> None:
        """Record the batch job id of an allocation once the backend gave it."""
        with self._lock:
            self._state.allocation_submitted(alloc_id, backend_job_id)

    def allocation_started(
        self, alloc_id: str, started_ago: float = 0.0, walltime: float | None = None
    ) -> None:
        """Record that an allocation's batch job started ``started_ago`` seconds ago (pool clock).

        The one way an allocation becomes RUNNING: its owner (:meth:`expect_owner`) says so when it learns
        it; a pool without an owner does so itself as the allocation's first agent joins. Placement does
        not wait for it: an agent that joined is offered at once. ``walltime`` is what the batch system
        granted, in pool seconds (None: the requested one stands).
        """
        with self._lock:
            granted = self._state.allocation(alloc_id).walltime if walltime is None else walltime
            self._state.allocation_started(alloc_id, started_ago, granted)
        self._wake()
        self._deliver()

    def expect_owner(self) -> None:
        """Say that an owner (a run's allocation control) holds the allocations and tells the pool of them.

        Call it before any agent joins. From then on the pool changes an allocation's state only when told
        (the registry entries: :meth:`add_allocation`, :meth:`allocation_submitted`,
        :meth:`allocation_started`, :meth:`drain`, :meth:`allocation_ended`): an agent's join no longer
        marks its allocation RUNNING (its JOINED event is the owner's cue to ask the batch system), though
        its cores are offered at once. And a task re-queued after a loss is not started on an allocation
        with less walltime left than its estimate until the owner has decided (:meth:`decided`: it may ask
        for one with the time): a start there would be lost again, and use one of its retries.
        """
        with self._lock:
            self._state.owned = True

    def decided(self, task_ids: Iterable[str]) -> None:
        """Take the owner's word that it decided after these tasks' losses (see :meth:`expect_owner`)."""
        with self._lock:
            self._state.decided(task_ids)
        self._wake()
        self._deliver()

    def allocation_ended(
        self,
        alloc_id: str,
        state: AllocationState | JobState,
        detail: str = "",
        started_ago: float | None = None,
    ) -> None:
        """Record that an allocation's batch job ended; its running tasks are re-queued or failed.

        Any final state may end an allocation that has not ended. One whose start was not told yet takes
        ``started_ago`` (seconds before now, pool clock) as its start when given (its owner learned the
        start and the end at once); without it, it ends straight from REQUESTED with no start time (its
        agent never joined and nobody told its start). Ending an ended allocation again does nothing.

        Raises
        ------
        ConfigError
            ``state`` is not final, ``started_ago`` is negative or not finite, or the allocation is
            unknown.
        """
        new = AllocationState.from_job_state(state) if isinstance(state, JobState) else state
        if not new.is_final:
            raise ConfigError(f"allocation_ended: state must be final, got {new.value}")
        if started_ago is not None and not (math.isfinite(started_ago) and started_ago >= 0.0):
            raise ConfigError(
                f"allocation_ended: started_ago must be a finite number >= 0, got {started_ago}"
            )
        with self._lock:
            self._state.allocation_ended(alloc_id, new, detail, started_ago)
        self._wake()
        self._deliver()
        # What its agents left in the spool (an agent killed by SIGKILL cannot remove its own directory).
        shutil.rmtree(spool.allocation_dir(self.spool_dir, alloc_id), ignore_errors=True)

    def drain(self, alloc_id: str, reason: str = "asked to drain") -> None:
        """Place no new task on an allocation; its agents leave once their running tasks end.

        An allocation whose agent has not joined yet is drained as soon as one joins.
        """
        with self._lock:
            self._state.drain(alloc_id, reason)
        self._wake()
        self._deliver()

    def allocation(self, alloc_id: str) -> Allocation:
        """Return the current record of one allocation (raises ConfigError for unknown ids)."""
        with self._lock:
            return self._state.allocation(alloc_id)

    def allocations(self) -> tuple[Allocation, ...]:
        """Return every allocation ever added, in the order added."""
        with self._lock:
            return tuple(self._state.allocs.values())

    def submit(self, task: Task, future: Future[Any] | None = None) -> Future[Any]:
        """Queue a task; the future gets its value or its exception (remote traceback as ``__cause__``).

        A call whose pickle is larger than :data:`elastic.pool.spool.INLINE_LIMIT` is written to the spool
        directory here, and read from there by the worker that runs it.

        Parameters
        ----------
        task : Task
            What to run.
        future : Future or None, default None
            The future to resolve (one the caller already handed out); ``None``: a new one.

        Raises
        ------
        PoolClosedError
            The pool is closed.
        ConfigError
            The task id is already used, or a large call could not be written to the spool.
        """
        if self._closing.is_set():
            raise PoolClosedError(f"cannot submit task {task.task_id!r}: the pool is closed")
        if task.kind is TaskKind.CALL and len(task.payload) > spool.INLINE_LIMIT:
            task = self._spill(task)
        try:
            with self._lock:
                if self._closing.is_set():
                    raise PoolClosedError(f"cannot submit task {task.task_id!r}: the pool is closed")
                future = self._state.submit(task, future)
        except BaseException:
            if task.payload_file:
                spool.remove(self.spool_dir, task.payload_file)
            raise
        self._wake()
        self._deliver()
        return future

    def _spill(self, task: Task) -> Task:
        """Write a large call to the spool; return the task that names the file instead of carrying it."""
        size = len(task.payload)
        try:
            name = spool.write(self.spool_dir, task.payload, ".call")
        except OSError as exc:
            raise ConfigError(
                f"task {task.task_id!r}: its function and arguments pickle to {size:,} bytes, more than the "
                f"{spool.INLINE_LIMIT:,} a message carries, and writing them to the spool directory "
                f"{self.spool_dir} failed ({exc}); pass a path to the data instead"
            ) from exc
        logger.debug("pool: task %s: %d bytes of call through %s", task.task_id, size, name)
        return dataclasses.replace(task, payload=b"", payload_file=name)

    def kill(self, task_id: str, reason: str = "") -> bool:
        """Kill a task: drop it if no agent has it yet, else have its agent kill its processes.

        Its future fails with :class:`~elastic.pool.tasks.TaskKilledError` (unless it finished first).
        Returns False when the pool does not know the task (it has ended, or was never submitted).
        """
        with self._lock:
            known = self._state.kill(task_id, reason)
        self._wake()
        self._deliver()
        return known

    def agents(self) -> tuple[AgentView, ...]:
        """Every registered agent: its name, allocation, host, free cores and walltime left."""
        with self._lock:
            return self._state.agent_views(self._clock())

    def queued(self) -> tuple[Task, ...]:
        """Tasks waiting for cores, oldest first."""
        with self._lock:
            return tuple(self._state.tasks[t].task for t in self._state.queued())

    def running(self) -> dict[str, tuple[Task, ...]]:
        """Return the running tasks by allocation id."""
        with self._lock:
            return self._state.running()

    def free_cores(self) -> dict[str, int]:
        """Offered but unused cores by allocation id (agents that joined and are not draining)."""
        with self._lock:
            return self._state.free_cores()

    def busy_cores(self) -> dict[str, int]:
        """Cores running tasks, by allocation id (allocations with none left out)."""
        with self._lock:
            return self._state.busy_cores()

    @property
    def events(self) -> tuple[PoolEvent, ...]:
        """The newest events (at most ``events_kept``), oldest first."""
        with self._lock:
            return tuple(self._state.events)

    def subscribe(self, callback: Callable[[PoolEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for each new event, in order, never with the pool's lock held.

        It runs in a thread that caused events (the pool's I/O thread, or a caller of :meth:`submit`,
        :meth:`add_allocation`...) after that thread released the lock; keep it quick. It may call the
        pool. Returns a function that unsubscribes (an event whose delivery already started may still
        reach the callback from another thread).
        """
        with self._lock:
            self._state.subscribe(callback)

        def unsubscribe() -> None:
            with self._lock:
                self._state.unsubscribe(callback)

        return unsubscribe

    def _deliver(self) -> None:
        """Hand the recorded events to their subscribers; call it only WITHOUT the lock held.

        One thread delivers at a time, in recorded order; a thread that finds another delivering returns
        at once (that one delivers its events too, before it stops), so a subscriber that calls the pool
        from the delivering thread does not recurse. (Read without the lock first: a thread that recorded
        an event and then sees no delivery under way, or sees one, is right either way, since the one
        delivering takes the last events and stops in one locked step.)
        """
        state = self._state
        if self._delivering or not state.pending:
            return
        with self._lock:
            if self._delivering:
                return
            batch = state.take_pending()
            self._delivering = bool(batch)
        while batch:
            done = 0
            try:
                for event, callbacks in batch:
                    state.deliver(event, callbacks)
                    done += 1
            except BaseException:  # a KeyboardInterrupt in a subscriber: the rest is delivered later
                with self._lock:
                    self._delivering = False
                    state.pending[:0] = batch[done + 1 :]
                raise
            with self._lock:
                batch = state.take_pending()
                self._delivering = bool(batch)

    def close(self) -> None:
        """Stop every agent, fail unfinished futures with :class:`PoolClosedError`, delete the secret file.

        Raises
        ------
        PoolError
            Called from the pool's own I/O thread (a future's done callback), which it must join:
            close the pool from another thread.
        """
        if self.in_io_thread():
            raise PoolError(
                "Pool.close() was called from the pool's own thread (a future's done callback), which it "
                "must join: close it from another thread"
            )
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
        self._wake()
        self._thread.join()
        # The I/O thread is gone: this thread may use the socket now.
        state = self._state
        for ident, message in state.outbox:
            self._send(ident, message)
        for agent in state.agents.values():
            self._send(agent.ident, Stop("pool closed"))
        self._sock.close()
        self._deliver()
        for fn in state.resolve:
            fn()
        for rec in state.tasks.values():
            if not rec.future.done() and (rec.future_running or not rec.future.cancel()):
                rec.future.set_exception(PoolClosedError(f"task {rec.task.task_id!r}: the pool was closed"))
        self._remove_files()
        os.close(self._wake_fd)
        logger.info("pool: closed")

    def _remove_files(self) -> None:
        """Remove the secret file and the spool (but kept outputs), and the pool's own directory if empty."""
        self.secret_file.unlink(missing_ok=True)
        kept = spool.clean(self.spool_dir)
        if kept:
            logger.info("pool: %d whole task output(s) kept in %s", kept, self.spool_dir / "output")
        if self._own_dir:
            with contextlib.suppress(OSError):  # not empty: it holds kept outputs
                self.secret_file.parent.rmdir()

    # ---------------------------------------------------------------------------------------- I/O thread

    def _wake(self) -> None:
        """Make the I/O thread look at the state now (once per sleep: later calls are free)."""
        if not self._woken:
            self._woken = True
            with contextlib.suppress(OSError):
                os.eventfd_write(self._wake_fd, 1)

    def _loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock.socket, zmq.POLLIN)
        poller.register(self._sock.monitor, zmq.POLLIN)
        poller.register(self._wake_fd, zmq.POLLIN)
        while not self._closing.is_set():
            try:
                self._step(poller)
            except Exception:  # a bug must not silently stop every future of the run
                logger.exception("pool: I/O loop step failed; continuing")

    def _step(self, poller: zmq.Poller) -> None:
        """Wait for a message, a wake-up or the next due check; then handle everything that is waiting."""
        state = self._state
        with self._lock:
            timeout = 0.0 if self._sock.discarding else state.next_tick(self._clock())
        ready = dict(poller.poll(round(timeout * 1000))) if not self._woken else {}
        if self._wake_fd in ready or self._woken:
            with contextlib.suppress(BlockingIOError):
                os.eventfd_read(self._wake_fd)
            self._woken = False
        refused = [("?", why) for why in self._sock.refusals()] if self._sock.monitor in ready else []
        received: list[tuple[bytes, Message]] = []
        drained = False
        for _ in range(_MAX_BATCH):  # bounded, so checks and heartbeats still happen under a flood
            try:
                got = self._sock.recv(0.0)
            except AuthenticationError as exc:
                refused.append((exc.peer, str(exc)))
                continue
            except ProtocolError as exc:
                refused.append(("?", str(exc)))
                continue
            if got is None:
                drained = not self._sock.discarding
                break
            received.append(got)
        now = self._clock()
        if drained:
            self._heard_until = now
        with self._lock:
            for peer, why in refused:
                state.refuse(peer, why)
            for ident, message in received:
                state.handle(ident, message)
            state.tick(now, self._heard_until)
            outbox, state.outbox = state.outbox, []
            resolve, state.resolve = state.resolve, []
        for ident, message in outbox:
            self._send(ident, message)
        self._deliver()  # events before the futures they concern, as they happened
        for fn in resolve:  # futures are resolved outside the lock: their callbacks may block
            try:
                fn()
            except BaseException:
                # a done callback that re-raises a task's SystemExit (Parsl's reads result() and catches
                # Exception only) must not stop this thread, and with it every later future of the run
                logger.exception("pool: a future's done callback raised; the other futures go on")

    def _send(self, ident: bytes, message: Message) -> None:
        try:
            self._sock.send(ident, message)
        except ProtocolError:  # too large: batches and the spool keep messages small, so a bug
            logger.exception("pool: could not send %s to agent %r", type(message).__name__, ident)


_MAX_BATCH = 1000
"""Messages the I/O thread reads before it checks agents and places tasks again."""
