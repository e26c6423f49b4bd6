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

Here: the front door's life (submitting, the control thread, the view and the end). Its parts are built
and wired by :mod:`~elastic.front.assembly`; tasks coming in are :mod:`~elastic.front.intake`'s, the run's
record (events, metrics, the store's run row) :mod:`~elastic.front.record`'s.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from elastic.allocations import Allocation
from elastic.backends.base import BatchBackend
from elastic.control.controller import AllocationController, learn_runtimes
from elastic.control.execution import RunResult
from elastic.errors import ConfigError, LimitReachedError
from elastic.front import signals
from elastic.front.assembly import assemble
from elastic.front.progress import ProgressLogger, RunProgress
from elastic.front.settings import Settings, SubmissionLimit, check_settings, settings_from
from elastic.metrics import Event, EventKind
from elastic.pool.pool import Pool
from elastic.pool.tasks import Task
from elastic.site import SiteConfig
from elastic.strategies.base import StageView, Strategy
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
    max_retries, drain_margin, speedup, name, user, site, submission_rate, progress : optional
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
        submission_rate: float | SubmissionLimit | None = None,
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
            submission_rate=submission_rate,
            progress=progress,
            **pool_options,
        )
        """The settings in force (:class:`~elastic.front.settings.Settings`, keywords applied)."""
        s = self.settings
        self._closed = threading.Event()
        self._ended = threading.Event()
        self._end_lock = threading.Lock()
        self._ender: threading.Thread | None = None
        self._poke = threading.Event()
        self._cleanup: list[Callable[[], None]] = []
        self._ctl_lock = threading.Lock()
        self.result: RunResult | None = None
        """The run's result, once :meth:`shutdown` returned."""
        try:
            parts = assemble(s, poke=self._poke, closed=self._closed, cleanup=self._cleanup)
        except BaseException:
            self._release()
            raise
        self._strategy, self._backend, self._speedup = parts.strategy, parts.backend, parts.speedup
        self.site = parts.site
        """The site configuration in force (None: none given, not on Slurm)."""
        self._store, self._record, self._name = parts.store, parts.record, parts.name
        self._demand, self._knowledge, self._pool = parts.demand, parts.knowledge, parts.pool
        self._partition, self._execution = parts.partition, parts.execution
        self._controller: AllocationController = parts.controller
        self._intake = parts.intake
        self._progress: RunProgress | None = None
        progress = True if s.progress is None else s.progress
        if progress is not False:
            self._progress = RunProgress(None if progress is True else progress, view=self.view)
            self._record.progress = self._progress
            self._progress.start()
            self._cleanup.append(self._progress.stop)
        self._record.add(Event(self._backend.now(), EventKind.RUN_START, note=self._strategy.name))
        self._thread = threading.Thread(target=self._control, name="elastic-control", daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)
        _end_on_signal_before_threads_join(self)
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
        return self._intake.call(fn, args, kwargs)

    def submit_task(self, task: Task, *, after: Iterable[Fut[Any]] = ()) -> Fut[Any]:
        """Run a prepared task (a shell command, cores, an estimate, isolation), after the futures ``after``.

        ``after`` only orders: the task runs once they are done, whatever their outcome.
        """
        return self._intake.prepared(task, after)

    def expect(
        self,
        stage: str,
        tasks: int,
        *,
        cores: int = 1,
        after: Sequence[str] = (),
        ready: bool = False,
        runtime: float | None = None,
        final: bool = False,
    ) -> None:
        """Announce ``tasks`` tasks of ``stage`` that exist but are not submitted yet (front-ends call it).

        The count replaces the last one announced for the stage; strategies can then size and pre-submit the
        stage's allocation before its first task is submitted. ``ready``: the tasks could run now and wait
        only for cores (a Mesos framework waiting for offers), so the stage is ready at once. ``runtime``:
        their expected runtime in seconds, if known (the walltime of the stage's first allocation is asked
        from it, as for submitted tasks' estimates). ``final`` with no tasks: none will come from this
        front-end any more (a Mesos framework removed), so the stage completes as soon as nothing of it is
        outstanding, without waiting ``idle_timeout``, and its allocations go.

        Raises
        ------
        ConfigError
            ``tasks``, ``cores`` or ``runtime`` is not a number in range.
        """
        self._intake.expect(stage, tasks, cores=cores, after=after, ready=ready, runtime=runtime, final=final)

    # -- watching --------------------------------------------------------------------------------------

    def view(self) -> FrontDoorView:
        """Return what runs where now: stages, allocations, busy cores, queued tasks."""
        with self._ctl_lock:
            now = self._backend.now()
            allocations = self._controller.allocations
        queued = len(self._pool.queued())
        return FrontDoorView(now, self._demand.stages(), allocations, self._pool.busy_cores(), queued)

    def tasks_taken(self) -> dict[str, int]:
        """Return how many tasks of each stage the front door took so far (the live demand's counts).

        Held, queued, running, done or failed; not the announced ones, nor one refused at once. A
        front-end that announces what it sees (:meth:`expect`) reads it before it looks and after, to take
        off the tasks it submitted meanwhile.
        """
        return self._demand.taken()

    def claim_cores(self, source: Callable[[], Mapping[str, int]]) -> Callable[[], None]:
        """Count the cores ``source()`` names (by allocation id) as in use by a front-end's own placement.

        For a front-end whose users place their tasks themselves (a Mesos framework launches on the cores
        it is offered): such cores run nothing the pool sees, but are not idle, and the strategy does not
        release them as idle (:meth:`~elastic.control.pool_execution.PoolExecution.claim`). ``source`` is
        called from allocation control's thread; it must be quick and take no lock that is held while
        this front door is called. Returns a function that stops counting it.
        """
        return self._execution.claim(source)

    @property
    def widest_task(self) -> int:
        """The most cores one task may take: one allocation's most (``max_cores``), within one node."""
        most = self._controller.max_cores or self._partition.cores
        node = self._partition.node_cores
        return most if node is None else min(most, node)

    @property
    def partition_cores(self) -> int:
        """The cores of the partition: the most the run's allocations can hold together."""
        return self._partition.cores

    @property
    def pool(self) -> Pool:
        """The pool (its address, secret file, events)."""
        return self._pool

    @property
    def outstanding(self) -> int:
        """Tasks submitted and not finished yet (held for their inputs, queued or running)."""
        return len(self._intake.outstanding)

    # -- allocation control ----------------------------------------------------------------------------

    def _control(self) -> None:
        failures = 0
        while not self._closed.is_set():
            wake: float | None = None
            try:
                with self._ctl_lock:
                    now = self._backend.now()
                    wake = self._controller.step(now)
                failures = 0
            except LimitReachedError as exc:  # too many allocations: trying again cannot help
                logger.error("front door: %s; failing every outstanding task", exc)
                self._intake.fail_all(exc)
                return
            except Exception as exc:  # a backend hiccup (sbatch timed out...): try again, then give up
                failures += 1
                logger.exception("front door: allocation control failed (%d in a row)", failures)
                if failures >= 5:
                    self._intake.fail_all(exc)
                    return
                now = self._backend.now()
            delay = 1.0 if wake is None else max(0.0, (wake - now) / self._speedup)
            self._poke.wait(delay)
            self._poke.clear()
            self._closed.wait(_MIN_STEP)

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
            Wait until every submitted task has finished first. False ends the run at once: tasks still
            running are lost (:class:`~elastic.pool.pool.PoolClosedError`), unlike
            :meth:`concurrent.futures.Executor.shutdown`, whose pending tasks go on.
        cancel_pending, cancel_futures : bool, default False
            Cancel the tasks that have not started (both names mean the same; the second is
            :meth:`concurrent.futures.Executor.shutdown`'s).
        status : {"completed", "cancelled", "failed", "interrupted"} or None, default None
            How the run is recorded (default: ``"cancelled"`` when cancelling, or when not waiting for
            tasks still outstanding, else ``"completed"``), e.g.
            ``"failed"`` when the program stops because a task failed.

        Notes
        -----
        Any thread may call it, and several at once: the run ends once, and each call returns when it
        has ended. From a future's done callback (the thread that completes futures, which the end must
        wait for and join) it returns at once and the run ends in a thread of its own, ``elastic-shutdown``
        (not a daemon: the program waits for it); :attr:`result` is set when it is done.
        """
        cancel = cancel_pending or cancel_futures
        if status is None:  # not waiting for tasks still outstanding cuts them short too
            status = "cancelled" if cancel or (not wait and self._intake.outstanding) else "completed"
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
        self._intake.stop_taking()
        if cancel:
            for future in list(self._intake.outstanding):
                future.cancel()  # only those that have not started
        stopped: BaseException | None = None
        if wait:
            try:
                concurrent.futures.wait(list(self._intake.outstanding))
            except BaseException as exc:  # Ctrl-C (or a signal) while waiting: end the run interrupted,
                stopped, status = exc, "interrupted"  # then let the exception go on
                for future in list(self._intake.outstanding):
                    future.cancel()
        # From here on the run is released: no new batch job (a step under way sees the demand finished),
        # and a SIGTERM or SIGHUP arriving now waits until every allocation is released.
        with signals.deferred():
            self._demand.finish()
            self._closed.set()
            self._poke.set()
            self._thread.join()
            atexit.unregister(self._at_exit)
            if self._intake.error is not None:
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
        if stopped is not None:
            raise stopped

    def _finish(self, status: str) -> RunResult:
        self._demand.close()
        now = self._backend.now()
        self._controller.take_events(now)
        self._demand.update(now)
        self._controller.shutdown(now)  # cancels every allocation: their running tasks are lost
        end = self._backend.now()
        self._record.end(status, end)
        plan, stages = self._demand.plan, self._demand.stages()
        width = max((s.width for s in stages), default=1)  # (no stage: nothing was submitted)
        learn_runtimes(self._knowledge, stages, status=status, end=end, width=width)
        return self._record.finish(self._name, self._strategy.name, status, plan, stages)

    def _release(self) -> None:
        self._closed.set()
        for close in reversed(self._cleanup):
            try:
                close()
            except Exception:
                logger.exception("front door: closing %r failed", close)
        self._cleanup.clear()


def _end_on_signal_before_threads_join(door: Elastic) -> None:
    """End ``door``'s run when the interpreter shuts down after SIGTERM or SIGHUP, before it joins threads.

    :mod:`atexit` hooks run after the interpreter has joined every non-daemon thread: a user thread
    blocked on a task's result kept a SIGTERMed program, and its batch jobs, alive until the task was
    done (or the batch system's SIGKILL came, leaving the jobs behind). Hooks registered with
    ``threading._register_atexit`` (as :mod:`concurrent.futures` does) run before that join. Only after a
    signal: on a normal exit a non-daemon thread may still be using the run, and the :mod:`atexit` hook
    ends it once that thread is done. The door is held weakly, so a closed one is not kept alive.
    """
    ref = weakref.ref(door)

    def end() -> None:
        live = ref()
        if live is not None and signals.received() is not None:
            live._at_exit()

    with contextlib.suppress(RuntimeError):  # the interpreter is already shutting down
        threading._register_atexit(end)  # type: ignore[attr-defined]


_END_STATUSES = ("completed", "cancelled", "failed", "interrupted")
"""How a run may end (the store's run statuses)."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(f"Elastic: {message}")
