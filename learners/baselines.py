"""Baseline queue-wait predictors with the same interface as :class:`elastic.learners.asa.ASAEstimator`.

- :class:`LastWait`: the last wait observed for the key.
- :class:`RunningMean`, :class:`RunningMedian`, :class:`RunningQuantile`: mean / median / a quantile of
  the last ``window`` waits (:class:`RunningQuantile` also gives the empirical quantiles, see
  :class:`~elastic.learners.base.WaitDistribution`).
- :class:`QBETSUpperBound`: QBETS-style upper confidence bound on a quantile of recent waits
  (Nurmi, Brevik and Wolski, *QBETS: queue bounds estimation from time series*, JSSPP 2007).

All are keyed (independent history per key), learn with ``observe(key, wait)`` (alias ``partial_fit``),
raise :class:`~elastic.learners.base.NotFittedError` from ``predict`` before the first observation of a key,
and
keep their state as JSON-able dicts. The predictors that learn nothing (0 s, ask the scheduler) are in
:mod:`elastic.learners.reference`.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy import stats

from elastic.errors import ConfigError
from elastic.learners.base import BaseLearner, Interval, Key, NotFittedError

__all__ = [
    "LastWait",
    "QBETSUpperBound",
    "RunningMean",
    "RunningMedian",
    "RunningQuantile",
    "check_wait",
]


def check_wait(owner: str, wait: float) -> float:
    """Return ``wait`` as a float, or raise ConfigError naming ``owner`` unless it is finite and >= 0."""
    ok = isinstance(wait, (int, float, np.integer, np.floating)) and not isinstance(wait, bool)
    if not ok or not math.isfinite(wait) or wait < 0:
        raise ConfigError(f"{owner}.observe: 'wait' must be a finite number >= 0 seconds; got {wait!r}")
    return float(wait)


class _HistoryPredictor(BaseLearner):
    """Keeps the last ``_maxlen()`` waits per key; subclasses turn them into one estimate."""

    def _maxlen(self) -> int:
        raise NotImplementedError

    def _estimate(self, waits: Sequence[float]) -> float:
        raise NotImplementedError

    def _initialise(self) -> None:
        if not hasattr(self, "history_"):
            self._validate_params()
            self.history_: dict[Key, deque[float]] = {}

    def _history(self, key: Key) -> deque[float]:
        history = self.history_.get(key)
        if history is None:
            history = self.history_[key] = deque(maxlen=self._maxlen())
        return history

    def observe(self, key: Key, wait: float) -> Any:
        """Record one observed wait (seconds, >= 0) for ``key``; return ``self``.

        Raises
        ------
        ConfigError
            ``wait`` is negative or not finite, or a hyperparameter is invalid.
        """
        self._initialise()
        self._history(key).append(check_wait(type(self).__name__, wait))
        return self

    def partial_fit(self, key: Key, wait: float) -> Any:
        """Alias of :meth:`observe`."""
        return self.observe(key, wait)

    def predict(self, key: Key) -> float:
        """Return the predicted wait in seconds for ``key``.

        Raises
        ------
        NotFittedError
            No wait was observed for ``key`` yet.
        """
        self._initialise()
        history = self.history_.get(key)
        if not history:
            name = type(self).__name__
            raise NotFittedError(
                f"{name} has observed no wait for key {key!r}; call observe(key, wait) first",
                learner=name,
                key=key,
            )
        return self._estimate(history)

    def get_state(self, key: Key) -> dict[str, Any]:
        """Return the history of ``key`` as a JSON-able dict (empty for an unseen key)."""
        self._initialise()
        return {"format": f"{type(self).__name__}/1", "waits": list(self.history_.get(key, ()))}

    def set_state(self, key: Key, state: Mapping[str, Any]) -> Any:
        """Replace the history of ``key`` with one from :meth:`get_state`; return ``self``.

        Raises
        ------
        ConfigError
            Wrong format, or a wait that is not a finite number >= 0.
        """
        self._initialise()
        name = type(self).__name__
        if state.get("format") != f"{name}/1":
            raise ConfigError(
                f"{name}.set_state(key={key!r}): 'format' must be {name + '/1'!r}; "
                f"got {state.get('format')!r}"
            )
        waits = [check_wait(name, w) for w in state.get("waits", [])]
        history = self.history_[key] = deque(maxlen=self._maxlen())
        history.extend(waits)
        return self


class LastWait(_HistoryPredictor):
    """Predict the last wait observed for the key.

    Attributes
    ----------
    history_ : dict of str to deque
        The last observed wait per key.

    Examples
    --------
    >>> LastWait().observe("k", 30.0).observe("k", 90.0).predict("k")
    90.0
    """

    def __init__(self) -> None:
        pass

    def _maxlen(self) -> int:
        return 1

    def _estimate(self, waits: Sequence[float]) -> float:
        return float(waits[-1])


class _WindowPredictor(_HistoryPredictor):
    """A history predictor over the last ``window`` waits of each key (``window`` >= 1)."""

    _parameter_constraints: ClassVar[Mapping[str, Sequence[Any]]] = {
        "window": [Interval(1, None, integer=True)]
    }

    def __init__(self, *, window: int = 10) -> None:
        self.window = window

    def _maxlen(self) -> int:
        return self.window


class RunningMean(_WindowPredictor):
    """Predict the mean of the last ``window`` waits of the key.

    Parameters
    ----------
    window : int, default 10
        How many recent waits to average (>= 1).

    Attributes
    ----------
    history_ : dict of str to deque
        The last ``window`` waits per key.

    Examples
    --------
    >>> m = RunningMean(window=2)
    >>> for w in (10.0, 20.0, 40.0):
    ...     _ = m.observe("k", w)
    >>> m.predict("k")
    30.0
    """

    def _estimate(self, waits: Sequence[float]) -> float:
        return float(np.mean(waits))


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Return the ``q`` quantile of sorted values, interpolated linearly as ``numpy.quantile`` does.

    Written out because a predictor asks for one quantile of about ten values per call, where the
    overhead of a numpy call is about 20 times the cost of sorting and interpolating in Python (it made
    ``elastic waits`` spend a second per such predictor on HPC2N); a test checks it against numpy.
    """
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    if lo + 1 >= len(ordered):
        return float(ordered[-1])
    return float(ordered[lo] + (h - lo) * (ordered[lo + 1] - ordered[lo]))


