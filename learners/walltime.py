"""Walltime requests for stages with uncertain runtimes: distributions, costs, strategies, a learner.

* :class:`ESDD` and :func:`esdd` / :func:`esdd_from_runtimes`: the equally-spaced discretisation of
  Gainaru et al. (ICPP 2019, Section 4.2) of a ``scipy.stats`` distribution on ``[a, b]``, or of observed
  runtimes where runs killed at their walltime are right-censored (Kaplan-Meier, not dropped).
* :class:`CostModel`: iSBatch's cost of one submission, ``alpha * t + beta * min(X, t) + gamma``.
* Evaluators: :func:`expected_cost` and :func:`expected_makespan` (Theorem 1, backfilling rate
  ``zeta``) of any sequence under an ESDD, :func:`empirical_cost` on a list of runtimes.
* Strategies producing sequences: :class:`FixedSequence` (TOptimal / ATOptimal output),
  :class:`ClassicalHPC`, :class:`Neuroscience`, :class:`MASI`; :func:`strategy_expectation` averages a
  history-dependent strategy over histories drawn from the distribution.
* :class:`WalltimeLearner`: censored runtime history -> reservation sequence and ``next_request``.

All durations are float seconds (any unit works as long as it is used consistently).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt
from scipy import stats

from elastic.errors import ConfigError
from learners.base import BaseLearner, Interval, NotFittedError
from learners.toptimal import atoptimal, toptimal, toptimal_policy

__all__ = [
    "ESDD",
    "MASI",
    "ClassicalHPC",
    "CostModel",
    "FixedSequence",
    "Neuroscience",
    "WalltimeLearner",
    "WalltimeStrategy",
    "empirical_cost",
    "esdd",
    "esdd_from_runtimes",
    "expected_cost",
    "expected_makespan",
    "strategy_expectation",
]

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ESDD:
    """An equally-spaced discrete runtime distribution ``(v_i, f_i)_{i = 0..n}``.

    Attributes
    ----------
    values : ndarray of float, shape (n + 1,)
        ``v_i = lower + i * (upper - lower) / n`` (seconds).
    probs : ndarray of float, shape (n + 1,)
        ``f_i = P(X = v_i)``: the mass of ``(v_{i-1}, v_i]`` (runtimes are rounded *up* to the grid,
        so a request of ``v_i`` covers them); ``f_0`` is the mass at or below ``lower``.
    """

    values: FloatArray
    probs: FloatArray

    @property
    def lower(self) -> float:
        """Smallest value ``a`` (seconds)."""
        return float(self.values[0])

    @property
    def upper(self) -> float:
        """Largest value ``b``, the last request of every sequence (seconds)."""
        return float(self.values[-1])

    @property
    def points(self) -> int:
        """Number of intervals ``n`` (the grid has ``n + 1`` values)."""
        return int(self.values.size - 1)

    def mean(self) -> float:
        """Return the expected (rounded-up) runtime in seconds."""
        return float(self.values @ self.probs)

    def sample(self, size: int | tuple[int, ...], rng: np.random.Generator) -> FloatArray:
        """Draw runtimes from the distribution (values of the grid)."""
        result: FloatArray = rng.choice(self.values, size=size, p=self.probs)
        return result


def _grid(lower: float, upper: float, points: int) -> FloatArray:
    if not (isinstance(points, (int, np.integer)) and not isinstance(points, bool) and points >= 1):
        raise ConfigError(f"points must be an integer >= 1; got {points!r}")
    if not (np.isfinite(lower) and np.isfinite(upper) and 0 <= lower < upper):
        raise ConfigError(f"need finite 0 <= lower < upper; got lower={lower!r}, upper={upper!r}")
    grid: FloatArray = lower + (upper - lower) / points * np.arange(points + 1, dtype=np.float64)
    return grid


def _from_cdf(values: FloatArray, cdf: FloatArray) -> ESDD:
    cdf = np.clip(np.maximum.accumulate(cdf), 0.0, 1.0)
    probs = np.diff(cdf, prepend=0.0)
    probs[-1] += 1.0 - cdf[-1]  # anything beyond b is lumped at b (see callers)
    return ESDD(values, probs / probs.sum())


def esdd(distribution: Any, lower: float, upper: float, points: int) -> ESDD:
    """Discretise a continuous distribution on ``[lower, upper]`` into ``points`` equal intervals.

    ``f_0 = F(a)``, ``f_i = F(v_i) - F(v_{i-1})`` as in the paper, conditioned on ``X <= b`` (divided by
    ``F(b)``) when the distribution has mass beyond ``b``.

    Parameters
    ----------
    distribution : frozen scipy.stats continuous distribution
        Anything with a vectorised ``cdf`` method, e.g. ``scipy.stats.lognorm(0.5, scale=3600)``.
    lower, upper : float
        The support ``[a, b]`` in seconds, ``0 <= a < b``.
    points : int
        Number of intervals ``n``; the spacing is ``(b - a) / n``.

    Returns
    -------
    ESDD

    Raises
    ------
    ConfigError
        Bad bounds or points, or the distribution has no mass in ``[0, b]`` / returns NaN (invalid
        shape parameters).

    Examples
    --------
    >>> from scipy import stats
    >>> d = esdd(stats.uniform(0, 10), 0.0, 10.0, 5)
    >>> d.values.tolist(), d.probs.round(2).tolist()
    ([0.0, 2.0, 4.0, 6.0, 8.0, 10.0], [0.0, 0.2, 0.2, 0.2, 0.2, 0.2])
    """
    values = _grid(lower, upper, points)
    cdf = np.asarray(distribution.cdf(values), dtype=np.float64)
    if not np.all(np.isfinite(cdf)):
        raise ConfigError(f"the distribution's cdf is not finite on [{lower}, {upper}]: check its parameters")
    if cdf[-1] <= 0:
        raise ConfigError(f"the distribution has no mass at or below upper={upper!r}; raise upper")
    return _from_cdf(values, cdf / cdf[-1])


def esdd_from_runtimes(
    runtimes: npt.ArrayLike,
    censored: npt.ArrayLike | None = None,
    *,
    lower: float = 0.0,
    upper: float | None = None,
    points: int = 200,
) -> ESDD:
    """Discretise observed runtimes, some of which may be right-censored, with Kaplan-Meier.

    A run killed at its walltime only tells that its runtime exceeds that walltime: it is kept as a
    right-censored observation (``scipy.stats.ecdf`` on ``scipy.stats.CensoredData``), which moves mass
    to larger runtimes; dropping it would bias the distribution towards short runs. The mass the
    estimate leaves beyond the largest observation is put at ``upper``.

    Parameters
    ----------
    runtimes : array_like of float
        Observed runtimes in seconds, >= 0.
    censored : array_like of bool, optional
        True where the run was killed at its walltime (the runtime is a lower bound). Default: none.
    lower : float, default 0.0
        ``a`` in seconds.
    upper : float or None, default None
        ``b``: the largest walltime that may be requested (e.g. the partition's limit). Default: the
        largest runtime, allowed only if that one is not censored.
    points : int, default 200
        Number of intervals ``n``.

    Returns
    -------
    ESDD

    Raises
    ------
    ConfigError
        No runtimes, a negative or non-finite runtime, a runtime above ``upper``, mismatched lengths, or
        the largest runtime is censored while ``upper`` is not given.

    Examples
    --------
    >>> d = esdd_from_runtimes([1.0, 2.0, 3.0, 4.0], points=4)
    >>> d.probs.round(2).tolist()
    [0.0, 0.25, 0.25, 0.25, 0.25]
    """
    x = np.asarray(runtimes, dtype=np.float64).ravel()
    if x.size == 0:
        raise ConfigError("runtimes is empty: at least one observed runtime is needed")
    cens = np.zeros(x.size, dtype=bool) if censored is None else np.asarray(censored, dtype=bool).ravel()
    if cens.shape != x.shape:
        raise ConfigError(f"censored has {cens.size} entries but runtimes has {x.size}")
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        bad = int(np.flatnonzero(~np.isfinite(x) | (x < 0))[0])
        raise ConfigError(f"runtimes must be finite and >= 0; runtimes[{bad}] = {float(x[bad])!r}")
    largest = float(x.max())
    if upper is None:
        if bool(cens[x == largest].any()):
            raise ConfigError(
                f"the largest runtime ({largest:g} s) is censored, so runs can last longer: pass upper= "
                "(the largest walltime you may request, e.g. the partition's time limit)"
            )
        upper = largest
    elif largest > upper:
        raise ConfigError(f"runtime {largest:g} s exceeds upper={upper!r}; raise upper or check the data")
    values = _grid(lower, upper, points)
    if bool(cens.all()):
        cdf = np.zeros(values.size)  # nothing finished: all we know is that runs reach their walltimes
    else:
        estimate = stats.ecdf(stats.CensoredData(uncensored=x[~cens], right=x[cens]))
        cdf = np.asarray(estimate.cdf.evaluate(values), dtype=np.float64)
    return _from_cdf(values, cdf)


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
    """
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


class WalltimeLearner(BaseLearner):
    """Learn a stage's runtime distribution from (censored) runs; give the walltime to request next.

    Parameters
    ----------
    lower : float, default 0.0
        Smallest runtime considered, seconds.
    upper : float or None, default None
        Largest walltime that may be requested (seconds), e.g. the partition's time limit. Default:
        the largest runtime seen (then it must not be censored).
    points : int, default 200
        Intervals of the discretisation.
    zeta : float, default 0.0
        Backfilling work rate in [0, 1). ``0`` gives TOptimal; ``> 0`` gives ATOptimal, computed on a
        grid of ``at_points`` intervals.
    at_points : int, default 50
        Intervals for ATOptimal (its cost grows quickly with this; the paper finds < 50 enough).
    alpha, beta, gamma : float
        :class:`CostModel` weights used by TOptimal (ignored by ATOptimal, which minimises makespan).

    Attributes
    ----------
    runtimes_ : ndarray of float
        Every runtime learned so far, seconds.
    censored_ : ndarray of bool
        Whether each one was cut by its walltime.
    distribution_ : ESDD
        Kaplan-Meier discretisation of the history.
    sequence_ : ReservationSequence
        The requests to make, in order, for the next run.

    Examples
    --------
    >>> learner = WalltimeLearner(points=10).fit([3.0, 4.0, 5.0, 10.0])
    >>> learner.sequence_.requests
    (5.0, 10.0)
    >>> learner.next_request([5.0])
    10.0
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "lower": [Interval(0, None)],
        "upper": [Interval(0, None, closed="neither"), None],
        "points": [Interval(1, None, integer=True)],
        "zeta": [Interval(0, 1, closed="left")],
        "at_points": [Interval(1, None, integer=True)],
        "alpha": [Interval(0, None)],
        "beta": [Interval(0, None)],
        "gamma": [Interval(0, None)],
    }

    def __init__(
        self,
        *,
        lower: float = 0.0,
        upper: float | None = None,
        points: int = 200,
        zeta: float = 0.0,
        at_points: int = 50,
        alpha: float = 1.0,
        beta: float = 0.0,
        gamma: float = 0.0,
    ) -> None:
        self.lower = lower
        self.upper = upper
        self.points = points
        self.zeta = zeta
        self.at_points = at_points
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma

    def fit(self, runtimes: npt.ArrayLike, censored: npt.ArrayLike | None = None) -> WalltimeLearner:
        """Forget the history, learn these runs; return ``self``.

        Parameters
        ----------
        runtimes : array_like of float
            Runtimes in seconds.
        censored : array_like of bool, optional
            True where the run hit its walltime (the runtime is a lower bound).

        Raises
        ------
        InvalidParameterError
            A hyperparameter is out of range.
        ConfigError
            Bad runtimes (see :func:`esdd_from_runtimes`).
        """
        for name in ("runtimes_", "censored_"):
            if hasattr(self, name):
                delattr(self, name)
        return self.partial_fit(runtimes, censored)

    def partial_fit(self, runtimes: npt.ArrayLike, censored: npt.ArrayLike | None = None) -> WalltimeLearner:
        """Add runs to the history and recompute the sequence; return ``self``.

        Parameters
        ----------
        runtimes : array_like of float or float
            Runtimes in seconds.
        censored : array_like of bool or bool, optional
            True where the run hit its walltime.
        """
        self._validate_params()
        x = np.atleast_1d(np.asarray(runtimes, dtype=np.float64)).ravel()
        c = np.zeros(x.size, bool) if censored is None else np.atleast_1d(np.asarray(censored, bool)).ravel()
        if c.size != x.size:
            raise ConfigError(f"censored has {c.size} entries but runtimes has {x.size}")
        all_x = np.concatenate((getattr(self, "runtimes_", np.zeros(0)), x))
        all_c = np.concatenate((getattr(self, "censored_", np.zeros(0, bool)), c))
        dist = esdd_from_runtimes(all_x, all_c, lower=self.lower, upper=self.upper, points=self.points)
        if self.zeta > 0:
            coarse = esdd_from_runtimes(
                all_x, all_c, lower=self.lower, upper=dist.upper, points=self.at_points
            )
            seq = atoptimal(coarse.values, coarse.probs, zeta=self.zeta)
        else:
            seq = toptimal(dist.values, dist.probs, alpha=self.alpha, beta=self.beta, gamma=self.gamma)
        self.runtimes_, self.censored_ = all_x, all_c
        self.distribution_, self.sequence_ = dist, seq
        logger.info("walltime learner: %d runs -> requests %s", all_x.size, seq.requests)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "sequence_"):
            raise NotFittedError(
                "WalltimeLearner has no runtimes yet; call fit(runtimes) first", learner="WalltimeLearner"
            )

    def next_request(self, previous_requests: Sequence[float] = ()) -> float:
        """Return the walltime to request after ``previous_requests`` all ended in a kill.

        Parameters
        ----------
        previous_requests : sequence of float, default ()
            Walltimes (seconds) this run already had and exceeded.

        Returns
        -------
        float
            The next request of :attr:`sequence_` if the previous ones are its prefix; otherwise the
            TOptimal choice given that the runtime exceeds the longest previous request.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        ConfigError
            A previous request already reached the upper bound: nothing longer can be requested.
        """
        self._check_fitted()
        requests = self.sequence_.requests
        done = len(previous_requests)
        if done < len(requests) and tuple(previous_requests) == requests[:done]:
            return requests[done]
        longest = max(previous_requests)
        dist = self.distribution_
        if longest >= dist.upper:
            raise ConfigError(
                f"a previous request ({longest:g} s) already reached upper={dist.upper:g} s; "
                "the stage needs more than the largest allowed walltime"
            )
        _, next_index = toptimal_policy(
            dist.values, dist.probs, alpha=self.alpha, beta=self.beta, gamma=self.gamma
        )
        known = int(np.searchsorted(dist.values, longest, side="right")) - 1  # runtime > v_known
        return float(dist.values[next_index[known + 1]])

    @property
    def requests_(self) -> tuple[float, ...]:
        """The learned request sequence, seconds (shortcut for ``sequence_.requests``)."""
        self._check_fitted()
        return self.sequence_.requests
