"""Reservation-free "on-the-fly" orderings: shortest and longest estimated job first (SEJF, LEJF).

From Gainaru et al., *On-the-fly scheduling vs. reservation-based scheduling* (IJHPCA): queued jobs are
ordered by their estimate (the requested walltime: shortest first for SEJF, longest first for LEJF,
ties by arrival) and whenever cores are free the highest-priority jobs that fit are started. No
reservation is made, so a wide job can starve while narrower ones keep the cores busy.

With multi-core jobs "the highest-priority job that fits" is a greedy first fit over the ordered queue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from elastic.simulator.jobs import PENDING

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["Lejf", "Sejf"]


class _Ordered:
    """Greedy first fit over the queue sorted by a key; no reservations."""

    name = ""

    def __init__(self) -> None:
        self._reservations: dict[int, float] = {}
        self._mark = -1
        self._scanned = 0

    @property
    def reservations(self) -> Mapping[int, float]:
        """Always empty: on-the-fly orderings make no reservations."""
        return self._reservations

    def _key(self, engine: Engine) -> Callable[[int], tuple[float, float]]:
        raise NotImplementedError

    def schedule(self, engine: Engine) -> None:
        """Start, in key order, every queued job that fits."""
        q = engine.queue
        if not q:
            return
        cl = engine.cluster
        if self._mark == engine.release_count:
            # Nothing released since the last pass: the jobs seen then still do not fit.
            candidates = q[self._scanned :]
            if len(candidates) > 1:
                candidates.sort(key=self._key(engine))
        else:
            candidates = sorted(q, key=self._key(engine))
        jobs = engine.jobs
        cores = jobs.cores
        whole = jobs.whole
        started = False
        for j in candidates:
            if not cl.free:
                break
            if cl.fits(cores[j], whole[j]):
                engine.start(j)
                started = True
        if started:
            state = jobs.state
            q[:] = [j for j in q if state[j] == PENDING]
        self._mark = engine.release_count
        self._scanned = len(q)


class Sejf(_Ordered):
    """Shortest estimated (requested walltime) job first, without reservations."""

    name = "sejf"

    def _key(self, engine: Engine) -> Callable[[int], tuple[float, float]]:
        wall = engine.jobs.walltime
        rank = engine.jobs.rank
        return lambda j: (wall[j], rank[j])


class Lejf(_Ordered):
    """Longest estimated (requested walltime) job first, without reservations."""

    name = "lejf"

    def _key(self, engine: Engine) -> Callable[[int], tuple[float, float]]:
        wall = engine.jobs.walltime
        rank = engine.jobs.rank
        return lambda j: (-wall[j], rank[j])