class RunningQuantile(_WindowPredictor):
    """Predict a quantile of the last ``window`` waits of the key.

    A low quantile errs short: where an early start idles every core of an allocation and a late one
    delays only the run, the cheaper error (see :class:`~elastic.learners.walltime_cost.CostModel`). Also a
    :class:`~elastic.learners.base.WaitDistribution`: :meth:`quantiles` gives any quantiles of the same waits.

    Parameters
    ----------
    window : int, default 10
        How many recent waits to take the quantile of (>= 1).
    quantile : float, default 0.5
        Which quantile ``predict`` returns, in [0, 1] (linear interpolation, :func:`numpy.quantile`).

    Attributes
    ----------
    history_ : dict of str to deque
        The last ``window`` waits per key.

    Examples
    --------
    >>> q = RunningQuantile(window=4, quantile=0.25)
    >>> for w in (0.0, 100.0, 200.0, 300.0):
    ...     _ = q.observe("k", w)
    >>> q.predict("k"), q.quantiles("k", [0.5, 1.0]).tolist()
    (75.0, [150.0, 300.0])
    """

    _parameter_constraints: ClassVar[Mapping[str, Sequence[Any]]] = {
        "window": [Interval(1, None, integer=True)],
        "quantile": [Interval(0, 1)],
    }

    def __init__(self, *, window: int = 10, quantile: float = 0.5) -> None:
        self.window = window
        self.quantile = quantile

    def _estimate(self, waits: Sequence[float]) -> float:
        return _quantile(sorted(waits), self.quantile)

    def quantiles(self, key: Key, probs: Sequence[float]) -> npt.NDArray[np.float64]:
        """Return the ``probs`` quantiles of the last ``window`` waits of ``key``, seconds.

        Raises
        ------
        NotFittedError
            No wait was observed for ``key`` yet.
        """
        self.predict(key)  # validates, raises NotFittedError for an unseen key
        waits = self.history_[key]
        out: npt.NDArray[np.float64] = np.quantile(
            np.fromiter(waits, dtype=np.float64, count=len(waits)), np.asarray(probs, dtype=np.float64)
        )
        return out


class RunningMedian(RunningQuantile):
    """Predict the median of the last ``window`` waits of the key (:class:`RunningQuantile` at 0.5).

    Parameters
    ----------
    window : int, default 10
        How many recent waits to take the median of (>= 1).

    Attributes
    ----------
    history_ : dict of str to deque
        The last ``window`` waits per key.

    Examples
    --------
    >>> m = RunningMedian(window=3)
    >>> for w in (10.0, 500.0, 20.0):
    ...     _ = m.observe("k", w)
    >>> m.predict("k")
    20.0
    """

    _parameter_constraints: ClassVar[Mapping[str, Sequence[Any]]] = {
        "window": [Interval(1, None, integer=True)]
    }

    def __init__(self, *, window: int = 10) -> None:
        super().__init__(window=window, quantile=0.5)


