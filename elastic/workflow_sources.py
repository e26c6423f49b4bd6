"""Where workflows come from: the built-in ones (:data:`BUILTIN_WORKFLOWS`) and TOML or JSON files.

The file format is in :mod:`elastic.workflow`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elastic.errors import ConfigError, UnknownNameError
from elastic.limits import MAX_STAGES, check_count
from elastic.workflow_model import STAGES_WHY, Stage, Workflow, workflow_from_stages
from elastic.workflow_suite import PUBLISHED_SHAPES
from elastic.workflow_wfformat import is_wfformat, workflow_from_wfformat

__all__ = [
    "BUILTIN_WORKFLOWS",
    "WORKFLOW_GROUPS",
    "builtin_workflow",
    "expand_workflow_names",
    "load_workflow",
    "resolve_workflow",
    "workflow_from_mapping",
]


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


BUILTIN_WORKFLOWS.update(
    {
        name: Workflow(
            name,
            tuple(
                Stage(stage, tasks, cores, runtime, cv, depends_on=deps)
                for stage, tasks, cores, runtime, cv, deps in shape
            ),
        )
        for name, shape in PUBLISHED_SHAPES.items()
    }
)
# the published shapes of :mod:`elastic.workflow_suite` (1000genome, cybershake, epigenomics, seismology,
# soykb, srasearch, bwa): DAGs with parallel branches, long chains and 4-core tasks

WORKFLOW_GROUPS: dict[str, tuple[str, ...]] = {
    "paper": ("blast", "montage", "statistics"),
    "published": tuple(PUBLISHED_SHAPES),
    "suite": ("blast", "montage", "statistics", *PUBLISHED_SHAPES),
}
"""Names that stand for several built-in workflows where a list is accepted (``--workflow suite``):
``paper`` is the ASA paper's three, ``published`` the shapes of :mod:`elastic.workflow_suite`, ``suite``
both."""


def expand_workflow_names(text: str) -> list[str]:
    """Split a comma-separated list of workflow names or files, expanding :data:`WORKFLOW_GROUPS`.

    >>> expand_workflow_names("montage, paper")
    ['montage', 'blast', 'statistics']
    """
    out: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        for name in WORKFLOW_GROUPS.get(item, (item,)) if item else ():
            if name not in out:
                out.append(name)
    return out


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
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory; give a workflow file (.toml or .json)")
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
            raise ConfigError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
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
    """Build a workflow from parsed TOML/JSON data; errors name ``source`` and the field.

    A WfCommons instance (WfFormat JSON: a ``workflow`` object of tasks) is read as one stage per task
    category (:mod:`elastic.workflow_wfformat`).
    """
    if is_wfformat(data):
        return workflow_from_wfformat(data, default_name=default_name, source=source)  # type: ignore[arg-type]
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a table/object with a 'stages' list at the top level")
    unknown = set(data) - {"name", "stages"}
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level keys {sorted(unknown)}; allowed: name, stages (or a WfCommons "
            "instance: a 'workflow' object of tasks)"
        )
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: name must be a non-empty string, got {name!r}")
    raw = data.get("stages")
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ConfigError(f"{source}: 'stages' must be a non-empty list of stage tables")
    check_count(len(raw), MAX_STAGES, f"{source}: stages", STAGES_WHY)
    stages = []
    for i, item in enumerate(raw):
        where = f"{source}: stages[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{where} must be a table/object, got {type(item).__name__}")
        bad = set(item) - _STAGE_KEYS
        if bad:
            allowed = ", ".join(sorted(_STAGE_KEYS))
            raise ConfigError(f"{where}: unknown keys {sorted(bad)}; allowed: {allowed}")
        for key in ("name", "tasks"):
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
                    cores=item.get("cores", 1),  # as in WfCommons' format: a task of one core
                    runtime=item.get("runtime"),
                    runtime_cv=item.get("runtime_cv", 0.0),
                    depends_on=None if deps is None else tuple(deps),
                    command=item.get("command"),
                )
            )
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return workflow_from_stages(name, tuple(stages), source)
