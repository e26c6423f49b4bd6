"""The three ways to run a demo's driver: Elastic's front door, Parsl apps, a Prefect flow.

A driver (:mod:`elastic.workflows.dataflow`) calls ``submit.submit(fn, *args)``. Here is what ``submit`` is
in each
system, each through its standard API, so that choosing Elastic's executor or task runner is a
configuration choice, not a change of code:

- **Elastic**: the :class:`elastic.Elastic` object itself (:func:`run_elastic`).
- **Parsl** (:class:`ParslSubmitter`, :func:`run_parsl`): each stage function becomes a ``python_app``
  (referenced by module, so workers import it) on the executors of the Parsl ``Config`` given; AppFutures
  passed as arguments are dependencies. Any Parsl executor works: ``ThreadPoolExecutor``,
  ``HighThroughputExecutor``, or Elastic's ``ElasticExecutor`` (:func:`elastic_parsl_config`).
- **Prefect** (:class:`PrefectSubmitter`, :func:`run_prefect`): each stage function becomes a Prefect
  ``task`` named after its stage (no caching, results kept in memory), called with ``.submit`` inside a
  flow run on the task runner given; PrefectFutures passed as arguments are dependencies. Any task runner
  works: ``ThreadPoolTaskRunner``, or Elastic's ``ElasticTaskRunner`` (:func:`elastic_prefect_runner`).

Prefect needs its API: ``PREFECT_API_URL``, else Prefect starts a temporary local server for the run
(about 15 s here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from elastic.errors import ConfigError
from elastic.front.tasks import options_of
from elastic.workflows.dataflow import Handle, Submitter

if TYPE_CHECKING:
    from parsl.config import Config

    from elastic.front.door import Elastic

__all__ = [
    "FRONTENDS",
    "ParslSubmitter",
    "PrefectSubmitter",
    "elastic_parsl_config",
    "elastic_prefect_runner",
    "run_elastic",
    "run_parsl",
    "run_prefect",
]

FRONTENDS = ("elastic", "parsl", "prefect")
"""The front-ends a demo runs through."""

T = TypeVar("T")
In = TypeVar("In")
Out = TypeVar("Out")


def run_elastic(driver: Callable[[Submitter, In], Out], inputs: In, el: Elastic) -> Out:
    """Run ``driver`` through the front door ``el`` (the caller opens and shuts it)."""
    return driver(el, inputs)


class ParslSubmitter:
    """A :class:`Submitter` that runs each stage function as a Parsl ``python_app``.

    Parameters
    ----------
    executors : "all" or sequence of str, default "all"
        Labels of the executors the apps may run on (Parsl's ``executors=``).
    """

    def __init__(self, executors: str | Sequence[str] = "all") -> None:
        self._executors: Any = executors if isinstance(executors, str) else list(executors)
        self._apps: dict[Callable[..., Any], Any] = {}

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Handle[T]:
        """Invoke ``fn``'s app on ``args`` (AppFutures among them are its dependencies)."""
        from parsl.app.app import python_app

        app = self._apps.get(fn)
        if app is None:
            app = self._apps[fn] = python_app(fn, executors=self._executors)
        future: Handle[T] = app(*args)
        return future


def run_parsl(
    driver: Callable[[Submitter, In], Out],
    inputs: In,
    config: Config,
    *,
    executors: str | Sequence[str] = "all",
) -> Out:
    """Load ``config`` (a Parsl ``Config``), run ``driver`` with python_apps, then clean Parsl up."""
    import parsl

    with parsl.load(config):
        return driver(ParslSubmitter(executors), inputs)


class PrefectSubmitter:
    """A :class:`~elastic.workflows.dataflow.Submitter` that submits each stage function as a Prefect task.

    Must be used inside a flow run (:func:`run_prefect` makes one). Prefect leaves a task whose input
    failed Pending (its result raises ``UnfinishedRun``); the handles returned here raise the failed
    input's own error instead, as the other systems do.
    """

    def __init__(self) -> None:
        self._tasks: dict[Callable[..., Any], Any] = {}

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Handle[T]:
        """Submit ``fn``'s task on ``args`` to the flow's task runner (futures among them are its inputs)."""
        from prefect import task
        from prefect.cache_policies import NO_CACHE

        prefect_task = self._tasks.get(fn)
        if prefect_task is None:
            make = task(name=options_of(fn).stage, cache_policy=NO_CACHE, persist_result=False)
            prefect_task = self._tasks[fn] = make(fn)
        inputs = [a for a in args if isinstance(a, _PrefectHandle)]
        future = prefect_task.submit(*(a.future if isinstance(a, _PrefectHandle) else a for a in args))
        return _PrefectHandle(future, inputs)


class _PrefectHandle(Generic[T]):
    """A PrefectFuture whose result, when an input failed, raises that input's error."""

    def __init__(self, future: Any, inputs: list[_PrefectHandle[Any]]) -> None:
        self.future = future
        self.inputs = inputs

    def result(self, timeout: float | None = None) -> T:
        from prefect.exceptions import UnfinishedRun

        try:
            value: T = self.future.result(timeout=timeout)
        except UnfinishedRun:
            for handle in self.inputs:  # the task never ran: raise the error of the input that failed
                handle.result(timeout=timeout)
            raise
        return value


def run_prefect(
    driver: Callable[[Submitter, In], Out], inputs: In, task_runner: Any, *, name: str = "demo"
) -> Out:
    """Run ``driver`` as the Prefect flow ``name`` on ``task_runner`` (a Prefect ``TaskRunner``)."""
    from prefect import flow

    def body() -> Out:
        return driver(PrefectSubmitter(), inputs)

    body.__name__ = name
    run = flow(name=name, task_runner=task_runner, persist_result=False, validate_parameters=False)(body)
    result: Out = run()
    return result


# --- Elastic's executor and task runner -----------------------------------------------------------


def elastic_parsl_config(label: str = "elastic", *, run_dir: str = "runinfo", **settings: Any) -> Config:
    """Return a Parsl ``Config`` with one ``ElasticExecutor`` (``executors/parsl_executor.py``), no scaling.

    ``run_dir`` is where Parsl writes its log (``parsl.log``) and run information. ``settings`` are the
    executor's (``backend``, ``strategy``, ``workflow``, ``store``, ``poll_interval``, ...; the front
    door's settings).

    Raises
    ------
    ConfigError
        This installation has no ``elastic.executors.parsl_executor``.
    """
    from parsl.config import Config

    try:
        from elastic.executors.parsl_executor import ElasticExecutor  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise ConfigError(
            "--frontend parsl runs Parsl apps on Elastic's ElasticExecutor (executors/parsl_executor.py), "
            f"which this installation lacks ({exc}); use --frontend elastic"
        ) from exc
    return Config(executors=[ElasticExecutor(label=label, **settings)], strategy="none", run_dir=run_dir)


def elastic_prefect_runner(**settings: Any) -> Any:
    """Return a Prefect ``ElasticTaskRunner`` (``executors/prefect_runner.py``) with ``settings``.

    Raises
    ------
    ConfigError
        This installation has no ``elastic.executors.prefect_runner``.
    """
    try:
        from elastic.executors.prefect_runner import ElasticTaskRunner  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise ConfigError(
            "--frontend prefect runs Prefect tasks on Elastic's ElasticTaskRunner "
            f"(executors/prefect_runner.py), which this installation lacks ({exc}); use --frontend elastic"
        ) from exc
    return ElasticTaskRunner(**settings)
