"""Stochastic runtimes and walltime strategies for the speculative-scheduling experiment (ICPP 2019).

A :class:`Runtime` is a continuous runtime distribution truncated to ``[lower, upper]`` seconds; it
samples runtimes, discretises itself for the dynamic programmes, and gives the expected work a job would
complete in a gap (the speculative-backfilling gain). :func:`requests` turns a strategy name into the
request sequence of one job.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError
from elastic.learners.toptimal import atoptimal, toptimal
from elastic.learners.walltime import ESDD, esdd
from elastic.learners.walltime_baselines import MASI, Neuroscience

__all__ = ["HOUR", "STRATEGY_PATTERN", "Runtime", "requests"]

HOUR = 3600.0

#: Strategy names :func:`requests` understands: ``hpc``, ``toptimal``, ``atoptimal:ZETA``,
#: ``neuro:K`` (max of the last K runs), ``masi:K`` (mean of the last K runs, x1.4 per kill).
STRATEGY_PATTERN = re.compile(r"^(hpc|toptimal|atoptimal:(0(\.\d+)?)|neuro:(\d+)|masi:(\d+))$")

#: Grid intervals of TOptimal's and the gain's discretisation, and of ATOptimal's (O(n^3) states;
#: 46 reproduces the paper's Table 1).
POINTS = 200
AT_POINTS = 46


@dataclass(frozen=True)
class Runtime:
    """A runtime distribution truncated to ``[lower, upper]`` seconds.

    Attributes
    ----------
    name : str
        Label for tables.
    dist : frozen scipy.stats distribution
        Anything with vectorised ``cdf`` and ``ppf``.
    lower, upper : float
        The support in seconds; ``upper`` is Classical HPC's request.
    """

    name: str
    dist: Any
    lower: float
    upper: float
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.lower < self.upper:
            raise ConfigError(f"{self.name}: need 0 <= lower < upper, got [{self.lower}, {self.upper}]")

    def sample(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
        """Draw ``size`` runtimes (inverse cdf on the truncated support; never below 1 second)."""
        lo, hi = self.dist.cdf([self.lower, self.upper])
        x = np.asarray(self.dist.ppf(rng.uniform(lo, hi, size)), dtype=np.float64)
        return np.clip(x, max(self.lower, 1.0), self.upper)

    def grid(self, points: int = POINTS) -> ESDD:
        """Return the equally-spaced discretisation the dynamic programmes use (cached)."""
        key = f"grid{points}"
        if key not in self._cache:
            self._cache[key] = esdd(self.dist, self.lower, self.upper, points)
        grid: ESDD = self._cache[key]
        return grid

    def mean(self) -> float:
        """Return the expected runtime (seconds) of the discretised distribution."""
        return self.grid().mean()

    def partial_mean(self, known: float, d: float) -> float:
        """Return ``E[X; known < X <= d] / P(X > known)``: the work a run finishes in a gap of ``d``."""
        g = self.grid()
        v, f = g.values, g.probs
        alive = v > known
        mass = float(f[alive].sum())
        if mass <= 0:
            return 0.0
        inside = alive & (v <= d)
        return float((v[inside] * f[inside]).sum()) / mass

    @functools.cached_property
    def _toptimal(self) -> tuple[float, ...]:
        g = self.grid()
        return toptimal(g.values, g.probs).requests

    def sequence(self, zeta: float | None = None) -> tuple[float, ...]:
        """Return TOptimal's requests, or ATOptimal's for backfilling rate ``zeta`` (seconds, cached)."""
        if zeta is None or zeta == 0:
            return self._toptimal
        key = f"at{zeta}"
        if key not in self._cache:
            g = self.grid(AT_POINTS)
            self._cache[key] = atoptimal(g.values, g.probs, zeta=zeta).requests
        seq: tuple[float, ...] = self._cache[key]
        return seq


def requests(strategy: str, runtime: Runtime, rng: np.random.Generator) -> tuple[float, ...]:
    """Return one job's request sequence (seconds) under ``strategy`` (see :data:`STRATEGY_PATTERN`).

    ``neuro:K`` and ``masi:K`` draw the job's K previous runtimes from its distribution (each job is
    a fresh instance of its application with its own recent history).

    Raises
    ------
    ConfigError
        Unknown strategy name.
    """
    m = STRATEGY_PATTERN.match(strategy)
    if m is None:
        raise ConfigError(
            f"unknown walltime strategy {strategy!r}: use hpc, toptimal, atoptimal:ZETA, neuro:K or masi:K"
        )
    if strategy == "hpc":
        return (runtime.upper,)
    if strategy == "toptimal":
        return runtime.sequence()
    if m.group(2) is not None:
        return runtime.sequence(float(m.group(2)))
    k = int(m.group(4) or m.group(5))
    if k < 1:
        raise ConfigError(f"{strategy}: the history length must be >= 1")
    history = [float(x) for x in runtime.sample(rng, k)]
    base = Neuroscience(window=k) if m.group(4) else MASI(window=k)
    return base.requests(history, runtime.upper)
