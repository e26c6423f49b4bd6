"""The Mesos master of the front door: frameworks, offers from the pool, launched tasks, status updates.

:class:`MesosMaster` serves scheduler calls (parsed by :mod:`elastic.front.mesos.calls`) for one
:class:`~elastic.front.door.Elastic`, whose strategy decides the allocations:

- **Demand**: a subscribed framework that is not suppressed wants cores. Its stage is its label
  ``elastic.stage``, else its role (other than ``*``), else its name; it is announced to the front door as
  ready tasks (``Elastic.expect(stage, n, ready=True)``), ``n`` being what is left of its label
  ``elastic.tasks`` (how many tasks it will run, if it says) and at least 1, so Big-Job, Per-Stage or ASA
  request allocations for it as for any stage. Launched tasks are submitted to the front door
  (``Elastic.submit_task``) and count like any task; SUPPRESS and TEARDOWN announce 0, so the stage ends
  once its tasks are done and its allocation is released.
- **Offers** come from the pool's agents (the rule: :mod:`elastic.front.mesos.offers`), from a
  background thread woken by every pool event. An agent that leaves or is lost has its offers rescinded
  first; it is reported with FAILURE when a framework's task ran there or it was lost without being
  released, while an agent that said goodbye or whose allocation was drained (released by the strategy)
  with nothing running leaves quietly (routine scale-down, as Mesos removes a drained agent).
- **Launches** run as pool shell tasks pinned to the offer's agent; their progress and outcome become
  status updates (:mod:`elastic.front.mesos.states`), resent until acknowledged
  (:mod:`elastic.front.mesos.updates`).
- **Custom executors** (a task with an ``ExecutorInfo``): the executor's command runs as the pool task, and
  the executor speaks the v1 executor API to this master (:mod:`elastic.front.mesos.executors`); the task's
  statuses are the executor's. REQUEST calls size the framework's demand
  (:func:`~elastic.front.mesos.frameworks.demand`); a gang short of cores and a framework that declines
  every offer while it runs nothing (its tasks wider than the offers) are learned there too.
- **Disconnection**: a framework whose stream closes keeps its tasks for ``failover_timeout`` seconds; it
  may subscribe again with its id (its unacknowledged updates are sent again), else it is torn down.

Every method takes one lock; the pool's callbacks only queue what they saw for the background thread, so
the pool's lock and this one are never taken in the opposite order.

Over 500 lines because every scheduler call changes the same framework and task records under that one
lock; the parsing, offer rule, states, updates and executors already live in their own modules.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from elastic.allocations import Allocation, AllocationEvent, AllocationState
from elastic.errors import ConfigError
from elastic.front.mesos import events as ev
from elastic.front.mesos import executors as ex
from elastic.front.mesos.calls import (
    Accept,
    Acknowledge,
    Call,
    Decline,
    FrameworkInfo,
    Kill,
    Message,
    Reconcile,
    Request,
    Revive,
    Suppress,
    Teardown,
)
from elastic.front.mesos.executors import ExecutorCall, ExecutorRun
from elastic.front.mesos.fields import BadCallError, ForbiddenError, NotSubscribedError
from elastic.front.mesos.frameworks import (
    LONG_REFUSAL,
    POOL_PREFIX,
    Framework,
    MesosTask,
    Stream,
    check_labels,
    demand,
    held_cores,
    stage_of,
)
from elastic.front.mesos.launch import plan_launches, task_spec
from elastic.front.mesos.offers import OfferBook, Wanting
from elastic.front.mesos.states import TaskStatus, outcome_status, progress_status, reconciled
from elastic.pool.events import AgentEvent, AgentEventKind, PoolEvent
from elastic.pool.state import AgentView
from elastic.pool.tasks import TaskEvent, TaskState
from elastic.strategies.knowledge import TOTAL

if TYPE_CHECKING:
    from elastic.front.door import Elastic

__all__ = [
    "DEFAULT_ALLOCATION_INTERVAL",
    "DEFAULT_OFFER_TIMEOUT",
    "MAX_PENDING_UPDATES",
    "MESOS_ALLOCATION_INTERVAL",
    "MesosMaster",
]

logger = logging.getLogger(__name__)

_ENDED = frozenset({TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED})

DEFAULT_OFFER_TIMEOUT = 30.0
"""Seconds after which an unanswered offer is rescinded, unless told otherwise."""

MESOS_ALLOCATION_INTERVAL = 1.0
"""The Mesos master's default ``--allocation_interval`` (seconds between batch allocations)."""

DEFAULT_ALLOCATION_INTERVAL = 0.0
"""Seconds between batch allocations here unless told otherwise: 0, every free core is offered at once.

Not Mesos' 1 s: cores freed by a task sit idle until the next batch, and a strategy that releases idle
batch jobs (ASA releases an idle piece of a split request) gives them back between a framework's short
tasks."""

MAX_PENDING_UPDATES = 1000
"""Most unacknowledged status updates an executor may queue for its task (more: HTTP 400)."""

_RECONCILE_SLICE = 500
"""Answers to a RECONCILE sent as one piece of the event stream."""

_TICK = 1.0
"""Longest sleep of the background thread (seconds): offers' walltime left is refreshed this often."""


