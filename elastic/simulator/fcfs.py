"""Plain first come, first served: jobs start strictly in priority order, no backfilling."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from elastic.simulator.engine import Engine

__all__ = ["Fcfs"]


class Fcfs:
    """Start queued jobs in order while they fit; stop at the first that does not.

    A blocked head holds back every job behind it, even ones that would fit (no backfilling), so
    ``reservations`` stays empty: the head starts as soon as it fits, which is the earliest possible.
    """

    name = "fcfs"

    def __init__(self) -> None:
        self._reservations: dict[int, float] = {}

    @property
    def reservations(self) -> Mapping[int, float]:
        """Always empty: plain FCFS makes no reservations."""
        return self._reservations

    def schedule(self, engine: Engine) -> None:
        """Start the head jobs that fit."""
        q = engine.queue
        jobs = engine.jobs
        cores = jobs.cores
        whole = jobs.whole
        cl = engine.cluster
        k = 0
        n = len(q)
        while k < n:
            j = q[k]
            if cl.fits(cores[j], whole[j]):
                engine.start(j)
                k += 1
            else:
                break
        if k:
            del q[:k]
