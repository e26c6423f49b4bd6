"""What a report keeps of each run: its metrics, its allocations' spans and, for one run, its busy cores.

A :class:`~elastic.control.execution.RunResult` holds the whole event timeline (tens of kB per run); a
comparison of 1,000 runs keeps only a :class:`RunRecord` of each: the metrics summary, one
:class:`AllocationSpan` per allocation (submitted, eligible, started, ended, cores, predicted wait: what
the Gantt chart and the learner's convergence are drawn from) and, only for the runs the Gantt chart
shows, the busy cores over time. Everything here is read from the timeline, so a stored or emulated run
gives the same record as a simulated one.

Examples
--------
>>> from elastic.metrics import Event, EventKind as K
>>> ev = (
...     Event(0.0, K.RUN_START),
...     Event(0.0, K.ALLOC_SUBMIT, allocation="a1", stage="s", cores=2, predicted_wait=5.0),
...     Event(10.0, K.ALLOC_START, allocation="a1"),
...     Event(10.0, K.TASK_START, task="t", stage="s", allocation="a1", cores=1),
...     Event(40.0, K.TASK_END, task="t", stage="s", allocation="a1", cores=1),
...     Event(40.0, K.ALLOC_END, allocation="a1", note="CANCELLED"),
...     Event(40.0, K.RUN_END),
... )
>>> [(a.submit, a.start, a.end, a.cores, a.wait) for a in allocation_spans(ev)]
[(0.0, 10.0, 40.0, 2, 10.0)]
>>> busy_steps(ev)
((0.0, 0), (10.0, 1), (40.0, 0))
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from elastic.control.execution import RunResult
from elastic.metrics import Event, EventKind

__all__ = ["AllocationSpan", "RunRecord", "allocation_spans", "busy_steps", "runs_frame"]


@dataclass(frozen=True, slots=True)
class AllocationSpan:
    """One allocation of a run, in seconds from the run's start.

    Attributes
    ----------
    stage : str
        Stage it was requested for (``"*"``: the whole workflow).
    cores : int
        Width.
    submit : float
        When it was requested.
    eligible : float
        When its dependencies and begin time were satisfied (``submit`` if it had none).
    start : float or None
        When it started; None if it never did (cancelled while pending, or the run ended first).
    end : float or None
        When it ended or was cancelled; None if the timeline does not say.
    predicted_wait : float or None
        The queue wait the strategy planned with, if any.
    note : str
        Why it was submitted (``initial``, ``walltime``, ``lost``, ``resubmit``).
    """

    stage: str
    cores: int
    submit: float
    eligible: float
    start: float | None
    end: float | None
    predicted_wait: float | None
    note: str

    @property
    def wait(self) -> float | None:
        """Queue wait (start - eligible), once started."""
        return None if self.start is None else self.start - self.eligible


def allocation_spans(events: Iterable[Event]) -> tuple[AllocationSpan, ...]:
    """Return every allocation of a timeline in submission order, times relative to RUN_START."""
    events = sorted(events, key=lambda e: e.time)
    origin = next((e.time for e in events if e.kind is EventKind.RUN_START), 0.0)
    rows: dict[str, dict[str, object]] = {}
    for e in events:
        if e.allocation is None:
            continue
        if e.kind is EventKind.ALLOC_SUBMIT:
            rows[e.allocation] = {
                "stage": e.stage or "*",
                "cores": e.cores,
                "submit": e.time - origin,
                "eligible": e.time - origin,
                "start": None,
                "end": None,
                "predicted_wait": e.predicted_wait,
                "note": e.note,
            }
        elif e.allocation in rows and e.kind is EventKind.ALLOC_START:
            row = rows[e.allocation]
            row["start"] = e.time - origin
            if e.eligible is not None:
                row["eligible"] = max(float(row["submit"]), e.eligible - origin)  # type: ignore[arg-type]
        elif e.allocation in rows and e.kind is EventKind.ALLOC_END:
            rows[e.allocation]["end"] = e.time - origin
    return tuple(AllocationSpan(**row) for row in rows.values())  # type: ignore[arg-type]


def busy_steps(events: Iterable[Event]) -> tuple[tuple[float, int], ...]:
    """Return ``(time, cores running tasks)`` at every change, times relative to RUN_START."""
    events = sorted(events, key=lambda e: e.time)
    origin = next((e.time for e in events if e.kind is EventKind.RUN_START), 0.0)
    steps: list[tuple[float, int]] = [(0.0, 0)]
    busy = 0
    ends = (EventKind.TASK_END, EventKind.TASK_LOST, EventKind.TASK_FAILED)
    for e in events:
        if e.kind is EventKind.TASK_START:
            busy += e.cores
        elif e.kind in ends:
            busy -= e.cores
        else:
            continue
        t = e.time - origin
        if steps[-1][0] == t:
            steps[-1] = (t, busy)
        else:
            steps.append((t, busy))
    return tuple(steps)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What a report keeps of one run.

    Attributes
    ----------
    workflow : str
        The workflow's name before scaling (``montage``), the report's row label.
    cores : int
        Peak cores the workflow was scaled to (its widest stage).
    strategy : str
        Strategy registry name.
    index : int
        Run number within its cell (same start point of the background for every strategy).
    order : int
        Position among all runs of this strategy in the experiment: the order its learner saw them.
    status : str
        ``completed`` or why not.
    stages : tuple of str
        Stage names in workflow order.
    metrics : mapping of str to float
        :meth:`~elastic.metrics.RunMetrics.summary` (seconds, core-hours, per-stage ``<stage>.<metric>``).
    allocations : tuple of AllocationSpan
        Every allocation, in submission order.
    busy : tuple of (float, int) or None
        Busy cores over time (:func:`busy_steps`), kept only for the runs the Gantt chart shows.
    """

    workflow: str
    cores: int
    strategy: str
    index: int
    order: int
    status: str
    stages: tuple[str, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)
    allocations: tuple[AllocationSpan, ...] = ()
    busy: tuple[tuple[float, int], ...] | None = None

    @classmethod
    def from_result(
        cls,
        result: RunResult,
        *,
        workflow: str,
        cores: int,
        strategy: str,
        index: int,
        order: int,
        stages: Sequence[str],
        keep_busy: bool = False,
    ) -> RunRecord:
        """Keep what the report needs of ``result`` (``strategy``: the registry name it ran under)."""
        return cls(
            workflow=workflow,
            cores=cores,
            strategy=strategy,
            index=index,
            order=order,
            status=result.status,
            stages=tuple(stages),
            metrics=dict(result.metrics.summary()),
            allocations=allocation_spans(result.events),
            busy=busy_steps(result.events) if keep_busy else None,
        )

    @property
    def end(self) -> float:
        """Latest time the record knows of (makespan, or the last allocation end), seconds."""
        ends = [a.end for a in self.allocations if a.end is not None]
        makespan = self.metrics.get("makespan", math.nan)
        return max([*ends, 0.0 if math.isnan(makespan) else makespan])


def runs_frame(records: Iterable[RunRecord]) -> pd.DataFrame:
    """One row per run: workflow, cores, strategy, run, order, status and every metric (the report's CSV)."""
    rows = [
        {
            "workflow": r.workflow,
            "cores": r.cores,
            "strategy": r.strategy,
            "run": r.index,
            "order": r.order,
            "status": r.status,
            **r.metrics,
        }
        for r in records
    ]
    return pd.DataFrame(rows)
