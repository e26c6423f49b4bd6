"""Backfilling with *held* reservations: the machine model of Gainaru et al., ICPP 2019, Sections 3-4.

In the speculative-scheduling paper a large job's reservation is paid in full: when a run ends before its
requested time, the rest of its reservation stays the job's (the next large job starts where the plan put
it), and only *backfilling* work may use the idle processors meanwhile (the paper's gaps "due to
over-estimation of the jobs' reservation times"). Slurm and :class:`~elastic.simulator.easy.EasyBackfill`
instead hand the cores to the next job at once. :class:`HeldBackfill` is EASY backfilling on the paper's
model:

* only jobs named ``"large"`` head the queue and get a reservation (the shadow time); backfilling jobs
  have none ("unlike large jobs, no reservation is made for small jobs", Section 3.2): they start only
  where they delay no queued large job, or on the fly while no large job waits;
* jobs named ``"large"`` that complete early leave a *hold* on their cores until ``start + request``;
  large jobs never use held cores;
* any job may borrow held cores if its request ends before the earliest hold expires (so it never
  delays the job holding them): small backfilling jobs, and large jobs whose next request fits the gap
  (the paper's "schedule the failed job in a gap later in the round"); a run on borrowed cores
  leaves no hold of its own;
* with ``gain`` given, *speculative backfilling* (paper, Section 4.3): when cores are still free after the
  pass, the queued large job maximising the expected use of the gap, ``p_j E[X_j; X_j <= d | X_j > a'_j]``,
  is started with a kill at the gap's end ``d``; a killed run goes back to the top of the queue with its
  request (Section 5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from elastic.simulator.jobs import COMPLETED, PENDING

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["LARGE", "HeldBackfill"]

LARGE = "large"
"""Engine job name of the jobs whose reservations are held."""

#: (job, lower bound a', gap length d) -> E[X; X <= d | X > a'] in seconds (0 when it cannot succeed).
Gain = Callable[[int, float, float], float]


class HeldBackfill:
    """EASY backfilling where large jobs' reservations are held for their full request.

    Parameters
    ----------
    gain : callable or None, default None
        Enables speculative backfilling; ``gain(job, lower, d)`` is the expected runtime the engine job
        would complete within a gap of ``d`` seconds, given it is known to run longer than ``lower``
        (0 = no knowledge beyond its own distribution).

    Attributes
    ----------
    speculations : int
        Speculative runs started.
    reservations : dict of int to float
        First shadow time computed for each blocked head job.
    lent : set of int
        Engine jobs that ran on held cores (they leave no hold of their own).
    """

    wants_end_log = True

    def __init__(self, gain: Gain | None = None) -> None:
        self.name = "held+speculative" if gain is not None else "held"
        self.gain = gain
        self.holds: list[tuple[float, int]] = []
        self.borrowed: dict[int, int] = {}
        self.lent: set[int] = set()
        self.lower: dict[int, float] = {}
        self.speculations = 0
        self._reservations: dict[int, float] = {}

    @property
    def reservations(self) -> Mapping[int, float]:
        """Shadow time first computed for each job blocked at the head of the queue."""
        return self._reservations

    # -- bookkeeping --------------------------------------------------------------------------

    def _learn(self, engine: Engine) -> None:
        log = engine.end_log
        jobs = engine.jobs
        if log:
            for j in log:
                borrowed = self.borrowed.pop(j, 0)
                st = jobs.state[j]
                if jobs.name[j] != LARGE:
                    continue
                if st == PENDING:  # a speculative run was killed: it ran at least this long
                    a, b = jobs.attempts[j][-1]
                    self.lower[j] = max(self.lower.get(j, 0.0), b - a)
                    self._to_top(engine, j)
                elif st == COMPLETED and not jobs.speculated[j] and not borrowed:
                    until = jobs.start[j] + jobs.walltime[j]
                    if until > jobs.end[j]:
                        self.holds.append((until, jobs.cores[j]))
                        engine.wake_at(until)
            log.clear()
        now = engine.now
        if self.holds:
            self.holds = [h for h in self.holds if h[0] > now]

    @staticmethod
    def _to_top(engine: Engine, j: int) -> None:
        """Put a requeued job first in the queue ("add it back to the top of the waiting queue", Sect. 5)."""
        q = engine.queue
        if j in q and q[0] != j:
            q.remove(j)
            engine.jobs.rank[j] = engine.jobs.rank[q[0]] - 0.5
            q.insert(0, j)

    def _held_idle(self, engine: Engine) -> int:
        held = sum(c for _, c in self.holds)
        return max(0, held - sum(self.borrowed.values()))

    def _shadow(self, engine: Engine, need: int, free_large: int) -> tuple[float, int]:
        jobs = engine.jobs
        releases = [(end, jobs.cores[j] - self.borrowed.get(j, 0)) for end, j in engine.running]
        releases += self.holds
        releases.sort()
        avail = free_large
        if avail >= need:
            return engine.now, avail - need
        for end, c in releases:
            avail += c
            if avail >= need:
                return end, avail - need
        return math.inf, 0

    # -- the pass -----------------------------------------------------------------------------

    def schedule(self, engine: Engine) -> None:
        """Start what fits now, backfill behind the blocked head, then speculate into what is left."""
        self._learn(engine)
        q = engine.queue
        if not q:
            return
        jobs = engine.jobs
        cores, wall = jobs.cores, jobs.walltime
        cl = engine.cluster
        now = engine.now
        held_idle = min(cl.free, self._held_idle(engine))
        free_large = cl.free - held_idle
        earliest_hold = min((u for u, _ in self.holds), default=math.inf)

        def try_start(j: int, limit: float, extra: int) -> tuple[bool, int]:
            """Start ``j`` if it fits by ``limit`` (or within ``extra`` cores); return (started, extra)."""
            nonlocal free_large, held_idle
            c = cores[j]
            end = now + wall[j]
            if c <= free_large and (end <= limit or c <= extra):
                if end > limit:
                    extra -= c
                free_large -= c
                engine.start(j)
                return True, extra
            if end > earliest_hold:
                return False, extra
            if c <= held_idle:  # only held cores, returned before any hold expires
                borrow = c
            elif c <= held_idle + free_large and end <= limit:
                borrow = held_idle
                free_large -= c - held_idle
            else:
                return False, extra
            held_idle -= borrow
            self.borrowed[j] = borrow
            self.lent.add(j)
            engine.start(j)
            return True, extra

        # Large jobs start in queue order while they fit; backfilling jobs never head the queue (no
        # reservation is made for them, Section 3.2), so a large job waits only for large jobs.
        names = jobs.name
        head = -1
        while q:
            head = next((j for j in q if names[j] == LARGE), -1)
            if head < 0:
                break
            ok, _ = try_start(head, math.inf, 0)
            if not ok:
                break
            q.remove(head)
        if not q:
            return
        if head >= 0:
            shadow, extra = self._shadow(engine, cores[head], free_large)
            self._reservations.setdefault(head, shadow)
        else:  # no large job waits: backfilling work runs on the fly, wherever it fits
            shadow, extra = math.inf, 0
        i = 0
        while i < len(q) and cl.free:
            if q[i] == head:
                i += 1
                continue
            ok, extra = try_start(q[i], shadow, extra)
            if ok:
                del q[i]
            else:
                i += 1
        if self.gain is not None:
            while cl.free and self._speculate(engine, min(shadow, earliest_hold), free_large):
                free_large = cl.free - min(cl.free, self._held_idle(engine))

    def _speculate(self, engine: Engine, until: float, free_large: int) -> bool:
        assert self.gain is not None
        q = engine.queue
        jobs = engine.jobs
        now = engine.now
        d = until - now
        free = engine.cluster.free
        if not (d > 0 and free):
            return False
        best, best_gain = -1, 0.0
        for i, j in enumerate(q):
            c = jobs.cores[j]
            if jobs.name[j] != LARGE or c > free or jobs.speculated[j] or jobs.walltime[j] <= d:
                continue
            g = c * self.gain(j, self.lower.get(j, 0.0), d)
            if g > best_gain:
                best, best_gain = i, g
        if best < 0:
            return False
        j = q.pop(best)
        borrow = max(0, jobs.cores[j] - free_large)
        if borrow:
            self.borrowed[j] = borrow
            self.lent.add(j)
        engine.start(j, kill_at=until)
        self.speculations += 1
        return True
