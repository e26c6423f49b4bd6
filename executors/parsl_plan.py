"""What Parsl knows before a task reaches the executor: its stage, cores and runtime, and the tasks it holds.

What :class:`~elastic.executors.parsl_executor.ElasticExecutor` reads from Parsl, kept here so the
executor stays an adapter (and the DataFlowKernel it belongs to: :func:`calling_dfk`, :func:`loaded_dfk`):

- **Resource specifications** (:func:`app_resources`): ``parsl_resource_specification={"stage": ...,
  "cores": ..., "runtime": ...}``, passed by the DataFlowKernel to ``submit`` untouched
  (``parsl/dataflow/dflow.py:975,722``). Unknown keys and bad values raise Parsl's own
  :class:`~parsl.executors.errors.InvalidResourceSpecification`, as ``HighThroughputExecutor`` does for
  keys it does not know (``parsl/executors/high_throughput/executor.py:389-400``).
- **Tasks waiting on their inputs** (:func:`waiting_stages`): Parsl calls an executor's ``submit`` only
  once a task's dependencies are done (``_launch_if_ready_async`` returns early while
  ``_count_deps(...) != 0``, ``dflow.py:623``), but every app invocation is recorded at once in
  ``DataFlowKernel.tasks`` (``dflow.py:1060``) with ``status == States.pending``, its ``executor`` label,
  ``func_name`` (``dflow.py:983``), ``resource_specification`` and ``depends`` (the futures it waits for,
  ``dflow.py:1035``). Finished tasks are removed from it (``wipe_task``, ``dflow.py:581``). Counting the
  pending records of our executor by stage, with the stages of the tasks they wait for, tells the
  strategy how wide the coming stages are and in which order they come, before their first task is
  submitted.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elastic.extras import require

try:
    from parsl.dataflow.states import States
    from parsl.executors.errors import InvalidResourceSpecification
except ImportError:  # say which extra installs it, not only that a module is missing
    require("parsl", "the Parsl executor (elastic.parsl)")
    raise

if TYPE_CHECKING:
    from parsl.dataflow.dflow import DataFlowKernel

__all__ = [
    "RESOURCE_KEYS",
    "AppResources",
    "WaitingStage",
    "app_resources",
    "calling_dfk",
    "loaded_dfk",
    "record_resources",
    "waiting_stages",
]

RESOURCE_KEYS = frozenset({"stage", "cores", "runtime"})
"""Keys ``parsl_resource_specification`` may have for :class:`ElasticExecutor`."""


@dataclass(frozen=True, slots=True)
class AppResources:
    """What one app invocation asks for.

    Attributes
    ----------
    stage : str
        Its stage: ``resource_specification["stage"]``, else the app's function name.
    cores : int
        Cores it needs on one node (default 1).
    runtime : float or None
        Expected seconds (walltime-aware placement and the first walltime requests); None: learned.
    """

    stage: str
    cores: int = 1
    runtime: float | None = None


def app_resources(spec: Mapping[str, Any] | None, app: str) -> AppResources:
    """Return what ``spec`` (a ``parsl_resource_specification``) asks for the app named ``app``.

    Raises
    ------
    InvalidResourceSpecification
        A key outside :data:`RESOURCE_KEYS`, or a value out of range (the message names it and what is
        allowed).

    Examples
    --------
    >>> app_resources({"stage": "mProject", "cores": 2, "runtime": 30}, "project")
    AppResources(stage='mProject', cores=2, runtime=30.0)
    >>> app_resources(None, "project")
    AppResources(stage='project', cores=1, runtime=None)
    """
    if not spec:
        return AppResources(app)
    if not isinstance(spec, Mapping):
        raise InvalidResourceSpecification(
            {type(spec).__name__}, f"parsl_resource_specification must be a dict, got {spec!r}"
        )
    unknown = set(spec) - RESOURCE_KEYS
    if unknown:
        raise InvalidResourceSpecification(
            unknown,
            f"app {app!r}: ElasticExecutor accepts only {', '.join(sorted(RESOURCE_KEYS))} "
            "(stage: a name; cores: an integer >= 1; runtime: expected seconds)",
        )
    stage = spec.get("stage", app)
    if not isinstance(stage, str) or not stage:
        raise InvalidResourceSpecification(
            {"stage"}, f"app {app!r}: stage must be a non-empty string, got {stage!r}"
        )
    cores = spec.get("cores", 1)
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise InvalidResourceSpecification(
            {"cores"}, f"app {app!r}: cores must be an integer >= 1, got {cores!r}"
        )
    runtime = spec.get("runtime")
    if runtime is not None:
        ok = isinstance(runtime, (int, float)) and not isinstance(runtime, bool) and math.isfinite(runtime)
        if not ok or runtime < 0:
            raise InvalidResourceSpecification(
                {"runtime"}, f"app {app!r}: runtime must be finite seconds >= 0 or None, got {runtime!r}"
            )
        runtime = float(runtime)
    return AppResources(stage, cores, runtime)


@dataclass(frozen=True, slots=True)
class WaitingStage:
    """Tasks of one stage the DataFlowKernel holds for our executor, not submitted yet.

    Attributes
    ----------
    stage : str
        The stage.
    tasks : int
        How many.
    cores : int
        The most cores one of them asks for.
    after : tuple of str
        Stages of the tasks they wait for (other than their own).
    first : int
        Smallest Parsl task id among them (stages are announced in the order the program invoked them).
    runtime : float or None
        Mean of the runtime estimates those of them that give one declare (seconds); None: none does.
    """

    stage: str
    tasks: int
    cores: int
    after: tuple[str, ...]
    first: int
    runtime: float | None = None


def record_resources(record: Mapping[str, Any]) -> AppResources:
    """Return the stage, cores and runtime of a DataFlowKernel task record (a bad spec: the defaults)."""
    app = str(record.get("func_name") or "parsl")
    try:
        return app_resources(record.get("resource_specification"), app)
    except InvalidResourceSpecification:  # it fails at submit, with the error; here it is just counted
        return AppResources(app)


def waiting_stages(records: Iterable[Mapping[str, Any]], label: str) -> list[WaitingStage]:
    """Group the pending task records of executor ``label`` by stage, in the order of their first task.

    ``records`` are ``DataFlowKernel.tasks`` values (see the module docstring); records of other executors
    and tasks already launched, done or failed are skipped. A pending task whose inputs are all done is
    counted too: it is about to be submitted.
    """
    found: dict[str, tuple[int, int, dict[str, None], int]] = {}
    runtimes: dict[str, list[float]] = {}
    for record in records:
        if record.get("executor") != label or record.get("status") != States.pending:
            continue
        res = record_resources(record)
        task_id = int(record.get("id", 0))
        tasks, cores, after, first = found.get(res.stage, (0, 1, {}, task_id))
        for dep in record.get("depends") or ():
            dep_record = getattr(dep, "task_record", None)
            if isinstance(dep_record, Mapping):
                dep_stage = record_resources(dep_record).stage
                if dep_stage != res.stage:
                    after[dep_stage] = None
        found[res.stage] = (tasks + 1, max(cores, res.cores), after, min(first, task_id))
        if res.runtime is not None:
            runtimes.setdefault(res.stage, []).append(res.runtime)
    stages = [WaitingStage(s, n, c, tuple(a), f, _mean(runtimes.get(s))) for s, (n, c, a, f) in found.items()]
    return sorted(stages, key=lambda w: w.first)


def _mean(values: list[float] | None) -> float | None:
    return sum(values) / len(values) if values else None


def calling_dfk() -> DataFlowKernel | None:
    """Return the DataFlowKernel whose ``add_executors`` is calling the executor's ``start``, if any.

    ``DataFlowKernel.__init__`` calls ``self.add_executors(config.executors)`` (``dflow.py:206``), which
    sets ``run_dir``/``run_id`` and calls ``executor.start()`` (``dflow.py:1127``): the DataFlowKernel is
    ``self`` two frames up. It is not yet what ``parsl.dfk()`` returns (``parsl.load`` sets that after
    the constructor returns), and its ``tasks`` table is created after (``dflow.py:210``).
    """
    from parsl.dataflow.dflow import DataFlowKernel

    frame = inspect.currentframe()
    try:
        for _ in range(4):
            frame = frame.f_back if frame is not None else None
            candidate = frame.f_locals.get("self") if frame is not None else None
            if isinstance(candidate, DataFlowKernel):
                return candidate
        return None
    finally:
        del frame


def loaded_dfk() -> DataFlowKernel | None:
    """Return the DataFlowKernel ``parsl.dfk()`` returns, or None when none is loaded."""
    from parsl.dataflow.dflow import DataFlowKernelLoader
    from parsl.errors import NoDataFlowKernelError

    try:
        return DataFlowKernelLoader.dfk()
    except NoDataFlowKernelError:
        return None
