"""The front door: one long-lived object that takes tasks from user code and runs them on pilot allocations.

:class:`Elastic` owns a batch backend, the pool its allocations' agents join, a strategy, the wait learner
and the store. A background thread runs allocation control
(:class:`~elastic.control.controller.AllocationController` reading a
:class:`~elastic.control.live.LiveDemand`): it requests, watches and releases allocations as the strategy
decides, while user code submits tasks at any time and gets :class:`concurrent.futures.Future` objects back.
It is a :class:`concurrent.futures.Executor`: ``submit(fn, *args, **kwargs)``, ``map``, ``shutdown`` and
``with`` behave as for Python's own executors.

- A task's stage is its function's name, or what :func:`~elastic.front.tasks.task` says; futures among its
  arguments are waited for and replaced by their results (a dataflow: its stage then depends on theirs).
- :meth:`Elastic.submit_task` takes a prepared :class:`~elastic.pool.tasks.Task` (a shell command, cores,
  an estimate, isolation) and ``after`` futures to wait for.
- A failed task fails its own future (the original exception, the remote traceback as ``__cause__``); a
  task lost with its allocation runs again, up to ``max_retries`` times, then fails with
  :class:`~elastic.pool.tasks.TaskLostError`. Nothing a task does stops the front door.
- :meth:`Elastic.shutdown` (or leaving the ``with`` block) waits for the tasks, releases every allocation,
  stops every agent and records the run's metrics (those of ``elastic run``) in the store, with the stages
  seen, so the next run of the same workflow name knows its plan from the start. Leaving the block by an
  exception (Ctrl-C included), or the interpreter exiting first, cancels what did not start and ends the
  run ``interrupted``.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from elastic.allocations import Allocation, request_of
from elastic.backends.base import BatchBackend
from elastic.control.controller import AllocationController, learn_runtimes
from elastic.control.execution import RunResult
from elastic.control.live import LiveDemand
from elastic.control.pool_execution import PoolExecution
from elastic.errors import ConfigError, ElasticError
from elastic.front.setup import (
    plan_to_json,
    remembered_plan,
    resolve_backend,
    resolve_store,
    resolve_strategy,
)
from elastic.front.tasks import DependencyError, options_of, resolve_arguments
from elastic.metrics import Event, EventKind, MetricsRecorder
from elastic.pool.pool import Pool, PoolClosedError
from elastic.pool.tasks import Task
from elastic.strategies.base import StageView, Strategy
from elastic.strategies.knowledge import Knowledge, MemoryHistory
from elastic.workflow import Workflow

if TYPE_CHECKING:
    from elastic.store import Store
    from learners.base import WaitPredictor

__all__ = ["Elastic", "FrontDoorView", "check_settings"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
Fut = concurrent.futures.Future

_MIN_STEP = 0.02
"""Real seconds between two allocation-control steps at least (task events come by thousands)."""


_TASK_KINDS = frozenset(
    {
        EventKind.TASK_START,
        EventKind.TASK_END,
        EventKind.TASK_LOST,
        EventKind.TASK_FAILED,
        EventKind.TASK_DROPPED,
    }
)


@dataclass(frozen=True, slots=True)
class FrontDoorView:
    """What the front door is doing now (:meth:`Elastic.view`)."""

    now: float
    """Backend seconds."""
    stages: tuple[StageView, ...]
    allocations: tuple[Allocation, ...]
    busy_cores: dict[str, int]
    """Cores running tasks, by allocation id."""
    queued: int
    """Tasks waiting for cores in the pool."""


class Elastic(concurrent.futures.Executor):
    """Run tasks from user code on pilot allocations chosen by a strategy (see the module docstring).

    Parameters
    ----------
    backend : {"local", "mock", "slurm"} or BatchBackend, default "local"
        Where allocations come from (:mod:`elastic.front.setup`).
    strategy : str or Strategy, default "asa"
        When and how big to request allocations.
    workflow : str or Workflow, default "default"
        The workflow's name (its runtime history and remembered plan are kept under it), or a declared plan
        of its stages (runtimes optional, seconds).
    store : None, False, str or Store, default None
        Where runs, runtimes, waits and learner state are kept: the default store, none, a URL, a store.
    learner : str, WaitPredictor or None, default None
        Wait learner by name (:data:`learners.choice.WAIT_LEARNERS`), or a wait learner object (e.g.
        ``ASAEstimator(grid=..., ...)``: anything with ``predict(key)`` and ``observe(key, wait)``); None =
        the strategy's own (:func:`~elastic.strategies.base.strategy_learner`; ``ewma`` for a strategy
        object).
    max_cores : int or None, default None
        No allocation wider (default: the backend's partition).
    job_cores : int or None, default None
        Most cores in one batch job: a wider allocation is requested as several jobs of at most this many
        cores, each released as soon as its cores are not needed (a stage's straggling tail, a narrow stage
        after a wide one). Fewer idle core-hours, more jobs to queue. None: one job per allocation.
    idle_timeout : float, default 300.0
        Backend seconds a stage with nothing left to run keeps its allocations when nothing comes after it.
    poll_interval : float or None, default None
        Backend seconds between polls of allocation states (default 10 on Slurm, 30 otherwise).
    max_retries : int, default 2
        Losses a task survives before its future fails.
    drain_margin : float, default 30.0
        Backend seconds before an allocation's walltime end when it takes no new task.
    speedup : float or None, default None
        ``backend="mock"`` only: simulated seconds per real second (default 60).
    name : str, default "elastic"
        Prefix of batch job names.
    user : str or None, default None
        Owner of the jobs (mock backend accounting).
    **pool_options
        Passed to :class:`~elastic.pool.pool.Pool`: ``workers``, ``worker_memory``, ``prefetch_seconds``,
        ``bind``, ``port``, ``advertise``, ``secret_dir``, ``heartbeat_interval``, ``heartbeat_timeout``.
    """

    def __init__(
        self,
        backend: str | BatchBackend = "local",
        strategy: str | Strategy = "asa",
        *,
        workflow: str | Workflow = "default",
        store: Store | str | bool | None = None,
        learner: str | WaitPredictor | None = None,
        max_cores: int | None = None,
        job_cores: int | None = None,
        idle_timeout: float = 300.0,
        poll_interval: float | None = None,
        max_retries: int = 2,
        drain_margin: float = 30.0,
        speedup: float | None = None,
        name: str = "elastic",
        user: str | None = None,
        **pool_options: Any,
    ) -> None:
        check_settings(
            learner=learner,
            idle_timeout=idle_timeout,
            drain_margin=drain_margin,
            poll_interval=poll_interval,
            max_cores=max_cores,
            job_cores=job_cores,
            pool_options=pool_options,
        )
        from elastic.strategies import STRATEGY_NAMES, strategy_learner
        from learners.choice import DEFAULT_WAIT_LEARNER, make_wait_learner, shared_name

        if learner is None:
            named = strategy if isinstance(strategy, str) and strategy in STRATEGY_NAMES else None
            learner = strategy_learner(named) if named is not None else DEFAULT_WAIT_LEARNER
        if isinstance(learner, str):
            waits, learner_name = make_wait_learner(learner), shared_name(learner)
        else:  # a learner object: its state is shared under its kind's name
            from learners.ewma import LogEWMA

            waits, learner_name = learner, "ewma" if isinstance(learner, LogEWMA) else "asa"
        self._strategy = resolve_strategy(strategy)
        self._closed = threading.Event()
        self._poke = threading.Event()
        self._cleanup: list[Callable[[], None]] = []
        self._outstanding: set[Fut[Any]] = set()
        self._stage_of: weakref.WeakKeyDictionary[Fut[Any], str] = weakref.WeakKeyDictionary()
        self._error: BaseException | None = None
        self._timeline: list[Event] = []
        self._recorder = MetricsRecorder()
        self._record_lock = threading.Lock()
        self._ctl_lock = threading.Lock()
        self.result: RunResult | None = None
        """The run's result, once :meth:`shutdown` returned."""
        resolved = resolve_backend(backend, speedup=speedup)
        self._backend, self._speedup = resolved.backend, resolved.speedup
        if resolved.owned and hasattr(self._backend, "close"):
            self._cleanup.append(self._backend.close)
        try:
            self._store: Store | None
            self._store, own_store = resolve_store(store)
            if own_store and self._store is not None:
                self._cleanup.append(self._store.close)
            self._name = workflow.name if isinstance(workflow, Workflow) else str(workflow)
            plan = workflow if isinstance(workflow, Workflow) else None
            if plan is None and self._store is not None:
                plan = remembered_plan(self._store, self._name)
            self._demand = LiveDemand(
                self._name,
                record=self._record,
                clock=self._backend.now,
                plan=plan,
                idle_timeout=idle_timeout,
                speedup=self._speedup,
            )
            self._knowledge = Knowledge(
                self._demand.plan,
                waits=waits,
                history=self._store if self._store is not None else MemoryHistory(),
                wait_store=self._store,
                backend=self._backend.name,
                max_walltime=self._backend.partition().max_walltime,
                shared=self._store,
                learner_name=learner_name,
            )
            self._pool = Pool(
                max_retries=max_retries, drain_margin=drain_margin / self._speedup, **pool_options
            )
            self._execution = PoolExecution(
                self._backend, speedup=self._speedup, pool=self._pool, on_event=self._poke.set
            )
            self._cleanup.append(self._execution.close)
            partition = self._backend.partition().cores
            self._controller = AllocationController(
                self._strategy,
                self._backend,
                self._execution,
                self._knowledge,
                self._demand,
                record=self._record,
                poll_interval=poll_interval or (10.0 if self._backend.name == "slurm" else 30.0),
                name=name,
                user=user,
                max_cores=min(partition, max_cores or partition),
                job_cores=job_cores,
            )
            self._run_id = None
            if self._store is not None:
                self._run_id = self._store.record_run(
                    self._name, self._strategy.name, self._backend.name, params={"frontdoor": True}
                )
        except BaseException:
            self._release()
            raise
        self._record(Event(self._backend.now(), EventKind.RUN_START, note=self._strategy.name))
        self._thread = threading.Thread(target=self._control, name="elastic-control", daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)
        logger.info(
            "front door: %s on %s, pool at %s", self._strategy.name, self._backend.name, self._pool.address
        )

    # -- submitting ------------------------------------------------------------------------------------

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Fut[T]:
        """Run ``fn(*args, **kwargs)`` on a worker; return its future.

        The stage is ``fn``'s name unless :func:`~elastic.front.tasks.task` says otherwise. Futures among
        the arguments (top level) are waited for and replaced by their results; if one failed, this task
        does not run and fails with :class:`~elastic.front.tasks.DependencyError`.
        """
        opts = options_of(fn)
        deps = [a for a in (*args, *kwargs.values()) if isinstance(a, concurrent.futures.Future)]

        def make() -> Task:
            a, kw = resolve_arguments(args, kwargs)
            return Task.call(
                fn, a, kw, cores=opts.cores, estimate=opts.runtime, stage=opts.stage, isolate=opts.isolate
            )

        if not deps:
            return self._queue(make())
        return self._hold(opts.stage, opts.cores, opts.runtime, deps, make, ordering_only=False)

    def submit_task(self, task: Task, *, after: Iterable[Fut[Any]] = ()) -> Fut[Any]:
        """Run a prepared task (a shell command, cores, an estimate, isolation), after the futures ``after``.

        ``after`` only orders: the task runs once they are done, whatever their outcome.
        """
        deps = list(after)
        if not deps:
            return self._queue(task)
        return self._hold(task.stage, task.cores, task.estimate, deps, lambda: task, ordering_only=True)

    def expect(
        self, stage: str, tasks: int, *, cores: int = 1, after: Sequence[str] = (), ready: bool = False
    ) -> None:
        """Announce ``tasks`` tasks of ``stage`` that exist but are not submitted yet (front-ends call it).

        The count replaces the last one announced for the stage; strategies can then size and pre-submit the
        stage's allocation before its first task is submitted. ``ready``: the tasks could run now and wait
        only for cores (a Mesos framework waiting for offers), so the stage is ready at once.
        """
        self._demand.expect(stage, tasks, cores=cores, after=after, ready=ready)
        self._poke.set()

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise PoolClosedError("cannot submit: the front door was shut down")
        if self._error is not None:
            raise ElasticError(f"cannot submit: allocation control failed ({self._error})") from self._error

    def _track(self, future: Fut[T], stage: str) -> Fut[T]:
        self._outstanding.add(future)
        future.add_done_callback(self._outstanding.discard)
        self._stage_of[future] = stage
        return future

    def _queue(self, task: Task) -> Fut[Any]:
        self._check_open()
        self._demand.queued(task.stage, task.cores, task.estimate)
        future = self._track(self._pool.submit(task), task.stage)
        self._poke.set()
        return future

    def _hold(
        self,
        stage: str,
        cores: int,
        estimate: float | None,
        deps: list[Fut[Any]],
        make: Callable[[], Task],
        *,
        ordering_only: bool,
    ) -> Fut[Any]:
        self._check_open()
        after = [s for s in (self._stage_of.get(d) for d in deps) if s is not None]
        self._demand.held(stage, cores, estimate, after)
        outer: Fut[Any] = self._track(concurrent.futures.Future(), stage)
        left = [len(deps)]
        lock = threading.Lock()

        def one_done(_: Fut[Any]) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            self._release_held(outer, stage, deps, make, ordering_only)

        for d in deps:
            d.add_done_callback(one_done)
        return outer

    def _release_held(
        self, outer: Fut[Any], stage: str, deps: list[Fut[Any]], make: Callable[[], Task], ordering_only: bool
    ) -> None:
        """Queue a held task whose inputs are done (or fail it, or drop it when cancelled meanwhile)."""
        if outer.cancelled() or self._closed.is_set():
            self._demand.released(stage, queued=False)
            outer.cancel()
            return
        try:
            if not ordering_only:
                for d in deps:
                    if d.cancelled() or d.exception() is not None:
                        raise DependencyError(stage, d)
            task = make()
        except Exception as exc:
            self._demand.released(stage, queued=False)
            if outer.set_running_or_notify_cancel():
                outer.set_exception(exc)
            return
        self._demand.released(stage, queued=True)
        try:
            self._pool.submit(task, future=outer)
        except PoolClosedError as exc:
            if outer.set_running_or_notify_cancel():
                outer.set_exception(exc)
        self._poke.set()

    # -- watching --------------------------------------------------------------------------------------

    def view(self) -> FrontDoorView:
        """Return what runs where now: stages, allocations, busy cores, queued tasks."""
        with self._ctl_lock:
            now = self._backend.now()
            allocations = self._controller.allocations
        queued = len(self._pool.queued())
        return FrontDoorView(now, self._demand.stages(), allocations, self._pool.busy_cores(), queued)

    @property
    def pool(self) -> Pool:
        """The pool (its address, secret file, events)."""
        return self._pool

    @property
    def outstanding(self) -> int:
        """Tasks submitted and not finished yet (held for their inputs, queued or running)."""
        return len(self._outstanding)

    # -- allocation control ----------------------------------------------------------------------------

    def _record(self, event: Event) -> None:
        if event.kind is EventKind.ALLOC_SUBMIT and event.request is None and event.allocation is not None:
            # a batch job's submission names the request it is a piece of (the controller exists by then)
            event = dataclasses.replace(
                event, request=request_of(self._controller.allocations, event.allocation)
            )
        with self._record_lock:
            self._recorder.add(event)
            if event.kind not in _TASK_KINDS:  # task events are folded in, not kept
                self._timeline.append(event)

    def _control(self) -> None:
        failures = 0
        while not self._closed.is_set():
            wake: float | None = None
            try:
                with self._ctl_lock:
                    now = self._backend.now()
                    wake = self._controller.step(now)
                failures = 0
            except Exception as exc:  # a backend hiccup (sbatch timed out...): try again, then give up
                failures += 1
                logger.exception("front door: allocation control failed (%d in a row)", failures)
                if failures >= 5:
                    self._error = exc
                    self._fail_outstanding(exc)
                    return
                now = self._backend.now()
            delay = 1.0 if wake is None else max(0.0, (wake - now) / self._speedup)
            self._poke.wait(delay)
            self._poke.clear()
            self._closed.wait(_MIN_STEP)

    def _fail_outstanding(self, exc: BaseException) -> None:
        error = ElasticError(f"allocation control failed: {exc}; the front door stops taking tasks")
        for future in list(self._outstanding):
            if not future.done():
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    future.set_exception(error)

    # -- ending ----------------------------------------------------------------------------------------

    def shutdown(
        self,
        wait: bool = True,
        *,
        cancel_futures: bool = False,
        cancel_pending: bool = False,
        status: str | None = None,
    ) -> None:
        """Stop taking tasks, release every allocation and record the run (:attr:`result`).

        Parameters
        ----------
        wait : bool, default True
            Wait until every submitted task has finished first.
        cancel_pending, cancel_futures : bool, default False
            Cancel the tasks that have not started (both names mean the same; the second is
            :meth:`concurrent.futures.Executor.shutdown`'s).
        status : {"completed", "cancelled", "failed", "interrupted"} or None, default None
            How the run is recorded (default: ``"cancelled"`` when cancelling, else ``"completed"``), e.g.
            ``"failed"`` when the program stops because a task failed.
        """
        cancel = cancel_pending or cancel_futures
        if status is None:
            status = "cancelled" if cancel else "completed"
        _check(status in _END_STATUSES, f"status must be one of {', '.join(_END_STATUSES)}, got {status!r}")
        self._end(status, wait=wait, cancel=cancel)

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            self._end("completed", wait=True, cancel=False)
        else:
            self._end("interrupted", wait=False, cancel=True)

    def _at_exit(self) -> None:
        if not self._closed.is_set():
            logger.warning("front door: the program ended before shutdown(); ending the run as interrupted")
            self._end("interrupted", wait=False, cancel=True)

    def _end(self, status: str, *, wait: bool, cancel: bool) -> None:
        if self._closed.is_set():
            return
        if cancel:
            for future in list(self._outstanding):
                future.cancel()  # only those that have not started
        if wait:
            concurrent.futures.wait(list(self._outstanding))
        self._closed.set()
        self._poke.set()
        self._thread.join()
        atexit.unregister(self._at_exit)
        if self._error is not None:
            status = "failed"
        try:
            self.result = self._finish(status)
        finally:
            self._release()

    def _finish(self, status: str) -> RunResult:
        self._demand.close()
        now = self._backend.now()
        self._controller.take_events(now)
        self._demand.update(now)
        self._controller.shutdown(now)  # cancels every allocation: their running tasks are lost
        end = self._backend.now()
        with self._record_lock:
            for task in self._recorder.running_tasks:  # left running when the run stopped
                logger.info("front door: task attempt %s was still running at the end", task)
            self._recorder.end_running(end)
            self._recorder.add(Event(end, EventKind.RUN_END, note=status))
            self._timeline.append(Event(end, EventKind.RUN_END, note=status))
        plan = self._demand.plan
        stages = self._demand.stages()
        width = max((s.width for s in stages), default=1)  # (no stage: nothing was submitted)
        learn_runtimes(self._knowledge, stages, status=status, end=end, width=width)
        metrics = self._recorder.metrics(stages=plan.names)
        if self._store is not None and self._run_id is not None:
            summary = {k: (None if v != v else v) for k, v in metrics.summary().items()}
            self._store.finish_run(
                self._run_id,
                status,
                summary,
                params={"plan": plan_to_json(plan) if status == "completed" else None},
            )
        logger.info("front door: run %s, makespan %.0f s", status, metrics.makespan)
        return RunResult(self._name, self._strategy.name, status, tuple(self._timeline), metrics)

    def _release(self) -> None:
        self._closed.set()
        for close in reversed(self._cleanup):
            try:
                close()
            except Exception:
                logger.exception("front door: closing %r failed", close)
        self._cleanup.clear()


_END_STATUSES = ("completed", "cancelled", "failed", "interrupted")
"""How a run may end (the store's run statuses)."""

_POOL_OPTIONS = frozenset(
    {
        "workers",
        "worker_memory",
        "prefetch_seconds",
        "bind",
        "port",
        "advertise",
        "secret_dir",
        "heartbeat_interval",
        "heartbeat_timeout",
        "events_kept",
    }
)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(f"Elastic: {message}")


def check_settings(
    *,
    learner: object = None,
    idle_timeout: float = 300.0,
    drain_margin: float = 30.0,
    poll_interval: float | None = None,
    max_cores: int | None = None,
    job_cores: int | None = None,
    pool_options: Mapping[str, Any] | None = None,
) -> None:
    """Refuse the settings :class:`Elastic` would refuse, without starting anything (front-ends check early).

    Raises
    ------
    ConfigError
        The first bad setting, named with its value and what is allowed.
    """
    from learners.choice import WAIT_LEARNERS

    if isinstance(learner, str):
        _check(
            learner in WAIT_LEARNERS,
            f"learner must be one of {', '.join(WAIT_LEARNERS)} (or None: the strategy's own), "
            f"got {learner!r}",
        )
    elif learner is not None:  # None: the strategy's own
        _check(
            callable(getattr(learner, "predict", None)) and callable(getattr(learner, "observe", None)),
            f"learner must be a policy name or have predict(key) and observe(key, wait), got {learner!r}",
        )
    _check(
        0 <= idle_timeout < float("inf"),
        f"idle_timeout must be finite seconds >= 0, got {idle_timeout!r}",
    )
    _check(
        0 <= drain_margin < float("inf"),
        f"drain_margin must be finite seconds >= 0, got {drain_margin!r}",
    )
    _check(
        poll_interval is None or 0 < poll_interval < float("inf"),
        f"poll_interval must be finite seconds > 0, got {poll_interval!r}",
    )
    _check(max_cores is None or max_cores >= 1, f"max_cores must be >= 1 or None, got {max_cores!r}")
    _check(
        job_cores is None or (isinstance(job_cores, int) and job_cores >= 1),
        f"job_cores must be a whole number of cores >= 1 or None, got {job_cores!r}",
    )
    unknown = set(pool_options or {}) - _POOL_OPTIONS
    _check(not unknown, f"unknown options {sorted(unknown)}; allowed: {', '.join(sorted(_POOL_OPTIONS))}")
