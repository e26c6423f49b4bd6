"""Run metrics: pure functions on a recorded event timeline.

The run driver (:mod:`elastic.control.runner`) records one :class:`Event` per thing that happens during a run
(allocation submitted/started/ended, task started/ended/lost, stage ready/ended, run start/end), all in
backend seconds. Everything here is computed from that list alone, so a stored or hand-made timeline gives
the same figures as a live run.

Definitions (ASA paper, Section 4.1, and issue 4):

makespan
    ``RUN_END - RUN_START``.
stage execution time
    Last successful task end of the stage - first task start of the stage.
queue wait
    Per allocation ``start - eligible``, where an allocation is eligible at submit or, with batch
    dependencies or a begin time, once those are satisfied (a dependency hold is not a queue wait: it
    is not charged and overlaps the predecessor's run); a stage's queue wait sums the waits of the
    allocations requested for it; the total sums all allocations (Big-Job has one). Allocations
    cancelled before they started have no wait (their time in the queue shows up in perceived waits).
perceived wait
    Per stage: first task start - the moment the stage became ready (its dependencies done; the run start
    for the first stage): the time the stage's work really waited for cores.
core-hours charged / used
    Charged = allocated cores x (allocation end - start), over allocations that started. Used = task cores x
    (task end - start) over every task attempt, lost attempts included (those cores were busy).
overhead
    Idle core-seconds = charged - used core-seconds (reported in core-hours).
resubmissions
    Allocation submissions other than the first for a stage's plan: walltime follow-ups, replacements of
    lost allocations, and ASA-naive cancel-and-resubmit.
prediction hits / misses
    For allocations submitted with a predicted queue wait: a *hit* when the actual wait is within
    ``tolerance`` of the prediction, an *over*-prediction (the paper's "miss": resources came earlier than
    predicted) when the actual wait is shorter by more, an *under*-prediction when longer.

Examples
--------
>>> ev = [
...     Event(0.0, EventKind.RUN_START),
...     Event(0.0, EventKind.STAGE_READY, stage="s"),
...     Event(0.0, EventKind.ALLOC_SUBMIT, allocation="a1", stage="s", cores=2, walltime=100.0),
...     Event(10.0, EventKind.ALLOC_START, allocation="a1"),
...     Event(10.0, EventKind.TASK_START, task="t1", stage="s", allocation="a1", cores=1),
...     Event(40.0, EventKind.TASK_END, task="t1", stage="s", allocation="a1", cores=1),
...     Event(40.0, EventKind.ALLOC_END, allocation="a1", note="CANCELLED"),
...     Event(40.0, EventKind.RUN_END),
... ]
>>> m = compute_metrics(ev)
>>> (m.makespan, m.queue_wait, m.perceived_wait, m.core_seconds_charged, m.core_seconds_used)
(40.0, 10.0, 10.0, 60.0, 30.0)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from elastic.errors import ConfigError

__all__ = [
    "Event",
    "EventKind",
    "PredictionOutcome",
    "RunMetrics",
    "StageMetrics",
    "allocation_waits",
    "compute_metrics",
    "core_seconds_charged",
    "core_seconds_used",
    "makespan",
    "perceived_waits",
    "prediction_outcomes",
    "stage_execution_times",
]


class EventKind(str, enum.Enum):
    """What an :class:`Event` records."""

    RUN_START = "run_start"
    """The workflow was started."""
    RUN_END = "run_end"
    """The workflow finished (``note``: ``"completed"`` or why not)."""
    STAGE_READY = "stage_ready"
    """Every dependency of ``stage`` is done; its tasks were handed to the executor."""
    STAGE_END = "stage_end"
    """The last task of ``stage`` completed."""
    ALLOC_SUBMIT = "alloc_submit"
    """Allocation requested (``cores``, ``walltime``, ``predicted_wait``, ``note`` = reason)."""
    ALLOC_START = "alloc_start"
    """The allocation started (seen by the driver)."""
    ALLOC_END = "alloc_end"
    """The allocation ended (``note`` = final state) or was cancelled before starting."""
    TASK_START = "task_start"
    """A task attempt started on ``allocation``."""
    TASK_END = "task_end"
    """A task attempt completed."""
    TASK_LOST = "task_lost"
    """A task attempt was lost (its allocation ended); the task is re-queued."""


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a run's timeline; fields not meaningful for ``kind`` stay at their defaults.

    Attributes
    ----------
    time : float
        Backend seconds.
    kind : EventKind
        What happened.
    stage : str or None
        Stage (for allocations: the stage it was requested for, ``"*"`` for the whole workflow).
    allocation : str or None
        Our allocation id.
    task : str or None
        Task id.
    cores : int
        Cores of the allocation or task.
    walltime : float or None
        Requested walltime (ALLOC_SUBMIT).
    predicted_wait : float or None
        Queue wait the strategy predicted when submitting (ALLOC_SUBMIT), if any.
    note : str
        Reason or final state, in words.
    eligible : float or None
        ALLOC_START only: when the allocation became eligible to start (its dependencies and begin time
        satisfied); ``None`` = at submit. The queue wait is ``start - eligible``.
    job_id : str or None
        ALLOC_SUBMIT only: the backend's batch job id.
    """

    time: float
    kind: EventKind
    stage: str | None = None
    allocation: str | None = None
    task: str | None = None
    cores: int = 0
    walltime: float | None = None
    predicted_wait: float | None = None
    note: str = ""
    eligible: float | None = None
    job_id: str | None = None