class MesosMaster:
    """Serve the Mesos scheduler API for one front door (see the module docstring).

    Parameters
    ----------
    elastic : Elastic
        The front door: its pool gives offers and runs tasks, its strategy decides allocations.
    heartbeat_interval : float, default 15.0
        Seconds between HEARTBEAT events (Mesos' default).
    mem_per_core : float, default 1024.0
        ``mem`` (MB) offered per core (checked against launches, not enforced).
    disk_per_core : float, default 10240.0
        ``disk`` (MB) offered per core (checked against launches, not enforced; some frameworks, Toil's
        among them, launch nothing on an offer without disk).
    offer_timeout : float or None, default 30.0
        Rescind offers unanswered this long (seconds; the Mesos master's ``--offer_timeout``), so a
        framework that never answers does not hold cores; their cores are offered again. None: never.
    retry_min : float, default 10.0
        First wait before an unacknowledged status update is sent again (doubling, up to 600 s).
    gang_wait : float, default 10.0
        Seconds a framework none of whose tasks ended waits, its tasks running and no core free for it,
        before it is taken for a gang short of cores; and seconds a framework that declined its widest
        offer, running nothing, waits before its tasks are taken as twice as wide (see
        :mod:`elastic.front.mesos.frameworks`).
    allocation_interval : float, default 0.0
        Seconds between batch allocations (the Mesos master's ``--allocation_interval``, 1 s there): cores
        freed by ended tasks, declined, or left unused are offered at the next one, not at once; a
        framework that subscribes or revives is offered every agent's free cores at once, and a new
        agent's cores go out at once, as the Mesos allocator does. 0 (the default here, see
        :data:`DEFAULT_ALLOCATION_INTERVAL`): every free core is offered at once.
    clock : callable, default time.time
        Epoch seconds.
    """

    def __init__(
        self,
        elastic: Elastic,
        *,
        heartbeat_interval: float = 15.0,
        mem_per_core: float = 1024.0,
        disk_per_core: float = 10240.0,
        offer_timeout: float | None = DEFAULT_OFFER_TIMEOUT,
        retry_min: float = 10.0,
        gang_wait: float = 10.0,
        allocation_interval: float = DEFAULT_ALLOCATION_INTERVAL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, value in (("heartbeat_interval", heartbeat_interval), ("mem_per_core", mem_per_core),
                            ("disk_per_core", disk_per_core), ("retry_min", retry_min),
                            ("offer_timeout", offer_timeout), ("gang_wait", gang_wait)):  # fmt: skip
            if value is not None and not 0 < value < float("inf"):
                raise ConfigError(f"MesosMaster({name}=...) must be finite and > 0, got {value!r}")
        if not 0 <= allocation_interval < float("inf"):
            raise ConfigError(
                f"MesosMaster(allocation_interval=...) must be finite and >= 0 (0: offer at once, "
                f"Mesos' default: {MESOS_ALLOCATION_INTERVAL:g}), got {allocation_interval!r}"
            )
        self.elastic = elastic
        self.pool = elastic.pool
        self.heartbeat_interval = heartbeat_interval
        self.mem_per_core = mem_per_core
        self.disk_per_core = disk_per_core
        self.retry_min = retry_min
        self.gang_wait = gang_wait
        self.allocation_interval = allocation_interval
        self.host, self.port = "127.0.0.1", 0
        self.master_id = str(uuid.uuid4())
        self._clock = clock
        self._lock = threading.RLock()
        self._inbox: queue.SimpleQueue[PoolEvent | tuple[str, concurrent.futures.Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._answers: queue.SimpleQueue[tuple[Stream, list[tuple[str, TaskStatus | None]], bool, float]] = (
            queue.SimpleQueue()
        )
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._book = OfferBook(self.master_id, offer_timeout=offer_timeout)
        self.frameworks: dict[str, Framework] = {}
        self._removed: set[str] = set()
        self._issued: set[str] = set()
        self._drained: set[str] = set()  # allocations seen draining (released by the strategy)
        self._lost_on: set[str] = set()  # agents a task was lost on, until their FAILURE
        self._by_pool_id: dict[str, MesosTask] = {}
        self._runs: dict[str, ExecutorRun] = {}  # custom executor processes by the id they see
        self._seq = 0
        self._announced: dict[str, int] = {}
        self._next_allocation = 0.0  # when the next batch allocation is due (epoch seconds)
        self._allocate_all = False  # a framework subscribed or revived: offer every agent at once
        self._seen_agents: set[str] = set()  # agents offered before (a new one is offered at once)
        # cores the frameworks hold, by allocation, as of the last step: replaced whole, never changed, so
        # allocation control reads it without this lock (see _claims)
        self._claimed: dict[str, int] = {}
        self._unclaim = elastic.claim_cores(lambda: self._claimed)
        self._unsubscribe = self.pool.subscribe(self._on_pool_event)
        self._thread = threading.Thread(target=self._run, name="elastic-mesos", daemon=True)
        self._thread.start()

    # -- calls -------------------------------------------------------------------------------------------

    def subscribe(
        self, info: FrameworkInfo, framework_id: str | None, stream: Stream, principal: str | None = None
    ) -> tuple[str, str]:
        """Attach a framework's event stream; return ``(framework id, Mesos-Stream-Id)``.

        A framework subscribing with a known id fails over: its previous stream gets an ERROR and closes.
        ``principal`` is the authenticated principal (None: authentication is off).

        Raises
        ------
        ForbiddenError
            The id was never issued by this master, names a framework that was torn down or removed after
            its failover timeout, or one another principal subscribed; or ``framework_info.principal``
            differs from the authenticated principal.
        """
        check_labels(info)
        if principal is not None and info.principal not in (None, principal):
            raise ForbiddenError(
                f"subscribe.framework_info.principal {info.principal!r} is not the authenticated principal "
                f"{principal!r}"
            )
        with self._lock:
            if framework_id in self._removed:
                raise NotSubscribedError(
                    f"framework {framework_id} was removed (torn down, or not back within its failover "
                    "timeout); subscribe without an id to start a new one"
                )
            if framework_id is not None and framework_id not in self.frameworks:
                raise ForbiddenError(
                    f"framework id {framework_id!r} was never issued by this master (it may have been "
                    "restarted); subscribe without an id to start a new framework"
                )
            fw = self.frameworks.get(framework_id or "")
            if fw is None:
                framework_id = self._new_framework_id()
                fw = self.frameworks[framework_id] = Framework(
                    framework_id, info, stage_of(info), principal=principal
                )
                logger.info(
                    "mesos: framework %s (%s) subscribed, stage %s", framework_id, info.name, fw.stage
                )
            else:
                if fw.principal != principal:
                    raise ForbiddenError(
                        f"framework {framework_id} was subscribed by another principal; only it may fail over"
                    )
                if fw.stream is not None:
                    fw.emit(ev.error("Framework failed over to a new subscription"))
                    fw.stream.close()
                fw.info, fw.stage = info, stage_of(info)
                for task in fw.tasks.values():
                    task.updates.resend()
                logger.info("mesos: framework %s subscribed again", framework_id)
            fw.stream, fw.stream_id, fw.disconnected_at = stream, str(uuid.uuid4()), None
            fw.last_heartbeat = self._clock()
            self._allocate_all = True
            fw.emit(
                ev.subscribed(fw.framework_id, self.heartbeat_interval, self.host, self.port, self.master_id)
            )
            self._announce()
        self._wake.set()
        return fw.framework_id, fw.stream_id

    def disconnected(self, framework_id: str, stream_id: str) -> None:
        """Take note that the framework's event stream ``stream_id`` closed (its failover timeout starts)."""
        with self._lock:
            fw = self.frameworks.get(framework_id)
            if fw is None or fw.stream_id != stream_id:
                return
            fw.stream = fw.stream_id = None
            fw.disconnected_at = self._clock()
            self._book.drop(framework_id)
            logger.info("mesos: framework %s disconnected", framework_id)
        self._wake.set()

    def call(
        self, framework_id: str, stream_id: str | None, call: Call, principal: str | None = None
    ) -> None:
        """Serve one call other than SUBSCRIBE (answered 202 when this returns).

        ``principal`` is the authenticated principal (None: authentication is off).

        Raises
        ------
        BadCallError
            No ``Mesos-Stream-Id``, or not the framework's current one.
        NotSubscribedError
            The framework is not subscribed, or was subscribed by another principal.
        """
        answers: list[tuple[str, TaskStatus | None]] = []
        stream: Stream | None = None
        aware = False
        with self._lock:
            fw = self.frameworks.get(framework_id)
            if fw is None or fw.stream is None or fw.principal != principal:
                raise NotSubscribedError(f"framework {framework_id} is not subscribed; send SUBSCRIBE first")
            if stream_id is None:
                raise BadCallError("Mesos-Stream-Id", "header required (the one the SUBSCRIBE response gave)")
            if stream_id != fw.stream_id:
                raise BadCallError("Mesos-Stream-Id", f"{stream_id!r} is not the framework's current stream")
            now = self._clock()
            if isinstance(call, Accept):
                self._accept(fw, call, now)
            elif isinstance(call, Decline):
                offers, _ = self._book.take(framework_id, call.offer_ids)  # unknown ids: nothing to do
                fw.declined = True  # it turns cores down: not a gang short of them
                if fw.lost or fw.growing is not None:
                    fw.lost, fw.growing = 0, None  # it does not launch what it lost again, nor want more
                    self._announce()
                for offer in offers:
                    self._book.refuse(framework_id, offer.agent.name, offer.cores, call.refuse_seconds, now)
                    if call.refuse_seconds < LONG_REFUSAL:  # (a long one: it wants nothing now)
                        fw.refused = max(fw.refused, offer.cores)
            elif isinstance(call, Kill):
                self._kill(fw, call.task_id, now)
            elif isinstance(call, Acknowledge):
                task = fw.tasks.get(call.task_id)
                if task is not None and task.updates.ack(call.uuid):
                    self._relay_ack(task, call.uuid, now)
                    fw.flush(task, now)
            elif isinstance(call, Reconcile):
                ids = call.tasks or [t.task_id for t in fw.tasks.values() if not t.terminal]
                answers, stream = fw.latest(ids, now), fw.stream
                aware = fw.partition_aware
            elif isinstance(call, Revive):
                fw.suppressed, fw.refused, fw.narrow_since = False, 0, None
                self._book.revive(framework_id)
                self._allocate_all = True
                self._announce()
            elif isinstance(call, Suppress):
                fw.suppressed, fw.lost, fw.refused, fw.narrow_since = True, 0, 0, None
                self._announce()
            elif isinstance(call, Teardown):
                self._remove(fw, "torn down by the framework")
            elif isinstance(call, Message):
                for run in self._runs.values():  # none there: dropped, as Mesos does
                    if (run.framework_id, run.executor_id, run.agent_id) == (
                        framework_id, call.executor_id, call.agent_id
                    ) and run.stream is not None and not run.done:  # fmt: skip
                        run.stream.send(ev.record(ex.message(call.data)))
            elif isinstance(call, Request):
                fw.requested, fw.launched_at_request = call.cores, fw.launched
                self._announce()
        if isinstance(call, Reconcile) and stream is not None and answers:
            self._answers.put((stream, answers, aware, now))  # answered by the background thread, unlocked
        self._wake.set()

    # -- the executor API --------------------------------------------------------------------------------

    def executor_subscribe(self, call: ExecutorCall, stream: Stream) -> str:
        """Attach a custom executor's event stream (SUBSCRIBED, then LAUNCH); return its stream id.

        Raises
        ------
        ForbiddenError
            No executor of this framework was started with this id, or it was shut down.
        """
        with self._lock:
            run = self._run_of(call)
            if run.stream is not None:
                run.stream.close()
            run.stream, run.stream_id = stream, str(uuid.uuid4())
            fw = self.frameworks[run.framework_id]
            info = {"user": fw.info.user, "name": fw.info.name}
            parts = run.agent_id.split("/")  # <allocation>/<host>/<pid>
            host = parts[1] if len(parts) == 3 and parts[1] else self.host
            stream.send(ev.record(ex.subscribed(run, info, host)))
            if not run.launched:
                run.launched = True
                stream.send(ev.record(ex.launch(run)))
            if run.killed:
                stream.send(ev.record(ex.kill(run.task_id)))
            logger.info("mesos: executor %s of framework %s subscribed", run.run_id, run.framework_id)
            return run.stream_id

    def executor_disconnected(self, run_id: str, stream_id: str) -> None:
        """Take note that an executor's event stream closed."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None and run.stream_id == stream_id:
                run.stream = run.stream_id = None

    def executor_call(self, call: ExecutorCall) -> None:
        """Serve an executor's UPDATE or MESSAGE (answered 202 when this returns).

        Raises
        ------
        ForbiddenError
            No executor of this framework was started with this id, or it was shut down.
        BadCallError
            An UPDATE for a task that is not the executor's.
        """
        with self._lock:
            run = self._run_of(call, after_shutdown=True)
            fw = self.frameworks[run.framework_id]
            now = self._clock()
            if call.kind == "MESSAGE":
                assert call.data is not None
                fw.emit(ev.framework_message(run.agent_id, run.executor_id, call.data))
                return
            status = call.status
            assert status is not None
            if status.task_id != run.task_id:
                raise BadCallError(
                    "update.status.task_id", f"{status.task_id!r} is not this executor's task {run.task_id!r}"
                )
            task = fw.tasks.get(run.task_id)
            executor_uuid = status.uuid or b""
            if task is not None and len(task.updates) >= MAX_PENDING_UPDATES:
                raise BadCallError(
                    "update", f"{MAX_PENDING_UPDATES} updates of task {run.task_id!r} are not acknowledged"
                )
            if task is None or task.terminal:  # (already ended: nothing to tell; acknowledged at once)
                if run.stream is not None:
                    run.stream.send(ev.record(ex.acknowledged(run.task_id, executor_uuid)))
                return
            status = TaskStatus(
                status.task_id, status.state, "SOURCE_EXECUTOR", status.message, status.reason,
                run.agent_id, status.timestamp or now, None, status.data, status.labels,
            )  # fmt: skip
            fw.update(task, status, now)
            assert task.latest is not None and task.latest.uuid is not None
            run.acks[task.latest.uuid] = executor_uuid
            task.state, task.started = status.state, True
            if status.terminal:
                task.terminal = task.ended = True
                fw.ended += 1
                self._announce()
        self._wake.set()

    def _run_of(self, call: ExecutorCall, *, after_shutdown: bool = False) -> ExecutorRun:
        run = self._runs.get(call.executor_id)
        if run is None or run.framework_id != call.framework_id or run.framework_id not in self.frameworks:
            raise ForbiddenError(
                f"no executor {call.executor_id!r} of framework {call.framework_id!r} was started here"
            )
        if run.done and not after_shutdown:
            raise ForbiddenError(f"executor {call.executor_id!r} was shut down")
        return run

    def _relay_ack(self, task: MesosTask, our_uuid: bytes, now: float) -> None:
        """Tell a task's executor its update was acknowledged; shut it down once its task ended."""
        run = None if task.run_id is None else self._runs.get(task.run_id)
        if run is None:
            return
        executor_uuid = run.acks.pop(our_uuid, None)
        if executor_uuid is not None and run.stream is not None:
            run.stream.send(ev.record(ex.acknowledged(task.task_id, executor_uuid)))
        if task.terminal and not task.updates:
            self._shutdown_run(run, now)

    def _shutdown_run(self, run: ExecutorRun, now: float) -> None:
        """Send SHUTDOWN and close the executor's stream; its process is killed if still there later."""
        if run.done:
            return
        run.done, run.shutdown_at = True, now
        if run.stream is not None:
            run.stream.send(ev.record(ex.shutdown()))
            run.stream.close()

    def close(self) -> None:
        """Stop: every stream gets an ERROR and closes, launched tasks still running are killed."""
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
            for fw in list(self.frameworks.values()):
                if fw.stream is not None:
                    fw.emit(ev.error("the front door is shutting down"))
                self._remove(fw, "the front door is shutting down")
        self._wake.set()
        self._thread.join()
        self._unsubscribe()
        self._unclaim()

    # -- tasks -------------------------------------------------------------------------------------------

    def _accept(self, fw: Framework, call: Accept, now: float) -> None:
        # every task is read before any offer is used, so a malformed call (400) changes nothing
        specs = [
            (op, [task_spec(t, f"{op.path}[{i}]", group=op.group) for i, t in enumerate(op.tasks)])
            for op in call.operations
        ]
        offers, errors = self._book.take(fw.framework_id, call.offer_ids)
        plan = plan_launches(
            fw,
            specs,
            offers,
            errors,
            mem_per_core=self.mem_per_core,
            now=now,
            new_id=self._new_pool_id,
            retry_min=self.retry_min,
            endpoint=f"{self.host}:{self.port}",
            disk_per_core=self.disk_per_core,
        )
        for run, task in zip(plan.runs, [t for t in plan.tasks if t.run_id is not None], strict=True):
            run.pool_task_id = task.pool_task.task_id
            self._runs[run.run_id] = run
        for status in plan.refused:
            fw.emit(ev.update(status))
            if status.reason == "REASON_INVALID_OFFERS":  # lost before it started: launched again
                fw.lost += 1
        if plan.tasks:
            fw.starved_since = fw.narrow_since = None
            fw.refused = 0
            if fw.wide and offers and offers[0].cores < fw.wide:
                fw.wide = 0  # it runs on narrower offers: what its declines taught was wrong
            fw.lost = max(0, fw.lost - len(plan.tasks))
            if offers and offers[0].stage == fw.growing:
                fw.growing = None  # a step ends with a launch on the cores asked for it
        for task in plan.tasks:
            fw.tasks[task.task_id] = task
            fw.launched += 1
            self._by_pool_id[task.pool_task.task_id] = task
            try:
                future = self.elastic.submit_task(task.pool_task)
            except Exception as exc:  # the front door is closing, or its allocation control failed
                future = concurrent.futures.Future()
                future.set_exception(exc)
            future.add_done_callback(functools.partial(self._task_done, task.pool_task.task_id))
        if offers and not errors:
            self._book.refuse(fw.framework_id, offers[0].agent.name, plan.unused, call.refuse_seconds, now)
        self._announce()

    def _task_done(self, pool_id: str, future: concurrent.futures.Future[Any]) -> None:
        self._inbox.put((pool_id, future))
        self._wake.set()

    def _new_framework_id(self) -> str:
        """Return a framework id never issued before: random (a UUID, as Mesos' ids), not guessable."""
        while True:
            framework_id = str(uuid.uuid4())
            if framework_id not in self._issued:
                self._issued.add(framework_id)
                return framework_id

    def _new_pool_id(self) -> str:
        self._seq += 1
        return f"{POOL_PREFIX}{self.master_id[:8]}-{self._seq}"

    def _kill(self, fw: Framework, task_id: str, now: float) -> None:
        task = fw.tasks.get(task_id)
        if task is None:
            fw.reconcile([task_id], now, message="Attempted to kill an unknown task")
        elif not task.terminal:
            run = None if task.run_id is None else self._runs.get(task.run_id)
            if run is not None and not run.done and (run.stream is None or not run.launched):
                run.killed = True  # told after LAUNCH; an executor that never comes is killed with its task
            if run is not None and run.stream is not None and run.launched and not run.done:
                run.stream.send(ev.record(ex.kill(task.task_id)))  # the executor reports TASK_KILLED
            else:
                self.pool.kill(task.pool_task.task_id, f"KILL from framework {fw.framework_id}")

    def _remove(self, fw: Framework, why: str) -> None:
        for task in fw.tasks.values():
            if not task.terminal:
                self.pool.kill(task.pool_task.task_id, why)
        now = self._clock()
        for run in self._runs.values():
            if run.framework_id == fw.framework_id and not run.done:
                self._shutdown_run(run, now)
                self.pool.kill(run.pool_task_id, why)
        self._book.drop(fw.framework_id)
        if fw.stream is not None:
            fw.stream.close()
        fw.stream = fw.stream_id = None
        del self.frameworks[fw.framework_id]
        self._removed.add(fw.framework_id)
        self._announce()
        logger.info("mesos: framework %s removed: %s", fw.framework_id, why)

    def _announce(self) -> None:
        """Tell the front door how many tasks each framework stage wants to run now (see the docstring)."""
        wants = demand(self.frameworks.values())
        for stage in self._announced.keys() - wants.keys():
            wants[stage] = (0, 1)
        # a stage no framework has any more (removed) is over; a suppressed one, or a gang step that
        # ended, may want cores again, and keeps them for the idle timeout
        live = {fw.stage for fw in self.frameworks.values()}
        for stage, (n, cores) in wants.items():
            final = n == 0 and stage.split("+gang")[0] not in live
            try:
                self.elastic.expect(stage, n, cores=cores, ready=True, final=final)
            except Exception:  # (the front door may be closing)
                logger.debug("mesos: could not announce stage %s", stage, exc_info=True)
            self._announced[stage] = n

    def _on_pool_event(self, event: PoolEvent) -> None:
        """Queue what matters of a pool event and wake the thread (the pool calls it outside its lock)."""
        if isinstance(event, TaskEvent):
            if not event.task_id.startswith(POOL_PREFIX):
                self._wake.set()  # another task started or ended: cores may have freed
                return
        elif isinstance(event, AgentEvent) and event.kind is AgentEventKind.REFUSED:
            return
        self._inbox.put(event)
        self._wake.set()

    def _send_answers(self) -> None:
        """Encode and send queued RECONCILE answers in slices, without the lock (huge ones hold up nobody)."""
        while True:
            try:
                stream, answers, aware, now = self._answers.get_nowait()
            except queue.Empty:
                return
            for i in range(0, len(answers), _RECONCILE_SLICE):
                stream.send(
                    b"".join(
                        ev.record(ev.update(reconciled(task_id, latest, now, partition_aware=aware)))
                        for task_id, latest in answers[i : i + _RECONCILE_SLICE]
                    )
                )

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                self._send_answers()
                wait = self._step()
            except Exception:  # a bug must not stop every framework's offers and updates
                logger.exception("mesos: step failed; continuing")
                wait = _TICK
            self._wake.wait(wait)
            self._wake.clear()

    def _step(self) -> float:
        """Take the pool's news, rescind and make offers, resend updates, beat hearts; return the sleep."""
        items = []
        while True:
            try:
                items.append(self._inbox.get_nowait())
            except queue.Empty:
                break
        if not items and not self.frameworks:
            self._claimed = {}
            return _TICK  # nobody to offer to: leave the pool's lock alone
        agents = self.pool.agents()  # after the news: every event taken is reflected in it
        allocations = self.pool.allocations()
        with self._lock:
            now = self._clock()
            for item in items:
                self._take(item, now)
            if self._closing.is_set():
                return 0.0
            held = held_cores(self.frameworks.values())
            for offer in self._book.invalid(now, agents, held):
                self.frameworks[offer.framework_id].emit(ev.rescind(offer.offer_id))
            wanting = [
                Wanting(fw.framework_id, fw.stage)
                for fw in self.frameworks.values()
                if fw.stream is not None and not fw.suppressed
            ]
            stages = {a.alloc_id: a.stage or "*" for a in allocations}
            made = self._book.make(now, self._allocating(now, agents), wanting, held, stages)
            job_ids = {a.alloc_id: a.backend_job_id for a in allocations if a.backend_job_id}
            for framework_id, event in ev.offers(
                made, self.mem_per_core, job_ids, self.disk_per_core
            ).items():
                self.frameworks[framework_id].emit(event)
            self._learn_gangs(now, agents, held, allocations)
            self._claimed = self._claims()
            batch = self._next_allocation - now if self.allocation_interval else _TICK
            return min(self._chores(now), self.gang_wait, max(0.0, batch))

    def _claims(self) -> dict[str, int]:
        """Return the cores frameworks hold, by allocation: offered to one, or under a task launched there.

        A task's cores are its framework's until it heard that the task ended (its terminal status sent),
        and then offered to it again at once: as the Mesos allocator counts offered resources as allocated,
        they are not idle cores for the strategy, which would otherwise release a piece of a split request
        in the instant between a framework's short tasks (:meth:`Elastic.claim_cores`).
        """
        out: dict[str, int] = {}
        for offer in self._book.outstanding.values():
            out[offer.agent.alloc_id] = out.get(offer.agent.alloc_id, 0) + offer.cores
        for fw in self.frameworks.values():
            for task in fw.tasks.values():
                if not task.terminal:
                    out[task.allocation] = out.get(task.allocation, 0) + task.cores
        return out

    def _allocating(self, now: float, agents: Sequence[AgentView]) -> list[AgentView]:
        """Return the agents whose free cores may be offered now (the allocation interval, as Mesos').

        Every agent at a batch allocation (every :attr:`allocation_interval` seconds) or after a SUBSCRIBE
        or REVIVE; between them only agents never offered before (a new allocation's cores go out at once).
        """
        batch = now >= self._next_allocation or self._allocate_all or self.allocation_interval == 0
        if now >= self._next_allocation:
            self._next_allocation = now + self.allocation_interval
        self._allocate_all = False
        new = [a for a in agents if a.name not in self._seen_agents]
        self._seen_agents = {a.name for a in agents}
        return list(agents) if batch else new

    def _learn_gangs(
        self,
        now: float,
        agents: Sequence[AgentView],
        held: Mapping[str, int],
        allocations: Sequence[Allocation],
    ) -> None:
        """Take a step for each framework that looks like a gang short of cores (see ``frameworks``)."""
        free = sum(max(0, OfferBook.free(a, held)) for a in agents)
        offered = {o.framework_id for o in self._book.outstanding.values()}
        coming = {a.stage for a in allocations if a.state is AllocationState.REQUESTED}
        for fw in self.frameworks.values():
            self._learn_width(fw, now, agents, allocations)
            if self._grow_for_request(fw, allocations):
                continue
            running = any(t.started and not t.ended for t in fw.tasks.values())
            short = (
                fw.stream is not None and not fw.suppressed and not fw.declined and fw.ended == 0 and running
                and free == 0
                and fw.framework_id not in offered and fw.growing is None and fw.stage not in coming
            )  # fmt: skip
            if not short:
                fw.starved_since = None
            elif fw.starved_since is None:
                fw.starved_since = now
            elif now - fw.starved_since >= self.gang_wait:
                fw.starved_since = None
                cores = sum(t.cores for t in fw.tasks.values() if not t.ended)
                most = self.elastic.partition_cores
                if cores + fw.cores > most:
                    if not fw.gang_told:
                        fw.gang_told = True
                        logger.warning(
                            "mesos: framework %s waits with all its %d cores (a gang?) and the partition "
                            "has %d: no allocation can give it more, so a gang wider than %d cores never "
                            "runs here; it gets cores only as its own tasks end",
                            fw.framework_id, cores, most, most,
                        )  # fmt: skip
                    continue
                fw.steps += 1
                fw.growing, fw.growing_tasks, fw.starved_since = f"{fw.stage}+gang{fw.steps}", 1, None
                logger.info(
                    "mesos: framework %s waits with all its cores (a gang?): one more asked as stage %s",
                    fw.framework_id, fw.growing,
                )  # fmt: skip
                self._announce()

    def _learn_width(
        self, fw: Framework, now: float, agents: Sequence[AgentView], allocations: Sequence[Allocation]
    ) -> None:
        """Widen the tasks of a framework that declines every offer while it runs nothing (``frameworks``)."""
        own = (fw.stage, TOTAL)  # Big-Job's allocations are kept for every stage
        mine = {a.alloc_id for a in allocations if not a.ended and (a.stage or "").split("+gang")[0] in own}
        coming = any(a.pending for a in allocations if a.alloc_id in mine)
        widest = max((a.cores for a in agents if a.alloc_id in mine and not a.draining), default=0)
        narrow = (
            fw.stream is not None and not fw.suppressed and not coming and 0 < widest <= fw.refused
            and fw.cores <= widest and all(t.ended for t in fw.tasks.values())
        )  # fmt: skip
        if not narrow:
            fw.narrow_since = None
            return
        if fw.narrow_since is None:
            fw.narrow_since = now
        if now - fw.narrow_since < self.gang_wait:
            return
        fw.narrow_since = None
        limit = self.elastic.widest_task
        if widest >= limit:
            if not fw.widest_told:
                fw.widest_told = True
                logger.warning(
                    "mesos: framework %s declines every offer, %d cores the widest, and runs nothing; no "
                    "wider allocation can be had here (a task takes at most %d cores): it may never run",
                    fw.framework_id, widest, limit,
                )  # fmt: skip
            return
        fw.wide = min(2 * widest, limit)
        logger.info(
            "mesos: framework %s declines every offer, %d cores the widest, and runs nothing: its tasks "
            "are taken as %d cores wide (stage %s)", fw.framework_id, widest, fw.wide, fw.stage,
        )  # fmt: skip
        self._announce()

    def _grow_for_request(self, fw: Framework, allocations: Sequence[Allocation]) -> bool:
        """Ask for what a REQUEST wants beyond the cores its stage's allocations already have; True if so.

        A strategy sizes a stage's allocation once: one asked before the REQUEST arrived (the framework's
        first announced task) is narrower than the REQUEST, and would stay so. An allocation kept for the
        whole run (Big-Job's) counts as the stage's own, but its free cores are left to the never-stall
        rule (:mod:`elastic.control.liveness`), which counts them when it sizes the step's allocation.
        Only while the framework has tasks running: its stage, which announces what is left of the
        REQUEST, runs nothing otherwise, and the never-stall rule asks for the cores its allocations lack
        under every strategy (a step as well would ask for them twice).
        """
        left = -(-fw.requested // fw.cores) - (fw.launched - fw.launched_at_request)  # tasks still asked for
        if fw.growing is not None or fw.suppressed or fw.requested == 0 or left <= 1:
            return False
        busy = sum(t.cores for t in fw.tasks.values() if not t.ended)
        if busy == 0:
            return False  # its stage runs nothing: the never-stall rule asks for what its cores lack
        own = (fw.stage, TOTAL)  # Big-Job's allocations are kept for every stage
        mine = [a for a in allocations if not a.ended and (a.stage or "").split("+gang")[0] in own]
        if not any(a.stage in own for a in mine) or any(a.stage not in own for a in mine if a.pending):
            return False  # its stage has no allocation yet (sized from the REQUEST), or a step is coming
        if any(a.stage == TOTAL for a in mine):
            # the never-stall rule gives the step what the run's allocations lack beyond their free
            # cores: count only the cores of the stage's own (a step's), and the tasks running there
            named = {a.alloc_id for a in mine if a.stage != TOTAL}
            busy = sum(t.cores for t in fw.tasks.values() if not t.ended and t.allocation in named)
            mine = [a for a in mine if a.alloc_id in named]
        short = -(-(left * fw.cores - (sum(a.cores for a in mine) - busy)) // fw.cores)
        if short <= 0:
            return False
        fw.steps += 1
        fw.growing, fw.growing_tasks, fw.starved_since = f"{fw.stage}+gang{fw.steps}", short, None
        logger.info("mesos: framework %s requested more cores: %d tasks asked as stage %s",
                    fw.framework_id, short, fw.growing)  # fmt: skip
        self._announce()
        return True

    def _take(self, item: PoolEvent | tuple[str, concurrent.futures.Future[Any]], now: float) -> None:
        """Apply one piece of news from the pool (an event, or a launched task's finished future)."""
        if isinstance(item, tuple):
            pool_id, future = item
            task = self._by_pool_id.pop(pool_id, None)
            fw = None if task is None else self.frameworks.get(task.framework_id)
            run = None if task is None or task.run_id is None else self._runs.pop(task.run_id, None)
            if run is not None:
                run.done = True
                if run.stream is not None:
                    run.stream.close()
            if task is not None and fw is not None and not task.terminal:
                ended = outcome_status(task.task_id, task.agent_id, future, now, started=task.started)
                if run is not None and ended.state in ("TASK_FINISHED", "TASK_FAILED"):
                    ended = TaskStatus(
                        task.task_id, "TASK_FAILED", "SOURCE_AGENT",
                        f"the executor ended before its task did ({ended.message})",
                        "REASON_EXECUTOR_TERMINATED", task.agent_id, now,
                    )  # fmt: skip
                if ended.state == "TASK_LOST":
                    self._lost_on.add(task.agent_id)  # the agent went under it: a FAILURE follows
                    fw.lost += 1  # it will likely launch it again: its demand holds it meanwhile
                fw.update(task, ended, now)
                task.terminal = True
                fw.ended += 1
                self._announce()
        elif isinstance(item, TaskEvent):
            task = self._by_pool_id.get(item.task_id)
            fw = None if task is None else self.frameworks.get(task.framework_id)
            if task is not None and item.state in _ENDED:
                task.ended = True  # its cores are offered once the framework was told (the future follows)
            status = progress_status(task.task_id, task.agent_id, item.state, item.time) if task else None
            run = None if task is None or task.run_id is None else self._runs.get(task.run_id)
            if run is not None and status is not None and (run.launched or status.state == "TASK_RUNNING"):
                task.started = task.started or status.state == "TASK_RUNNING"  # type: ignore[union-attr]
                status = None  # the executor's process runs: the task's statuses are the executor's
            if task is not None and fw is not None and status is not None and status.state != task.state:
                task.state = status.state
                task.started = task.started or status.state == "TASK_RUNNING"
                fw.update(task, status, now)
        elif isinstance(item, AgentEvent) and item.kind in (AgentEventKind.LOST, AgentEventKind.LEFT):
            for offer in self._book.drop_agent(item.agent):  # its offers end first
                self.frameworks[offer.framework_id].emit(ev.rescind(offer.offer_id))
            busy = item.agent in self._lost_on or any(
                t.agent_id == item.agent and not t.terminal
                for fw in self.frameworks.values()
                for t in fw.tasks.values()
            )
            self._lost_on.discard(item.agent)
            released = item.kind is AgentEventKind.LEFT or item.alloc_id in self._drained
            if busy or not released:
                for fw in self.frameworks.values():
                    fw.emit(ev.failure(item.agent))
            else:
                logger.info("mesos: agent %s left with nothing running (no FAILURE)", item.agent)
        elif isinstance(item, AllocationEvent) and item.state is AllocationState.DRAINING:
            self._drained.add(item.alloc_id)  # released: its agents' end is routine, not a failure
        # other allocation events only wake the thread: the offer rule rescinds offers of draining ones

    def _chores(self, now: float) -> float:
        """Resend due updates, send heartbeats, remove frameworks gone too long; return the next sleep."""
        wake = now + _TICK
        for fw in list(self.frameworks.values()):
            if fw.stream is None:
                assert fw.disconnected_at is not None
                deadline = fw.disconnected_at + fw.info.failover_timeout
                if now >= deadline:
                    self._remove(fw, f"not back within its failover timeout ({fw.info.failover_timeout:g} s)")
                else:
                    wake = min(wake, deadline)
                continue
            wake = min(wake, fw.chores(now, self.heartbeat_interval))
        for run in self._runs.values():
            if run.shutdown_at is not None:
                deadline = run.shutdown_at + ex.SHUTDOWN_GRACE + 5.0
                if now >= deadline:
                    run.shutdown_at = None
                    self.pool.kill(run.pool_task_id, "the executor did not exit after SHUTDOWN")
                else:
                    wake = min(wake, deadline)
        expiry = self._book.next_expiry(now)
        if expiry is not None:
            wake = min(wake, expiry)
        return max(0.0, wake - now)
