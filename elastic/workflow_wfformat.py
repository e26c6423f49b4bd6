"""WfCommons instances (WfFormat JSON) read as workflows of stages.

`WfCommons <https://wfcommons.org>`_ publishes instances of real workflow executions (WfInstances: the
Pegasus, Makeflow and Nextflow runs of 1000Genome, Cycles, Epigenomics, Montage, ...) in its WfFormat
JSON: a graph of tasks, each with its parents, its measured runtime and the cores it used. Elastic's
workflows are stages of identical tasks, so an instance is read as one stage per task *category*:

- **Category.** The task's ``category`` (schema 1.4), else the program it ran where that is one word
  (``command.program``, schema 1.5: Pegasus and Makeflow record the transformation there, Nextflow a
  whole script), else its name without the numeric ID WfCommons appends (``individuals_ID0000001`` and
  ``mProject_00012`` -> ``individuals``, ``mProject``).
- **Stage.** Its tasks are the category's tasks; its cores per task the most any of them used
  (``cores``, ``coreCount``; 1 where none is given); its runtime the mean of theirs, with their
  coefficient of variation (a stage whose tasks took under a second on average is given 1 s).
- **Dependencies.** A stage depends on the stages of its tasks' parents.
- **Where a category cannot be one stage.** Tasks of a category that depend on one another (a chain of
  the same program), or categories that depend on each other both ways, would make a stage wait for
  itself. Such a category is cut by depth in the task graph (the longest path of parents above a task):
  its tasks at each depth are one stage, ``name#1``, ``name#2``, ... in depth order. Depth strictly
  grows along every edge, so the stages then always form a DAG; categories that need no cut keep one
  stage.

What a stage cannot keep: within a stage every task is ready when the stage is, so a task that in the
instance waited for only some of its parents' stage starts here when the whole stage before it ended
(the stage barrier of every Elastic workflow).

The workflow is named ``default_name`` (the file's stem), not by the instance's ``name``, which is the
id of the run it was recorded from.

Schemas read: 1.5 (``workflow.specification.tasks`` with parents by ``id``, and
``workflow.execution.tasks`` with ``runtimeInSeconds`` and ``coreCount``), 1.4 (``workflow.tasks``
with ``category``, ``runtimeInSeconds`` and parents by name or ``id``), and the older ``workflow.jobs``
or ``workflow.tasks`` with ``runtime``. Other keys (files, machines, commands) are ignored.

Examples
--------
>>> wf = workflow_from_wfformat(
...     {
...         "name": "tiny",
...         "schemaVersion": "1.4",
...         "workflow": {
...             "tasks": [
...                 {"name": "split_ID1", "category": "split", "runtimeInSeconds": 60, "parents": []},
...                 {"name": "work_ID2", "category": "work",
...                  "runtimeInSeconds": 300, "parents": ["split_ID1"]},
...                 {"name": "work_ID3", "category": "work",
...                  "runtimeInSeconds": 500, "parents": ["split_ID1"]},
...             ]
...         },
...     },
...     default_name="tiny",
...     source="tiny.json",
... )
>>> [(s.name, s.tasks, s.cores, s.runtime, s.depends_on) for s in wf.stages]
[('split', 1, 1, 60.0, ()), ('work', 2, 1, 400.0, ('split',))]
"""

from __future__ import annotations

import graphlib
import heapq
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elastic.errors import ConfigError
from elastic.limits import MAX_WORKFLOW_TASKS, check_count
from elastic.workflow_model import (
    MAX_RUNTIME_CV,
    WORKFLOW_TASKS_WHY,
    Stage,
    Workflow,
    finite_number,
    workflow_from_stages,
)

__all__ = ["MIN_STAGE_RUNTIME", "is_wfformat", "workflow_from_wfformat"]

MIN_STAGE_RUNTIME = 1.0
"""Seconds a stage's tasks are given at least: WfCommons records tasks of 0 s, which no batch task takes
and a stage's runtime model cannot be (it must be > 0)."""

_CUT_ROUNDS = 8
"""Passes that cut the categories found waiting for themselves; past them every category is cut by depth
(the published instances need at most two; a file built to need one per category would cost as many
passes over its tasks)."""

_ID_SUFFIX = re.compile(r"[_-]*(?:ID)?\d+$")
_PROGRAM = re.compile(r"[\w.+-]{1,128}")  # one word: Nextflow records a whole script there


def is_wfformat(data: object) -> bool:
    """Whether parsed JSON ``data`` is a WfFormat instance (a ``workflow`` object, no ``stages`` list)."""
    return isinstance(data, Mapping) and isinstance(data.get("workflow"), Mapping) and "stages" not in data


