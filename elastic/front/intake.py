"""Tasks coming in at the front door: refused, queued in the pool, or held until their inputs are done.

:class:`Intake` is the part of :class:`~elastic.front.door.Elastic` that user threads call through
``submit``, ``submit_task`` and ``expect``. For each task it

- refuses one no allocation could ever run (more cores than an allocation may have or a node has, or a
  longer estimate than the partition's time limit): its future fails with
  :class:`~elastic.errors.ConfigError` at once;
- counts it in its stage of the live demand (:class:`~elastic.control.live.LiveDemand`: queued, or held
  after the stages of its inputs) and hands it to the pool (:meth:`~elastic.pool.pool.Pool.submit`), whose
  future the caller gets; a task with futures to wait for gets a future of its own, completed by the pool
  once the task was queued there when its inputs are done;
- keeps every future not done yet (:attr:`Intake.outstanding`), for the end of the run to wait for or
  cancel, and wakes allocation control (``poke``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from elastic.control.live import LiveDemand
from elastic.errors import ConfigError, ElasticError
from elastic.front.tasks import DependencyError, options_of, resolve_arguments
from elastic.pool.pool import Pool, PoolClosedError
from elastic.pool.tasks import Task

__all__ = ["Intake"]

logger = logging.getLogger("elastic.front.door")

T = TypeVar("T")
Fut = concurrent.futures.Future


class Intake:
    """Tasks from user threads into the live demand and the pool (see the module docstring).

    Parameters
    ----------
    pool : Pool
        Where tasks are queued.
    demand : LiveDemand
        The stages' counts the strategy reads.
    poke : threading.Event
        Set to wake allocation control when the demand changed.
    closed : threading.Event
        Set when the front door stops taking tasks.
    max_cores : int or None
        The most cores an allocation may have (None: no limit).
    max_walltime : float or None
        The partition's time limit in backend seconds (None: none).
    speedup : float
        Backend seconds per real second (task estimates are real seconds).
    node_cores : int or None, default None
        Cores of one node where jobs are placed on nodes (a task runs inside one node; None: no limit).
    """

    def __init__(
        self,
        pool: Pool,
        demand: LiveDemand,
        *,
        poke: threading.Event,
        closed: threading.Event,
        max_cores: int | None,
        max_walltime: float | None,
        speedup: float,
        node_cores: int | None = None,
    ) -> None:
        self._pool, self._demand, self._poke, self._closed = pool, demand, poke, closed
        self._max_cores, self._max_walltime, self._speedup = max_cores, max_walltime, speedup
        self._node_cores = node_cores
        self.outstanding: set[Fut[Any]] = set()
        """Futures of the tasks submitted and not done yet."""
        self._stage_of: weakref.WeakKeyDictionary[Fut[Any], str] = weakref.WeakKeyDictionary()
        self.error: BaseException | None = None
        """Why allocation control failed (None: it did not); no task is taken once it is set."""
        self._stopped = threading.Event()

    def call(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Fut[T]:
        """Run ``fn(*args, **kwargs)`` once the futures among its arguments are done (``Elastic.submit``)."""
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

    def prepared(self, task: Task, after: Iterable[Fut[Any]]) -> Fut[Any]:
        """Run ``task`` once the futures ``after`` are done, whatever their outcome (``submit_task``)."""
        deps = list(after)
        if not deps:
            return self._queue(task)
        return self._hold(task.stage, task.cores, task.estimate, deps, lambda: task, ordering_only=True)

    def expect(
        self,
        stage: str,
        tasks: int,
        *,
        cores: int,
        after: Sequence[str],
        ready: bool,
        runtime: float | None,
        final: bool = False,
    ) -> None:
        """Check and announce tasks not submitted yet (``Elastic.expect``, which documents it).

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
            self._node_cores is None or cores <= self._node_cores,
            f"expect: tasks of stage {stage!r} ask for {cores} cores, but a node has {self._node_cores} and "
            "a task runs inside one node; ask for fewer cores or use a partition with wider nodes",
        )
        _check(
            runtime is None
            or (isinstance(runtime, (int, float)) and not isinstance(runtime, bool) and 0 <= runtime < 1e9),
            f"expect: runtime must be seconds >= 0 (or None), got {runtime!r}",
        )
        self._demand.expect(stage, tasks, cores=cores, after=after, ready=ready, runtime=runtime, final=final)
        self._poke.set()

    def fail_all(self, exc: BaseException) -> None:
        """Take no more tasks, and fail every outstanding one: allocation control failed with ``exc``."""
        self.error = exc
        error = ElasticError(f"allocation control failed: {exc}; the front door stops taking tasks")
        for future in list(self.outstanding):
            if not future.done():
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    future.set_exception(error)

    def stop_taking(self) -> None:
        """Refuse every task submitted from now on, as the run ends (held tasks already taken still run).

        Set as ``shutdown()`` begins, before it waits: a task submitted while it waits would run on
        allocations about to be released, and keep the wait going (``concurrent.futures`` refuses it too).
        """
        self._stopped.set()

    def _check_open(self) -> None:
        if self._stopped.is_set() and not self._closed.is_set():
            raise PoolClosedError("cannot submit: the front door is shutting down")
        if self._closed.is_set():
            raise PoolClosedError("cannot submit: the front door was shut down")
        if self.error is not None:
            raise ElasticError(f"cannot submit: allocation control failed ({self.error})") from self.error

    def _track(self, future: Fut[T], stage: str) -> Fut[T]:
        self.outstanding.add(future)
        future.add_done_callback(self.outstanding.discard)
        self._stage_of[future] = stage
        return future

    def _unservable(self, stage: str, cores: int, estimate: float | None) -> Fut[Any] | None:
        """Return a failed future for a task no allocation could ever run; None if one could."""
        most = self._max_cores
        limit = self._max_walltime
        why = None
        if most is not None and cores > most:
            why = (
                f"task of stage {stage!r} asks for {cores} cores, but no allocation may have more than "
                f"{most} (the partition's size, or max_cores); ask for fewer cores or a larger partition"
            )
        elif self._node_cores is not None and cores > self._node_cores:
            why = (
                f"task of stage {stage!r} asks for {cores} cores, but a node of the partition has "
                f"{self._node_cores} and a task runs inside one node; ask for fewer cores or use a partition "
                "with wider nodes"
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
        self._demand.queued(task.stage, task.cores, task.estimate, task=task.task_id)
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
            self._demand.released(stage, task=None)
            outer.cancel()
            return
        try:
            if not ordering_only:
                for d in deps:
                    if d.cancelled() or d.exception() is not None:
                        raise DependencyError(stage, d)
            task = make()
        except Exception as exc:
            self._demand.released(stage, task=None)
            if outer.set_running_or_notify_cancel():
                outer.set_exception(exc)
            return
        self._demand.released(stage, task=task.task_id)
        try:
            self._pool.submit(task, future=outer)
        except PoolClosedError as exc:
            if outer.set_running_or_notify_cancel():
                outer.set_exception(exc)
        self._poke.set()


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(f"Elastic: {message}")
