"""How a function becomes a task at the front door: its stage, cores and runtime, and its inputs.

:func:`task` marks a function with what the front door (and the Prefect runner) should know of it::

    @task(stage="project", cores=1, runtime=30.0)
    def project(tile): ...

Without it, a function's stage is its name, it needs one core and its runtime is unknown (learned from the
stage's history). Futures passed as arguments are inputs: the task waits for them, and gets their results
(:func:`resolve_arguments`); if one failed, the task does not run and fails with :class:`DependencyError`.
"""

from __future__ import annotations

import concurrent.futures
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from elastic.errors import ConfigError, PoolError
from elastic.limits import check_runtime

__all__ = ["DependencyError", "TaskOptions", "declared_options", "options_of", "resolve_arguments", "task"]

F = TypeVar("F", bound=Callable[..., Any])

_ATTRIBUTE = "__elastic_task__"


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """What :func:`task` attaches to a function.

    Attributes
    ----------
    stage : str
        Stage label of the function's tasks.
    cores : int
        Cores each task needs.
    runtime : float or None
        Expected seconds per task (placement and the first walltime requests); None: learned.
    isolate : bool
        Run each task in a fresh interpreter instead of a warm worker.
    """

    stage: str
    cores: int = 1
    runtime: float | None = None
    isolate: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.stage, str) or not self.stage:
            raise ConfigError(f"task(stage=...) must be a non-empty string, got {self.stage!r}")
        if isinstance(self.cores, bool) or not isinstance(self.cores, int) or self.cores < 1:
            raise ConfigError(f"task(cores=...) must be an integer >= 1, got {self.cores!r}")
        if self.runtime is not None and not (
            isinstance(self.runtime, (int, float)) and math.isfinite(self.runtime) and self.runtime >= 0
        ):
            raise ConfigError(f"task(runtime=...) must be finite seconds >= 0 or None, got {self.runtime!r}")
        if self.runtime is not None:
            check_runtime(self.runtime, "task(runtime=...):", "one task's runtime")


def task(
    fn: F | None = None,
    *,
    stage: str | None = None,
    cores: int = 1,
    runtime: float | None = None,
    isolate: bool = False,
) -> Any:
    """Mark ``fn`` with its stage, cores, runtime estimate and isolation (usable with or without arguments).

    Examples
    --------
    >>> @task(stage="blast", cores=2, runtime=60.0)
    ... def search(chunk): ...
    >>> options_of(search)
    TaskOptions(stage='blast', cores=2, runtime=60.0, isolate=False)
    """

    def mark(f: F) -> F:
        setattr(f, _ATTRIBUTE, TaskOptions(stage or _name(f), cores, runtime, isolate))
        return f

    return mark(fn) if fn is not None else mark


def options_of(fn: Callable[..., Any]) -> TaskOptions:
    """Return the options :func:`task` attached to ``fn``, or the defaults (stage: the function's name)."""
    opts = getattr(fn, _ATTRIBUTE, None)
    return opts if isinstance(opts, TaskOptions) else TaskOptions(_name(fn))


def declared_options(obj: object) -> TaskOptions | None:
    """Return the options :func:`task` attached to ``obj``, or None when it was not marked.

    Front-ends that wrap functions (a Prefect task around its function) use it to tell a declared stage
    from the default one.
    """
    opts = getattr(obj, _ATTRIBUTE, None)
    return opts if isinstance(opts, TaskOptions) else None


def _name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "default" if name == "<lambda>" else str(name)


class DependencyError(PoolError):
    """A task's input (a future passed as an argument) failed or was cancelled, so the task did not run.

    Parameters
    ----------
    stage : str
        Stage of the task that did not run.
    dependency : Future
        The input that failed; its exception is this error's ``__cause__``.
    """

    def __init__(self, stage: str, dependency: concurrent.futures.Future[Any]) -> None:
        self.stage = stage
        why = "was cancelled" if dependency.cancelled() else f"failed: {dependency.exception()!r}"
        super().__init__(f"a task of stage {stage!r} did not run: one of its inputs {why}")
        if not dependency.cancelled():
            self.__cause__ = dependency.exception()


def resolve_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Replace futures among ``args`` and ``kwargs`` (top level) by their results (they must be done)."""

    def value(x: Any) -> Any:
        return x.result(timeout=0) if isinstance(x, concurrent.futures.Future) else x

    return tuple(value(a) for a in args), {k: value(v) for k, v in kwargs.items()}