@dataclass(frozen=True, slots=True)
class StageMetrics:
    """Per-stage figures (seconds); ``nan`` when the stage never ran."""

    name: str
    execution_time: float
    queue_wait: float
    perceived_wait: float


@dataclass(frozen=True, slots=True)
class PredictionOutcome:
    """Counts of wait predictions that were hits, over-predictions (misses) and under-predictions."""

    hits: int = 0
    over: int = 0
    under: int = 0


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """All metrics of one run (seconds and core-seconds; core-hours as properties)."""

    makespan: float
    queue_wait: float
    perceived_wait: float
    core_seconds_charged: float
    core_seconds_used: float
    resubmissions: int
    allocations: int
    lost_tasks: int
    predictions: PredictionOutcome
    stages: tuple[StageMetrics, ...]

    @property
    def overhead_core_seconds(self) -> float:
        """Idle core-seconds: charged - used."""
        return self.core_seconds_charged - self.core_seconds_used

    @property
    def core_hours_charged(self) -> float:
        """Charged core-hours."""
        return self.core_seconds_charged / 3600.0

    @property
    def core_hours_used(self) -> float:
        """Used core-hours."""
        return self.core_seconds_used / 3600.0

    @property
    def overhead_core_hours(self) -> float:
        """Idle core-hours."""
        return self.overhead_core_seconds / 3600.0

    def summary(self) -> dict[str, float]:
        """Flat ``name -> number`` view (for tables and the store)."""
        out: dict[str, float] = {
            "makespan": self.makespan,
            "queue_wait": self.queue_wait,
            "perceived_wait": self.perceived_wait,
            "core_hours_charged": self.core_hours_charged,
            "core_hours_used": self.core_hours_used,
            "overhead_core_hours": self.overhead_core_hours,
            "resubmissions": float(self.resubmissions),
            "allocations": float(self.allocations),
            "lost_tasks": float(self.lost_tasks),
            "prediction_hits": float(self.predictions.hits),
            "prediction_misses": float(self.predictions.over),
            "prediction_under": float(self.predictions.under),
        }
        for s in self.stages:
            for key, value in asdict(s).items():
                if key != "name":
                    out[f"{s.name}.{key}"] = value
        return out