@dataclass(frozen=True, slots=True)
class _Task:
    """One task of the instance, as read."""

    key: str
    category: str
    runtime: float
    cores: int
    parents: tuple[str, ...]


def workflow_from_wfformat(data: Mapping[str, object], *, default_name: str, source: str) -> Workflow:
    """Build a workflow of stages from a parsed WfFormat instance (module docstring).

    Raises
    ------
    ConfigError
        The instance has no task, a task without a name, with a runtime that is not a number of seconds
        >= 0, with a core count that is not a number > 0, or (schema 1.5) with no recorded run, a parent
        that names no task, a task named twice, or a cycle of parents; the message names ``source`` and
        the task.
    """
    name = default_name  # an instance's own name is its run's id (``Cycles-20200413T154303Z-0``)
    tasks = _read_tasks(data, source)
    order = _topological(tasks, source)
    depth: dict[str, int] = {}
    for key in order:
        depth[key] = 1 + max((depth[p] for p in tasks[key].parents), default=-1)
    cut: set[str] = set()
    rounds = 0
    while True:
        rounds += 1
        if rounds > _CUT_ROUNDS:  # every category cut by depth: a DAG at once, where looking again and
            cut = {t.category for t in tasks.values()}  # again would cost a pass per category
        stage_of = {k: (t.category, depth[k] if t.category in cut else None) for k, t in tasks.items()}
        graph: dict[tuple[str, int | None], set[tuple[str, int | None]]] = {
            s: set() for s in stage_of.values()
        }
        inner: set[str] = set()
        for k, t in tasks.items():
            for p in t.parents:
                if stage_of[p] == stage_of[k]:
                    inner.add(t.category)
                else:
                    graph[stage_of[k]].add(stage_of[p])
        if inner - cut:  # a category whose tasks wait for one another: cut by depth, and look again
            cut |= inner
            continue
        try:
            tuple(graphlib.TopologicalSorter(graph).static_order())
        except graphlib.CycleError as exc:
            cycle = {node[0] for node in exc.args[1]}
            if cycle <= cut:  # pragma: no cover - depth grows along every edge: cut stages form no cycle
                raise ConfigError(
                    f"{source}: the task categories {sorted(cycle)} depend on each other"
                ) from None
            cut |= cycle
            continue
        break
    return _stages(name, tasks, order, depth, stage_of, graph, source)


