"""A queue-wait predictor that follows the recent queue: exponentially weighted log-normal waits.

Queue waits are heavy-tailed (on HPC2N the 20-39-core median is 1,414 s, the 90th percentile 94,000 s)
and drift with the queue: consecutive waits of a geometry are strongly correlated, while the wait
distribution over months is wide. :class:`LogEWMA` keeps, per key, an exponentially weighted mean and
variance of ``log(1 + wait)``: every observation moves the estimate by a share ``alpha`` of its
distance, so the estimate forgets a wait's influence geometrically (about ``1 / alpha`` observations)
and follows the current queue, while the log scale keeps one wait of a day from swamping a run of
minutes. ``predict`` returns a quantile of the log-normal these two moments describe (the median by
default, ``exp(mean) - 1``); :meth:`LogEWMA.quantiles` gives any quantiles of it, the wait distribution
an allocation planner prices its choices with (:class:`~elastic.learners.base.WaitDistribution`).

The weighted variance uses the standard incremental form (West 1979; Finch, *Incremental calculation of
weighted mean and variance*, 2009): with ``d = x - mean``, ``mean += alpha d`` and
``var = (1 - alpha) (var + alpha d^2)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError
from elastic.learners.base import BaseLearner, Interval, Key, NotFittedError
from elastic.learners.baselines import check_wait

__all__ = ["LogEWMA"]

_FORMAT = "LogEWMA/1"


class LogEWMA(BaseLearner):
    """Predict a quantile of an exponentially weighted log-normal fit of the recent waits of the key.

    The fit's quantiles are capped at the longest wait the key has seen: waits that are either about 0 or
    hours (a queue that is empty or full) fit a log-normal of huge spread, whose top quantiles are
    waits of weeks that never happened (HPC2N capacity mode, 1-core first waits: a 97.5 % quantile of
    412 h where the longest seen was hours). Priced by such a tail, a planner takes any second
    allocation for a run-away risk.

    Parameters
    ----------
    alpha : float, default 0.3
        Weight of the newest observation, in (0, 1]; 1 predicts the last wait (with ``quantile=0.5``).
    quantile : float, default 0.5
        Quantile ``predict`` returns, in (0, 1): below 0.5 errs short (an early allocation idles all its
        cores, a late one only delays the run).

    Attributes
    ----------
    moments_ : dict of str to tuple of (int, float, float, float)
        Per key: observations, weighted mean and weighted variance of ``log(1 + wait)``, and the longest
        wait seen (seconds; ``inf`` for a state restored without it).

    Examples
    --------
    >>> p = LogEWMA(alpha=0.5)
    >>> for w in (100.0, 100.0, 10_000.0):
    ...     _ = p.observe("k", w)
    >>> round(p.predict("k")), p.quantiles("k", [0.1, 0.9]).round().tolist()
    (1004, [52.0, 10000.0])
    """

    _parameter_constraints: ClassVar[Mapping[str, Sequence[Any]]] = {
        "alpha": [Interval(0, 1, closed="right")],
        "quantile": [Interval(0, 1, closed="neither")],
    }

    def __init__(self, *, alpha: float = 0.3, quantile: float = 0.5) -> None:
        self.alpha = alpha
        self.quantile = quantile

    def _initialise(self) -> None:
        if not hasattr(self, "moments_"):
            self._validate_params()
            self.moments_: dict[Key, tuple[int, float, float, float]] = {}
            self._z = NormalDist().inv_cdf(self.quantile)

    def observe(self, key: Key, wait: float) -> LogEWMA:
        """Learn one observed wait (seconds, >= 0) of ``key``; return ``self``.

        Raises
        ------
        ConfigError
            ``wait`` is negative or not finite, or a hyperparameter is invalid.
        """
        self._initialise()
        wait = check_wait("LogEWMA", wait)
        x = math.log1p(wait)
        n, mean, var, top = self.moments_.get(key, (0, x, 0.0, wait))
        d = x - mean
        a = self.alpha
        self.moments_[key] = (n + 1, mean + a * d, (1.0 - a) * (var + a * d * d), max(top, wait))
        return self

    def partial_fit(self, key: Key, wait: float) -> LogEWMA:
        """Alias of :meth:`observe`."""
        return self.observe(key, wait)

    def _moments(self, key: Key) -> tuple[float, float, float]:
        self._initialise()
        moments = self.moments_.get(key)
        if moments is None:
            raise NotFittedError(
                f"LogEWMA has observed no wait for key {key!r}; call observe(key, wait) first",
                learner="LogEWMA",
                key=key,
            )
        return moments[1], math.sqrt(moments[2]), moments[3]

    def predict(self, key: Key) -> float:
        """Return the ``quantile`` of the fitted wait distribution of ``key``, seconds (to the millisecond).

        At most the longest wait ``key`` has seen (class docstring).

        Rounded to the millisecond so that a queue that always waits ``w`` is predicted as exactly ``w``
        (``exp(log(1 + w)) - 1`` is off in the last bits).

        Raises
        ------
        NotFittedError
            No wait was observed for ``key`` yet.
        """
        mean, sd, top = self._moments(key)
        return round(min(max(0.0, math.expm1(mean + self._z * sd)), top), 3)

    def quantiles(self, key: Key, probs: Sequence[float]) -> npt.NDArray[np.float64]:
        """Return quantiles (``probs`` in (0, 1)) of the fitted wait distribution of ``key``, seconds.

        At most the longest wait ``key`` has seen (class docstring).

        Raises
        ------
        NotFittedError
            No wait was observed for ``key`` yet.
        ConfigError
            A probability is outside (0, 1).
        """
        mean, sd, top = self._moments(key)
        p = np.asarray(probs, dtype=np.float64)
        if np.any(~((p > 0) & (p < 1))):
            raise ConfigError(f"LogEWMA.quantiles: probabilities must be in (0, 1); got {list(probs)!r}")
        z = np.array([NormalDist().inv_cdf(float(q)) for q in p.ravel()]).reshape(p.shape)
        out: npt.NDArray[np.float64] = np.clip(np.expm1(mean + z * sd), 0.0, top)
        return out

    def get_state(self, key: Key) -> dict[str, Any]:
        """Return the moments of ``key`` as a JSON-able dict (``n`` = 0 for an unseen key).

        ``max`` (the longest wait seen) is left out when unknown (a state restored without it).
        """
        self._initialise()
        n, mean, var, top = self.moments_.get(key, (0, 0.0, 0.0, 0.0))
        state: dict[str, Any] = {"format": _FORMAT, "n": n, "mean": mean, "var": var}
        if math.isfinite(top):
            state["max"] = top
        return state

    def set_state(self, key: Key, state: Mapping[str, Any]) -> LogEWMA:
        """Replace the moments of ``key`` with those of :meth:`get_state`; return ``self``.

        Raises
        ------
        ConfigError
            Wrong format, a negative count, variance or longest wait, or a moment that is not a finite
            number.
        """
        self._initialise()
        n, mean, var = state.get("n"), state.get("mean"), state.get("var")
        top = state.get("max", math.inf)  # states written before the cap have none: no cap
        if (
            state.get("format") != _FORMAT
            or not isinstance(n, int)
            or n < 0
            or not isinstance(mean, (int, float))
            or not isinstance(var, (int, float))
            or not math.isfinite(mean)
            or not math.isfinite(var)
            or var < 0
            or not isinstance(top, (int, float))
            or isinstance(top, bool)
            or ("max" in state and not (math.isfinite(top) and top >= 0))
        ):
            raise ConfigError(
                f"LogEWMA.set_state(key={key!r}): expected format {_FORMAT!r} with 'n' an integer >= 0, "
                f"'mean' a finite number, 'var' a finite number >= 0 and 'max' (optional) a finite "
                f"number >= 0; got {dict(state)!r}"
            )
        if n == 0:
            self.moments_.pop(key, None)
        else:
            self.moments_[key] = (n, float(mean), float(var), float(top))
        return self
