"""Walltime request strategies the learned sequences are compared with (Gainaru et al., ICPP 2019).

* :class:`FixedSequence` (TOptimal / ATOptimal output, the same sequence for every run),
  :class:`ClassicalHPC`, :class:`Neuroscience` and :class:`MASI`, all :class:`WalltimeStrategy`;
* :func:`strategy_expectation` averages a metric (e.g. :func:`elastic.learners.walltime_cost.expected_cost`)
  of a history-dependent strategy over histories drawn from an :class:`~elastic.learners.walltime.ESDD`.

All durations are float seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from elastic.errors import ConfigError
from elastic.learners.walltime import ESDD

__all__ = [
    "MASI",
    "MAX_SAMPLED_RUNTIMES",
    "ClassicalHPC",
    "FixedSequence",
    "Neuroscience",
    "WalltimeStrategy",
    "strategy_expectation",
]

MAX_SAMPLED_RUNTIMES = 10_000_000
"""Most runtimes :func:`strategy_expectation` draws (``samples * history``): 80 MB of draws, and
about 10 s per million histories on a 2-core machine; more would exhaust memory or run for hours."""


class WalltimeStrategy(Protocol):
    """Something that chooses a request sequence from the runtimes of previous runs."""

    @property
    def name(self) -> str:
        """Label for tables."""
        ...

    def requests(self, history: Sequence[float], upper: float) -> tuple[float, ...]:
        """Return strictly increasing requests ending at ``upper`` (seconds) for the next run."""
        ...


def _capped(first: float, upper: float) -> tuple[float, ...]:
    return (upper,) if first >= upper else (first, upper)


@dataclass(frozen=True, slots=True)
class FixedSequence:
    """The same sequence whatever the history (TOptimal or ATOptimal output)."""

    name: str
    sequence: tuple[float, ...]

    def requests(self, history: Sequence[float], upper: float) -> tuple[float, ...]:
        """Return the fixed sequence (its last request must be ``upper``)."""
        return self.sequence


@dataclass(frozen=True, slots=True)
class ClassicalHPC:
    """Always request the upper bound."""

    name: str = "Classical HPC"

    def requests(self, history: Sequence[float], upper: float) -> tuple[float, ...]:
        """Return ``(upper,)``."""
        return (upper,)


@dataclass(frozen=True, slots=True)
class Neuroscience:
    """Request the longest of the last ``window`` runtimes; if killed, resubmit with the upper bound."""

    window: int = 10
    name: str = "Neuroscience"

    def requests(self, history: Sequence[float], upper: float) -> tuple[float, ...]:
        """Return ``(max(last runs), upper)``, or ``(upper,)`` without history."""
        if len(history) == 0:
            return (upper,)
        return _capped(float(max(history[-self.window :])), upper)


@dataclass(frozen=True, slots=True)
class MASI:
    """Request the mean of the last ``window`` runtimes; each kill multiplies the request by 1.4."""

    window: int = 10
    increase: float = 0.4
    name: str = "MASI"

    def requests(self, history: Sequence[float], upper: float) -> tuple[float, ...]:
        """Return ``mean, mean * 1.4, mean * 1.4^2, ...`` below ``upper``, then ``upper``."""
        if len(history) == 0:
            return (upper,)
        first = float(np.mean(history[-self.window :]))
        if first <= 0 or self.increase <= 0:
            return _capped(first, upper)
        growth = np.log(upper / first) / np.log1p(self.increase) if first < upper else 0.0
        steps = first * (1.0 + self.increase) ** np.arange(int(np.ceil(growth)))
        return (*(float(s) for s in steps[steps < upper]), upper)


def strategy_expectation(
    strategy: WalltimeStrategy,
    distribution: ESDD,
    metric: Callable[[tuple[float, ...], ESDD], float],
    *,
    history: int = 10,
    samples: int = 1000,
    seed: int = 0,
) -> float:
    """Average a metric of a history-dependent strategy over histories drawn from the distribution.

    Parameters
    ----------
    strategy : WalltimeStrategy
        E.g. :class:`Neuroscience`.
    distribution : ESDD
        Where the ``history`` previous runtimes and the next one come from.
    metric : callable
        ``metric(requests, distribution)``, e.g. ``lambda t, d: expected_cost(t, d, cost)``.
    history : int, default 10
        Previous runs per sampled history.
    samples : int, default 1000
        Histories drawn (Monte Carlo).
    seed : int, default 0
        Seed of the generator, for reproducible figures.

    Returns
    -------
    float
        Mean of the metric over the sampled histories (exact over the next runtime).

    Raises
    ------
    ConfigError
        ``samples`` is below 1, ``history`` below 0, or ``samples * history`` exceeds
        :data:`MAX_SAMPLED_RUNTIMES`.
    """
    if samples < 1 or history < 0:
        raise ConfigError(f"need samples >= 1 and history >= 0; got samples={samples}, history={history}")
    if samples * history > MAX_SAMPLED_RUNTIMES:
        raise ConfigError(
            f"samples x history = {samples:,} x {history:,} runtimes to draw; at most "
            f"{MAX_SAMPLED_RUNTIMES:,} are allowed (lower samples or history)"
        )
    rng = np.random.default_rng(seed)
    draws = distribution.sample((samples, history), rng)
    cache: dict[tuple[float, ...], float] = {}
    total = 0.0
    for row in draws:
        seq = strategy.requests(row.tolist(), distribution.upper)
        if seq not in cache:
            cache[seq] = metric(seq, distribution)
        total += cache[seq]
    return total / samples