@functools.lru_cache(maxsize=4096)
def _order_statistic(n: int, quantile: float, confidence: float) -> int:
    """0-based index of the order statistic bounding the ``quantile`` with ``confidence`` (n samples).

    The k-th smallest of n samples (1-based) is >= the true q-quantile with probability
    ``P(Binomial(n, q) <= k - 1)``; the smallest such k with probability >= ``confidence`` is
    ``binom.ppf(confidence, n, q) + 1``, i.e. the 0-based index ``binom.ppf(confidence, n, q)``.
    Returns ``n`` when even the maximum is not a bound at that confidence (too few samples).
    """
    return int(stats.binom.ppf(confidence, n, quantile))


class QBETSUpperBound(_HistoryPredictor):
    """QBETS-style upper bound: a binomial confidence bound on the ``quantile`` of recent waits.

    With the last ``n`` waits sorted, the prediction is the smallest order statistic that is at least
    the true ``quantile`` of the wait distribution with probability ``confidence`` (Nurmi, Brevik and
    Wolski 2007: a non-parametric bound, no distribution assumed). With too few waits for that
    confidence (fewer than ``log(1 - confidence) / log(quantile)``, 59 for the defaults) it predicts the
    largest wait seen.

    Like QBETS it detects change points: when ``m`` consecutive waits exceed the current bound and a
    run that long has probability ``(1 - quantile) ** m < changepoint_alpha`` under the old
    distribution, the history is cut to those ``m`` recent waits.

    Parameters
    ----------
    quantile : float, default 0.95
        Quantile bounded, in (0, 1).
    confidence : float, default 0.95
        Confidence of the bound, in (0, 1).
    history : int, default 1000
        Most recent waits kept per key (>= 1).
    changepoint_alpha : float or None, default 0.01
        Significance of the change-point test, in (0, 1); ``None`` disables it.

    Attributes
    ----------
    history_ : dict of str to deque
        Recent waits per key.
    misses_ : dict of str to int
        Consecutive waits above the bound, per key.

    Examples
    --------
    >>> q = QBETSUpperBound(quantile=0.5, confidence=0.5, changepoint_alpha=None)
    >>> for w in range(1, 102):
    ...     _ = q.observe("k", float(w))
    >>> q.predict("k")
    51.0
    """

    _parameter_constraints: ClassVar[Mapping[str, Sequence[Any]]] = {
        "quantile": [Interval(0, 1, closed="neither")],
        "confidence": [Interval(0, 1, closed="neither")],
        "history": [Interval(1, None, integer=True)],
        "changepoint_alpha": [None, Interval(0, 1, closed="neither")],
    }

    def __init__(
        self,
        *,
        quantile: float = 0.95,
        confidence: float = 0.95,
        history: int = 1000,
        changepoint_alpha: float | None = 0.01,
    ) -> None:
        self.quantile = quantile
        self.confidence = confidence
        self.history = history
        self.changepoint_alpha = changepoint_alpha

    def _maxlen(self) -> int:
        return self.history

    def _initialise(self) -> None:
        if not hasattr(self, "history_"):
            super()._initialise()
            self.misses_: dict[Key, int] = {}

    def _estimate(self, waits: Sequence[float]) -> float:
        n = len(waits)
        index = _order_statistic(n, self.quantile, self.confidence)
        ordered = np.sort(np.fromiter(waits, dtype=np.float64, count=n))
        return float(ordered[min(index, n - 1)])

    def observe(self, key: Key, wait: float) -> QBETSUpperBound:
        """Record one observed wait for ``key``, cutting the history at a change point."""
        self._initialise()
        wait = check_wait(type(self).__name__, wait)
        history = self._history(key)
        if self.changepoint_alpha is not None and history:
            misses = self.misses_.get(key, 0) + 1 if wait > self._estimate(history) else 0
            self.misses_[key] = misses
            if misses and (1.0 - self.quantile) ** misses < self.changepoint_alpha:
                recent = list(history)[-(misses - 1) :] if misses > 1 else []
                history.clear()
                history.extend(recent)
                self.misses_[key] = 0
        history.append(wait)
        return self

    def get_state(self, key: Key) -> dict[str, Any]:
        """Return the history and miss count of ``key`` as a JSON-able dict."""
        state = super().get_state(key)
        state["misses"] = self.misses_.get(key, 0)
        return state

    def set_state(self, key: Key, state: Mapping[str, Any]) -> QBETSUpperBound:
        """Replace the history and miss count of ``key``."""
        super().set_state(key, state)
        misses = state.get("misses", 0)
        if not isinstance(misses, int) or misses < 0:
            raise ConfigError(
                f"QBETSUpperBound.set_state(key={key!r}): 'misses' must be an integer >= 0; got {misses!r}"
            )
        self.misses_[key] = misses
        return self
