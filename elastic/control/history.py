"""What a run leaves in the runtime history: each stage's runtime, and the whole workflow's.

:func:`learn_runtimes` is called by every driver when a run ends (the declared-workflow
:class:`~elastic.control.runner.Runner` and the front door); the history is what the next runs' walltime
requests and expected durations come from (:class:`~elastic.strategies.knowledge.Knowledge`).
"""

from __future__ import annotations

from collections.abc import Sequence

from elastic.strategies.base import StageView
from elastic.strategies.knowledge import TOTAL, Knowledge, task_label

__all__ = ["learn_runtimes"]


def learn_runtimes(
    knowledge: Knowledge, stages: Sequence[StageView], *, status: str, end: float, width: int
) -> None:
    """Add a run's stage runtimes to the history.

    A completed stage's runtime is :attr:`StageView.runtime` where measured (never counting time when its
    tasks only waited for cores), else first task start to last task end. A stage cut short by the end of
    the run is recorded as censored: it ran at least first start to the end. A runtime includes work
    re-run after a walltime kill, which errs on the long side. The total (label ``"*"``, what a Big-Job
    allocation must hold) is the sum of the stage runtimes, so waits between stages under other
    strategies do not inflate it. A stage that measured its tasks' runtimes
    (:attr:`~elastic.strategies.base.StageView.task_runtime`) also records that, under
    :func:`~elastic.strategies.knowledge.task_label`: what placement starts its tasks by
    (:meth:`~elastic.strategies.knowledge.Knowledge.task_estimate`).

    Parameters
    ----------
    knowledge : Knowledge
        Where the history goes.
    stages : sequence of StageView
        The run's stages at its end.
    status : str
        ``"completed"`` or why not (then the total is censored).
    end : float
        When the run ended (backend seconds).
    width : int
        Cores of the widest stage (recorded with the total).
    """
    total = 0.0
    censored = status != "completed"
    for s in stages:
        if s.start_time is None:
            continue
        if s.end_time is not None:
            runtime = s.runtime if s.runtime is not None else s.end_time - s.start_time
            knowledge.record_runtime(s.name, runtime, cores=s.width)
            if s.task_runtime is not None:
                knowledge.record_runtime(task_label(s.name), s.task_runtime, cores=s.cores)
        else:
            runtime = end - s.start_time
            knowledge.record_runtime(s.name, runtime, censored=True, cores=s.width)
        total += runtime
    if total > 0:
        knowledge.record_runtime(TOTAL, total, censored=censored, cores=width)
