"""Cost of a walltime request sequence: iSBatch's cost model and the evaluators of a sequence.

* :class:`CostModel`: iSBatch's cost of one submission, ``alpha * t + beta * min(X, t) + gamma``.
* :func:`expected_cost` and :func:`expected_makespan` (Theorem 1 of Gainaru et al., ICPP 2019,
  backfilling rate ``zeta``) of any sequence under an :class:`~elastic.learners.walltime.ESDD`;
  :func:`empirical_cost` of a sequence on a list of observed runtimes.

A sequence ``t_0 < t_1 < ...`` is tried in order: a run killed at ``t_k`` restarts with ``t_{k+1}``.
All durations are float seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError
from elastic.learners.walltime import ESDD

__all__ = [
    "CostModel",
    "empirical_cost",
    "expected_cost",
    "expected_makespan",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class CostModel:
    """Cost of one submission of walltime ``t`` for a stage of runtime ``X`` (iSBatch's model).

    ``alpha * t + beta * min(X, t) + gamma``. ``alpha=1, beta=0`` pays what is reserved (the paper's
    TOptimal); ``alpha=1, beta=1`` is iSBatch's "HPC" model; ``gamma`` can stand for a queue wait.

    Parameters
    ----------
    alpha : float, default 1.0
        Cost per reserved second, >= 0.
    beta : float, default 0.0
        Cost per used second, >= 0.
    gamma : float, default 0.0
        Fixed cost per submission, >= 0 (e.g. the expected queue wait in seconds).
    """

    alpha: float = 1.0
    beta: float = 0.0
    gamma: float = 0.0

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "gamma"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
                raise ConfigError(f"CostModel: {name} must be a finite number >= 0; got {value!r}")
        if self.alpha == 0 and self.beta == 0 and self.gamma == 0:
            raise ConfigError("CostModel: at least one of alpha, beta, gamma must be > 0")


def _check_requests(requests: Sequence[float] | npt.ArrayLike, longest: float) -> FloatArray:
    t = np.asarray(requests, dtype=np.float64).ravel()
    if t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0) or np.any(np.diff(t) <= 0):
        raise ConfigError(
            f"requests must be a non-empty, strictly increasing sequence of seconds >= 0; got {t}"
        )
    if t[-1] < longest:
        raise ConfigError(
            f"the last request ({t[-1]:g} s) is shorter than a possible runtime ({longest:g} s): "
            "the stage would never finish; end the sequence at the upper bound"
        )
    return t


def _outcome_costs(t: FloatArray, x: FloatArray, cost: CostModel) -> FloatArray:
    """Cost of the sequence ``t`` for each runtime in ``x`` (vectorised over ``x``)."""
    k = np.searchsorted(t, x, side="left")  # index of the successful request
    reserved = np.concatenate(([0.0], np.cumsum(t)))  # reserved[k] = t_0 + ... + t_{k-1}
    result: FloatArray = cost.alpha * reserved[k + 1] + cost.beta * (reserved[k] + x) + cost.gamma * (k + 1)
    return result


def expected_cost(
    requests: Sequence[float] | npt.ArrayLike, distribution: ESDD, cost: CostModel | None = None
) -> float:
    """Return the expected cost of a request sequence under a discrete runtime distribution.

    Parameters
    ----------
    requests : sequence of float
        Strictly increasing walltimes (seconds); a killed stage restarts with the next one.
    distribution : ESDD
        Runtime distribution.
    cost : CostModel, optional
        Default ``CostModel()`` (pay what is reserved).

    Returns
    -------
    float
        ``sum_l f_l * cost(requests, v_l)``.

    Raises
    ------
    ConfigError
        The requests are not increasing, or end below the distribution's largest possible runtime.

    Examples
    --------
    >>> d = ESDD(np.array([1.0, 2.0]), np.array([0.5, 0.5]))
    >>> expected_cost([1.0, 2.0], d)
    2.0
    """
    cost = cost or CostModel()
    support = distribution.values[distribution.probs > 0]
    t = _check_requests(requests, float(support.max()))
    return float(distribution.probs @ _outcome_costs(t, distribution.values, cost))


def expected_makespan(requests: Sequence[float] | npt.ArrayLike, distribution: ESDD, zeta: float) -> float:
    """Return the expected makespan of a request sequence with backfilling rate ``zeta`` (Theorem 1).

    For a runtime in ``(t_m, t_{m+1}]`` the makespan is ``max(S_{m+1}, (S_m + X) / (1 - zeta))`` with
    ``S_m`` the sum of the first ``m`` requests; with ``zeta = 0`` it is :func:`expected_cost` with the
    default cost model.

    Parameters
    ----------
    requests : sequence of float
        Strictly increasing walltimes (seconds).
    distribution : ESDD
        Runtime distribution.
    zeta : float
        Backfilling work rate in [0, 1).

    Returns
    -------
    float
        Expected makespan in seconds.

    Raises
    ------
    ConfigError
        ``zeta`` outside [0, 1), or bad requests as for :func:`expected_cost`.
    """
    if not (np.isfinite(zeta) and 0.0 <= zeta < 1.0):
        raise ConfigError(f"zeta must be in [0, 1); got {zeta!r}")
    support = distribution.values[distribution.probs > 0]
    t = _check_requests(requests, float(support.max()))
    x = distribution.values
    k = np.searchsorted(t, x, side="left")
    reserved = np.concatenate(([0.0], np.cumsum(t)))
    makespan = np.maximum(reserved[k + 1], (reserved[k] + x) / (1.0 - zeta))
    return float(distribution.probs @ makespan)


def empirical_cost(
    requests: Sequence[float] | npt.ArrayLike, runtimes: npt.ArrayLike, cost: CostModel | None = None
) -> float:
    """Return the mean cost of a request sequence over observed (uncensored) runtimes.

    Parameters
    ----------
    requests : sequence of float
        Strictly increasing walltimes (seconds).
    runtimes : array_like of float
        True runtimes in seconds.
    cost : CostModel, optional
        Default ``CostModel()``.

    Returns
    -------
    float
        Mean cost per run.

    Raises
    ------
    ConfigError
        No runtimes, or bad requests as for :func:`expected_cost`.

    Examples
    --------
    >>> empirical_cost([5.0, 10.0], [4.0, 7.0])
    10.0
    """
    x = np.asarray(runtimes, dtype=np.float64).ravel()
    if x.size == 0:
        raise ConfigError("runtimes is empty")
    t = _check_requests(requests, float(x.max()))
    return float(_outcome_costs(t, x, cost or CostModel()).mean())
