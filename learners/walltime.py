"""Walltime requests for stages with uncertain runtimes: runtime distributions and the learner.

* :class:`ESDD` and :func:`esdd` / :func:`esdd_from_runtimes`: the equally-spaced discretisation of
  Gainaru et al. (ICPP 2019, Section 4.2) of a ``scipy.stats`` distribution on ``[a, b]``, or of observed
  runtimes where runs killed at their walltime are right-censored (Kaplan-Meier, not dropped).
* :class:`WalltimeLearner`: censored runtime history -> reservation sequence and ``next_request``.

Costs and evaluators of a sequence live in :mod:`elastic.learners.walltime_cost`, the baseline strategies it
is
compared with in :mod:`elastic.learners.walltime_baselines`, the TOptimal / ATOptimal dynamic programmes in
:mod:`elastic.learners.toptimal`.

All durations are float seconds (any unit works as long as it is used consistently).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy import stats

from elastic.errors import ConfigError
from elastic.learners.base import BaseLearner, Interval, NotFittedError
from elastic.learners.toptimal import atoptimal, toptimal, toptimal_policy

__all__ = [
    "ESDD",
    "WalltimeLearner",
    "esdd",
    "esdd_from_runtimes",
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
        :class:`~elastic.learners.walltime_cost.CostModel` weights used by TOptimal (ignored by ATOptimal,
        which minimises makespan).

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
