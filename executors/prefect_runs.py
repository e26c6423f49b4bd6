"""Prefect task runs seen from the flow process: placement from tags, run records, states set by the runner.

Helpers of :class:`~elastic.executors.prefect_runner.ElasticTaskRunner`, kept apart from its control flow:

- :func:`placement_of`: a task's stage, cores, runtime estimate and isolation, from its tags (``stage:NAME``,
  ``cores:N``, task tags and ``prefect.tags(...)`` contexts alike) or :func:`elastic.task`; a tag that
  cannot work is refused before anything runs.
- :func:`new_task_run`: the task run, created in the flow process when the task is submitted (so it shows
  as Pending while it waits for its inputs or for cores) with its lineage: the task runs of every future
  among its parameters and ``wait_for``, and the ``dependencies`` Prefect's ``map`` passes. It is the
  function Prefect's own engine uses to create a run (``prefect/task_engine.py:134-227``).
- :func:`set_state`: a state the runner decides (Crashed, Cancelled, AwaitingRetry, Failed), sent as the
  same client-side state event Prefect's engine emits (``prefect/task_engine.py:561-610``).
- :func:`upstream_futures`, :func:`with_final_states`: the futures a task waits for, and its parameters
  with each replaced by its final state (as ``prefect_dask`` replaces them by Dask futures that resolve to
  states), for the worker's engine to resolve.
- :func:`retry_delay`: the delay before the next attempt, as Prefect's engine computes it
  (``prefect/task_engine.py:693-735``).
- :class:`RunContext`: the serialised Prefect context sent with each task run, pickled once per flow run.
"""

from __future__ import annotations

import copyreg
import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from elastic.errors import ConfigError
from elastic.front.tasks import declared_options

__all__ = [
    "Placement",
    "RunContext",
    "final_state",
    "new_task_run",
    "pickle_annotations_by_value",
    "placement_of",
    "retry_delay",
    "set_state",
    "upstream_futures",
    "with_final_states",
]

_STAGE = re.compile(r"^stage:(.*)$")
_CORES = re.compile(r"^cores:(.*)$")


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a task's runs go: its stage, cores, runtime estimate (seconds or None) and isolation."""

    stage: str
    cores: int = 1
    runtime: float | None = None
    isolate: bool = False


def placement_of(task: Any, tags: Iterable[str] = ()) -> Placement:
    """Return a Prefect task's placement, from its tags, ``tags`` (context tags), or :func:`elastic.task`.

    The stage is the ``stage:NAME`` tag, else the stage :func:`elastic.task` gave the task (or its
    function), else the task's name; cores likewise from ``cores:N``, else the decorator, else 1.

    Raises
    ------
    ConfigError
        Two different ``stage:`` or ``cores:`` tags, an empty stage, or cores that are not an integer >= 1
        (the message names the task and the tag).
    """
    declared = declared_options(task) or declared_options(getattr(task, "fn", None))
    name = str(getattr(task, "name", None) or getattr(task, "__name__", "default"))
    stages: set[str] = set()
    cores: set[int] = set()
    for tag in sorted({*getattr(task, "tags", ()), *tags}):
        if m := _STAGE.match(tag):
            if not m.group(1).strip():
                raise ConfigError(f"task {name!r}: tag {tag!r} names no stage; write 'stage:NAME'")
            stages.add(m.group(1).strip())
        elif m := _CORES.match(tag):
            value = m.group(1).strip()
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(
                    f"task {name!r}: tag {tag!r}: cores must be an integer >= 1, e.g. 'cores:4'"
                )
            cores.add(int(value))
    for kind, found in (("stage", stages), ("cores", cores)):
        if len(found) > 1:
            raise ConfigError(
                f"task {name!r} has {len(found)} different {kind}: tags "
                f"({', '.join(f'{kind}:{v}' for v in sorted(map(str, found)))}); give it one"
            )
    return Placement(
        stage=next(iter(stages)) if stages else (declared.stage if declared else name),
        cores=next(iter(cores)) if cores else (declared.cores if declared else 1),
        runtime=declared.runtime if declared else None,
        isolate=declared.isolate if declared else False,
    )


def new_task_run(
    task: Any,
    parameters: dict[str, Any],
    wait_for: Iterable[Any] | None,
    dependencies: Mapping[str, set[Any]] | None,
) -> Any:
    """Create a task run in this process (the flow thread) and send its Pending state to the API.

    Its lineage is collected from the futures among ``parameters`` and ``wait_for`` before they are
    resolved, plus ``dependencies`` (what ``map`` collected before it resolved its iterables).
    """
    from prefect.task_engine import _create_task_run_locally
    from prefect.utilities.engine import emit_task_run_state_change_event

    task_run = _create_task_run_locally(
        task=task,
        parameters=parameters,
        wait_for=list(wait_for) if wait_for else None,
        extra_task_inputs={k: set(v) for k, v in (dependencies or {}).items() if k in parameters},
    )
    state = task_run.state
    assert state is not None, "a new task run is Pending"
    emit_task_run_state_change_event(task_run=task_run, initial_state=None, validated_state=state)
    return task_run


