"""The workflows a comparison runs: scaled to a peak core count, with runtimes from the model or the store.

The ASA paper runs each workflow at several *peak* core counts (28, 56 and 112 at HPC2N): the widest
stage is as wide as the peak. :func:`scale_workflow` does that to a workflow model. Its parallel stages
(more than one task) get ``peak / max_width`` times as many tasks; single-task stages stay sequential.
Two ways to scale:

``strong`` (default)
    The same input split further: a parallel stage's total work is kept, so each task runs
    ``old tasks / new tasks`` times as long (BLAST's database in more chunks).
``weak``
    The input grows with the cores: each task keeps its runtime (a larger mosaic in more tiles), so
    the makespan stays and the core-hours grow, as the paper reports for Montage.

:func:`runtimes_from_store` replaces each stage's runtime model by what the store recorded for it
(the front door records, under the workflow's name, each stage's runtime from its first task's start
to its last task's end): mean and coefficient of variation of the uncensored records. A stage recorded
with all its tasks in parallel thus gets tasks as long as the stage took; a stage that ran in waves
gets tasks as long as all its waves, which errs on the long side.

Examples
--------
>>> from elastic.workflow import builtin_workflow
>>> wf = scale_workflow(builtin_workflow("blast"), 56)
>>> [(s.name, s.tasks, s.runtime) for s in wf.stages], wf.name
([('search', 56, 1800.0), ('merge', 1, 600.0)], 'blast-56c')
>>> [s.runtime for s in scale_workflow(builtin_workflow("blast"), 56, scaling="weak").stages]
[3600.0, 600.0]
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from elastic.errors import ConfigError
from elastic.workflow import Stage, Workflow

if TYPE_CHECKING:
    from elastic.strategies.knowledge import RuntimeHistory

__all__ = ["MIN_RECORDS", "SCALINGS", "runtimes_from_store", "scale_workflow", "scaled_name"]

SCALINGS: tuple[str, ...] = ("strong", "weak")
"""How :func:`scale_workflow` changes task runtimes (see the module docstring)."""

MIN_RECORDS = 2
"""Uncensored runtimes a stage needs in the store before they replace its model (mean and spread)."""


def scaled_name(name: str, peak: int) -> str:
    """Return the name of ``name`` scaled to ``peak`` cores (its runtime history is kept apart)."""
    return f"{name}-{peak}c"


def scale_workflow(workflow: Workflow, peak: int, *, scaling: str = "strong") -> Workflow:
    """Return ``workflow`` with its widest stage ``peak`` cores wide.

    Parameters
    ----------
    workflow : Workflow
        A workflow model.
    peak : int
        Cores of the widest stage after scaling; the workflow itself when it is already that wide.
    scaling : {"strong", "weak"}, default "strong"
        Whether a parallel stage's total work is kept (strong) or each task's runtime (weak).

    Returns
    -------
    Workflow
        Named ``<name>-<peak>c`` unless unchanged.

    Raises
    ------
    ConfigError
        ``scaling`` is unknown, ``peak`` < 1, or no whole number of tasks makes the widest stage
        ``peak`` cores wide (its tasks' cores must divide ``peak``).
    """
    if scaling not in SCALINGS:
        raise ConfigError(f"scaling must be one of {', '.join(SCALINGS)}, got {scaling!r}")
    if isinstance(peak, bool) or not isinstance(peak, int) or peak < 1:
        raise ConfigError(f"peak cores must be an integer >= 1, got {peak!r}")
    if peak == workflow.max_width:
        return workflow
    factor = peak / workflow.max_width
    stages = []
    for s in workflow.stages:
        tasks = s.tasks if s.tasks == 1 else max(1, round(s.tasks * factor))
        runtime = s.runtime
        if runtime is not None and scaling == "strong" and tasks != s.tasks:
            runtime = runtime * s.tasks / tasks
        stages.append(
            Stage(s.name, tasks, s.cores, runtime, s.runtime_cv, depends_on=s.depends_on, command=s.command)
        )
    scaled = Workflow(scaled_name(workflow.name, peak), tuple(stages))
    if scaled.max_width != peak:
        widest = max(workflow.stages, key=lambda s: s.width)
        raise ConfigError(
            f"workflow {workflow.name!r} cannot be scaled to {peak} peak cores: its widest stage "
            f"{widest.name!r} has tasks of {widest.cores} cores, so the peak must be a multiple of "
            f"{widest.cores} (got {scaled.max_width} cores with {peak})"
        )
    return scaled


def runtimes_from_store(
    workflow: Workflow, history: RuntimeHistory, *, source: str = "the store"
) -> Workflow:
    """Return ``workflow`` with each stage's runtime model fitted on its recorded runtimes.

    Parameters
    ----------
    workflow : Workflow
        The plan (stage names as recorded).
    history : RuntimeHistory
        Where runtimes are recorded (the project's :class:`~elastic.store.Store`).
    source : str, default "the store"
        Names the history in messages.

    Returns
    -------
    Workflow
        Stages with at least :data:`MIN_RECORDS` uncensored records get their mean as ``runtime`` and
        their coefficient of variation as ``runtime_cv`` (capped by the stage model's limit); the
        others keep their model.

    Raises
    ------
    ConfigError
        A stage has neither enough records nor a runtime model; the message names the stage, what was
        found and what to do.
    """
    from elastic.workflow import MAX_RUNTIME_CV

    stages = []
    for s in workflow.stages:
        runtimes, censored = history.stage_runtimes(workflow.name, s.name)
        done = np.asarray(runtimes, dtype=float)[~np.asarray(censored, dtype=bool)]
        done = done[np.isfinite(done) & (done > 0)]
        if len(done) >= MIN_RECORDS:
            mean = float(done.mean())
            cv = min(float(done.std(ddof=1)) / mean, MAX_RUNTIME_CV)
            cv = cv if math.isfinite(cv) else 0.0
            stages.append(Stage(s.name, s.tasks, s.cores, mean, cv, s.depends_on, s.command))
        elif s.runtime is not None:
            stages.append(s)
        else:
            raise ConfigError(
                f"workflow {workflow.name!r}, stage {s.name!r}: {len(done)} completed runtime(s) in {source} "
                f"(need {MIN_RECORDS}) and no runtime in the plan; run the workflow first (e.g. "
                f"`elastic run {workflow.name} ...`) or use --runtimes model"
            )
    return Workflow(workflow.name, tuple(stages))