def _read_tasks(data: Mapping[str, object], source: str) -> dict[str, _Task]:
    """Read the instance's tasks, keyed by what their parents name them by."""
    workflow = data.get("workflow")
    if not isinstance(workflow, Mapping):
        raise ConfigError(f"{source}: a WfFormat instance needs a 'workflow' object")
    execution: dict[str, Mapping[str, object]] = {}
    spec = workflow.get("specification")
    if isinstance(spec, Mapping):  # schema 1.5: the graph and the measurements apart, joined by id
        raw = spec.get("tasks")
        done = workflow.get("execution")
        runs = done.get("tasks") if isinstance(done, Mapping) else None
        for item in runs if isinstance(runs, Sequence) and not isinstance(runs, str) else ():
            if isinstance(item, Mapping) and isinstance(item.get("id"), str):
                execution[str(item["id"])] = item
    else:
        raw = workflow.get("tasks", workflow.get("jobs"))
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ConfigError(
            f"{source}: a WfFormat instance needs a non-empty task list (workflow.tasks, workflow.jobs or "
            "workflow.specification.tasks)"
        )
    check_count(len(raw), MAX_WORKFLOW_TASKS, f"{source}: tasks", WORKFLOW_TASKS_WHY)
    items: list[Mapping[str, object]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ConfigError(f"{source}: task {i} must be an object with a non-empty 'name'")
        items.append(item)
    # parents name a task by its id (1.5; 1.4 where every parent is an id) or by its name
    ids = {str(t["id"]) for t in items if isinstance(t.get("id"), str)}
    by_id = spec is not None or (
        len(ids) == len(items) and all(str(p) in ids for t in items for p in _parents(t, source))
    )
    tasks: dict[str, _Task] = {}
    for item in items:
        task_name = str(item["name"])
        key = str(item["id"]) if by_id and isinstance(item.get("id"), str) else task_name
        where = f"{source}: task {key!r}"
        if key in tasks:
            raise ConfigError(f"{where} appears twice; every task needs its own name (or id)")
        if spec is not None and key not in execution:
            raise ConfigError(
                f"{where} has no recorded run in workflow.execution.tasks (an instance of schema 1.5 "
                "records each task's runtime there, by its id)"
            )
        measured = execution.get(key, item)
        runtime = measured.get("runtimeInSeconds", measured.get("runtime", item.get("runtime")))
        seconds = finite_number(runtime)
        if seconds is None:
            raise ConfigError(f"{where}: runtime must be a number of seconds, got {runtime!r}")
        if seconds < 0:
            raise ConfigError(f"{where}: runtime must be >= 0 seconds, got {runtime!r}")
        cores = measured.get("coreCount", measured.get("cores", item.get("cores", 1)))
        used = finite_number(cores)
        if used is None or used <= 0:
            raise ConfigError(f"{where}: cores must be a number > 0, got {cores!r}")
        category = _category(item, measured, task_name)
        tasks[key] = _Task(key, category, seconds, max(1, math.ceil(used)), _parents(item, source))
    for t in tasks.values():
        for p in t.parents:
            if p not in tasks:
                raise ConfigError(
                    f"{source}: task {t.key!r} has parent {p!r}, which is no task of the instance"
                )
    return tasks


def _category(item: Mapping[str, object], measured: Mapping[str, object], name: str) -> str:
    """Return the task's category: its ``category``, else the program it ran, else its name without ID."""
    category = item.get("category")
    if isinstance(category, str) and category.strip():
        return category
    command = measured.get("command", item.get("command"))
    program = command.get("program") if isinstance(command, Mapping) else None
    if isinstance(program, str) and _PROGRAM.fullmatch(program):
        return program
    return _ID_SUFFIX.sub("", name) or name


def _parents(item: Mapping[str, object], source: str) -> tuple[str, ...]:
    """Return the parents a task lists (strings), without repeats."""
    raw = item.get("parents", ())
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not all(isinstance(p, str) for p in raw):
        raise ConfigError(f"{source}: task {item.get('name')!r}: parents must be a list of task names")
    return tuple(dict.fromkeys(raw))


def _topological(tasks: Mapping[str, _Task], source: str) -> list[str]:
    """Return the tasks in an order where every parent comes first; a cycle is an error."""
    try:
        return list(graphlib.TopologicalSorter({k: t.parents for k, t in tasks.items()}).static_order())
    except graphlib.CycleError as exc:
        cycle = " -> ".join(exc.args[1][:6])
        raise ConfigError(
            f"{source}: the tasks' parents form a cycle ({cycle}); a workflow is a DAG"
        ) from None


def _stages(
    name: str,
    tasks: Mapping[str, _Task],
    order: Sequence[str],
    depth: Mapping[str, int],
    stage_of: Mapping[str, tuple[str, int | None]],
    graph: Mapping[tuple[str, int | None], set[tuple[str, int | None]]],
    source: str,
) -> Workflow:
    """Return the workflow: each stage after those it depends on (shallowest first, then in file order)."""
    members: dict[tuple[str, int | None], list[_Task]] = {}
    first: dict[tuple[str, int | None], tuple[int, int]] = {}
    for i, key in enumerate(order):
        node = stage_of[key]
        members.setdefault(node, []).append(tasks[key])
        first.setdefault(node, (depth[key], i))
    levels: dict[str, list[int]] = {}
    for cat, level in members:
        if level is not None:
            levels.setdefault(cat, []).append(level)
    label: dict[tuple[str, int | None], str] = {}
    for node in members:
        cat, level = node
        label[node] = cat if level is None else f"{cat}#{sorted(levels[cat]).index(level) + 1}"
    if len(set(label.values())) != len(label):  # a category named like another's cut ("a#1"): keep them apart
        label = {node: f"{text}#{i}" for i, (node, text) in enumerate(label.items())}
    children: dict[tuple[str, int | None], list[tuple[str, int | None]]] = {n: [] for n in members}
    waiting = {n: len(graph[n]) for n in members}
    for node, parents in graph.items():
        for p in parents:
            children[p].append(node)
    ready = [(first[n], n) for n, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    stages: list[Stage] = []
    while ready:
        _, node = heapq.heappop(ready)
        group = members[node]
        runtimes = [t.runtime for t in group]
        mean = math.fsum(r / len(runtimes) for r in runtimes)  # no larger than the largest: never inf
        cv = 0.0
        if MIN_STAGE_RUNTIME <= mean < math.inf:  # the spread over the mean, taken so as not to overflow
            spread = math.fsum((r / mean - 1.0) ** 2 for r in runtimes) / len(runtimes)
            cv = min(math.sqrt(spread), MAX_RUNTIME_CV)
        stages.append(
            Stage(
                name=label[node],
                tasks=len(group),
                cores=max(t.cores for t in group),
                runtime=max(mean, MIN_STAGE_RUNTIME),
                runtime_cv=cv,
                depends_on=tuple(sorted(label[p] for p in graph[node])),
            )
        )
        for child in children[node]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, (first[child], child))
    return workflow_from_stages(name, tuple(stages), source)
