"""Fidelity modes: queue waits on the mock backend that look like the traced centre's.

A plain replay of a trace under EASY gives waits far below the recorded ones, because the real centre
had priorities, limits and fragmentation the trace does not record. The modes here keep what the trace
*does* record, the schedule itself:

``replay``
    Every job is queued and scheduled by EASY backfilling (the plain simulator).
``recorded``
    Every background job is pinned at its recorded start for its recorded runtime
    (:meth:`Engine.pin <elastic.simulator.engine.Engine.pin>`); the evaluated ("foreground") jobs are
    queued and planned into the capacity left, by conservative backfilling
    (:class:`~elastic.simulator.pinned.PinnedBackfill`), each for its recorded runtime: the record says
    when it ended, and a walltime plan against pinned jobs (which the real scheduler never knew in
    advance) would refuse gaps the job really ran in. Jobs users submit to the mock backend are planned
    for their walltime, as Slurm does.
``recorded-chain``
    ``recorded``, and a job may not start before the same user's previous job (in submit order) has
    started: users whose earlier jobs still wait, wait (the strongest signal in HPC2N's waits).
``calibrated``
    ``recorded-chain`` with ``reserve`` cores never given to foreground jobs (fragmentation, limits and
    down nodes the trace does not record). ``reserve`` is fitted by bisection so that the median
    simulated wait of the first half of the evaluated jobs matches their recorded median; the report
    also shows the second half, which the fit never saw.
``capacity``
    ``recorded-chain`` on a machine whose usable size follows its recorded use: at time t, the most
    cores the recorded schedule had in use during the preceding ``window`` (12 h by default;
    :func:`~elastic.simulator.availability.recorded_capacity`). Down or drained nodes and jobs a cleaned
    trace removed are not offered. Nothing is fitted to the recorded waits when it runs (the default
    window was chosen on HPC2N; see the README's fidelity section).

:func:`fidelity_report` runs the modes on a trace and compares, for the trace's own jobs of a size
class (16-128 cores by default), simulated and recorded waits.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.availability import recorded_capacity
from elastic.simulator.engine import Engine
from elastic.simulator.pinned import PinnedBackfill
from elastic.simulator.workload import Workload

__all__ = [
    "DEFAULT_WINDOW",
    "MODES",
    "FidelityResult",
    "backend_setup",
    "calibrate_reserve",
    "fidelity_report",
    "fidelity_row",
    "mode_engine",
    "pinnable",
    "simulate_mode",
    "subset",
    "user_chain",
]

logger = logging.getLogger(__name__)

MODES: tuple[str, ...] = ("replay", "recorded", "recorded-chain", "calibrated", "capacity")
"""Fidelity modes, from the plain simulator to the recorded schedule on the recorded capacity."""

DEFAULT_WINDOW = 43_200.0
"""Look-back of the ``capacity`` mode's usable-size estimate, in seconds (12 h; the README's fidelity
section shows 8-24 h on HPC2N)."""

_BoolArray = npt.NDArray[np.bool_]
_IntArray = npt.NDArray[np.int64]
_FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FidelityResult:
    """Simulated waits of the evaluated jobs under one mode.

    Attributes
    ----------
    mode : str
        One of :data:`MODES`.
    reserve : int
        Cores held back from foreground jobs (0 unless ``calibrated``).
    jobs : pandas.DataFrame
        One row per evaluated job: ``job_id, user, cores, submit, recorded_wait, wait``.
    """

    mode: str
    reserve: int
    jobs: pd.DataFrame


def subset(workload: Workload, mask: _BoolArray) -> Workload:
    """Return the jobs of ``workload`` where ``mask`` is True, as a Workload of the same machine."""
    return workload.select(mask)


def user_chain(workload: Workload) -> _IntArray:
    """Index of each job's predecessor: the same user's previous job in submit order (-1: none).

    Jobs of unknown user (-1) have no predecessor.

    Examples
    --------
    >>> w = Workload(np.arange(4), np.zeros(4), np.ones(4, dtype=np.int64), np.ones(4), np.ones(4),
    ...              np.array([7, 8, 7, -1]), np.zeros(4), 4, "doc")
    >>> user_chain(w).tolist()
    [-1, -1, 0, -1]
    """
    idx = pd.Series(np.arange(len(workload)), dtype=np.int64)
    prev = idx.groupby(workload.user, sort=False).shift(1)
    out = prev.fillna(-1).to_numpy(dtype=np.int64, copy=True)
    out[workload.user < 0] = -1
    return out


def pinnable(workload: Workload, mask: _BoolArray) -> _BoolArray:
    """Which of the jobs in ``mask`` can be pinned at their recorded start without over-allocation.

    Jobs are taken in recorded-start order; one that would push the recorded occupancy above the
    machine (inconsistent traces, or requested > allocated processors) is left out. Jobs without a
    recorded wait cannot be pinned. Zero-runtime jobs hold no cores (the engine starts and ends them
    at once), so they never conflict and are not counted: counting them, their end (sorted before
    their start at the same instant) freed cores they did not hold yet, and a later job could be
    pinned into cores that were in use.

    Examples
    --------
    On 4 cores, a 4-core job runs over [0, 100); at 50 a zero-runtime 4-core job and a 2-core job
    start. The zero-runtime job is harmless; the 2-core job would need 6 cores.

    >>> n = np.array
    >>> w = Workload(n([1, 2, 3]), n([0.0, 50.0, 50.0]), n([4, 4, 2]), n([100.0, 0.0, 10.0]),
    ...              n([100.0, 1.0, 10.0]), n([1, 1, 1]), n([0.0, 0.0, 0.0]), 4, "doc")
    >>> pinnable(w, np.ones(3, dtype=bool)).tolist()
    [True, True, False]
    """
    ok = mask & ~np.isnan(workload.recorded_wait)
    idx = np.flatnonzero(ok & (workload.runtime > 0))
    start = workload.submit[idx] + workload.recorded_wait[idx]
    end = start + workload.runtime[idx]
    cores = workload.cores[idx]
    times = np.concatenate([start, end])
    delta = np.concatenate([cores, -cores])
    order = np.lexsort((delta, times))  # ends before starts at equal times
    level = np.cumsum(delta[order])
    if level.size == 0 or level.max() <= workload.processors:
        return ok
    # Rare: drop the offending jobs one at a time, in start order (a plain loop; few conflicts).
    keep = np.ones(idx.size, dtype=bool)
    used = 0
    for k in order.tolist():
        job = k % idx.size
        if k < idx.size:
            if used + int(cores[job]) > workload.processors:
                keep[job] = False
                continue
            used += int(cores[job])
        elif keep[job]:
            used -= int(cores[job])
    logger.warning(
        "trace %s: %d jobs left unpinned: their recorded schedule exceeds %d cores",
        workload.source,
        int((~keep).sum()),
        workload.processors,
    )
    out = ok.copy()
    out[idx[~keep]] = False
    return out


def backend_setup(
    workload: Workload | None,
    mode: str,
    *,
    order: str = "conservative",
    reserve: int | None = 0,
    cores: tuple[int, int] = (16, 128),
    window: float = DEFAULT_WINDOW,
) -> tuple[PinnedBackfill, Workload, Workload, _FloatArray]:
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
    window : float, default DEFAULT_WINDOW
        ``capacity`` only: look-back of the usable-size estimate in seconds.

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
    if mode not in MODES[1:]:
        raise UnknownNameError("mode", mode, MODES)
    if workload is None:
        raise ConfigError(
            f"mode {mode!r} pins the recorded schedule of a trace: give a workload read from an SWF "
            "trace with recorded waits (field 3), or use mode='replay'"
        )
    if len(workload) and np.isnan(workload.recorded_wait).all():
        # An empty workload (a quiet stretch of a trace) is fine: nothing to pin, nothing queued.
        raise ConfigError(
            f"mode {mode!r} pins the recorded schedule of a trace, but {workload.source!r} has no recorded "
            "waits (SWF field 3, wait_time, is -1 on every job); use mode='replay'"
        )
    x = 0
    if mode == "calibrated":
        x = calibrate_reserve(workload, cores=cores, order=order) if reserve is None else reserve
    evaluated = _evaluated(workload, cores, require=False)
    return _parts(workload, mode, evaluated, x, order, window)


def _parts(
    workload: Workload, mode: str, evaluated: _BoolArray, reserve: int, order: str, window: float
) -> tuple[PinnedBackfill, Workload, Workload, _FloatArray]:
    fg = subset(workload, evaluated)
    pins = pinnable(workload, ~evaluated)
    bg = subset(workload, pins)
    chain: dict[int, int] | None = None
    if mode != "recorded":
        # Engine indices: queued jobs first (0..F-1, in submit order), then pinned jobs.
        engine_index = np.full(len(workload), -1, dtype=np.int64)
        engine_index[evaluated] = np.arange(len(fg))
        engine_index[pins] = len(fg) + np.arange(len(bg))
        prev = user_chain(workload)[evaluated]
        parent = np.where(prev >= 0, engine_index[np.maximum(prev, 0)], -1)
        has = np.flatnonzero(parent >= 0)
        chain = dict(zip(has.tolist(), parent[has].tolist(), strict=True))
    capacity = None
    if mode == "capacity":
        times, usable = recorded_capacity(workload, window=window)
        capacity = (times.tolist(), usable.tolist())
    policy = PinnedBackfill(
        order=order,
        reserve=reserve if mode == "calibrated" else 0,
        chain=chain,
        capacity=capacity,
        trace_jobs=len(fg),
    )
    return policy, fg, bg, bg.submit + bg.recorded_wait


def _evaluated(workload: Workload, cores: tuple[int, int], *, require: bool = True) -> _BoolArray:
    lo, hi = cores
    if not 1 <= lo <= hi:
        raise ConfigError(f"cores must be a range lo:hi with 1 <= lo <= hi, got {lo}:{hi}")
    mask = (workload.cores >= lo) & (workload.cores <= hi) & ~np.isnan(workload.recorded_wait)
    if require and not mask.any():
        raise ConfigError(
            f"no job of {workload.source!r} asks for {lo}-{hi} cores and has a recorded wait; "
            "choose another --cores range"
        )
    return np.asarray(mask, dtype=bool)


def mode_engine(
    workload: Workload,
    mode: str,
    *,
    cores: tuple[int, int] = (16, 128),
    reserve: int = 0,
    order: str = "conservative",
    window: float = DEFAULT_WINDOW,
) -> tuple[Engine, _BoolArray]:
    """Build (not run) the engine that simulates ``workload`` under one fidelity mode.

    In ``replay`` every job is queued under EASY. In the other modes the evaluated jobs (``cores``
    range, recorded wait known) are queued, in submit order, as engine jobs ``0..F-1``; every other
    job with a recorded wait is pinned at its recorded start (jobs ``F..``).

    Parameters
    ----------
    workload : Workload
        A trace with recorded waits.
    mode : str
        One of :data:`MODES`.
    cores : tuple of (int, int), default (16, 128)
        Evaluated jobs: those asking for ``lo`` to ``hi`` cores (inclusive) with a recorded wait.
    reserve : int, default 0
        Cores never given to queued jobs (``calibrated`` only; ignored otherwise).
    order : {"conservative", "fcfs"}, default "conservative"
        Queue discipline of queued jobs in the recorded modes.
    window : float, default DEFAULT_WINDOW
        Look-back in seconds of the ``capacity`` mode's usable-size estimate (ignored otherwise).

    Returns
    -------
    (Engine, ndarray of bool)
        The engine, and which workload jobs are evaluated.

    Raises
    ------
    UnknownNameError
        Unknown ``mode`` or ``order``.
    ConfigError
        No evaluated job, or a bad ``cores`` range.
    """
    if mode not in MODES:
        raise UnknownNameError("mode", mode, MODES)
    evaluated = _evaluated(workload, cores)
    if mode == "replay":
        return Engine(nodes=workload.processors, policy="easy", workload=workload), evaluated
    policy, fg, bg, starts = _parts(workload, mode, evaluated, reserve, order, window)
    engine = Engine(nodes=workload.processors, policy=policy, workload=fg)
    engine.pin(bg, starts)
    return engine, evaluated


def simulate_mode(
    workload: Workload,
    mode: str,
    *,
    cores: tuple[int, int] = (16, 128),
    reserve: int = 0,
    order: str = "conservative",
    window: float = DEFAULT_WINDOW,
) -> FidelityResult:
    """Simulate ``workload`` under one fidelity mode; return the evaluated jobs' waits.

    Parameters are those of :func:`mode_engine` (``calibrated`` uses ``reserve`` as given; see
    :func:`calibrate_reserve`).

    Returns
    -------
    FidelityResult
    """
    engine, evaluated = mode_engine(workload, mode, cores=cores, reserve=reserve, order=order, window=window)
    engine.run()
    starts = np.asarray(engine.jobs.start[: len(workload)], dtype=np.float64)
    start = starts[evaluated] if mode == "replay" else starts[: int(evaluated.sum())]
    jobs = pd.DataFrame(
        {
            "job_id": workload.job_id[evaluated],
            "user": workload.user[evaluated],
            "cores": workload.cores[evaluated],
            "submit": workload.submit[evaluated],
            "recorded_wait": workload.recorded_wait[evaluated],
            "wait": start - workload.submit[evaluated],
        }
    )
    return FidelityResult(mode, reserve if mode == "calibrated" else 0, jobs)


def _first_half(workload: Workload, cores: tuple[int, int]) -> tuple[Workload, float]:
    """Return the jobs submitted before the median submit time of the evaluated jobs, and that time."""
    split = float(np.median(workload.submit[_evaluated(workload, cores)]))
    return subset(workload, workload.submit < split), split


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
    half, _ = _first_half(workload, cores)
    widest = int(half.cores[_evaluated(half, cores)].max())
    hi = workload.processors - widest if max_reserve is None else max_reserve
    return _fit_reserve(half, cores=cores, order=order, hi=hi, since=-math.inf)


def _fit_reserve(sample: Workload, *, cores: tuple[int, int], order: str, hi: int, since: float) -> int:
    """Fit the reserve by galloping then bisection.

    The result's median wait of the evaluated jobs submitted from ``since`` on is closest (on a log
    scale) to their recorded median.
    """
    evaluated = _evaluated(sample, cores) & (sample.submit >= since)
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
        if median(mid) < target:
            lo = mid
        else:
            hi = mid

    def distance(x: int) -> float:
        return abs(math.log1p(median(x)) - math.log1p(target))

    return lo if distance(lo) < distance(hi) else hi


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
    ratio = (med_sim / med_rec) if med_rec > 0 else math.nan
    return {
        "mode": label,
        "reserve": result.reserve,
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
        "median_ratio": ratio,
        "meets_goal": bool(0.5 <= ratio <= 2.0 and rho >= 0.6),
    }


def fidelity_report(
    workload: Workload,
    *,
    cores: tuple[int, int] = (16, 128),
    modes: tuple[str, ...] = MODES,
    reserve: int | None = None,
    order: str = "conservative",
    window: float = DEFAULT_WINDOW,
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
        Reserve of the ``calibrated`` mode; None fits it with :func:`calibrate_reserve`.
    order : {"conservative", "fcfs"}, default "conservative"
        Queue discipline of foreground jobs in the recorded modes.
    window : float, default DEFAULT_WINDOW
        Look-back in seconds of the ``capacity`` mode.

    Returns
    -------
    pandas.DataFrame
        One row per mode; ``calibrated`` adds ``calibrated (1st half)`` (the jobs the reserve was
        fitted on) and ``calibrated (2nd half)`` (the jobs the fit did not see), and ``capacity``
        its two halves likewise (nothing is fitted there: they show whether it holds over time).
        Columns: ``mode, reserve, jobs``, simulated and ``recorded_`` ``mean_wait``, ``median_wait``,
        ``p90_wait``, ``started_at_once`` (share with zero wait), ``spearman`` (rank correlation per job),
        ``median_ratio`` (simulated / recorded median) and ``meets_goal``
        (median within 2x and Spearman >= 0.6). Waits in seconds.
    """
    rows = []
    for mode in modes:
        x = 0
        if mode == "calibrated":
            x = calibrate_reserve(workload, cores=cores, order=order) if reserve is None else reserve
        result = simulate_mode(workload, mode, cores=cores, reserve=x, order=order, window=window)
        rows.append(fidelity_row(mode, result))
        if mode in ("calibrated", "capacity"):
            _, split = _first_half(workload, cores)
            second = (result.jobs["submit"] >= split).to_numpy()
            rows.append(fidelity_row(f"{mode} (1st half)", result, ~second))
            rows.append(fidelity_row(f"{mode} (2nd half)", result, second))
    return pd.DataFrame(rows)
