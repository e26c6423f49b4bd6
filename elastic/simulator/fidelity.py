"""Fidelity modes (:mod:`elastic.simulator.modes`) and the calibration of the ``calibrated`` mode.

The modes make queue waits on the mock backend look like the traced centre's; their names are importable
from here too. :func:`calibrate_reserve` fits the ``calibrated`` mode's ``reserve`` (the cores never
given to foreground jobs) on the first half of the evaluated jobs, so that the second half stays out of
the fit.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import numpy.typing as npt

from elastic.simulator.modes import (
    MODES,
    FidelityResult,
    check_pinnable,
    evaluated_jobs,
    mode_engine,
    pinned_setup,
    simulate_mode,
    subset,
)
from elastic.simulator.pinned import PinnedBackfill
from elastic.simulator.workload import Workload

__all__ = [
    "MODES",
    "FidelityResult",
    "backend_setup",
    "calibrate_reserve",
    "evaluated_jobs",
    "half_split",
    "mode_engine",
    "simulate_mode",
    "subset",
]

logger = logging.getLogger(__name__)


def backend_setup(
    workload: Workload | None,
    mode: str,
    *,
    order: str = "conservative",
    reserve: int | None = 0,
    cores: tuple[int, int] = (16, 128),
    window: float | None = None,
    queues: bool = True,
) -> tuple[PinnedBackfill, Workload, Workload, npt.NDArray[np.float64]]:
    """Policy, queued and pinned jobs for a mock backend whose queue waits follow a fidelity ``mode``.

    The same set-up the fidelity report evaluates: the trace's jobs of ``cores`` cores stay queued
    (planned by :class:`~elastic.simulator.pinned.PinnedBackfill`, like the jobs the backend's users
    submit), every other job with a recorded wait is pinned at its recorded start. In
    ``recorded-chain``, ``calibrated`` and ``capacity`` the policy's ``chain`` is a dict the backend
    extends with its users' jobs (a user's jobs start in submit order).

    Parameters
    ----------
    workload : Workload
        The trace (must have recorded waits).
    mode : {"recorded", "recorded-chain", "calibrated", "capacity"}
        Fidelity mode (``replay`` needs no set-up).
    order : {"conservative", "fcfs"}, default "conservative"
        Queue discipline of queued jobs.
    reserve : int or None, default 0
        ``calibrated`` only: cores held back; None fits them with :func:`calibrate_reserve`.
    cores : tuple of (int, int), default (16, 128)
        Size class of the trace jobs that stay queued (none in the trace: all are pinned).
    window : float or None, default None
        ``capacity`` only: look-back of the usable-size estimate in seconds; None derives it from
        the trace (:func:`~elastic.simulator.recorded.capacity_window`).
    queues : bool, default True
        ``capacity`` only: the queue rules (fast queues apart, short queues first: see
        :mod:`elastic.simulator.modes`). Submitted jobs join the batch partition: the jobs of fast queues
        are neither queued nor pinned.

    Returns
    -------
    (PinnedBackfill, Workload, Workload, ndarray)
        The policy, the queued jobs (engine jobs ``0..F-1``), the pinned jobs and their starts.

    Raises
    ------
    ConfigError
        No workload, or a workload without recorded waits.
    UnknownNameError
        ``mode`` or ``order`` is unknown.
    """
    if mode == "calibrated" and reserve is None:
        reserve = calibrate_reserve(check_pinnable(workload, mode), cores=cores, order=order)
    return pinned_setup(
        workload, mode, order=order, reserve=reserve or 0, cores=cores, window=window, queues=queues
    )


def half_split(workload: Workload, cores: tuple[int, int] = (16, 128)) -> float:
    """Return the median submit time of the evaluated jobs: the first half is submitted before it."""
    return float(np.median(workload.submit[evaluated_jobs(workload, cores)]))


def calibrate_reserve(
    workload: Workload,
    *,
    cores: tuple[int, int] = (16, 128),
    order: str = "conservative",
    max_reserve: int | None = None,
) -> int:
    """Fit ``reserve`` for the ``calibrated`` mode on the first half of the evaluated jobs.

    Galloping then bisection on the integer reserve: the median simulated wait grows with it (fewer
    cores for the same jobs). Returns the reserve whose median is closest to the recorded one on a
    log scale. Only jobs submitted before the median submit time of the evaluated jobs are
    simulated, so the second half stays out of the fit.

    Parameters
    ----------
    workload : Workload
        A trace with recorded waits.
    cores : tuple of (int, int), default (16, 128)
        Evaluated jobs' size class.
    order : {"conservative", "fcfs"}, default "conservative"
        Queue discipline of foreground jobs.
    max_reserve : int or None
        Upper end of the search; default: machine size minus the largest evaluated job.

    Returns
    -------
    int
        The fitted reserve in cores.
    """
    half = subset(workload, workload.submit < half_split(workload, cores))
    widest = int(half.cores[evaluated_jobs(half, cores)].max())
    hi = workload.processors - widest if max_reserve is None else max_reserve
    return _fit_reserve(half, cores=cores, order=order, hi=hi, since=-math.inf)


def _fit_reserve(sample: Workload, *, cores: tuple[int, int], order: str, hi: int, since: float) -> int:
    """Fit the reserve by galloping then bisection.

    The result's median wait of the evaluated jobs submitted from ``since`` on is closest (on a log
    scale) to their recorded median.
    """
    evaluated = evaluated_jobs(sample, cores) & (sample.submit >= since)
    target = float(np.median(sample.recorded_wait[evaluated]))
    medians: dict[int, float] = {}

    def median(x: int) -> float:
        if x not in medians:
            res = simulate_mode(sample, "calibrated", cores=cores, reserve=x, order=order)
            jobs = res.jobs.loc[res.jobs["submit"] >= since]
            medians[x] = float(jobs["wait"].median())
            logger.info(
                "calibration: reserve %d cores -> median wait %.0f s (recorded %.0f s)", x, medians[x], target
            )
        return medians[x]

    def close(x: int) -> bool:  # within a scheduler cycle (60 s) or 20 %: good enough
        return abs(median(x) - target) <= max(60.0, 0.2 * target)

    lo = 0
    if median(lo) >= target or close(lo):
        return lo
    # Galloping search first: simulations with a needlessly large reserve are long (the queue grows
    # without bound), so the upper end is found by doubling from a small step.
    x = 4
    while True:
        x = min(x, hi)
        if median(x) >= target:
            hi = x
            break
        if close(x):  # still below, but close: a larger reserve would only cost time
            return x
        if x == hi:
            return hi
        lo, x = x, 2 * x
    while hi - lo > 1:  # median(lo) < target <= median(hi)
        mid = (lo + hi) // 2
        if close(mid):
            return mid
        if median(mid) < target:
            lo = mid
        else:
            hi = mid

    def distance(x: int) -> float:
        return abs(math.log1p(median(x)) - math.log1p(target))

    return lo if distance(lo) < distance(hi) else hi
