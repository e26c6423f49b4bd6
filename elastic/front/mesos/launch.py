"""Mesos TaskInfo objects as pool tasks: what a launched task needs, what it may not ask for.

:func:`task_spec` reads one TaskInfo of a LAUNCH or LAUNCH_GROUP operation. A wrong JSON type or a missing
required field (``name``, ``task_id``, ``agent_id``) is a malformed call (HTTP 400, naming the field); a
well-formed task this front door cannot run (a container image, resources other than ``cpus`` and
``mem``, neither a command nor an executor, an executor with a container) gets a :attr:`TaskSpec.problem`,
which the master answers with a ``TASK_ERROR`` status update (``REASON_TASK_INVALID``), as Mesos does for
invalid tasks. A task with a custom executor (``executor`` with a command) runs that executor's command
instead, which receives the task through the executor API (:mod:`elastic.front.mesos.executors`).

A task runs as a pool shell task (:meth:`elastic.pool.tasks.Task.shell`) on its offer's agent:

- ``command.value`` with ``shell`` true (the default) is the ``bash -c`` script; with ``shell`` false it is
  the executable and ``arguments[1:]`` its arguments (``arguments[0]`` is argv[0] in Mesos), quoted;
- ``command.environment.variables`` are exported first, and ``MESOS_TASK_ID`` is set;
- it takes ``ceil(cpus)`` whole cores (one pool core runs one task); ``mem`` and ``disk`` (MB) are checked
  against the offer, not enforced (the batch system's limits apply);
- ``labels``, ``data``, ``kill_policy``, ``discovery`` and ``max_completion_time`` are accepted and not
  used; ``command.user`` is not used either: tasks run as the allocation's user.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic.front.mesos.calls import Launch
from elastic.front.mesos.executors import ExecutorRun, executor_command, new_run_id
from elastic.front.mesos.fields import (
    BadCallError,
    id_value,
    items,
    number,
    obj,
    optional_string,
    shown,
    string,
)
from elastic.front.mesos.frameworks import Framework, MesosTask
from elastic.front.mesos.offers import Offer
from elastic.front.mesos.states import TaskStatus
from elastic.front.mesos.updates import UpdateQueue
from elastic.pool.tasks import Task

__all__ = ["OFFERED_RESOURCES", "Launches", "TaskSpec", "plan_launches", "shell_command", "task_spec"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

OFFERED_RESOURCES = ("cpus", "mem", "disk")
"""Scalar resources offers carry (and tasks may use)."""

_UNSUPPORTED = {
    "container": "containers (ContainerInfo) are not supported: commands run in the allocation's environment",
    "health_check": "health checks are not supported",
    "check": "task checks are not supported",
    "resource_limits": "resource limits are not supported",
}


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task of a launch, read from its TaskInfo.

    Attributes
    ----------
    task_id, name, agent_id : str
        As the framework gave them.
    cpus : float
        ``cpus`` it uses (0 if none).
    mem : float
        ``mem`` (MB) it uses (0 if none).
    disk : float
        ``disk`` (MB) it uses (0 if none).
    command : str
        The ``bash -c`` script that runs it (``""`` when it has a problem).
    problem : str or None
        Why it cannot run here (answered with TASK_ERROR), or None.
    executor : mapping or None
        Its custom ExecutorInfo (``command`` is then the executor's script), or None.
    raw : mapping
        The TaskInfo as given (sent to its executor).
    """

    task_id: str
    name: str
    agent_id: str
    cpus: float
    mem: float
    command: str
    problem: str | None = None
    disk: float = 0.0
    executor: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cores(self) -> int:
        """Whole cores it takes: ``ceil(cpus)`` (with its executor's ``cpus`` when it has one)."""
        return max(1, math.ceil(self.cpus - 1e-9))


def task_spec(raw: Mapping[str, Any], path: str, *, group: bool = False) -> TaskSpec:
    """Read one TaskInfo (``path`` names it in errors; ``group``: part of a LAUNCH_GROUP).

    Raises
    ------
    BadCallError
        A field of the wrong JSON type, or a required one missing.
    """
    name = string(raw.get("name"), f"{path}.name")
    task_id = id_value(raw.get("task_id"), f"{path}.task_id")
    agent_id = id_value(raw.get("agent_id"), f"{path}.agent_id")
    cpus, mem, disk, problem = _resources(raw.get("resources", []), f"{path}.resources")
    command = ""
    cmd = raw.get("command")
    if cmd is not None:
        command, cmd_problem = shell_command(obj(cmd, f"{path}.command"), f"{path}.command", task_id)
        problem = problem or cmd_problem
    executor = None
    if raw.get("executor") is not None:
        executor = obj(raw["executor"], f"{path}.executor")
        kind = executor.get("type", "CUSTOM")
        if group and kind == "DEFAULT":
            executor = None  # the default executor runs each task's command: as plain tasks
        else:
            command, (ex_cpus, ex_mem, ex_disk), ex_problem = _executor(
                executor, f"{path}.executor", task_id, group
            )
            problem = problem or ex_problem
            if cmd is not None:
                problem = problem or "a task has either a command or an executor, not both (as in Mesos)"
            cpus, mem, disk = cpus + ex_cpus, mem + ex_mem, disk + ex_disk
    for key, why in _UNSUPPORTED.items():
        if raw.get(key) is not None:
            problem = problem or why
    if cmd is None and executor is None:
        problem = problem or "the task has neither a command (CommandInfo) nor an executor: nothing to run"
    if cpus <= 0:
        problem = problem or "the task uses no cpus: give it a 'cpus' scalar resource > 0"
    return TaskSpec(
        task_id, name, agent_id, cpus, mem, command if problem is None else "", problem, disk, executor, raw
    )


