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

from elastic.workflow_model import MAX_RUNTIME_CV, Stage, Workflow, check_scale
from elastic.workflow_sources import (
    BUILTIN_WORKFLOWS,
    WORKFLOW_GROUPS,
    builtin_workflow,
    expand_workflow_names,
    load_workflow,
    resolve_workflow,
    workflow_from_mapping,
)

__all__ = [
    "BUILTIN_WORKFLOWS",
    "MAX_RUNTIME_CV",
    "WORKFLOW_GROUPS",
    "Stage",
    "Workflow",
    "builtin_workflow",
    "check_scale",
    "expand_workflow_names",
    "load_workflow",
    "resolve_workflow",
    "workflow_from_mapping",
]
