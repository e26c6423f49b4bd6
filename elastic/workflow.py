"""Workflows: an ordered list of stages, each a set of identical tasks.

A :class:`Workflow` is what a strategy allocates cores for. Each :class:`Stage` has a number of tasks,
the cores each task needs, the stages it depends on (by default the stage before it) and a task runtime
distribution. The distribution serves two purposes: in pure simulation task durations are sampled from
it, and its mean is the user's runtime *estimate* that strategies fall back on before any runtime history
exists. For real runs a stage may carry a shell ``command``; without one, a real task sleeps for its
sampled duration (divided by the clock speed-up on the scaled mock clock).

Workflows come from :func:`builtin_workflow` (``demo3``, ...) or from a TOML or JSON file
(:func:`load_workflow`)::

    name = "example"
    [[stages]]
    name = "split"
    tasks = 1
    cores = 1
    runtime = 600        # mean task runtime, seconds
    runtime_cv = 0.2     # coefficient of variation (lognormal); 0 = every task takes exactly `runtime`
    [[stages]]
    name = "work"
    tasks = 8
    cores = 1
    runtime = 1800
    depends_on = ["split"]   # optional; default: the previous stage

Examples
--------
>>> wf = builtin_workflow("demo3")
>>> [(s.name, s.tasks, s.cores) for s in wf.stages]
[('prepare', 1, 1), ('process', 8, 1), ('merge', 1, 1)]
>>> wf.max_width
8
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elastic.errors import ConfigError, UnknownNameError
from elastic.limits import MAX_STAGE_TASKS, MAX_STAGES, check_count

__all__ = [
    "BUILTIN_WORKFLOWS",
    "MAX_RUNTIME_CV",
    "Stage",
    "Workflow",
    "builtin_workflow",
    "check_scale",
    "load_workflow",
    "resolve_workflow",
    "workflow_from_mapping",
]


MAX_RUNTIME_CV = 100.0
"""Largest ``runtime_cv`` a stage may have. At cv = 100 the lognormal's median is already 100 times
below its mean (almost every task is short, a rare one takes days); far beyond it the sampled
durations overflow or round to zero."""


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of a workflow: ``tasks`` identical tasks of ``cores`` cores each.

    Parameters
    ----------
    name : str
        Unique within the workflow.
    tasks : int
        Number of tasks, >= 1.
    cores : int
        Cores per task, >= 1.
    runtime : float or None, default None
        Mean task runtime in seconds, > 0 (also the user's estimate before any history exists); ``None``
        when unknown (a plan for the front door; running a declared workflow needs it).
    runtime_cv : float, default 0.0
        Coefficient of variation of the task runtime (standard deviation / mean), in
        ``[0, MAX_RUNTIME_CV]``. Durations follow a lognormal distribution with this mean and cv; 0 means
        every task takes exactly ``runtime``.
    depends_on : tuple of str or None, default None
        Stages that must complete before this one starts; ``None`` means the previous stage (none for the
        first stage). Set by :class:`Workflow` to the resolved tuple.
    command : str or None, default None
        Shell command a real task runs (a non-empty string); ``None`` means "sleep for the sampled
        duration".
    """

    name: str
    tasks: int
    cores: int
    runtime: float | None = None
    runtime_cv: float = 0.0
    depends_on: tuple[str, ...] | None = None
    command: str | None = None

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ConfigError(f"Stage.name must be a non-empty string, got {self.name!r}")
        where = f"stage {self.name!r}"
        if isinstance(self.tasks, bool) or not isinstance(self.tasks, int) or self.tasks < 1:
            raise ConfigError(f"{where}: tasks must be an integer >= 1, got {self.tasks!r}")
        if isinstance(self.cores, bool) or not isinstance(self.cores, int) or self.cores < 1:
            raise ConfigError(f"{where}: cores must be an integer >= 1, got {self.cores!r}")
        if self.runtime is not None and (not _finite(self.runtime) or self.runtime <= 0):
            raise ConfigError(
                f"{where}: runtime must be a number of seconds > 0 (or left out), got {self.runtime!r}"
            )
        if not _finite(self.runtime_cv) or not 0 <= self.runtime_cv <= MAX_RUNTIME_CV:
            allowed = f">= 0 and <= {MAX_RUNTIME_CV:g}"
            raise ConfigError(f"{where}: runtime_cv must be a number {allowed}, got {self.runtime_cv!r}")
        if self.command is not None and not (isinstance(self.command, str) and self.command.strip()):
            raise ConfigError(
                f"{where}: command must be a non-empty shell command string (or left out to sleep for "
                f"the sampled duration), got {self.command!r}"
            )

    @property
    def width(self) -> int:
        """Cores needed to run every task of the stage at once (tasks x cores)."""
        return self.tasks * self.cores

    def sample_runtimes(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Draw task durations in seconds (lognormal with mean ``runtime`` and cv ``runtime_cv``).

        Parameters
        ----------
        rng : numpy.random.Generator
            Source of randomness (seeded by the caller for reproducible runs).
        n : int or None, default None
            How many; ``None`` means one per task.

        Returns
        -------
        ndarray of float64
            Durations, all > 0.

        Raises
        ------
        ConfigError
            The stage has no runtime model.
        """
        if self.runtime is None:
            raise ConfigError(f"stage {self.name!r} has no runtime model to draw task durations from")
        size = self.tasks if n is None else n
        if self.runtime_cv == 0:
            return np.full(size, float(self.runtime))
        # lognormal parameters from mean m and cv c: sigma^2 = ln(1 + c^2), mu = ln(m) - sigma^2 / 2
        sigma2 = math.log1p(self.runtime_cv**2)
        mu = math.log(self.runtime) - sigma2 / 2
        return rng.lognormal(mu, math.sqrt(sigma2), size)


@dataclass(frozen=True, slots=True)
class Workflow:
    """An ordered list of stages; dependencies may only point to earlier stages.

    Parameters
    ----------
    name : str
        Workflow name (the key runtime history is stored under).
    stages : tuple of Stage
        At least one, unique names. Stages whose ``depends_on`` is ``None`` are given the previous stage.

    Raises
    ------
    ConfigError
        No stages, duplicate names, or a dependency on an unknown or later stage.
    """

    name: str
    stages: tuple[Stage, ...]

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("Workflow.name must be a non-empty string")
        if not self.stages:
            raise ConfigError(f"workflow {self.name!r}: needs at least one stage")
        resolved: list[Stage] = []
        seen: set[str] = set()
        for i, stage in enumerate(self.stages):
            if stage.name in seen:
                raise ConfigError(f"workflow {self.name!r}: stage name {stage.name!r} is used twice")
            deps = stage.depends_on
            if deps is None:
                deps = (self.stages[i - 1].name,) if i > 0 else ()
            for dep in deps:
                if dep not in seen:
                    earlier = ", ".join(sorted(seen)) or "none"
                    raise ConfigError(
                        f"workflow {self.name!r}: stage {stage.name!r} depends on {dep!r}, which is not an "
                        f"earlier stage (earlier stages: {earlier})"
                    )
            seen.add(stage.name)
            resolved.append(_replace_deps(stage, tuple(deps)))
        object.__setattr__(self, "stages", tuple(resolved))

    @property
    def max_width(self) -> int:
        """Cores of the widest stage."""
        return max(s.width for s in self.stages)

    @property
    def names(self) -> tuple[str, ...]:
        """Stage names in order."""
        return tuple(s.name for s in self.stages)

    def stage(self, name: str) -> Stage:
        """Return the stage called ``name``; raise UnknownNameError."""
        for s in self.stages:
            if s.name == name:
                return s
        raise UnknownNameError("stage", name, self.names)

    def index(self, name: str) -> int:
        """Return the position of stage ``name``; raise UnknownNameError."""
        return self.names.index(self.stage(name).name)


def _replace_deps(stage: Stage, deps: tuple[str, ...]) -> Stage:
    return Stage(
        name=stage.name,
        tasks=stage.tasks,
        cores=stage.cores,
        runtime=stage.runtime,
        runtime_cv=stage.runtime_cv,
        depends_on=deps,
        command=stage.command,
    )


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


BUILTIN_WORKFLOWS: dict[str, Workflow] = {
    "demo3": Workflow(
        "demo3",
        (
            Stage("prepare", tasks=1, cores=1, runtime=600.0, runtime_cv=0.2),
            Stage("process", tasks=8, cores=1, runtime=1800.0, runtime_cv=0.2),
            Stage("merge", tasks=1, cores=1, runtime=300.0, runtime_cv=0.2),
        ),
    ),
    "blast": Workflow(
        "blast",
        (
            Stage("search", tasks=28, cores=1, runtime=3600.0, runtime_cv=0.3),
            Stage("merge", tasks=1, cores=1, runtime=600.0, runtime_cv=0.2),
        ),
    ),
    "montage": Workflow(
        "montage",
        (
            Stage("project", tasks=28, cores=1, runtime=900.0, runtime_cv=0.3),
            Stage("diff", tasks=28, cores=1, runtime=600.0, runtime_cv=0.3),
            Stage("fit", tasks=1, cores=1, runtime=600.0, runtime_cv=0.2),
            Stage("background", tasks=28, cores=1, runtime=600.0, runtime_cv=0.3),
            Stage("add", tasks=1, cores=1, runtime=1200.0, runtime_cv=0.2),
        ),
    ),
    "statistics": Workflow(
        "statistics",
        (
            Stage("split", tasks=1, cores=1, runtime=600.0, runtime_cv=0.2),
            Stage("chunk_stats", tasks=28, cores=1, runtime=1800.0, runtime_cv=0.3),
            Stage("merge", tasks=1, cores=1, runtime=600.0, runtime_cv=0.2),
            Stage("period_stats", tasks=28, cores=1, runtime=1800.0, runtime_cv=0.3),
        ),
    ),
}
"""Built-in workflows by name. ``demo3`` is the issue's 3-stage demo: 1 task x 1 core, then 8 tasks x 1
core, then 1 task x 1 core. ``blast``, ``montage`` and ``statistics`` mimic the shapes of the ASA paper's
workflows at 28 cores: a wide stage then a sequential one; alternating wide and sequential stages; two
narrow and two wide stages interleaved, each long (split, per-chunk statistics, merge, per-period
statistics; the stage names of the Statistics demo, so its recorded runtimes apply).
:func:`elastic.report.scaling.scale_workflow` widens them to the paper's other scales (56 and 112 cores)."""


def builtin_workflow(name: str) -> Workflow:
    """Return the built-in workflow ``name``; raise UnknownNameError listing the built-in names."""
    try:
        return BUILTIN_WORKFLOWS[name]
    except KeyError:
        raise UnknownNameError("workflow", name, BUILTIN_WORKFLOWS) from None


def resolve_workflow(name_or_path: str) -> Workflow:
    """Return a built-in workflow by name, or load one from a ``.toml``/``.json`` file.

    Raises
    ------
    UnknownNameError
        Neither a built-in name nor an existing file.
    ConfigError
        The file is not a valid workflow.
    """
    if name_or_path in BUILTIN_WORKFLOWS:
        return BUILTIN_WORKFLOWS[name_or_path]
    path = Path(name_or_path)
    if path.suffix.lower() in (".toml", ".json") or path.exists():
        return load_workflow(path)
    raise UnknownNameError("workflow (built-in name, or a .toml/.json file)", name_or_path, BUILTIN_WORKFLOWS)


def load_workflow(path: str | Path) -> Workflow:
    """Load a workflow from a TOML or JSON file (format in the module docstring).

    Parameters
    ----------
    path : str or Path
        A ``.toml`` or ``.json`` file; the workflow name defaults to the file stem.

    Raises
    ------
    ConfigError
        The file is missing, unreadable, of another type, or does not describe a valid workflow; the
        message names the file and the offending field (e.g. ``stages[1].tasks``).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: workflow file not found")
    suffix = path.suffix.lower()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the workflow file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}:{line}: byte 0x{raw[exc.start]:02x} is not UTF-8 text; a workflow file is TOML or "
            "JSON text (format in the elastic.workflow docstring)"
        ) from None
    data: Any
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    elif suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10: the same parser, installed as tomli
            import tomli as tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    else:
        raise ConfigError(f"{path}: workflow files must end in .toml or .json, got {suffix or 'no suffix'!r}")
    return workflow_from_mapping(data, default_name=path.stem, source=str(path))


_STAGE_KEYS = {"name", "tasks", "cores", "runtime", "runtime_cv", "depends_on", "command"}


def workflow_from_mapping(data: object, *, default_name: str, source: str) -> Workflow:
    """Build a workflow from parsed TOML/JSON data; errors name ``source`` and the field."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a table/object with a 'stages' list at the top level")
    unknown = set(data) - {"name", "stages"}
    if unknown:
        raise ConfigError(f"{source}: unknown top-level keys {sorted(unknown)}; allowed: name, stages")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: name must be a non-empty string, got {name!r}")
    raw = data.get("stages")
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ConfigError(f"{source}: 'stages' must be a non-empty list of stage tables")
    check_count(len(raw), MAX_STAGES, f"{source}: stages", _STAGES_WHY)
    stages = []
    for i, item in enumerate(raw):
        where = f"{source}: stages[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{where} must be a table/object, got {type(item).__name__}")
        bad = set(item) - _STAGE_KEYS
        if bad:
            allowed = ", ".join(sorted(_STAGE_KEYS))
            raise ConfigError(f"{where}: unknown keys {sorted(bad)}; allowed: {allowed}")
        for key in ("name", "tasks", "cores"):
            if key not in item:
                raise ConfigError(f"{where}: missing required key {key!r}")
        deps = item.get("depends_on")
        deps_ok = isinstance(deps, Sequence) and not isinstance(deps, str)
        if deps is not None and not (deps_ok and all(isinstance(d, str) for d in deps)):
            raise ConfigError(f"{where}.depends_on must be a list of stage names, got {deps!r}")
        try:
            stages.append(
                Stage(
                    name=item["name"],
                    tasks=item["tasks"],
                    cores=item["cores"],
                    runtime=item.get("runtime"),
                    runtime_cv=item.get("runtime_cv", 0.0),
                    depends_on=None if deps is None else tuple(deps),
                    command=item.get("command"),
                )
            )
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    try:
        workflow = Workflow(name, tuple(stages))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    check_scale(workflow, source)
    return workflow


_STAGES_WHY = "planning a chain of stages grows faster than the square of their number: 1,000 take minutes"
_TASKS_WHY = "simulating a stage costs more than its task count: 100,000 tasks take about 90 s"


def check_scale(workflow: Workflow, source: str | None = None) -> None:
    """Refuse a declared workflow too big to plan or simulate in minutes (:mod:`elastic.limits`).

    Parameters
    ----------
    workflow : Workflow
        The declared workflow.
    source : str or None, default None
        Where it came from (a file), for the message; default: the workflow's name.

    Raises
    ------
    ConfigError
        More than :data:`~elastic.limits.MAX_STAGES` stages, or a stage of more than
        :data:`~elastic.limits.MAX_STAGE_TASKS` tasks; the message gives the limit.
    """
    where = source if source is not None else f"workflow {workflow.name!r}"
    check_count(len(workflow.stages), MAX_STAGES, f"{where}: stages", _STAGES_WHY)
    for stage in workflow.stages:
        check_count(stage.tasks, MAX_STAGE_TASKS, f"{where}: stage {stage.name!r}: tasks", _TASKS_WHY)