def _one(events: Iterable[Event], kind: EventKind) -> float:
    times = [e.time for e in events if e.kind is kind]
    if len(times) != 1:
        raise ConfigError(f"timeline must hold exactly one {kind.value} event, found {len(times)}")
    return times[0]


def makespan(events: Sequence[Event]) -> float:
    """Return RUN_END - RUN_START; raise ConfigError unless there is exactly one of each."""
    return _one(events, EventKind.RUN_END) - _one(events, EventKind.RUN_START)


@dataclass(slots=True)
class _Alloc:
    submit: float
    cores: int
    stage: str | None
    predicted: float | None
    reason: str
    start: float | None = None
    end: float | None = None
    eligible: float | None = None

    @property
    def wait(self) -> float | None:
        """Queue wait: start - max(submit, eligible), once started."""
        if self.start is None:
            return None
        return self.start - max(self.submit, self.eligible if self.eligible is not None else self.submit)


def _alloc_table(events: Sequence[Event]) -> dict[str, _Alloc]:
    table: dict[str, _Alloc] = {}
    for e in events:
        if e.allocation is None:
            continue
        if e.kind is EventKind.ALLOC_SUBMIT:
            table[e.allocation] = _Alloc(e.time, e.cores, e.stage, e.predicted_wait, e.note)
        elif e.kind in (EventKind.ALLOC_START, EventKind.ALLOC_END):
            row = table.get(e.allocation)
            if row is None:
                raise ConfigError(
                    f"{e.kind.value} at {e.time}: allocation {e.allocation!r} was never submitted"
                )
            if e.kind is EventKind.ALLOC_START:
                row.start = e.time
                row.eligible = e.eligible
            else:
                row.end = e.time
    return table


def allocation_waits(events: Sequence[Event]) -> dict[str, float]:
    """Return ``allocation -> queue wait`` (start - eligible) for every allocation that started."""
    return {a: row.wait for a, row in _alloc_table(events).items() if row.wait is not None}


def core_seconds_charged(events: Sequence[Event]) -> float:
    """Allocated cores x (end - start) over started allocations; an open one ends at RUN_END."""
    run_end = max((e.time for e in events if e.kind is EventKind.RUN_END), default=None)
    total = 0.0
    for alloc, row in _alloc_table(events).items():
        if row.start is None:
            continue
        end = row.end if row.end is not None else run_end
        if end is None:
            raise ConfigError(f"allocation {alloc!r} started but never ended and the run has no RUN_END")
        total += row.cores * (end - row.start)
    return total


def _task_attempts(events: Sequence[Event]) -> list[tuple[Event, Event]]:
    """Pair every TASK_START with the TASK_END/TASK_LOST of the same task and allocation."""
    open_: dict[tuple[str | None, str | None], Event] = {}
    pairs: list[tuple[Event, Event]] = []
    for e in events:
        key = (e.task, e.allocation)
        if e.kind is EventKind.TASK_START:
            if key in open_:
                raise ConfigError(f"task {e.task!r} started twice on {e.allocation!r} (at {e.time})")
            open_[key] = e
        elif e.kind in (EventKind.TASK_END, EventKind.TASK_LOST):
            start = open_.pop(key, None)
            if start is None:
                raise ConfigError(f"{e.kind.value} at {e.time} for task {e.task!r} that was not running")
            pairs.append((start, e))
    if open_:
        raise ConfigError(f"tasks still running at the end of the timeline: {sorted(map(str, open_))}")
    return pairs


def core_seconds_used(events: Sequence[Event]) -> float:
    """Task cores x (end - start) over every task attempt (lost attempts included)."""
    return sum(s.cores * (e.time - s.time) for s, e in _task_attempts(events))


