"""What ``elastic run`` shows: the live view of a run, its metrics, its event timeline; and its signals.

Shared by the declared-workflow runs (:mod:`elastic.cli.run`) and the demos (:mod:`elastic.cli.run_demo`).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, compress, islice
from operator import is_not
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table

from elastic.cli.outputs import write_output
from elastic.front.progress import ended_word, short_duration
from elastic.metrics import RunMetrics

if TYPE_CHECKING:
    from elastic.allocations import Allocation
    from elastic.control.execution import RunResult
    from elastic.strategies import RunView, StageView

__all__ = ["PlainLines", "event_row", "live_view", "metrics_table", "sigterm_interrupts", "write_events"]


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while a run goes on, so it ends as cleanly as on Ctrl-C."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"got signal {signum}")

    try:
        old = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _waited(a: Allocation, now: float) -> float | None:
    """How long ``a`` waited in the queue once eligible: until it started, else so far; None unsubmitted."""
    since = a.eligible_time if a.eligible_time is not None else a.submit_time
    if since is None:
        return None
    return max(0.0, (a.start_time if a.start_time is not None else now) - since)


def live_view(view: RunView) -> Group:
    """Tables of a running workflow: its stages' progress and its newest allocations.

    Each allocation shows its queue wait (so far, while it is queued) and the wait its strategy predicted.
    """
    stages = Table(title=f"{view.workflow.name} at t={view.now:.0f} s")
    for col in ("stage", "done", "running", "tasks", "ready", "started", "ended"):
        stages.add_column(col, justify="left" if col == "stage" else "right")

    def t(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}"

    for s in view.stages:
        stages.add_row(
            s.name, str(s.done), str(s.running), str(s.tasks), t(s.ready_time), t(s.start_time), t(s.end_time)
        )
    allocs = Table(title="allocations")
    for col in (
        "id",
        "stage",
        "cores",
        "phase",
        "waited",
        "predicted",
        "submitted",
        "started",
        "ended",
        "walltime",
        "busy",
        "reason",
    ):
        allocs.add_column(col, justify="left" if col in ("id", "stage", "phase", "reason") else "right")
    for a in view.allocations[-12:]:
        allocs.add_row(
            a.alloc_id,
            a.stage or "",
            str(a.cores),
            a.state.value,
            short_duration(_waited(a, view.now)),
            short_duration(a.predicted_wait),
            t(a.submit_time),
            t(a.start_time),
            t(a.end_time),
            f"{a.walltime:.0f}",
            str(view.busy_cores(a.alloc_id)),
            a.reason,
        )
    return Group(stages, allocs)


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``1 task``, ``2 tasks``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class PlainLines:
    """``elastic run``'s progress off a terminal: one line per stage and allocation change of the run view.

    Called with each :class:`~elastic.strategies.RunView` (the runner's ``on_iteration``), it prints what
    changed since the last view: a stage ready or done (tasks done/total), an allocation requested,
    running (after how long in the queue) or ended.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._stages: dict[str, tuple[bool, bool]] = {}
        self._allocs: dict[str, str] = {}
        self._seen: tuple[Sequence[StageView], Sequence[Allocation]] = ((), ())
        """The last view's stages and allocations: only the records that are not the same objects are
        read again (a view keeps each unchanged record; reading 5,000 stages at every step of a
        5,000-stage run was a third of ``elastic run``'s CPU)."""

    @staticmethod
    def _changed(now: Sequence[Any], last: Sequence[Any]) -> Iterable[Any]:
        """Return the records of ``now`` that are not the objects at the same place in ``last``."""
        if len(now) < len(last):  # another view's records: read them all
            return now
        # compared in C, record by record (map stops at the shorter), then the records after ``last``
        return chain(compress(now, map(is_not, now, last)), islice(now, len(last), None))

    def __call__(self, view: RunView) -> None:
        """Print the lines of what changed in ``view``, each stamped with when it happened."""
        for at, line in self.stamped(view):
            self.console.print(f"t={at:.0f} s elastic: {line}", highlight=False, soft_wrap=True)

    def lines(self, view: RunView) -> list[str]:
        """Return the lines of what changed since the last view (and remember this one)."""
        return [line for _, line in self.stamped(view)]

    def stamped(self, view: RunView) -> list[tuple[float, str]]:
        """Return what changed since the last view, each with the time it happened, in time order.

        A view comes at each step of the run (up to the poll interval after a change, 30 s on Slurm):
        the time is the record's own (a stage's ready or end time, an allocation's submit, start or end
        time), the view's time where the record has none.
        """
        out: list[tuple[float, str]] = []
        stages, allocations = view.stages, view.allocations
        seen_stages, seen_allocs = self._seen
        self._seen = (stages, allocations)
        for s in self._changed(stages, seen_stages):
            ready, done = s.ready_time is not None, s.end_time is not None
            was_ready, was_done = self._stages.get(s.name, (False, False))
            if ready and not was_ready:
                out.append((_at(s.ready_time, view), f"stage {s.name}: ready ({_count(s.tasks, 'task')})"))
            if done and not was_done:
                out.append(
                    (_at(s.end_time, view), f"stage {s.name}: done ({s.done}/{_count(s.tasks, 'task')})")
                )
            self._stages[s.name] = (ready, done)
        for a in self._changed(allocations, seen_allocs):
            state = a.state.value
            before = self._allocs.get(a.alloc_id)
            if before == state:
                continue
            # the steps a view did not show (one requested, started and released between two views
            # was charged for the seconds it ran): each line once, at its own time
            if before is None:
                wait = (
                    "" if a.predicted_wait is None else f", predicted wait {short_duration(a.predicted_wait)}"
                )
                cores = _count(a.cores, "core")
                line = f"allocation {a.alloc_id}: requested {cores} for stage {a.stage}{wait}"
                out.append((_at(a.submit_time, view), line))
            started = a.start_time is not None and a.submit_time is not None
            if before in (None, "REQUESTED") and state != "REQUESTED" and started:
                waited = _waited(a, view.now)
                line = f"allocation {a.alloc_id}: running after {waited:.0f} s in the queue"
                out.append((_at(a.start_time, view), line))
            if state not in ("REQUESTED", "RUNNING"):
                word = ended_word(state, a.start_time is not None)
                out.append((_at(a.end_time, view), f"allocation {a.alloc_id}: {word}"))
            self._allocs[a.alloc_id] = state
        out.sort(key=lambda line: line[0])  # stable: one record's lines keep their order
        return out


def _at(time: float | None, view: RunView) -> float:
    """``time``, or the view's where a record has none (never later than the view)."""
    return view.now if time is None else min(time, view.now)


STAGE_ROWS = 30
"""Stages :func:`metrics_table` shows a row for at most (a declared workflow may have 1,000)."""


def metrics_table(metrics: RunMetrics, title: str) -> Table:
    """Rich table of one run's metrics: totals, then one row per stage (at most :data:`STAGE_ROWS`).

    Beyond :data:`STAGE_ROWS` stages, the first ones and a row saying how many more, and that the
    timeline ``--events`` writes has every stage's.
    """
    out = Table(title=title)
    out.add_column("metric")
    out.add_column("value", justify="right")
    rows = [
        ("makespan (s)", f"{metrics.makespan:.0f}"),
        ("queue wait (s)", f"{metrics.queue_wait:.0f}"),
        ("perceived wait (s)", f"{metrics.perceived_wait:.0f}"),
        ("core-hours charged", f"{metrics.core_hours_charged:.3f}"),
        ("core-hours used", f"{metrics.core_hours_used:.3f}"),
        ("overhead core-hours (idle)", f"{metrics.overhead_core_hours:.3f}"),
        ("  of it before a job's first task", f"{metrics.idle.early / 3600.0:.3f}"),
        ("  between a job's tasks", f"{metrics.idle.between / 3600.0:.3f}"),
        ("  after a job's last task", f"{metrics.idle.after / 3600.0:.3f}"),
        ("  in jobs that ran no task", f"{metrics.idle.unused / 3600.0:.3f}"),
        ("allocations / resubmissions", f"{metrics.allocations} / {metrics.resubmissions}"),
        ("jobs that started and ran no task", str(metrics.unused_jobs)),
        ("lost task attempts", str(metrics.lost_tasks)),
        (
            "wait predictions hit / over / under",
            f"{metrics.predictions.hits} / {metrics.predictions.over} / {metrics.predictions.under}",
        ),
    ]
    for s in metrics.stages[:STAGE_ROWS]:
        rows.append(
            (
                f"stage {s.name}: execution / queue wait / perceived wait (s)",
                f"{s.execution_time:.0f} / {s.queue_wait:.0f} / {s.perceived_wait:.0f}",
            )
        )
    more = len(metrics.stages) - STAGE_ROWS
    if more > 0:
        rows.append((f"{more:,} more stages (each in the timeline --events writes)", ""))
    for name, value in rows:
        out.add_row(name, value)
    return out


def event_row(e: Any) -> dict[str, Any]:
    """One event of a run's timeline as a CSV row."""
    return {
        "time": e.time,
        "kind": e.kind.value,
        "stage": e.stage,
        "allocation": e.allocation,
        "task": e.task,
        "cores": e.cores,
        "walltime": e.walltime,
        "predicted_wait": e.predicted_wait,
        "eligible": e.eligible,
        "job_id": e.job_id,
        "note": e.note,
    }


def write_events(path: str, result: RunResult, console: Console) -> None:
    """Write the run's event timeline as CSV (``--events``)."""
    import pandas as pd

    events = pd.DataFrame([event_row(e) for e in result.events])
    write_output(Path(path), "--events", lambda out: events.to_csv(out, index=False))
    console.print(f"event timeline written to {path}", highlight=False)
