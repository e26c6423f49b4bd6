"""Speculative backfilling on top of EASY (Gainaru et al., *Speculative scheduling*, ICPP 2019).

After the ordinary EASY backfill, cores may still be free until the head job's shadow time: a *gap*
of ``q`` cores for ``d = shadow - now`` seconds. Background jobs whose request does not fit the gap may
still finish in it, since most jobs end well before their requested walltime. Among the queued jobs
that fit in cores, the one maximising the expected gap utilisation

    G_j = p_j * E[X_j ; X_j <= d] / (q * d)

is started *speculatively* (paper, Section 4.3), where ``p_j`` is its core count and ``X_j`` its
runtime, modelled as ``walltime_j * R`` with ``R`` drawn from the empirical distribution of
runtime / walltime ratios of recently ended jobs. A speculative run is killed at the shadow time if it
has not finished (so the head's reservation holds) and the job is requeued with its normal request;
each job is speculated at most once. The step repeats while cores remain free.

Only background jobs are speculated; submitted allocations (pilots) are never killed early.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from itertools import accumulate
from typing import TYPE_CHECKING

from elastic.errors import ConfigError
from elastic.simulator.easy import EasyBackfill
from elastic.simulator.jobs import COMPLETED, TIMEOUT

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["RatioDistribution", "SpeculativeEasy"]


class RatioDistribution:
    """Empirical distribution of runtime / walltime ratios (in [0, 1]) of the last ``window`` jobs.

    Parameters
    ----------
    window : int, default 2000
        How many recent observations are kept.
    refresh : int, default 64
        The sorted view used by :meth:`partial_mean` is rebuilt after this many new observations
        (sorting on every query would dominate a long replay).

    Examples
    --------
    >>> d = RatioDistribution(refresh=1)
    >>> for r in (0.1, 0.2, 0.5, 1.0): d.add(r)
    >>> round(d.partial_mean(0.5), 6)  # E[R; R <= 0.5] = (0.1 + 0.2 + 0.5) / 4
    0.2
    """

    def __init__(self, window: int = 2000, refresh: int = 64) -> None:
        if window < 1:
            raise ConfigError(f"RatioDistribution window must be >= 1, got {window}")
        self._recent: deque[float] = deque(maxlen=window)
        self._refresh = max(1, refresh)
        self._new = 0
        self._sorted: list[float] = []
        self._prefix: list[float] = [0.0]

    def __len__(self) -> int:
        return len(self._recent)

    def add(self, ratio: float) -> None:
        """Record one ended job's runtime / walltime (clipped to [0, 1])."""
        self._recent.append(min(1.0, max(0.0, ratio)))
        self._new += 1
        if self._new >= self._refresh:
            self._rebuild()

    def _rebuild(self) -> None:
        self._sorted = sorted(self._recent)
        self._prefix = [0.0, *accumulate(self._sorted)]
        self._new = 0

    def partial_mean(self, x: float) -> float:
        """Return E[R ; R <= x] = (sum of ratios <= x) / (number of ratios)."""
        n = len(self._sorted)
        if not n:
            return 0.0
        return self._prefix[bisect_right(self._sorted, x)] / n


class SpeculativeEasy(EasyBackfill):
    """EASY backfilling plus speculative backfilling of background jobs into the remaining gap.

    Parameters
    ----------
    min_samples : int, default 30
        No speculation before this many jobs have ended (the ratio distribution is too thin).
    depth : int, default 1000
        At most this many queued jobs are examined per speculative pick (like Slurm's
        ``bf_max_job_test``), bounding the cost of a pass on a long queue.
    window : int, default 2000
        Observations kept in the ratio distribution.
    """

    name = "easy+speculative"
    wants_end_log = True

    def __init__(self, *, min_samples: int = 30, depth: int = 1000, window: int = 2000) -> None:
        super().__init__()
        if depth < 1:
            raise ConfigError(f"SpeculativeEasy depth must be >= 1, got {depth}")
        self.min_samples = min_samples
        self.depth = depth
        self.ratios = RatioDistribution(window)
        self.speculations = 0

    def schedule(self, engine: Engine) -> None:
        """Run an EASY pass, then fill what is left of the gap speculatively."""
        self._learn(engine)
        super().schedule(engine)
        q = engine.queue
        if not q or not engine.cluster.free or self._blocked != q[0]:
            return
        if len(self.ratios) < self.min_samples:
            return
        while engine.cluster.free and self._speculate(engine):
            pass
        self._scanned = len(q)

    def _learn(self, engine: Engine) -> None:
        log = engine.end_log
        if not log:
            return
        jobs = engine.jobs
        state = jobs.state
        for j in log:
            if state[j] in (COMPLETED, TIMEOUT) and jobs.background[j]:
                self.ratios.add((jobs.end[j] - jobs.start[j]) / jobs.walltime[j])
        log.clear()

    def _speculate(self, engine: Engine) -> bool:
        q = engine.queue
        jobs = engine.jobs
        cores = jobs.cores
        wall = jobs.walltime
        now = engine.now
        shadow = self._shadow
        gap = shadow - now
        free = engine.cluster.free
        if not gap > 0:
            return False
        best = -1
        best_gain = 0.0
        partial_mean = self.ratios.partial_mean
        for i in range(1, min(len(q), self.depth + 1)):
            j = q[i]
            c = cores[j]
            if c > free or jobs.speculated[j] or not jobs.background[j] or jobs.whole[j]:
                continue
            w = wall[j]
            if w <= gap:
                continue  # fits by its request: ordinary backfill refused it for a reason
            gain = c * w * partial_mean(gap / w)
            if gain > best_gain:
                best, best_gain = i, gain
        if best < 0:
            return False
        j = q.pop(best)
        engine.start(j, kill_at=shadow)
        self.speculations += 1
        return True