def _executor(
    raw: Mapping[str, Any], path: str, task_id: str, group: bool
) -> tuple[str, tuple[float, float, float], str | None]:
    """Read a custom ExecutorInfo; return ``(its command's script, (cpus, mem, disk), problem or None)``."""
    id_value(raw.get("executor_id"), f"{path}.executor_id")
    kind = raw.get("type", "CUSTOM")
    cpus, mem, disk, problem = _resources(raw.get("resources", []), f"{path}.resources")
    if kind != "CUSTOM":
        problem = problem or f"executor type {shown(kind)}: only CUSTOM executors (with a command) run here"
    if group:
        problem = problem or "task groups run on the default executor only (custom executors: LAUNCH)"
    if raw.get("container") is not None:
        problem = problem or (
            "executor containers (ContainerInfo: images, volumes) are not supported: executors run in the "
            "allocation's environment"
        )
    cmd = raw.get("command")
    if cmd is None:
        return "", (cpus, mem, disk), problem or "the executor has no command (CommandInfo): nothing to run"
    command, cmd_problem = shell_command(obj(cmd, f"{path}.command"), f"{path}.command", task_id)
    return command, (cpus, mem, disk), problem or cmd_problem


def shell_command(raw: Mapping[str, Any], path: str, task_id: str) -> tuple[str, str | None]:
    """Return ``(the bash -c script of a CommandInfo, problem or None)``."""
    value = optional_string(raw.get("value"), f"{path}.value")
    shell = raw.get("shell", True)
    if not isinstance(shell, bool):
        raise BadCallError(f"{path}.shell", f"expected true or false, got {shown(shell)}")
    args = [
        string(a, f"{path}.arguments[{i}]")
        for i, a in enumerate(items(raw.get("arguments", []), f"{path}.arguments"))
    ]
    exports = [f"export MESOS_TASK_ID={shlex.quote(task_id)}"]
    env = raw.get("environment")
    problem = None
    if env is not None:
        variables = items(
            obj(env, f"{path}.environment").get("variables", []), f"{path}.environment.variables"
        )
        for i, var in enumerate(variables):
            vpath = f"{path}.environment.variables[{i}]"
            var = obj(var, vpath)
            key = string(var.get("name"), f"{vpath}.name")
            if var.get("type", "VALUE") != "VALUE":
                problem = (
                    problem or f"environment variable {key!r}: only plain values (type VALUE) are supported"
                )
                continue
            text = var.get("value", "")
            if not isinstance(text, str):
                raise BadCallError(f"{vpath}.value", f"expected a string, got {shown(text)}")
            if not _NAME.match(key):
                raise BadCallError(f"{vpath}.name", f"not a shell variable name: {key!r}")
            exports.append(f"export {key}={shlex.quote(text)}")
    if items(raw.get("uris", []), f"{path}.uris"):
        problem = problem or "fetching URIs (command.uris) is not supported: read the files from the command"
    if value is None:
        return "", problem or "command.value is missing: there is nothing to run"
    script = value if shell else "exec " + shlex.join([value, *args[1:]])
    return "; ".join(exports) + "\n" + script, problem


def _resources(raw: Any, path: str) -> tuple[float, float, float, str | None]:
    """Return ``(cpus, mem, disk, problem)`` of a list of Resource objects."""
    totals = dict.fromkeys(OFFERED_RESOURCES, 0.0)
    problem = None
    for i, res in enumerate(items(raw, path)):
        rpath = f"{path}[{i}]"
        res = obj(res, rpath)
        name = string(res.get("name"), f"{rpath}.name")
        kind = res.get("type", "SCALAR")
        if name not in totals:
            problem = (
                problem
                or f"resource {name!r} is not offered here (offers have {', '.join(OFFERED_RESOURCES)})"
            )
            continue
        if kind != "SCALAR":
            raise BadCallError(f"{rpath}.type", f"{name} is a SCALAR resource, got {shown(kind)}")
        value = obj(res.get("scalar"), f"{rpath}.scalar").get("value")
        amount = number(value)
        if amount is None or amount < 0:
            raise BadCallError(f"{rpath}.scalar.value", f"expected a finite number >= 0, got {shown(value)}")
        totals[name] += amount
    return totals["cpus"], totals["mem"], totals["disk"], problem


