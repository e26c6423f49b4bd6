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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from elastic.allocations import Allocation
from elastic.backends.base import BatchBackend
from elastic.control.controller import AllocationController, learn_runtimes
from elastic.control.execution import RunResult
from elastic.control.live import LiveDemand
from elastic.control.pool_execution import PoolExecution
from elastic.errors import ConfigError, ElasticError
from elastic.front import signals
from elastic.front.progress import ProgressLogger, RunProgress
from elastic.front.settings import Settings, settings_from
from elastic.front.setup import (
    driver_identity,
    plan_to_json,
    recover_abandoned,
    remembered_plan,
    resolve_backend,
    resolve_store,
    resolve_strategy,
)
from elastic.front.tasks import DependencyError, options_of, resolve_arguments
from elastic.metrics import Event, EventKind, MetricsRecorder
from elastic.pool.pool import Pool, PoolClosedError
from elastic.pool.tasks import Task
from elastic.site import SiteConfig, describe
from elastic.strategies.base import StageView, Strategy
from elastic.strategies.knowledge import Knowledge, MemoryHistory
from elastic.workflow import Workflow

if TYPE_CHECKING:
    from elastic.learners.base import WaitPredictor
    from elastic.store import Store
    from elastic.store.resilient import ResilientStore

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

    The options are those of :class:`~elastic.front.settings.Settings` (documented there once), given as
    one object (``settings=``) or as keywords; a keyword given (not None) replaces the object's value.

    Parameters
    ----------
    backend : {"local", "mock", "slurm"}, BatchBackend or None, default None
        Where allocations come from (default: the settings', ``"local"``).
    strategy : str, Strategy or None, default None
        When and how big to request allocations (default: the settings', ``"asa"``).
    settings : Settings or None, default None
        Every option at once (:class:`~elastic.front.settings.Settings`); None: ``Settings()``.
    workflow, store, learner, max_cores, job_cores, idle_timeout, poll_interval : optional
        As the :class:`~elastic.front.settings.Settings` fields of the same names (``workflow`` None:
        ``"default"``).
    max_retries, drain_margin, speedup, name, user, site, progress : optional
        As the :class:`~elastic.front.settings.Settings` fields (``max_retries`` None: 2; ``name`` None:
        ``"elastic"``; ``progress`` None: True, see :mod:`elastic.front.progress`). On Slurm, the site's
        options are checked with ``sbatch --test-only`` here, before any allocation.
    **pool_options
        Passed to :class:`~elastic.pool.pool.Pool`: ``workers``, ``worker_memory``, ``prefetch_seconds``,
        ``bind``, ``port``, ``advertise``, ``secret_dir``, ``heartbeat_interval``, ``heartbeat_timeout``.
    """

    def __init__(
        self,
        backend: str | BatchBackend | None = None,
        strategy: str | Strategy | None = None,
        *,
        settings: Settings | None = None,
        workflow: str | Workflow | None = None,
        store: Store | ResilientStore | str | bool | None = None,
        learner: str | WaitPredictor | None = None,
        max_cores: int | None = None,
        job_cores: int | None = None,
        idle_timeout: float | None = None,
        poll_interval: float | None = None,
        max_retries: int | None = None,
        drain_margin: float | None = None,
        speedup: float | None = None,
        name: str | None = None,
        user: str | None = None,
        site: SiteConfig | None = None,
        progress: bool | ProgressLogger | None = None,
        **pool_options: Any,
    ) -> None:
        self.settings = settings_from(
            settings,
            backend=backend,
            strategy=strategy,
            workflow=workflow,
            store=store,
            learner=learner,
            max_cores=max_cores,
            job_cores=job_cores,
            idle_timeout=idle_timeout,
            poll_interval=poll_interval,
            max_retries=max_retries,
            drain_margin=drain_margin,
            speedup=speedup,
            name=name,
            user=user,
            site=site,
            progress=progress,
            **pool_options,
        )
        """The settings in force (:class:`~elastic.front.settings.Settings`, keywords applied)."""
        s = self.settings
        backend, strategy, store, learner, speedup = s.backend, s.strategy, s.store, s.learner, s.speedup
        workflow = "default" if s.workflow is None else s.workflow
        pool_options = dict(s.pool)
        from elastic.learners.choice import DEFAULT_WAIT_LEARNER, make_wait_learner, shared_name
        from elastic.strategies import STRATEGY_NAMES, strategy_learner

        if learner is None:
            named = strategy if isinstance(strategy, str) and strategy in STRATEGY_NAMES else None
            learner = strategy_learner(named) if named is not None else DEFAULT_WAIT_LEARNER
        if isinstance(learner, str):
            waits, learner_name = make_wait_learner(learner), shared_name(learner)
        else:  # a learner object: its state is shared under its kind's name
            from elastic.learners.ewma import LogEWMA

            waits, learner_name = learner, "ewma" if isinstance(learner, LogEWMA) else "asa"
        self._strategy = resolve_strategy(strategy)
        self._closed = threading.Event()
        self._ended = threading.Event()
        self._end_lock = threading.Lock()
        self._ender: threading.Thread | None = None
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
        resolved = resolve_backend(backend, speedup=speedup, site=s.site)
        self._backend, self._speedup = resolved.backend, resolved.speedup
        self.site = resolved.site
        """The site configuration in force (None: none given, not on Slurm)."""
        if resolved.owned and hasattr(self._backend, "close"):
            self._cleanup.append(self._backend.close)
        try:
            check_site = getattr(self._backend, "check_site", None)  # Slurm: sbatch --test-only
            if callable(check_site):
                check_site()
            self._store: ResilientStore | None
            self._store, close_store = resolve_store(store)
            if self._store is not None and close_store:
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
                idle_timeout=s.idle_timeout,
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
            if self.site is not None:
                _note_site(self.site, self._backend.name)
                if self.site.python is not None:
                    pool_options = {**pool_options, "python": self.site.python}
            self._pool = Pool(
                max_retries=2 if s.max_retries is None else s.max_retries,
                drain_margin=s.drain_margin / self._speedup,
                **pool_options,
            )
            self._execution = PoolExecution(
                self._backend, speedup=self._speedup, pool=self._pool, on_event=self._poke.set
            )
            self._cleanup.append(self._execution.close)
            self._partition = self._backend.partition()
            partition = self._partition.cores
            self._controller = AllocationController(
                self._strategy,
                self._backend,
                self._execution,
                self._knowledge,
                self._demand,
                record=self._record,
                poll_interval=s.poll_interval or (10.0 if self._backend.name == "slurm" else 30.0),
                name="elastic" if s.name is None else s.name,
                user=s.user,
                max_cores=min(partition, s.max_cores or partition),
                job_cores=s.job_cores,
            )
            self._run_id = None
            self._jobs: list[str] = []
            if self._store is not None:
                recover_abandoned(self._store, self._backend)
                self._run_id = self._store.record_run(
                    self._name,
                    self._strategy.name,
                    self._backend.name,
                    params={"frontdoor": True, "driver": driver_identity()},
                )
        except BaseException:
            self._release()
            raise
        self._progress: RunProgress | None = None
        progress = True if s.progress is None else s.progress
        if progress is not False:
            self._progress = RunProgress(None if progress is True else progress, view=self.view)
            self._progress.start()
            self._cleanup.append(self._progress.stop)
        self._record(Event(self._backend.now(), EventKind.RUN_START, note=self._strategy.name))
        self._thread = threading.Thread(target=self._control, name="elastic-control", daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)
        signals.install()
        self._cleanup.insert(0, signals.uninstall)  # run last
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
        self,
        stage: str,
        tasks: int,
        *,
        cores: int = 1,
        after: Sequence[str] = (),
        ready: bool = False,
        runtime: float | None = None,
    ) -> None:
        """Announce ``tasks`` tasks of ``stage`` that exist but are not submitted yet (front-ends call it).

        The count replaces the last one announced for the stage; strategies can then size and pre-submit the
        stage's allocation before its first task is submitted. ``ready``: the tasks could run now and wait
        only for cores (a Mesos framework waiting for offers), so the stage is ready at once. ``runtime``:
        their expected runtime in seconds, if known (the walltime of the stage's first allocation is asked
        from it, as for submitted tasks' estimates).

        Raises
        ------
        ConfigError
            ``tasks``, ``cores`` or ``runtime`` is not a number in range.
        """
        _check(
            isinstance(tasks, int) and not isinstance(tasks, bool) and tasks >= 0,
            f"expect: tasks must be a whole number >= 0, got {tasks!r}",
        )
        _check(
            isinstance(cores, int) and not isinstance(cores, bool) and cores >= 1,
            f"expect: cores must be a whole number >= 1, got {cores!r}",
        )
        _check(
            runtime is None
            or (isinstance(runtime, (int, float)) and not isinstance(runtime, bool) and 0 <= runtime < 1e9),
            f"expect: runtime must be seconds >= 0 (or None), got {runtime!r}",
        )
        self._demand.expect(stage, tasks, cores=cores, after=after, ready=ready, runtime=runtime)
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

    def _unservable(self, stage: str, cores: int, estimate: float | None) -> Fut[Any] | None:
        """Return a failed future for a task no allocation could ever run; None if one could."""
        most = self._controller.max_cores
        limit = self._partition.max_walltime
        why = None
        if most is not None and cores > most:
            why = (
                f"task of stage {stage!r} asks for {cores} cores, but no allocation may have more than "
                f"{most} (the partition's size, or max_cores); ask for fewer cores or a larger partition"
            )
        elif estimate is not None and limit is not None and estimate * self._speedup > limit:
            why = (
                f"task of stage {stage!r} is expected to run {estimate:.0f} s, longer than the partition's "
                f"time limit ({limit / self._speedup:.0f} s); no allocation can run it to its end"
            )
        if why is None:
            return None
        logger.error("front door: %s", why)
        future: Fut[Any] = concurrent.futures.Future()
        future.set_exception(ConfigError(why))
        return future

    def _queue(self, task: Task) -> Fut[Any]:
        self._check_open()
        refused = self._unservable(task.stage, task.cores, task.estimate)
        if refused is not None:
            return refused
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
        refused = self._unservable(stage, cores, estimate)
        if refused is not None:
            return refused
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
        with self._record_lock:
            self._recorder.add(event)
            if event.kind not in _TASK_KINDS:  # task events are folded in, not kept
                self._timeline.append(event)
        if event.kind is EventKind.ALLOC_SUBMIT and event.job_id is not None:
            self._remember_job(event.job_id)
        if self._progress is not None:
            self._progress.event(event)

    def _remember_job(self, job_id: str) -> None:
        """Keep the run's batch job ids in the store, so a run whose driver was killed can be cleaned up.

        The next front door on the same store finds such a run
        (:func:`~elastic.front.setup.recover_abandoned`) and cancels these jobs; a store that cannot be
        written only loses that safety net.
        """
        self._jobs.append(job_id)
        if self._store is None or self._run_id is None:
            return
        try:
            self._store.add_run_params(self._run_id, {"jobs": list(self._jobs)})
        except ElasticError as exc:
            logger.warning("front door: cannot record batch job %s in the store: %s", job_id, exc)

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

        Notes
        -----
        Any thread may call it, and several at once: the run ends once, and each call returns when it
        has ended. From a future's done callback (the thread that completes futures, which the end must
        wait for and join) it returns at once and the run ends in a thread of its own, ``elastic-shutdown``
        (not a daemon: the program waits for it); :attr:`result` is set when it is done.
        """
        cancel = cancel_pending or cancel_futures
        if status is None:
            status = "cancelled" if cancel else "completed"
        _check(status in _END_STATUSES, f"status must be one of {', '.join(_END_STATUSES)}, got {status!r}")
        if self._internal_thread():
            threading.Thread(
                target=self._end,
                args=(status,),
                kwargs={"wait": wait, "cancel": cancel},
                name="elastic-shutdown",
            ).start()
            return
        self._end(status, wait=wait, cancel=cancel)

    def _internal_thread(self) -> bool:
        """Tell whether the caller is a thread the end must wait for or join (control, the pool's I/O)."""
        return threading.current_thread() is self._thread or self._pool.in_io_thread()

    def _claim_end(self) -> bool:
        """Tell whether this thread ends the run; if another one is ending it, return False once it has.

        An internal thread (:meth:`_internal_thread`) is not made to wait. A thread that started the end
        and was interrupted (Ctrl-C while waiting for tasks) may end the run again, as may any thread
        once the one ending it is gone.
        """
        me = threading.current_thread()
        while True:
            with self._end_lock:
                ender = self._ender
                if ender is None or ender is me or not ender.is_alive():
                    self._ender = me
                    return True
            if self._internal_thread() or self._ended.wait(0.2):
                return False

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
        if not self._claim_end():
            return
        if self._closed.is_set():
            self._ended.set()
            return
        if cancel:
            for future in list(self._outstanding):
                future.cancel()  # only those that have not started
        if wait:
            concurrent.futures.wait(list(self._outstanding))
        # From here on the run is released: no new batch job (a step under way sees the demand finished),
        # and a SIGTERM or SIGHUP arriving now waits until every allocation is released.
        with signals.deferred():
            self._demand.finish()
            self._closed.set()
            self._poke.set()
            self._thread.join()
            atexit.unregister(self._at_exit)
            if self._error is not None:
                status = "failed"
            elif signals.received() is not None:  # SIGTERM/SIGHUP: however the program shut us down
                status = "interrupted"
            result = None
            try:
                result = self._finish(status)
            finally:
                self._release()
                # set once everything is released: a caller that sees the result sees no pool left either
                self.result = result
                self._ended.set()

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
        if self._progress is not None:
            self._progress.event(Event(end, EventKind.RUN_END, note=status))
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
                params={"plan": _plan_seen(plan, stages) if status == "completed" else None},
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


def _plan_seen(plan: Workflow, stages: Sequence[StageView]) -> list[dict[str, Any]] | None:
    """Return the stages of ``plan`` that had a task in this run, as the store keeps plans (None: none did).

    A stage remembered from an earlier run or declared, that got no task this time (the script changed),
    is not carried on to the next run; a run in which no task ran leaves no plan at all (no placeholder).
    """
    ran = {s.name for s in stages if s.ready}
    kept = [
        dataclasses.replace(s, depends_on=tuple(d for d in (s.depends_on or ()) if d in ran))
        for s in plan.stages
        if s.name in ran
    ]
    return plan_to_json(Workflow(plan.name, tuple(kept))) if kept else None


_END_STATUSES = ("completed", "cancelled", "failed", "interrupted")
"""How a run may end (the store's run statuses)."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(f"Elastic: {message}")


def _note_site(site: SiteConfig, backend: str) -> None:
    """Log the site settings in force; warn about those the backend does not use (all but ``python``)."""
    settings = describe(site)
    if not settings:
        return
    logger.info("front door: site settings %s", settings)
    unused = sorted(set(settings) - {"python"})
    if backend != "slurm" and unused:
        logger.warning(
            "front door: site settings %s apply to Slurm jobs only; on the %s backend only python is used",
            unused,
            backend,
        )


def check_settings(**settings: Any) -> None:
    """Refuse the settings :class:`Elastic` would refuse, without starting anything.

    Kept for callers of the keyword form: build a :class:`~elastic.front.settings.Settings` instead (it
    checks itself when built). ``pool_options`` is the mapping of pool options (:attr:`Settings.pool`).

    Raises
    ------
    ConfigError
        The first bad setting, named with its value and what is allowed.
    """
    pool = settings.pop("pool_options", None) or {}
    settings_from(None, **settings, **pool)
