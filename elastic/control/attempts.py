"""Per-task attempts of one stage: when each running attempt started and what lost attempts ran.

A task whose allocation ended under it (walltime, cancel, a dead agent) is lost and queued again; its
re-run starts from scratch. Both demands (:mod:`~elastic.control.demand` for declared workflows,
:mod:`~elastic.control.live` for the front door) keep one :class:`Attempts` per stage, for
:attr:`~elastic.strategies.base.StageView.rerun_end` and
:attr:`~elastic.strategies.base.StageView.rerun_floor`. The runtime history takes a task's completing
attempt, not its attempts summed (:meth:`~elastic.control.demand.DeclaredDemand.observe`).

Examples
--------
>>> a = Attempts()
>>> a.start("t", 0.0); a.lost("t", 3000.0); a.rerun_end()  # lost after 3000 s: ends >= 6000 s
6000.0
>>> a.rerun_floor()  # it waits for cores; its re-run takes more than the 3000 s it lost
(3000.0, 1)
>>> a.start("t", 3600.0); a.rerun_end(), a.rerun_floor(), a.oldest_start()  # restarted at 3600 s
(6600.0, None, 3600.0)
>>> a.end("t", 7000.0), a.rerun_end()  # ran 3000 s + 3400 s in all
(6400.0, None)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Attempts", "lost_alone"]


@dataclass(slots=True)
class Attempts:
    """Attempt starts and lost seconds of the tasks of one stage."""

    started: dict[str, float] = field(default_factory=dict)
    """Running task -> its current attempt's start."""
    spent: dict[str, float] = field(default_factory=dict)
    """Task not done -> seconds its lost attempts ran."""
    lost_at: dict[str, float] = field(default_factory=dict)
    """Task not done -> when its latest attempt was lost."""
    longest: dict[str, float] = field(default_factory=dict)
    """Task not done -> seconds its longest lost attempt ran."""

    def start(self, task: str, at: float) -> None:
        """Record that an attempt of ``task`` started at ``at``."""
        self.started[task] = at

    def lost(self, task: str, at: float) -> None:
        """Record that the running attempt of ``task`` was lost at ``at``."""
        start = self.started.pop(task, at)
        ran = at - start
        self.spent[task] = self.spent.get(task, 0.0) + at - start  # in this order: the same bits as before
        self.longest[task] = max(self.longest.get(task, 0.0), ran)
        self.lost_at[task] = at

    def end(self, task: str, at: float) -> float:
        """``task`` ended (done, failed or dropped) at ``at``; return the seconds its attempts ran."""
        ran = self.spent.pop(task, 0.0) + at - self.started.pop(task, at)
        self.lost_at.pop(task, None)
        self.longest.pop(task, None)
        return ran

    def rerun_end(self) -> float | None:
        """Return the soonest the tasks re-run after a lost attempt can end (None: no such task left).

        Each ends no sooner than its current attempt's start (its loss while it waits for cores) plus the
        seconds its lost attempts ran.
        """
        ends = [self.started.get(t, self.lost_at.get(t, 0.0)) + s for t, s in self.spent.items()]
        return max(ends, default=None)

    def oldest_start(self) -> float | None:
        """Return the start of the oldest attempt still running (None: none runs).

        If its allocation runs out under it, the attempt is lost having run from then: its re-run is placed
        by twice that (:func:`~elastic.pool.placement.estimate_after_loss`).
        """
        return min(self.started.values(), default=None)

    def rerun_floor(self) -> tuple[float, int] | None:
        """Return the longest attempt lost by a task waiting for a re-run, and how many wait (None: none).

        A task lost and not started again waits for cores. Its re-run starts from scratch and takes longer
        than any attempt it lost, so an allocation with no more walltime left than that would lose it again.
        """
        waiting = [t for t in self.spent if t not in self.started]
        if not waiting:
            return None
        return max(self.longest.get(t, 0.0) for t in waiting), len(waiting)


def lost_alone(lost: Iterable[tuple[float, float]], kept: Iterable[tuple[float, float]]) -> float:
    """Return the seconds in which only attempts later lost ran: ``lost`` spans covered by no ``kept`` one.

    ``lost`` and ``kept``: (start, end) of a stage's lost attempts and of those that ended (completed or
    failed). A front-door stage's runtime is measured over time (first start to end, less the gaps
    when its queued tasks waited for cores); the seconds when nothing of it ran but attempts it ran
    again from scratch are not part of it either, as a declared stage's runtime leaves lost attempts
    out. A sweep over the spans' ends (sorted once): a stage's spans are few beside its run.

    Examples
    --------
    >>> lost_alone([(0.0, 100.0)], [(50.0, 80.0), (300.0, 400.0)])  # 0-50 and 80-100 ran nothing else
    70.0
    >>> lost_alone([(0.0, 100.0), (60.0, 150.0)], [(0.0, 120.0)])
    30.0
    """
    marks = sorted([(s, 0, 1) for s, _ in lost] + [(e, 0, -1) for _, e in lost]
                   + [(s, 1, 1) for s, _ in kept] + [(e, 1, -1) for _, e in kept])  # fmt: skip
    alone = 0.0
    running = [0, 0]  # lost attempts, kept ones
    previous = None
    for at, which, step in marks:
        if previous is not None and running[0] > 0 and running[1] == 0:
            alone += at - previous
        running[which] += step
        previous = at
    return alone