@dataclass(frozen=True, slots=True)
class Launches:
    """What an ACCEPT comes to: statuses of the tasks refused, the tasks to run, the cores left unused."""

    refused: tuple[TaskStatus, ...]
    tasks: tuple[MesosTask, ...]
    unused: int
    runs: tuple[ExecutorRun, ...] = ()
    """The executor processes the tasks launched with a custom executor start."""


def plan_launches(
    fw: Framework,
    operations: Sequence[tuple[Launch, Sequence[TaskSpec]]],
    offers: Sequence[Offer],
    errors: Sequence[str],
    *,
    mem_per_core: float,
    now: float,
    new_id: Callable[[], str],
    retry_min: float,
    endpoint: str = "",
    disk_per_core: float = 0.0,
) -> Launches:
    """Decide, as a Mesos master validates an ACCEPT, which launched tasks run and which are refused.

    With an invalid offer among ``offers``/``errors``, every task is refused (TASK_DROPPED for
    ``PARTITION_AWARE`` frameworks, else TASK_LOST, ``REASON_INVALID_OFFERS``). Otherwise each task runs if
    it has no problem, names the offer's agent, has an id not in use and fits the cores and ``mem`` left;
    else TASK_ERROR (``REASON_TASK_INVALID``; for a task group, every task of the group with
    ``REASON_TASK_GROUP_INVALID``). ``new_id`` gives pool task ids; ``endpoint`` is the ``host:port`` custom
    executors call (``MESOS_AGENT_ENDPOINT``).
    """
    refused: list[TaskStatus] = []
    tasks: list[MesosTask] = []
    runs: list[ExecutorRun] = []

    def refuse(spec: TaskSpec, state: str, reason: str, message: str) -> None:
        agent = spec.agent_id
        refused.append(TaskStatus(spec.task_id, state, "SOURCE_MASTER", message, reason, agent, now))

    if errors or not offers:
        state = "TASK_DROPPED" if fw.partition_aware else "TASK_LOST"
        why = "Task launched with invalid offers: " + "; ".join(errors or ["no offer"])
        for _, specs in operations:
            for spec in specs:
                refuse(spec, state, "REASON_INVALID_OFFERS", why)
        return Launches(tuple(refused), (), 0)
    agent = offers[0].agent
    cores = sum(o.cores for o in offers)
    mem = cores * mem_per_core
    disk = cores * disk_per_core
    in_use = {t for t, task in fw.tasks.items() if not task.terminal}
    where = f"offer{'s' if len(offers) > 1 else ''} {', '.join(o.offer_id for o in offers)}"

    def problem(spec: TaskSpec) -> str | None:
        if spec.problem is not None:
            return spec.problem
        if spec.agent_id != agent.name:
            return f"Task uses agent {spec.agent_id} but {where} is on agent {agent.name}"
        if spec.task_id in in_use:
            return f"Task has duplicate ID: {spec.task_id}"
        return None

    def too_big(n: int, m: float, d: float) -> str | None:
        if n <= cores and m <= mem + 1e-6 and d <= disk + 1e-6:
            return None
        have = f"cpus {cores}, mem {mem:g}, disk {disk:g}"
        return (
            f"Task uses more resources (cpus {n}, mem {m:g}, disk {d:g}) than available ({have}) in {where}"
        )

    for op, specs in operations:
        if op.group:
            found = [problem(s) for s in specs]
            bad = next((p for p in found if p), None) or too_big(
                sum(s.cores for s in specs), sum(s.mem for s in specs), sum(s.disk for s in specs)
            )
            if bad is not None:
                for spec in specs:
                    refuse(spec, "TASK_ERROR", "REASON_TASK_GROUP_INVALID", f"Task group is invalid: {bad}")
                continue
        for spec in specs:
            bad = None if op.group else (problem(spec) or too_big(spec.cores, spec.mem, spec.disk))
            if bad is not None:
                refuse(spec, "TASK_ERROR", "REASON_TASK_INVALID", bad)
                continue
            command, run = spec.command, None
            if spec.executor is not None:
                executor_id = spec.executor["executor_id"]["value"]
                run = ExecutorRun(
                    new_run_id(executor_id), fw.framework_id, executor_id, agent.name, spec.executor,
                    spec.raw, spec.task_id,
                )  # fmt: skip
                command = executor_command(run.run_id, fw.framework_id, endpoint, spec.command)
                runs.append(run)
            pool_task = Task.shell(
                command, cores=spec.cores, stage=fw.stage, task_id=new_id(), agent=agent.name
            )
            tasks.append(
                MesosTask(
                    spec.task_id,
                    fw.framework_id,
                    agent.name,
                    pool_task,
                    UpdateQueue(retry_min),
                    run_id=None if run is None else run.run_id,
                )
            )
            in_use.add(spec.task_id)
            cores -= spec.cores
            mem -= spec.mem
            disk -= spec.disk
    return Launches(tuple(refused), tuple(tasks), cores, tuple(runs))
