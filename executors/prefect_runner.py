"""``ElasticTaskRunner``: a Prefect 3 task runner whose task runs execute on Elastic's pilot allocations.

::

    from prefect import flow, task
    from elastic.prefect import ElasticTaskRunner

    @task(tags=["stage:align", "cores:2"])
    def align(chunk): ...

    @flow(task_runner=ElasticTaskRunner("slurm", "asa"))
    def pipeline(chunks):
        aligned = align.map(chunks)
        ...

The runner is a thin adapter around :class:`elastic.Elastic` (the front door): each flow run gets one,
started at the flow run's first task submission, which requests allocations from the backend as the
strategy decides, runs the task runs on the warm workers of their agents and releases every allocation
when the flow run ends. Task runs are created and tracked in Prefect as with Prefect's own runners
(states, lineage, logs, results, retries, caching); see ``docs/guide/prefect.md``, and
:mod:`elastic.executors.prefect_dispatch` for holding, retries, cancellation and crashes.

Prefect's contract (``prefect/task_runners.py:64-240``): ``duplicate`` (the engine runs each flow run on
a duplicate, ``prefect/flow_engine.py:1108``), ``submit``, ``map`` (inherited: it calls ``submit``),
``__enter__``/``__exit__`` and ``cancel_all``. Two facts shape this class:

- the flow object, and so this runner, is pickled into every task run's context, and each worker enters
  a duplicate of it per task run (``prefect/context.py:178-180``): a copy made by pickling keeps no
  configuration and never starts allocations (a task that submits tasks runs them in a thread of its
  worker), and ``__enter__`` does nothing costly;
- on SIGTERM (a deployment's run being cancelled) the engine calls ``cancel_all`` on the flow's own
  runner, not on the duplicate running the tasks (``prefect/flow_engine.py:457-459,1232``): the runner a
  flow was given forwards it to its live duplicates.

A flow run cancelled through the API while it runs outside a deployment (the engine hears nothing then)
is noticed by polling its state every ``cancel_poll_interval`` seconds.
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from typing_extensions import Self

from elastic.extras import require

try:
    from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
except ImportError:  # say which extra installs it, not only that a module is missing
    require("prefect", "the Prefect task runner (elastic.prefect)")
    raise

from elastic.backends.base import BatchBackend
from elastic.control.execution import RunResult
from elastic.errors import ConfigError
from elastic.executors.prefect_dispatch import ElasticPrefectFuture, FlowRunDispatch
from elastic.executors.prefect_runs import RunContext, placement_of
from elastic.front.door import Elastic
from elastic.front.progress import ProgressLogger
from elastic.front.settings import Settings, settings_from, site_of

__all__ = ["ElasticPrefectFuture", "ElasticTaskRunner"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Config:
    settings: Settings
    cancel_poll_interval: float | None = 2.0


class ElasticTaskRunner(TaskRunner[ElasticPrefectFuture]):
    """Run a flow's task runs on pilot allocations chosen by a strategy (see the module docstring).

    Parameters
    ----------
    backend : {"local", "mock", "slurm"}, BatchBackend or None, default None
        Where allocations come from (as for :class:`elastic.Elastic`; default: the settings').
    strategy : str, Strategy or None, default None
        When and how big to request allocations: ``bigjob``, ``perstage``, ``asa``, ...
    settings : Settings or None, default None
        The options every front-end shares, at once (:class:`~elastic.front.settings.Settings`).
    cancel_poll_interval : float or None, default 2.0
        Seconds between two looks at the flow run's state, to notice a cancellation made through the API
        while the flow runs outside a deployment; None: do not look.
    **options
        :class:`~elastic.front.settings.Settings` fields (a keyword given replaces the object's value):
        ``workflow`` (default: the flow's name, so later runs of the flow know its stages from the store),
        ``store``, ``learner``, ``max_cores``, ``job_cores``, ``idle_timeout``, ``poll_interval``,
        ``drain_margin``, ``speedup``, ``name``, ``user``, ``site`` (with ``"slurm"`` and no ``site``, the
        site file, read and checked here), ``submission_rate``, ``progress`` (default: one line per
        stage and allocation event on the flow run's logger, Prefect's console and the run's logs in the
        UI, and a live view on a terminal; False: nothing), and pool options (``workers``,
        ``worker_memory``, ``secret_dir``, ...). Not ``max_retries``: a task run lost with its allocation
        is retried under the Prefect task's own ``retries``.

    Raises
    ------
    ConfigError
        An unknown backend, strategy or option, or ``max_retries``, before any flow runs.
    """

    def __init__(
        self,
        backend: str | BatchBackend | None = None,
        strategy: Any = None,
        *,
        settings: Settings | None = None,
        cancel_poll_interval: float | None = 2.0,
        **options: Any,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        resolved = settings_from(settings, backend=backend, strategy=strategy, **options)
        if resolved.max_retries is not None:
            raise ConfigError(
                "ElasticTaskRunner: max_retries is not an option: a task run lost with its allocation counts "
                "against the Prefect task's own retries (@task(retries=N))"
            )
        _check_interval(cancel_poll_interval)
        site_of(resolved)  # a bad site file is refused here, not when a flow starts
        self._config: _Config | None = _Config(resolved, cancel_poll_interval)
        self._children: weakref.WeakSet[ElasticTaskRunner] = weakref.WeakSet()
        self._dispatch: FlowRunDispatch | None = None
        self._nested: ThreadPoolTaskRunner[Any] | None = None
        self._context = RunContext()
        self._start_lock = threading.Lock()
        self._watch_stop = threading.Event()
        self._parent: weakref.ref[ElasticTaskRunner] | None = None
        self.results: list[RunResult] = []
        """What the front door recorded for each flow run this runner (or a duplicate) ran, oldest first:
        status, events, metrics (makespan, core-hours charged and used, per-stage waits)."""

    # -- copies ----------------------------------------------------------------------------------------

    def duplicate(self) -> Self:
        """Return a runner with the same configuration, for one flow run (cancelled with this one)."""
        if self._config is None:
            copy: Self = _remote_copy(type(self))
            return copy
        c = self._config
        dup = type(self)(settings=c.settings, cancel_poll_interval=c.cancel_poll_interval)
        self._children.add(dup)
        dup._parent = weakref.ref(self)
        return dup

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled into every task run's context: the copy keeps no backend, store or live state.
        return (_remote_copy, (type(self),))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ElasticTaskRunner) and other._config == self._config

    __hash__ = TaskRunner.__hash__

    # -- Prefect's contract ----------------------------------------------------------------------------

    def submit(
        self,
        task: Any,
        parameters: dict[str, Any],
        wait_for: Any = None,
        dependencies: Any = None,
    ) -> Any:
        """Create the task run and run it on a pool worker once its upstream futures are done."""
        if not self._started:
            raise RuntimeError("The task runner must be started before submitting work.")
        if self._config is None:  # a task on a worker submitting tasks: they run in its threads
            return self._nested_runner().submit(task, parameters, wait_for, dependencies)
        from prefect.context import TagsContext
        from prefect.settings import get_current_settings

        placement = placement_of(task, TagsContext.get().current_tags)
        dispatch = self._dispatch or self._start()
        settings = get_current_settings()
        if settings is not self._env_for:  # as Prefect's process pool, again only when settings change
            self._env, self._env_for = worker_env(settings), settings
        # Workers take the settings from ``env`` (applied once per worker) instead of rebuilding a
        # Settings object for every task run from the context.
        context = self._context.pickled()
        return dispatch.submit(task, parameters, wait_for, dependencies, placement, context, self._env)

    def cancel_all(self) -> None:
        """Cancel every task run of this runner's flow runs and release every allocation they hold."""
        for child in list(self._children):
            child.cancel_all()
        if self._dispatch is not None:
            self._dispatch.cancel("the flow run was cancelled")

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        try:
            self._watch_stop.set()
            if self._dispatch is not None:
                failed = _flow_run_failed(self._flow_run)
                if exc_type is not None or failed:
                    self._dispatch.cancel(failed or "the flow run was interrupted")
                else:
                    self._dispatch.close()
                result = self._dispatch.elastic.result
                if result is not None:
                    self.results.append(result)
                    parent = self._parent() if self._parent is not None else None
                    if parent is not None:
                        parent.results.append(result)
            if self._nested is not None:
                self._nested.__exit__(exc_type, exc_value, traceback)
        finally:
            super().__exit__(exc_type, exc_value, traceback)

    # -- internals -------------------------------------------------------------------------------------

    def _start(self) -> FlowRunDispatch:
        """Open the front door for this flow run (at its first submission, in the flow's thread)."""
        from prefect.context import FlowRunContext

        assert self._config is not None
        with self._start_lock:
            if self._dispatch is not None:
                return self._dispatch
            ctx = FlowRunContext.get()
            flow = getattr(ctx, "flow", None)
            self._flow_run = getattr(ctx, "flow_run", None)
            settings = self._config.settings
            workflow = settings.workflow or (flow.name if flow is not None else "prefect")
            progress: bool | ProgressLogger = settings.progress is not False
            if settings.progress is None or settings.progress is True:
                progress = _run_logger()  # the flow run's logs
            elif settings.progress is not False:
                progress = settings.progress  # a logger of the user's
            elastic = Elastic(settings=settings, workflow=workflow, max_retries=0, progress=progress)
            self._dispatch = FlowRunDispatch(elastic)
            interval = self._config.cancel_poll_interval
            if interval is not None and self._flow_run is not None:
                _watch(self._flow_run.id, interval, self._watch_stop, self._dispatch)
            return self._dispatch

    def _nested_runner(self) -> ThreadPoolTaskRunner[Any]:
        with self._start_lock:
            if self._nested is None:
                self._nested = ThreadPoolTaskRunner().__enter__()
            return self._nested

    _flow_run: Any = None
    _env: dict[str, str] = {}  # noqa: RUF012  (replaced, never mutated)
    _env_for: Any = None


def _remote_copy(cls: type[ElasticTaskRunner]) -> Any:
    """Return a runner without configuration: what a worker unpickles (it never starts allocations)."""
    runner = cls.__new__(cls)
    TaskRunner.__init__(runner)  # type: ignore[arg-type,no-untyped-call]
    runner._config = None
    runner._children = weakref.WeakSet()
    runner._dispatch = None
    runner._nested = None
    runner._context = RunContext()
    runner._start_lock = threading.Lock()
    runner._watch_stop = threading.Event()
    runner._parent = None
    runner.results = []
    return runner


def _run_logger() -> ProgressLogger:
    """Return the flow run's logger (its logs in the UI, Prefect's console), else ``prefect.elastic``."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("prefect.elastic")


def _check_interval(interval: object) -> None:
    interval_ok = isinstance(interval, (int, float)) and not isinstance(interval, bool)
    if interval is not None and not (interval_ok and 0 < interval < float("inf")):  # type: ignore[operator]
        raise ConfigError(
            f"ElasticTaskRunner: cancel_poll_interval must be finite seconds > 0 or None, got {interval!r}"
        )


def worker_env(settings: Any) -> dict[str, str]:
    """Prefect ``settings`` for the workers, as environment variables, with the API URL they must use.

    Without a configured API URL the flow talks to Prefect's ephemeral server (a subprocess on this
    host); the workers are given its URL rather than starting ephemeral servers of their own.
    """
    env: dict[str, str] = dict(settings.to_environment_variables(exclude_unset=True))
    if not settings.api.url:
        from prefect.server.api.server import SubprocessASGIServer

        server = SubprocessASGIServer()
        server.start()
        env["PREFECT_API_URL"] = server.api_url
    return env


def _flow_run_failed(flow_run: Any) -> str | None:
    """Why the flow run did not complete (its function raised or returned a failure), or None."""
    state = getattr(flow_run, "state", None)
    if state is None or state.is_completed() or state.is_running():
        return None
    return f"the flow run ended {state.name}" + (f": {state.message}" if state.message else "")


def _watch(flow_run_id: Any, interval: float, stop: threading.Event, dispatch: FlowRunDispatch) -> None:
    """Cancel ``dispatch`` once the flow run is Cancelling or Cancelled in the API (a daemon thread)."""
    import contextvars

    from prefect.client.orchestration import get_client

    def loop() -> None:
        # httpx_settings={} gives this thread a client of its own instead of the flow thread's
        with get_client(sync_client=True, httpx_settings={}) as client:
            while not stop.wait(interval):
                try:
                    state = client.read_flow_run(flow_run_id).state
                except Exception:  # the API is briefly away: look again later
                    logger.debug("prefect runner: reading flow run %s failed", flow_run_id, exc_info=True)
                    continue
                if state is not None and (state.is_cancelling() or state.is_cancelled()):
                    logger.info(
                        "prefect runner: flow run %s is %s; cancelling its task runs", flow_run_id, state.name
                    )
                    dispatch.cancel(f"the flow run was cancelled ({state.name})")
                    return

    ctx = contextvars.copy_context()
    threading.Thread(target=ctx.run, args=(loop,), name="elastic-prefect-cancel", daemon=True).start()
