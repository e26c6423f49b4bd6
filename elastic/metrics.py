"""Run metrics: pure functions on a recorded event timeline.

The run driver (:mod:`elastic.control.runner`) records one :class:`~elastic.timeline.Event` per thing
that happens during a run (allocation submitted/started/ended, task started/ended/lost, stage ready/ended,
run start/end), all in backend seconds. Everything here is computed from that list alone, so a stored or
hand-made timeline gives the same figures as a live run (:class:`~elastic.figures.RunMetrics`).

Definitions (ASA paper, Section 4.1, and issue 4):

makespan
    ``RUN_END - RUN_START``.
stage execution time
    Last successful task end of the stage - first task start of the stage.
queue wait
    Per *request*: the time until its cores were usable. A request is what a strategy asked for at once;
    run control may submit it as several batch jobs (its *pieces*, :attr:`Event.request`,
    :attr:`~elastic.allocations.Allocation.request`). A request's wait runs from when it became eligible
    (at submit or, with batch dependencies or a begin time, once those are satisfied: a dependency hold
    is not a queue wait, it is not charged and overlaps the predecessor's run; the earliest of its
    started pieces') to the start of the **last** of its pieces that started: the pieces' waits
    overlap, so they are never summed. A request of one job waits ``start - eligible``. A stage's queue
    wait sums the waits of the requests made for it; the run's total sums all requests (Big-Job has
    one). Pieces cancelled before they started have no wait (their time in the queue shows up in
    perceived waits); a request none of whose pieces started has none either.
perceived wait
    Per stage: first task start - the moment the stage became ready (its dependencies done; the run start
    for the first stage): the time the stage's work really waited for cores. Per run: the length of the
    *union* of those stages' intervals ``[ready, first task start]``, the time in which some ready stage
    waited for cores; stages waiting at the same time count once, so it never exceeds the makespan.
core-hours charged / used
    Charged = allocated cores x (allocation end - start), over allocations that started. Used = task cores x
    (task end - start) over every task attempt, lost attempts included (those cores were busy).
overhead
    Idle core-seconds = charged - used core-seconds (reported in core-hours), and where they went, read per
    allocation from its own tasks (:class:`~elastic.figures.IdleParts`): *early*, before its first task
    started; *between*, from its first task's start to its last task's end, the cores its tasks did not
    use; *after*, from its last task's end until it ended; *unused*, an allocation that ran no task. A
    strategy's idle cores are read by them: plain Big-Job's are between (one allocation through every
    stage), a request asked ahead that came early is early, a piece kept for work that did not come is after.
resubmissions
    Allocation submissions other than the first for a stage's plan: walltime follow-ups, replacements of
    lost allocations, and ASA-naive cancel-and-resubmit.
gap closed
    Comparing strategies: the share of the Per-Stage - Big-Job makespan gap a strategy closes
    (:mod:`elastic.gap`).
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

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elastic.errors import ConfigError

__all__ = [
    "Event",
    "EventKind",
    "IdleParts",
    "GAP_MIN_SHARE",
    "MetricsRecorder",
    "PredictionOutcome",
    "RunMetrics",
    "StageMetrics",
    "allocation_waits",
    "compute_metrics",
    "core_seconds_charged",
    "core_seconds_used",
    "format_gap",
    "gap_closed",
    "makespan",
    "perceived_waits",
    "prediction_outcomes",
    "request_waits",
    "stage_execution_times",
    "union_length",
]


from elastic.figures import IdleParts, PredictionOutcome, RunMetrics, StageMetrics
from elastic.gap import GAP_MIN_SHARE, format_gap, gap_closed
from elastic.timeline import Event, EventKind


@dataclass(slots=True)
class _Alloc:
    submit: float
    cores: int
    stage: str | None
    predicted: float | None
    reason: str
    request: str
    start: float | None = None
    end: float | None = None
    eligible: float | None = None
    first_task: float | None = None  # its first task's start
    last_task: float | None = None  # its last task's end
    used: float = 0.0  # core-seconds its tasks ran

    @property
    def wait(self) -> float | None:
        """Queue wait: start - max(submit, eligible), once started."""
        if self.start is None:
            return None
        return self.start - self.since

    @property
    def since(self) -> float:
        """When it became eligible: max(submit, eligible)."""
        return max(self.submit, self.eligible if self.eligible is not None else self.submit)


class MetricsRecorder:
    """Fold a run's events, one at a time and in time order, into its metrics.

    The one definition of every metric: :func:`compute_metrics` and the functions below feed a whole
    timeline through it; a long-lived front door feeds events as they happen and keeps only per-allocation
    and per-stage sums, never the task events themselves, so its memory does not grow with the tasks run.

    Raises
    ------
    ConfigError
        From :meth:`add` when the timeline is inconsistent (an allocation starts that was never submitted, a
        task ends that never started); the message names the event.
    """

    def __init__(self) -> None:
        self.allocs: dict[str, _Alloc] = {}
        self._open: dict[tuple[str | None, str | None], Event] = {}
        self.core_seconds_used = 0.0
        self.lost_tasks = 0
        self.run_start: list[float] = []
        self.run_end: list[float] = []
        self.first_start: dict[str, float] = {}
        self.last_end: dict[str, float] = {}
        self.ready: dict[str, float] = {}
        self.order: dict[str, None] = {}  # stages in order of first appearance

    def add(self, e: Event) -> None:
        """Take one event (not earlier than the ones before it)."""
        kind = e.kind
        if e.stage is not None and e.stage != "*" and kind is not EventKind.ALLOC_SUBMIT:
            self.order.setdefault(e.stage)
        if kind is EventKind.TASK_START:
            key = (e.task, e.allocation)
            if key in self._open:
                raise ConfigError(f"task {e.task!r} started twice on {e.allocation!r} (at {e.time})")
            self._open[key] = e
            if e.stage is not None:
                self.first_start.setdefault(e.stage, e.time)
            row = self.allocs.get(e.allocation) if e.allocation is not None else None
            if row is not None and row.first_task is None:
                row.first_task = e.time
        elif kind in (EventKind.TASK_END, EventKind.TASK_LOST, EventKind.TASK_FAILED):
            start = self._open.pop((e.task, e.allocation), None)
            if start is None:
                raise ConfigError(f"{kind.value} at {e.time} for task {e.task!r} that was not running")
            self.core_seconds_used += start.cores * (e.time - start.time)
            row = self.allocs.get(e.allocation) if e.allocation is not None else None
            if row is not None:
                row.used += start.cores * (e.time - start.time)
                row.last_task = e.time if row.last_task is None else max(row.last_task, e.time)
            if kind is EventKind.TASK_LOST:
                self.lost_tasks += 1
            elif kind is EventKind.TASK_END and e.stage is not None:
                self.last_end[e.stage] = max(self.last_end.get(e.stage, e.time), e.time)
        elif kind is EventKind.ALLOC_SUBMIT and e.allocation is not None:
            request = e.request if e.request is not None else e.allocation
            self.allocs[e.allocation] = _Alloc(e.time, e.cores, e.stage, e.predicted_wait, e.note, request)
        elif kind in (EventKind.ALLOC_START, EventKind.ALLOC_END) and e.allocation is not None:
            row = self.allocs.get(e.allocation)
            if row is None:
                raise ConfigError(
                    f"{kind.value} at {e.time}: allocation {e.allocation!r} was never submitted"
                )
            if kind is EventKind.ALLOC_START:
                row.start = e.time
                row.eligible = e.eligible
            else:
                row.end = e.time
        elif kind is EventKind.STAGE_READY and e.stage is not None:
            self.ready.setdefault(e.stage, e.time)
        elif kind is EventKind.RUN_START:
            self.run_start.append(e.time)
        elif kind is EventKind.RUN_END:
            self.run_end.append(e.time)

    @property
    def running_tasks(self) -> list[str]:
        """Task attempts started and not ended."""
        return sorted(map(str, self._open))

    def end_running(self, at: float) -> None:
        """End every attempt still running as lost at ``at`` (a run stopped under them)."""
        for (task, alloc), start in list(self._open.items()):
            self.add(
                Event(
                    at, EventKind.TASK_LOST, stage=start.stage, allocation=alloc, task=task, cores=start.cores
                )
            )

    def makespan(self) -> float:
        """Return RUN_END - RUN_START; raise ConfigError unless there is exactly one of each."""
        for name, times in (("run_end", self.run_end), ("run_start", self.run_start)):
            if len(times) != 1:
                raise ConfigError(f"timeline must hold exactly one {name} event, found {len(times)}")
        return self.run_end[0] - self.run_start[0]

    def allocation_waits(self) -> dict[str, float]:
        """Return ``allocation -> queue wait`` (start - eligible) for every allocation that started."""
        return {a: row.wait for a, row in self.allocs.items() if row.wait is not None}

    def request_waits(self) -> dict[str, tuple[str | None, float]]:
        """Return ``request -> (stage, queue wait)`` for every request with a started piece.

        A request's wait runs from the earliest eligibility of its started pieces to the start of the last
        of them (see the module's definition of queue wait).
        """
        spans: dict[str, tuple[str | None, float, float]] = {}
        for row in self.allocs.values():
            if row.start is None:
                continue
            seen = spans.get(row.request)
            if seen is None:
                spans[row.request] = (row.stage, row.since, row.start)
            else:
                spans[row.request] = (seen[0], min(seen[1], row.since), max(seen[2], row.start))
        return {request: (stage, last - since) for request, (stage, since, last) in spans.items()}

    def core_seconds_charged(self) -> float:
        """Allocated cores x (end - start) over started allocations; an open one ends at RUN_END."""
        run_end = max(self.run_end, default=None)
        total = 0.0
        for alloc, row in self.allocs.items():
            if row.start is None:
                continue
            end = row.end if row.end is not None else run_end
            if end is None:
                raise ConfigError(f"allocation {alloc!r} started but never ended and the run has no RUN_END")
            total += row.cores * (end - row.start)
        return total

    def idle_parts(self) -> IdleParts:
        """Return where the idle core-seconds went (:class:`~elastic.figures.IdleParts`), per allocation.

        An allocation still open ends at RUN_END, as in :meth:`core_seconds_charged`.
        """
        run_end = max(self.run_end, default=None)
        early = between = after = unused = 0.0
        for row in self.allocs.values():
            end = row.end if row.end is not None else run_end
            if row.start is None or end is None:
                continue
            if row.first_task is None or row.last_task is None:
                unused += row.cores * max(0.0, end - row.start)  # a start seen a hair after its end
                continue
            pre = row.cores * (row.first_task - row.start)
            post = row.cores * (end - row.last_task)
            early += pre
            after += post
            between += row.cores * (end - row.start) - row.used - pre - post
        return IdleParts(early, between, after, unused)

    def stage_execution_times(self) -> dict[str, float]:
        """Return ``stage -> last successful task end - first task start`` for stages that ran."""
        return {s: self.last_end[s] - self.first_start[s] for s in self.first_start if s in self.last_end}

    def perceived_waits(self) -> dict[str, float]:
        """Return ``stage -> first task start - STAGE_READY`` for stages that became ready and started."""
        return {s: self.first_start[s] - self.ready[s] for s in self.ready if s in self.first_start}

    def perceived_wait(self) -> float:
        """Return the run's perceived wait: the union of the stages' ``[ready, first task start]``."""
        return union_length((self.ready[s], self.first_start[s]) for s in self.ready if s in self.first_start)

    def prediction_outcomes(self, *, tolerance: float = 60.0, relative: float = 0.1) -> PredictionOutcome:
        """Classify every wait prediction against the real wait (see :func:`prediction_outcomes`)."""
        hits = over = under = 0
        for row in self.allocs.values():
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

    def metrics(self, stages: Sequence[str] | None = None) -> RunMetrics:
        """Every metric of the run so far (it must have its RUN_START and RUN_END, no task still running).

        Parameters
        ----------
        stages : sequence of str or None, default None
            Stage names in workflow order (default: in order of their first appearance).
        """
        if self._open:
            raise ConfigError(f"tasks still running at the end of the timeline: {self.running_tasks}")
        if stages is None:
            stages = list(self.order)
        waits = self.request_waits()
        stage_wait: dict[str, float] = {}
        for label, wait in waits.values():
            if label is not None:
                stage_wait[label] = stage_wait.get(label, 0.0) + wait
        exec_times = self.stage_execution_times()
        perceived = self.perceived_waits()
        nan = float("nan")
        per_stage = tuple(
            StageMetrics(s, exec_times.get(s, nan), stage_wait.get(s, 0.0), perceived.get(s, nan))
            for s in stages
        )
        return RunMetrics(
            makespan=self.makespan(),
            queue_wait=sum(wait for _, wait in waits.values()),
            perceived_wait=self.perceived_wait(),
            core_seconds_charged=self.core_seconds_charged(),
            core_seconds_used=self.core_seconds_used,
            resubmissions=sum(1 for row in self.allocs.values() if row.reason not in ("", "initial")),
            allocations=len(self.allocs),
            lost_tasks=self.lost_tasks,
            predictions=self.prediction_outcomes(),
            stages=per_stage,
            idle=self.idle_parts(),
            unused_jobs=sum(
                1 for row in self.allocs.values() if row.start is not None and row.first_task is None
            ),
        )


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Return the length of the union of closed intervals ``(start, end)`` (empty ones count 0).

    Examples
    --------
    >>> union_length([(0.0, 10.0), (5.0, 15.0), (20.0, 30.0), (25.0, 25.0)])
    25.0
    """
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def _fold(events: Iterable[Event]) -> MetricsRecorder:
    recorder = MetricsRecorder()
    for e in sorted(events, key=lambda e: e.time):  # stable: equal times keep their recorded order
        recorder.add(e)
    return recorder


def makespan(events: Sequence[Event]) -> float:
    """Return RUN_END - RUN_START; raise ConfigError unless there is exactly one of each."""
    return _fold(events).makespan()


def allocation_waits(events: Sequence[Event]) -> dict[str, float]:
    """Return ``allocation -> queue wait`` (start - eligible) for every allocation that started."""
    return _fold(events).allocation_waits()


def request_waits(events: Sequence[Event]) -> dict[str, float]:
    """Return ``request -> queue wait`` (eligible to the start of its last started piece) per request.

    Examples
    --------
    >>> ev = [
    ...     Event(0.0, EventKind.ALLOC_SUBMIT, allocation="a1", request="a1", stage="s", cores=2),
    ...     Event(0.0, EventKind.ALLOC_SUBMIT, allocation="a2", request="a1", stage="s", cores=2),
    ...     Event(10.0, EventKind.ALLOC_START, allocation="a1"),
    ...     Event(30.0, EventKind.ALLOC_START, allocation="a2"),
    ... ]
    >>> request_waits(ev), allocation_waits(ev)
    ({'a1': 30.0}, {'a1': 10.0, 'a2': 30.0})
    """
    return {request: wait for request, (_, wait) in _fold(events).request_waits().items()}


def core_seconds_charged(events: Sequence[Event]) -> float:
    """Allocated cores x (end - start) over started allocations; an open one ends at RUN_END."""
    return _fold(events).core_seconds_charged()


def core_seconds_used(events: Sequence[Event]) -> float:
    """Task cores x (end - start) over every task attempt (lost and failed attempts included)."""
    return _fold(events).core_seconds_used


def stage_execution_times(events: Sequence[Event]) -> dict[str, float]:
    """Return ``stage -> last successful task end - first task start`` for stages that ran."""
    return _fold(events).stage_execution_times()


def perceived_waits(events: Sequence[Event]) -> dict[str, float]:
    """Return ``stage -> first task start - STAGE_READY`` for stages that became ready and started."""
    return _fold(events).perceived_waits()


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
    return _fold(events).prediction_outcomes(tolerance=tolerance, relative=relative)


def compute_metrics(
    events: Sequence[Event], *, stages: Sequence[str] | None = None, ended: float | None = None
) -> RunMetrics:
    """Compute every metric of one run from its timeline.

    Parameters
    ----------
    events : sequence of Event
        The timeline, with exactly one RUN_START and one RUN_END (sorted by time here).
    stages : sequence of str or None, default None
        Stage names in workflow order (default: in order of their first appearance).
    ended : float or None, default None
        A run that was stopped (interrupted, failed): task attempts still running then count as lost at
        this time. None: every attempt must have ended.

    Returns
    -------
    RunMetrics

    Raises
    ------
    ConfigError
        The timeline is inconsistent (e.g. an allocation starts that was never submitted, a task ends that
        never started); the message names the event.
    """
    recorder = _fold(e for e in events if e.kind is not EventKind.RUN_END)
    if ended is not None:
        recorder.end_running(ended)
    for e in events:
        if e.kind is EventKind.RUN_END:
            recorder.add(e)
    return recorder.metrics(stages)
