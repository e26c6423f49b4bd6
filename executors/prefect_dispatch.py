"""One Prefect flow run's task runs on one front door: hold, send, finish, retry, cancel.

:class:`FlowRunDispatch` is the live half of :class:`~elastic.executors.prefect_runner.ElasticTaskRunner`
(one per
flow run; the runner itself is configuration). It owns the front door it sends task runs to.

- **Holding.** Prefect submits a task at once, its inputs still running. A task run with unfinished
  upstream futures (among its parameters or ``wait_for``) is *held* here, never on a worker; the front door
  is told of it as demand of its stage after its inputs' stages (:meth:`Elastic.expect`), so a strategy
  sees stage k+1 while stage k runs and ASA can request its allocation ahead. Once its inputs are done,
  every future in its parameters is replaced by its final state and the run goes to the pool.
- **Finishing.** Every Prefect future resolves to a final state, whatever happens: the worker's state
  (Completed, Failed, Cached, NotReady...), or one the runner decides and sends to the API: Crashed when
  its worker or allocation died and the task has no retries left, Cancelled when the flow run was
  cancelled or failed before it ran.
- **Retries.** The pool retries nothing here (``max_retries=0``); a run lost with its allocation, or
  whose worker process died, is a crashed attempt under the task's own policy: AwaitingRetry (its
  ``retry_delay_seconds``, jitter and ``retry_condition_fn``), then sent again to whichever allocation
  has cores, with the retries left; Crashed once they are spent.
- **Ending.** :meth:`close` waits for every task run and then shuts the front door down (every
  allocation released); :meth:`cancel` cancels what waits, ends what runs by releasing every allocation
  at once, and marks all of it Cancelled.

Done callbacks of pool futures run on the pool's I/O thread; they only queue work for this object's
thread, which builds and sends held runs and finishes ended ones.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import datetime
import functools
import logging
import queue
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from prefect.futures import PrefectConcurrentFuture

from elastic.errors import ElasticError
from elastic.executors.prefect_runs import (
    Placement,
    final_state,
    new_task_run,
    pickle_annotations_by_value,
    retry_delay,
    set_state,
    upstream_futures,
    with_final_states,
)
from elastic.executors.prefect_worker import TaskRunReply, TaskRunRequest, run_task_run
from elastic.front.door import Elastic
from elastic.pool.tasks import Task, TaskCrashedError, TaskLostError

__all__ = ["ElasticPrefectFuture", "FlowRunDispatch"]

logger = logging.getLogger(__name__)


class ElasticPrefectFuture(PrefectConcurrentFuture[Any]):
    """The Prefect future of a task run on Elastic; resolves to the run's final state (never raises).

    Attributes
    ----------
    stage : str
        The run's stage (a task submitted with this future as an input is demand of a later stage).
    """

    def __init__(self, task_run_id: Any, wrapped_future: concurrent.futures.Future[Any], stage: str) -> None:
        super().__init__(task_run_id, wrapped_future)
        self.stage = stage


@dataclass(eq=False, slots=True)
class _Run:
    task: Any
    task_run: Any
    parameters: dict[str, Any]
    wait_for: list[Any] | None
    context: bytes
    env: dict[str, str]
    placement: Placement
    outer: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)
    waiting: int = 0
    held: bool = False
    losses: int = 0
    retries: int = 0  # the task's own policy (losses count against it)


class FlowRunDispatch:
    """Task runs of one flow run on one front door (see the module docstring).

    Parameters
    ----------
    elastic : Elastic
        The front door (owned: :meth:`close` and :meth:`cancel` shut it down).
    """

    def __init__(self, elastic: Elastic) -> None:
        pickle_annotations_by_value()
        self.elastic = elastic
        self._lock = threading.Lock()
        self._runs: dict[Any, _Run] = {}
        self._held: dict[str, int] = defaultdict(int)
        self._after: dict[str, set[str]] = defaultdict(set)
        self._cores: dict[str, int] = defaultdict(lambda: 1)
        self._runtime: dict[str, float] = {}  # the longest runtime estimate of a held run, by stage
        self._timers: dict[_Run, threading.Timer] = {}
        self._cancelled: str | None = None
        self._stopping = False
        self._stopped = threading.Event()
        self._stopper: int | None = None  # the thread that shuts down
        self._closed = False
        self._inbox: queue.SimpleQueue[tuple[str, _Run, Any] | None] = queue.SimpleQueue()
        # The states this thread decides (Cancelled, Crashed...) are sent as events, and Prefect's events
        # worker names an event's flow run from the context of the thread that emits it, else from the
        # context the worker itself was started in: another flow run's once a process has run one
        # (prefect/events/worker.py, _prepare_item and _handle). Run it in the flow run's context (this
        # object is made in the flow's thread), or its task runs end up recorded under that other one.
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._serve,), name="elastic-prefect", daemon=True
        )
        self._thread.start()

    # -- from the flow thread --------------------------------------------------------------------------

    def submit(
        self,
        task: Any,
        parameters: dict[str, Any],
        wait_for: Any,
        dependencies: Any,
        placement: Placement,
        context: bytes,
        env: dict[str, str],
    ) -> ElasticPrefectFuture:
        """Create the task run, then send it to the pool now or hold it until its inputs are done.

        ``context`` is Prefect's serialised context (pickled), ``env`` the Prefect settings for the worker.
        """
        wait_for = list(wait_for) if wait_for else None
        task_run = new_task_run(task, parameters, wait_for, dependencies)
        run = _Run(task, task_run, parameters, wait_for, context, env, placement, retries=task.retries)
        future = ElasticPrefectFuture(task_run.id, run.outer, placement.stage)
        pending = [f for f in upstream_futures(parameters, wait_for) if not _done(f)]
        with self._lock:
            cancelled = self._cancelled
            if cancelled is None:
                self._runs[task_run.id] = run
                if pending:
                    run.waiting, run.held = len(pending), True
                    stage = placement.stage
                    self._held[stage] += 1
                    self._cores[stage] = max(self._cores[stage], placement.cores)
                    if placement.runtime is not None:
                        self._runtime[stage] = max(self._runtime.get(stage, 0.0), placement.runtime)
                    self._after[stage].update(s for f in pending if (s := getattr(f, "stage", None)))
                    self._announce(stage)
        if cancelled is not None:
            self._finish(run, _cancelled(cancelled), decided=True)
        elif not pending:
            self._dispatch(run)
        else:
            for f in pending:
                f.add_done_callback(lambda _f, run=run: self._upstream_done(run))
        return future

    # -- holding and sending ---------------------------------------------------------------------------

    def _announce(self, stage: str) -> None:
        """Tell the front door how many runs of ``stage`` are held, after which stages (lock held)."""
        self.elastic.expect(
            stage,
            self._held[stage],
            cores=self._cores[stage],
            after=sorted(self._after[stage] - {stage}),
            runtime=self._runtime.get(stage),
        )

    def _upstream_done(self, run: _Run) -> None:
        with self._lock:
            run.waiting -= 1
            ready = run.waiting == 0
        if ready:
            self._inbox.put(("dispatch", run, None))

    def _dispatch(self, run: _Run) -> None:
        """Send a run whose inputs are done to the pool, its futures replaced by their final states."""
        if self._cancelled is not None:
            self._finish(run, _cancelled(self._cancelled), decided=True)
            return
        p = run.placement
        try:
            request = TaskRunRequest(
                run.task,
                run.task_run,
                with_final_states(run.parameters),
                [final_state(f) for f in run.wait_for] if run.wait_for else None,
                run.context,
                run.env,
            )
            task = Task.call(
                run_task_run, (request,), cores=p.cores, estimate=p.runtime, stage=p.stage, isolate=p.isolate
            )
        except Exception as exc:  # e.g. parameters that cannot be pickled: the run fails, with the reason
            self._finish(run, _failed(exc), decided=True)
            return
        with self._lock:
            try:
                door = self.elastic.submit_task(task)
            except ElasticError as exc:  # the front door was shut down meanwhile
                door = concurrent.futures.Future()
                door.set_exception(exc)
            if run.held:
                run.held = False
                self._held[p.stage] -= 1
            if p.stage in self._held:
                self._announce(p.stage)  # queuing a task counts one announced task as arrived
        door.add_done_callback(functools.partial(self._door_done, run))

    # -- finishing -------------------------------------------------------------------------------------

    def _door_done(self, run: _Run, door: concurrent.futures.Future[Any]) -> None:
        self._inbox.put(("done", run, door))  # on the pool's I/O thread: hand over at once

    def _serve(self) -> None:
        while True:
            item = self._inbox.get()
            if item is None:
                return
            self._handle(item)

    def _handle(self, item: tuple[str, _Run, Any]) -> None:
        kind, run, door = item
        try:
            if kind == "dispatch":
                self._dispatch(run)
            else:
                self._ended(run, door)
        except Exception as exc:  # never leave a run without a final state
            logger.exception("prefect runner: handling %s of task run %s failed", kind, run.task_run.id)
            self._finish(run, _crashed(f"the Elastic task runner failed: {exc!r}", exc), decided=True)

    def _ended(self, run: _Run, door: concurrent.futures.Future[Any]) -> None:
        if door.cancelled():
            self._finish(run, _cancelled(self._cancelled or "its task was cancelled"), decided=True)
            return
        exc = door.exception()
        if exc is None:
            reply: TaskRunReply = door.result()
            _send_logs(reply.logs)
            self._finish(run, reply.state, decided=False)
        elif self._cancelled is not None:
            self._finish(run, _cancelled(self._cancelled), decided=True)
        elif isinstance(exc, (TaskLostError, TaskCrashedError)):
            if not self._retry(run, exc):
                self._finish(run, _crashed(f"{type(exc).__name__}: {exc}", exc), decided=True)
        else:
            self._finish(run, _crashed(f"{type(exc).__name__}: {exc}", exc), decided=True)

    def _retry(self, run: _Run, exc: BaseException) -> bool:
        """Send a run lost with its allocation (or worker) again if the task's policy allows; True if so."""
        from prefect.states import AwaitingRetry, Crashed

        if run.losses >= run.retries:
            return False
        task = run.task
        condition = getattr(task, "retry_condition_fn", None)
        if condition is not None and not condition(task, run.task_run, Crashed(message=str(exc), data=exc)):
            return False
        delay = retry_delay(task, run.losses)
        run.losses += 1
        run.task_run.run_count += 1  # the lost attempt ran
        delays = task.retry_delay_seconds
        run.task = task.with_options(
            retries=run.retries - run.losses,
            retry_delay_seconds=(delays[1:] or delays) if isinstance(delays, list) else delays,
        )
        when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=delay)
        message = (
            f"Attempt crashed ({type(exc).__name__}: {exc}); retry {run.losses}/{run.retries} on any "
            f"allocation with cores" + (f" in {delay:.1f} s" if delay else "")
        )
        set_state(run.task_run, AwaitingRetry(scheduled_time=when, message=message))
        if delay <= 0:
            self._inbox.put(("dispatch", run, None))
            return True
        timer = threading.Timer(delay, self._retry_due, args=(run,))
        timer.daemon = True
        with self._lock:
            self._timers[run] = timer
        timer.start()
        return True

    def _retry_due(self, run: _Run) -> None:
        with self._lock:
            self._timers.pop(run, None)
        self._inbox.put(("dispatch", run, None))

    def _finish(self, run: _Run, state: Any, *, decided: bool) -> None:
        if decided:
            set_state(run.task_run, state)
        with self._lock:
            self._runs.pop(run.task_run.id, None)
            if run.held:
                run.held = False
                self._held[run.placement.stage] -= 1
                if not self._closed:
                    with contextlib.suppress(ElasticError):
                        self._announce(run.placement.stage)
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            run.outer.set_result(state)

    # -- ending ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for every task run, then release every allocation (the flow run completed)."""
        try:
            while True:
                with self._lock:
                    outers = [r.outer for r in self._runs.values()]
                if not outers:
                    break
                concurrent.futures.wait(outers)
        except BaseException:
            self.cancel("the flow run was interrupted")
            raise
        self._shutdown(cancel=False)

    def cancel(self, reason: str) -> None:
        """Cancel every task run: held and queued ones now, running ones by releasing every allocation.

        Returns once the front door has shut down, also when another thread started the shutdown (the
        flow run's cancellation watcher, then the runner's exit): the caller reads its result next.
        """
        with self._lock:
            again = self._cancelled is not None or self._closed
            if not again:
                self._cancelled, self._stopper = reason, threading.get_ident()
        if again:
            if threading.get_ident() != self._stopper:
                self._stopped.wait()
            return
        with self._lock:
            held = [r for r in self._runs.values() if r.held]
            timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()
        for run in held:
            self._finish(run, _cancelled(reason), decided=True)
        self._shutdown(cancel=True)

    def _shutdown(self, *, cancel: bool) -> None:
        with self._lock:
            first, self._stopping = not self._stopping, True
            if first and self._stopper is None:
                self._stopper = threading.get_ident()
        if not first:  # another thread is shutting down: wait until it is done
            self._stopped.wait()
            return
        try:
            self.elastic.shutdown(wait=not cancel, cancel_pending=cancel)
        finally:
            with self._lock:
                self._closed = True
            self._inbox.put(None)
            self._thread.join()
            while True:  # what the last results queued (their dependants) ends here
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    self._handle(item)
            with self._lock:
                left = list(self._runs.values())
            for run in left:  # e.g. a retry that was waiting for its delay
                self._finish(run, _cancelled(self._cancelled or "the flow run ended first"), decided=True)
            self._stopped.set()


def _done(future: Any) -> bool:
    wrapped = getattr(future, "wrapped_future", None)
    return isinstance(wrapped, concurrent.futures.Future) and wrapped.done()


def _send_logs(logs: list[dict[str, Any]]) -> None:
    if not logs:
        return
    from prefect.logging.handlers import emit_api_log

    for log in logs:
        emit_api_log(log)


def _cancelled(reason: str) -> Any:
    from prefect.states import Cancelled

    return Cancelled(message=reason)


def _crashed(message: str, exc: BaseException) -> Any:
    from prefect.states import Crashed

    return Crashed(message=message, data=exc)


def _failed(exc: BaseException) -> Any:
    from prefect.states import Failed

    return Failed(message=f"Task run could not be sent to a worker: {type(exc).__name__}: {exc}", data=exc)