def set_state(task_run: Any, state: Any) -> Any:
    """Give ``task_run`` (the flow process' record of it) a state the runner decided; send it to the API."""
    from prefect.utilities.engine import emit_task_run_state_change_event

    last = task_run.state
    if last is not None and last.timestamp >= state.timestamp:
        state.timestamp = last.timestamp + datetime.timedelta(microseconds=1)  # as the engine does
    state.state_details.task_run_id = task_run.id
    state.state_details.flow_run_id = task_run.flow_run_id
    task_run.state = state
    task_run.state_id, task_run.state_type, task_run.state_name = state.id, state.type, state.name
    if state.is_final() and task_run.end_time is None:
        task_run.end_time = state.timestamp
    emit_task_run_state_change_event(task_run=task_run, initial_state=last, validated_state=state)
    return state


def upstream_futures(parameters: dict[str, Any], wait_for: Iterable[Any] | None) -> list[Any]:
    """Every Prefect future among ``parameters`` (at any depth, inside annotations too) and ``wait_for``."""
    from prefect.futures import PrefectFuture
    from prefect.utilities.collections import visit_collection

    found: dict[int, Any] = {}

    def visit(expr: Any) -> Any:
        if isinstance(expr, PrefectFuture):
            found[id(expr)] = expr
        return expr

    visit_collection(parameters, visit_fn=visit, return_data=False)
    for future in wait_for or ():
        visit_collection(future, visit_fn=visit, return_data=False)
    return list(found.values())


def final_state(future: Any) -> Any:
    """Return the final state of a done Prefect future (read from the future itself when it holds one)."""
    future.wait()
    return future.state


def with_final_states(expr: Any) -> Any:
    """Return ``expr`` with every Prefect future in it replaced by its final state (they must be done)."""
    from prefect.futures import PrefectFuture
    from prefect.utilities.collections import visit_collection

    def visit(value: Any) -> Any:
        return final_state(value) if isinstance(value, PrefectFuture) else value

    return visit_collection(expr, visit_fn=visit, return_data=True)


def retry_delay(task: Any, retries_used: int) -> float:
    """Seconds before retry number ``retries_used + 1`` of ``task`` (its delays and jitter, as the engine)."""
    from prefect.utilities.math import clamped_poisson_interval

    delays = task.retry_delay_seconds
    if not delays:
        return 0.0
    delay = float(delays[min(retries_used, len(delays) - 1)] if isinstance(delays, list) else delays)
    if task.retry_jitter_factor and delay > 0:
        delay = float(clamped_poisson_interval(delay, clamping_factor=task.retry_jitter_factor))
    return delay


def pickle_annotations_by_value() -> None:
    """Make Prefect's annotations (``allow_failure``, ``unmapped``, ``quote``...) survive pickling.

    They are ``tuple`` subclasses whose ``__new__`` takes the value, so the default tuple pickling rebuilds
    ``allow_failure((value,))`` (prefect 3.9.1, ``prefect/utilities/annotations.py``): a worker would get
    the wrapped value as a one-element tuple. Registered with :mod:`copyreg` (which cloudpickle honours),
    each is rebuilt from its value.
    """
    from prefect.utilities.annotations import BaseAnnotation

    todo = [BaseAnnotation]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        copyreg.pickle(cls, _reduce_annotation)


def _reduce_annotation(annotation: Any) -> tuple[Any, tuple[Any]]:
    return type(annotation), (annotation.unwrap(),)


class RunContext:
    """The Prefect context a worker needs, serialised and pickled once per set of live context objects.

    ``prefect.context.serialize_context()`` without the settings (``prefect/context.py:115-146``): workers
    take the flow's settings from the environment they are given instead. Serialising the flow run's
    context (a result store dumped with its secrets check, ``prefect/blocks/core.py:440``) and pickling it
    was most of the flow thread's time per submission (about 4 ms of 6 under load, measured with
    ``py-spy record --subprocesses`` on ``benchmarks/bench_prefect.py``); within one flow run the context
    objects stay the same, so :meth:`pickled` redoes it only when one of them is replaced (a ``tags(...)``
    block entered or left, another flow run).
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[tuple[Any, ...], bytes] | None = None

    def pickled(self) -> bytes:
        """Return the current context as ``cloudpickle`` bytes (a dict, as ``serialize_context`` gives)."""
        import cloudpickle
        from prefect.context import (
            EngineContext,
            TagsContext,
            TaskRunContext,
            _deployment_id,
            _deployment_parameters,
        )

        key = (
            EngineContext.get(),
            TaskRunContext.get(),
            TagsContext.__var__.get(None),  # TagsContext.get() makes a new empty one each time when unset
            _deployment_id.get(),
            _deployment_parameters.get(),
        )
        last = self._last  # one read: another thread may replace it meanwhile
        if last is not None and all(a is b for a, b in zip(last[0], key, strict=True)):
            return last[1]
        flow_run_context, task_run_context, tags_context, deployment_id, parameters = key
        blob: bytes = cloudpickle.dumps(
            {
                "flow_run_context": flow_run_context.serialize() if flow_run_context else {},
                "task_run_context": task_run_context.serialize() if task_run_context else {},
                "tags_context": (tags_context or TagsContext()).serialize(),
                "settings_context": {},
                "asset_context": {},
                "deployment_id": str(deployment_id) if deployment_id else None,
                "deployment_parameters": parameters,
            }
        )
        self._last = (key, blob)
        return blob
