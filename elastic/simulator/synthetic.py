"""Synthetic background load: Poisson arrivals with random sizes and log-normal runtimes.

This is the mock backend's background load when no trace is given. The defaults describe a 256-core
machine offered 70% load by 10,000 jobs of 1 to 128 cores (powers of two) whose runtimes are log-normal
around a median of 30 minutes, with walltime requests twice the runtime: busy enough that jobs queue
(see the tests), idle enough that the queue drains.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.workload import Workload

__all__ = ["MAX_JOBS", "SIZE_DISTRIBUTIONS", "synthetic_workload"]

logger = logging.getLogger(__name__)

SIZE_DISTRIBUTIONS: tuple[str, ...] = ("power-of-two", "log-uniform", "uniform")
"""Job-size distributions :func:`synthetic_workload` knows.

- ``"power-of-two"``: ``2**k`` cores, ``k`` uniform over the powers of two in ``[min_cores, max_cores]``.
- ``"log-uniform"``: ``floor(exp(u))`` with ``u`` uniform in ``[ln min_cores, ln(max_cores + 1))``.
- ``"uniform"``: any integer in ``[min_cores, max_cores]`` with equal probability.
"""

DEFAULT_UTILISATION = 0.7
"""Offered load used when neither ``utilisation`` nor ``arrival_rate`` is given."""

MAX_JOBS = 2_000_000
"""Most jobs :func:`synthetic_workload` generates: ten times the whole HPC2N trace. A simulation holds
every job in memory (about 750 bytes each with its record: ``elastic simulate --jobs 1000000`` peaks
at 0.9 GB), so more would exhaust memory rather than finish."""


def _sizes(rng: np.random.Generator, distribution: str, n: int, low: int, high: int) -> npt.NDArray[np.int64]:
    if distribution == "power-of-two":
        k_low, k_high = math.ceil(math.log2(low)), math.floor(math.log2(high))
        if k_low > k_high:
            raise ConfigError(
                f"synthetic_workload size='power-of-two' needs a power of two in "
                f"[min_cores, max_cores] = [{low}, {high}]"
            )
        return np.left_shift(1, rng.integers(k_low, k_high + 1, size=n)).astype(np.int64)
    if distribution == "log-uniform":
        drawn = np.floor(np.exp(rng.uniform(math.log(low), math.log(high + 1), size=n)))
        return np.clip(drawn, low, high).astype(np.int64)
    if distribution == "uniform":
        return rng.integers(low, high + 1, size=n).astype(np.int64)
    raise UnknownNameError("size distribution", distribution, SIZE_DISTRIBUTIONS)


def synthetic_workload(
    *,
    jobs: int = 10_000,
    processors: int = 256,
    utilisation: float | None = None,
    arrival_rate: float | None = None,
    size: str = "power-of-two",
    min_cores: int = 1,
    max_cores: int | None = None,
    runtime_median: float = 1800.0,
    runtime_sigma: float = 1.5,
    max_runtime: float = 172_800.0,
    estimate_ratio: float = 2.0,
    users: int = 32,
    seed: int | None = 0,
) -> Workload:
    """Generate a background workload with Poisson arrivals.

    Inter-arrival times are exponential; sizes follow ``size``; runtimes are log-normal
    (``runtime_median * exp(runtime_sigma * Z)``, clipped to ``[1, max_runtime]`` seconds); walltime is
    ``runtime * estimate_ratio``; users are uniform over ``users`` ids. Sizes, runtimes and arrivals are
    independent. Everything is drawn from one :func:`numpy.random.default_rng` seeded with ``seed``, so
    equal arguments give equal workloads.

    Parameters
    ----------
    jobs : int, default 10000
        Number of jobs, in ``[0, MAX_JOBS]``.
    processors : int, default 256
        Machine size in cores, >= 1.
    utilisation : float or None, default None
        Offered load in (0, 10]: the arrival rate is set so that the expected core-seconds arriving per
        second, ``rate * mean(cores * runtime)`` (mean over the drawn jobs), equal
        ``utilisation * processors``. Above 1 the queue grows without bound. When both this and
        ``arrival_rate`` are None, :data:`DEFAULT_UTILISATION` (0.7) is used.
    arrival_rate : float or None, default None
        Jobs per second, > 0, instead of ``utilisation`` (give at most one of the two).
    size : {"power-of-two", "log-uniform", "uniform"}, default "power-of-two"
        Job-size distribution, see :data:`SIZE_DISTRIBUTIONS`.
    min_cores : int, default 1
        Smallest job, >= 1.
    max_cores : int or None, default None
        Widest job, in ``[min_cores, processors]``; None means ``max(min_cores, processors // 2)``.
    runtime_median : float, default 1800.0
        Median runtime in seconds, > 0.
    runtime_sigma : float, default 1.5
        Standard deviation of ``log(runtime)``, >= 0 (0 gives every job the median runtime).
    max_runtime : float, default 172800.0
        Runtimes are clipped to this many seconds (48 h), >= 1.
    estimate_ratio : float, default 2.0
        Walltime request = runtime x ``estimate_ratio``, > 0. Below 1 every job ends in TIMEOUT.
    users : int, default 32
        Number of distinct user ids (0 .. users - 1), >= 1.
    seed : int or None, default 0
        Seed of the random generator; None draws fresh entropy (not reproducible).

    Returns
    -------
    Workload
        ``jobs`` jobs sorted by submit time, the first submitted at 0; ``job_id`` is 1..jobs;
        ``recorded_wait`` is NaN; ``source`` names the generator and its arguments.

    Raises
    ------
    ConfigError
        A parameter is out of range; the message names it.
    UnknownNameError
        ``size`` is not a known distribution.

    Examples
    --------
    >>> w = synthetic_workload(jobs=1000, processors=64, utilisation=0.5, seed=1)
    >>> len(w), w.processors, int(w.cores.max()) <= 32, float(w.submit[0])
    (1000, 64, True, 0.0)
    """
    if max_cores is None:
        max_cores = max(min_cores, processors // 2)
    checks: list[tuple[bool, str]] = [
        (
            0 <= jobs <= MAX_JOBS,
            f"jobs must be >= 0 and at most {MAX_JOBS:,} (every job is held in memory), got {jobs!r}",
        ),
        (processors >= 1, f"processors must be >= 1, got {processors!r}"),
        (min_cores >= 1, f"min_cores must be >= 1, got {min_cores!r}"),
        (
            min_cores <= max_cores <= processors,
            f"max_cores must be in [min_cores, processors] = [{min_cores}, {processors}], got {max_cores!r}",
        ),
        (
            math.isfinite(runtime_median) and runtime_median > 0,
            f"runtime_median must be > 0 s, got {runtime_median!r}",
        ),
        (
            math.isfinite(runtime_sigma) and runtime_sigma >= 0,
            f"runtime_sigma must be >= 0, got {runtime_sigma!r}",
        ),
        (max_runtime >= 1, f"max_runtime must be >= 1 s, got {max_runtime!r}"),
        (
            math.isfinite(estimate_ratio) and estimate_ratio > 0,
            f"estimate_ratio must be > 0, got {estimate_ratio!r}",
        ),
        (users >= 1, f"users must be >= 1, got {users!r}"),
        (
            utilisation is None or arrival_rate is None,
            f"give utilisation or arrival_rate, not both (got {utilisation!r} and {arrival_rate!r})",
        ),
        (
            utilisation is None or (math.isfinite(utilisation) and 0 < utilisation <= 10),
            f"utilisation must be in (0, 10], got {utilisation!r}",
        ),
        (
            arrival_rate is None or (math.isfinite(arrival_rate) and arrival_rate > 0),
            f"arrival_rate must be > 0 jobs/s, got {arrival_rate!r}",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(f"synthetic_workload {message}")

    rng = np.random.default_rng(seed)
    cores = _sizes(rng, size, jobs, min_cores, max_cores)
    runtime = np.clip(runtime_median * np.exp(runtime_sigma * rng.standard_normal(jobs)), 1.0, max_runtime)
    if arrival_rate is None:
        target = DEFAULT_UTILISATION if utilisation is None else utilisation
        mean_work = float(np.mean(cores * runtime)) if jobs else runtime_median
        arrival_rate = target * processors / mean_work
    gaps = rng.exponential(1.0 / arrival_rate, size=max(jobs - 1, 0))
    submit = np.concatenate([np.zeros(min(jobs, 1)), np.cumsum(gaps)])
    user = rng.integers(0, users, size=jobs).astype(np.int64)
    logger.debug("synthetic load: %d jobs, %.6g jobs/s on %d cores", jobs, arrival_rate, processors)

    return Workload(
        job_id=np.arange(1, jobs + 1, dtype=np.int64),
        submit=submit.astype(np.float64),
        cores=cores,
        runtime=runtime.astype(np.float64),
        walltime=(runtime * estimate_ratio).astype(np.float64),
        user=user,
        recorded_wait=np.full(jobs, np.nan),
        processors=processors,
        source=(
            f"synthetic(jobs={jobs}, processors={processors}, arrival_rate={arrival_rate:.6g}/s, "
            f"size={size}[{min_cores}..{max_cores}], runtime=lognormal(median={runtime_median:g}, "
            f"sigma={runtime_sigma:g}), estimate_ratio={estimate_ratio:g}, seed={seed})"
        ),
    )
