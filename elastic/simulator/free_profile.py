"""The free-capacity profile :class:`~elastic.simulator.pinned.PinnedBackfill` plans queued jobs into.

A step function of time: ``free[i]`` cores are free for queued jobs from ``times[i]`` until the next
breakpoint. It starts as the partition minus a reserve, the usable-capacity steps and the pinned jobs,
and the planner takes (and gives back) the slots of queued jobs. Only the near future is held in the
Python lists: breakpoints of the pinned jobs are loaded from sorted arrays as far as planning needs
them, and the past is dropped, so the lists stay short even with hundreds of thousands of pinned jobs.
(Hand-written rather than a numpy array because the profile is edited one breakpoint at a time in the
hot path, where numpy element access is slower.)
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from elastic.simulator.conservative import split_at

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["FreeProfile"]

_CHUNK = 2048  # pinned breakpoints loaded into the profile at a time
_PRUNE = 4096  # drop the past once this many breakpoints lie before now


class FreeProfile:
    """Free cores over time for queued jobs, loaded lazily from the pinned jobs' breakpoints.

    Parameters
    ----------
    times : list of float
        Breakpoints (increasing); the first is the current time.
    free : list of int
        Free cores from each breakpoint on.

    Attributes
    ----------
    times, free : list
        The loaded part of the profile.

    Examples
    --------
    >>> p = FreeProfile([0.0], [4])
    >>> p.take(10.0, 20.0, 3)
    >>> p.earliest(2, 5.0, 0.0), p.earliest(2, 15.0, 0.0)
    (0.0, 20.0)
    """

    def __init__(self, times: list[float], free: list[int]) -> None:
        self.times = times
        self.free = free
        self._src_t: list[float] = []  # pinned-only profile, not yet loaded part
        self._src_f: list[int] = []
        self._src_pos = 0

    @classmethod
    def of_pins(
        cls, engine: Engine, reserve: int, capacity: tuple[Sequence[float], Sequence[int]] | None
    ) -> FreeProfile:
        """Build the profile of the cores queued jobs may use from ``engine.now`` on.

        The partition minus ``reserve`` minus the pinned jobs; ``capacity`` (breakpoint times, usable
        cores from each) lowers the partition's size over time.
        """
        jobs = engine.jobs
        pins = engine.pinned
        cap = engine.cluster.total - reserve
        at = np.asarray([jobs.begin[j] for j in pins], dtype=np.float64)
        run = np.asarray([jobs.runtime[j] for j in pins], dtype=np.float64)
        cores = np.asarray([jobs.cores[j] for j in pins], dtype=np.int64)
        times = np.concatenate([at, at + run])
        delta = np.concatenate([-cores, cores])
        if capacity is not None:  # the usable size's steps, as changes of the free level
            cap_t = np.asarray(capacity[0], dtype=np.float64)
            cap_c = np.minimum(np.asarray(capacity[1], dtype=np.int64), engine.cluster.total)
            steps = np.diff(np.concatenate([[engine.cluster.total], cap_c]))
            times = np.concatenate([times, cap_t])
            delta = np.concatenate([delta, steps])
        order = np.argsort(times, kind="stable")
        times = times[order]
        level = cap + np.cumsum(delta[order])
        uniq, first = np.unique(times, return_index=True)
        last = np.r_[first[1:] - 1, len(times) - 1] if len(times) else first
        src_t = uniq.tolist()
        src_f = level[last].astype(np.int64).tolist()
        now = engine.now
        k = bisect_right(src_t, now)
        profile = cls([now], [src_f[k - 1] if k else cap])
        profile._src_t = src_t
        profile._src_f = src_f
        profile._src_pos = k
        return profile

    def cover(self, until: float) -> None:
        """Load every pinned breakpoint at or before ``until`` (and a chunk more) into the profile."""
        src_t = self._src_t
        pos = self._src_pos
        n = len(src_t)
        if pos >= n or src_t[pos] > until:
            return
        stop = min(bisect_right(src_t, until, lo=pos) + _CHUNK, n)
        # Beyond the last loaded breakpoint no queued job holds cores (every hold ends at a loaded
        # breakpoint), so the pinned-only levels apply unchanged.
        self.times.extend(src_t[pos:stop])
        self.free.extend(self._src_f[pos:stop])
        self._src_pos = stop

    def split(self, t: float) -> int:
        """Index of the breakpoint at ``t`` (inserted if missing)."""
        return split_at(self.times, self.free, t)

    def take(self, start: float, end: float, cores: int) -> None:
        """Add ``cores`` (negative: give back) to the held cores over ``[start, end)``."""
        self.cover(end)
        lo = self.times[0]
        i = self.split(max(start, lo))
        k = self.split(max(end, lo))
        free = self.free
        free[i:k] = [f - cores for f in free[i:k]]

    def earliest(self, cores: int, duration: float, lb: float) -> float:
        """Earliest time >= ``lb`` from which ``cores`` stay free for ``duration`` seconds."""
        times = self.times
        free = self.free
        t = lb
        self.cover(t + duration)
        i = bisect_right(times, t) - 1
        while True:
            # times[i] <= t, and the profile is loaded up to t + duration.
            k = bisect_left(times, t + duration, i + 1)
            if min(free[i:k]) >= cores:  # the window check runs in C
                return t
            # Any start up to the last too-low breakpoint of the window would include it.
            v = k - 1
            while free[v] >= cores:
                v -= 1
            i = v + 1
            while True:
                n = len(times)
                while i < n and free[i] < cores:
                    i += 1
                if i < n:
                    break
                if self._src_pos >= len(self._src_t):
                    return math.inf
                self.cover(self._src_t[self._src_pos])
            t = times[i]
            self.cover(t + duration)

    def prune(self, now: float) -> None:
        """Drop the past once many breakpoints lie before ``now`` (keeps the lists short)."""
        times = self.times
        k = bisect_right(times, now) - 1
        if k >= _PRUNE:
            del times[:k]
            del self.free[:k]