def stage_execution_times(events: Sequence[Event]) -> dict[str, float]:
    """Return ``stage -> last successful task end - first task start`` for stages that ran."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for e in events:
        if e.stage is None:
            continue
        if e.kind is EventKind.TASK_START:
            first[e.stage] = min(first.get(e.stage, e.time), e.time)
        elif e.kind is EventKind.TASK_END:
            last[e.stage] = max(last.get(e.stage, e.time), e.time)
    return {s: last[s] - first[s] for s in first if s in last}


def perceived_waits(events: Sequence[Event]) -> dict[str, float]:
    """Return ``stage -> first task start - STAGE_READY`` for stages that became ready and started."""
    ready: dict[str, float] = {}
    first: dict[str, float] = {}
    for e in events:
        if e.stage is None:
            continue
        if e.kind is EventKind.STAGE_READY:
            ready.setdefault(e.stage, e.time)
        elif e.kind is EventKind.TASK_START:
            first.setdefault(e.stage, e.time)
    return {s: first[s] - ready[s] for s in ready if s in first}


def prediction_outcomes(
    events: Sequence[Event], *, tolerance: float = 60.0, relative: float = 0.1
) -> PredictionOutcome:
    """Classify every wait prediction against the allocation's real wait.

    Parameters
    ----------
    events : sequence of Event
        The timeline.
    tolerance : float, default 60.0
        Absolute slack in seconds counted as a hit.
    relative : float, default 0.1
        Relative slack (share of the actual wait); the larger of the two slacks applies.

    Returns
    -------
    PredictionOutcome
        Hits, over-predictions (the paper's misses) and under-predictions. Allocations cancelled before
        they started are not counted.
    """
    hits = over = under = 0
    for row in _alloc_table(events).values():
        predicted, actual = row.predicted, row.wait
        if predicted is None or actual is None:
            continue
        slack = max(tolerance, relative * actual)
        if predicted - actual > slack:
            over += 1
        elif actual - predicted > slack:
            under += 1
        else:
            hits += 1
    return PredictionOutcome(hits, over, under)


def compute_metrics(events: Sequence[Event], *, stages: Sequence[str] | None = None) -> RunMetrics:
    """Compute every metric of one run from its timeline.

    Parameters
    ----------
    events : sequence of Event
        The timeline, in time order, with exactly one RUN_START and one RUN_END.
    stages : sequence of str or None, default None
        Stage names in workflow order (default: in order of their first appearance).

    Returns
    -------
    RunMetrics

    Raises
    ------
    ConfigError
        The timeline is inconsistent (e.g. an allocation starts that was never submitted, a task ends that
        never started); the message names the event.
    """
    events = sorted(events, key=lambda e: e.time)  # stable: equal times keep their recorded order
    if stages is None:
        seen: dict[str, None] = {}
        for e in events:
            if e.stage is not None and e.stage != "*" and e.kind is not EventKind.ALLOC_SUBMIT:
                seen.setdefault(e.stage)
        stages = list(seen)
    table = _alloc_table(events)
    waits = allocation_waits(events)
    stage_wait: dict[str, float] = {}
    for alloc, wait in waits.items():
        label = table[alloc].stage
        if label is not None:
            stage_wait[label] = stage_wait.get(label, 0.0) + wait
    exec_times = stage_execution_times(events)
    perceived = perceived_waits(events)
    nan = float("nan")
    per_stage = tuple(
        StageMetrics(s, exec_times.get(s, nan), stage_wait.get(s, 0.0), perceived.get(s, nan)) for s in stages
    )
    resub = sum(1 for row in table.values() if row.reason not in ("", "initial"))
    return RunMetrics(
        makespan=makespan(events),
        queue_wait=sum(waits.values()),
        perceived_wait=sum(perceived.values()),
        core_seconds_charged=core_seconds_charged(events),
        core_seconds_used=core_seconds_used(events),
        resubmissions=resub,
        allocations=len(table),
        lost_tasks=sum(1 for e in events if e.kind is EventKind.TASK_LOST),
        predictions=prediction_outcomes(events),
        stages=per_stage,
    )
