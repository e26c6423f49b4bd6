"""How closely a fidelity mode reproduces a trace's recorded waits: the figures and the goal.

:func:`fidelity_report` runs modes of :mod:`elastic.simulator.fidelity` on a trace and, for the
trace's own jobs of one size class (16-128 cores by default: the geometries the strategies submit),
compares each job's simulated wait with the wait it really had: mean, median, p90, the share started at
once (real centres: a few per cent), the error per job (median and mean of ``|simulated - recorded|``)
and the Spearman rank correlation. The *goal* (:func:`meets_goal`): Spearman >= 0.6 and a median
within 2x of the recorded one, or within 10 minutes when the recorded median is under 5 minutes (a
ratio of a few seconds means nothing).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pandas as pd

from elastic.simulator.fidelity import MODES, FidelityResult, calibrate_reserve, half_split, simulate_mode
from elastic.simulator.workload import Workload

__all__ = [
    "GOAL_RATIO",
    "GOAL_SPEARMAN",
    "SHORT_MEDIAN",
    "SHORT_TOLERANCE",
    "fidelity_report",
    "fidelity_row",
    "median_close",
    "meets_goal",
]

GOAL_SPEARMAN = 0.6
"""Smallest per-job Spearman rank correlation of simulated and recorded waits that meets the goal."""

GOAL_RATIO = 2.0
"""The simulated median wait must be within this factor of the recorded one..."""

SHORT_MEDIAN = 300.0
"""...or, when the recorded median is under this many seconds (5 min),"""

SHORT_TOLERANCE = 600.0
"""...within this many seconds of it (10 min)."""


def median_close(simulated: float, recorded: float) -> bool:
    """Whether a simulated median wait is close enough to the recorded one (seconds).

    Examples
    --------
    >>> median_close(3000.0, 2000.0), median_close(500.0, 96.0), median_close(1400.0, 96.0)
    (True, True, False)
    """
    if not (math.isfinite(simulated) and math.isfinite(recorded)):
        return False
    if recorded > 0 and 1 / GOAL_RATIO <= simulated / recorded <= GOAL_RATIO:
        return True
    return recorded < SHORT_MEDIAN and abs(simulated - recorded) <= SHORT_TOLERANCE


def meets_goal(simulated_median: float, recorded_median: float, spearman: float) -> bool:
    """Whether the fidelity goal is met: :func:`median_close` and Spearman >= :data:`GOAL_SPEARMAN`."""
    return median_close(simulated_median, recorded_median) and spearman >= GOAL_SPEARMAN


def fidelity_row(
    label: str, result: FidelityResult, mask: npt.NDArray[np.bool_] | None = None
) -> dict[str, object]:
    """Compare simulated and recorded waits of ``result``'s jobs (those in ``mask``, default all).

    Returns one row of :func:`fidelity_report` (see there for the keys), labelled ``label``.
    """
    from scipy.stats import spearmanr

    jobs = result.jobs if mask is None else result.jobs.loc[mask]
    sim = jobs["wait"].to_numpy(dtype=np.float64)
    rec = jobs["recorded_wait"].to_numpy(dtype=np.float64)
    if sim.size == 0:  # e.g. a half of a one-job report: every figure is undefined
        sim = rec = np.full(1, math.nan)
    # Undefined (NaN) for fewer than two jobs or constant waits.
    defined = len(sim) > 1 and np.ptp(sim) > 0 and np.ptp(rec) > 0
    rho = float(spearmanr(sim, rec).statistic) if defined else math.nan
    med_sim, med_rec = float(np.median(sim)), float(np.median(rec))
    error = np.abs(sim - rec)
    return {
        "mode": label,
        "reserve": result.reserve,
        "window": result.window,
        "fast_queues": " ".join(str(q) for q in sorted(result.fast_queues)),
        "short_queues": " ".join(str(q) for q in sorted(result.short_queues)),
        "jobs": len(jobs),
        "mean_wait": float(sim.mean()),
        "recorded_mean_wait": float(rec.mean()),
        "median_wait": med_sim,
        "recorded_median_wait": med_rec,
        "p90_wait": float(np.percentile(sim, 90)),
        "recorded_p90_wait": float(np.percentile(rec, 90)),
        "spearman": rho,
        "started_at_once": float((sim <= 0).mean()),
        "recorded_started_at_once": float((rec <= 0).mean()),
        "median_abs_error": float(np.median(error)),
        "mean_abs_error": float(error.mean()),
        "median_ratio": (med_sim / med_rec) if med_rec > 0 else math.nan,
        "median_close": median_close(med_sim, med_rec),
        "meets_goal": meets_goal(med_sim, med_rec, rho),
    }


def fidelity_report(
    workload: Workload,
    *,
    cores: tuple[int, int] = (16, 128),
    modes: tuple[str, ...] = MODES,
    reserve: int | None = None,
    order: str = "conservative",
    window: float | None = None,
    queues: bool = True,
) -> pd.DataFrame:
    """Compare simulated and recorded waits of the trace's own jobs of one size class, per mode.

    Parameters
    ----------
    workload : Workload
        A trace with recorded waits.
    cores : tuple of (int, int), default (16, 128)
        Evaluated jobs: those asking for ``lo`` to ``hi`` cores.
    modes : tuple of str, default MODES
        Modes to run, in row order.
    reserve : int or None, default None
        Reserve of the ``calibrated`` mode; None fits it with
        :func:`~elastic.simulator.fidelity.calibrate_reserve`.
    order : {"conservative", "fcfs"}, default "conservative"
        Queue discipline of foreground jobs in the recorded modes.
    window : float or None, default None
        Look-back in seconds of the ``capacity`` mode; None derives it from the trace
        (:func:`~elastic.simulator.recorded.capacity_window`).
    queues : bool, default True
        ``capacity`` mode: simulate fast queues apart and plan short queues first
        (:func:`~elastic.simulator.recorded.fast_queues`, :func:`~elastic.simulator.recorded.short_queues`).

    Returns
    -------
    pandas.DataFrame
        One row per mode; ``calibrated`` adds ``calibrated (1st half)`` (the jobs the reserve was
        fitted on) and ``calibrated (2nd half)`` (the jobs the fit did not see), and ``capacity``
        its two halves likewise (nothing is fitted there: they show whether it holds over time).
        Columns: ``mode, reserve, window`` (s, NaN outside ``capacity``), ``fast_queues`` and
        ``short_queues`` (``capacity``: queue numbers, space-separated), ``jobs``, simulated and
        ``recorded_`` ``mean_wait``, ``median_wait``, ``p90_wait``, ``started_at_once`` (share with
        zero wait), ``median_abs_error`` and ``mean_abs_error`` (per job, ``|simulated - recorded|``),
        ``spearman`` (rank correlation per job), ``median_ratio`` (simulated / recorded median),
        ``median_close`` and ``meets_goal`` (see :func:`meets_goal`). Waits in seconds.
    """
    rows = []
    split = half_split(workload, cores)
    for mode in modes:
        x = 0
        if mode == "calibrated":
            x = calibrate_reserve(workload, cores=cores, order=order) if reserve is None else reserve
        result = simulate_mode(
            workload, mode, cores=cores, reserve=x, order=order, window=window, queues=queues
        )
        rows.append(fidelity_row(mode, result))
        if mode in ("calibrated", "capacity"):
            second = (result.jobs["submit"] >= split).to_numpy()
            rows.append(fidelity_row(f"{mode} (1st half)", result, ~second))
            rows.append(fidelity_row(f"{mode} (2nd half)", result, second))
    return pd.DataFrame(rows)
