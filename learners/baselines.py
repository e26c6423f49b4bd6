"""Baseline queue-wait predictors with the same interface as :class:`learners.asa.ASAEstimator`.

- :class:`LastWait`: the last wait observed for the key.
- :class:`RunningMean`, :class:`RunningMedian`: mean / median of the last ``window`` waits.
- :class:`QBETSUpperBound`: QBETS-style upper confidence bound on a quantile of recent waits
  (Nurmi, Brevik and Wolski, *QBETS: queue bounds estimation from time series*, JSSPP 2007).
- :class:`SchedulerEstimate`: "ask the scheduler": the backend's expected start for a job like ours
  (``sbatch --test-only``), minus now.

All are keyed (independent history per key), learn with ``observe(key, wait)`` (alias ``partial_fit``),
raise :class:`~learners.base.NotFittedError` from ``predict`` before the first observation of a key
(except :class:`SchedulerEstimate`, which needs none), and keep their state as JSON-able dicts.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from elastic.backends.base import BatchBackend
from elastic.batch import JobSpec
from elastic.errors import ConfigError
from learners.base import (
    BaseLearner,
    InstanceOf,
    Interval,
    Key,
    NotFittedError,
    PredictionUnavailableError,
)

__all__ = [
    "LastWait",
    "QBETSUpperBound",
    "RunningMean",
    "RunningMedian",
    "SchedulerEstimate",
]


def _check_wait(owner: str, wait: float) -> float:
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
        self._history(key).append(_check_wait(type(self).__name__, wait))
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
        waits = [_check_wait(name, w) for w in state.get("waits", [])]
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


class RunningMedian(_WindowPredictor):
    """Predict the median of the last ``window`` waits of the key.

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

    def _estimate(self, waits: Sequence[float]) -> float:
        return float(np.median(waits))


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
        wait = _check_wait(type(self).__name__, wait)
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


class SchedulerEstimate(BaseLearner):
    """Ask the scheduler: predict the backend's expected start of a job like ours, minus now.

    The Slurm backend answers with ``sbatch --test-only``; the mock backend simulates its queue. This
    predictor learns nothing: :meth:`observe` only counts observations.

    Parameters
    ----------
    backend : BatchBackend
        Backend to ask.
    spec : JobSpec or callable
        The job to ask about, or a function ``key -> JobSpec`` (e.g. cores from the key).

    Attributes
    ----------
    observations_ : dict of str to int
        Observations seen per key.
    """

    _parameter_constraints: ClassVar[Mapping[str, Sequence[Any]]] = {
        "backend": [InstanceOf(BatchBackend, "a BatchBackend (mock or Slurm)")],
    }  # 'spec' (a JobSpec or a callable) is checked in _initialise

    def __init__(self, *, backend: BatchBackend, spec: JobSpec | Callable[[Key], JobSpec]) -> None:
        self.backend = backend
        self.spec = spec

    def _initialise(self) -> None:
        if not hasattr(self, "observations_"):
            self._validate_params()
            if not isinstance(self.spec, JobSpec) and not callable(self.spec):
                raise ConfigError(
                    f"SchedulerEstimate: parameter 'spec' must be a JobSpec or a callable key -> JobSpec; "
                    f"got {self.spec!r}"
                )
            self.observations_: dict[Key, int] = {}

    def _spec_for(self, key: Key) -> JobSpec:
        spec = self.spec if isinstance(self.spec, JobSpec) else self.spec(key)
        if not isinstance(spec, JobSpec):
            raise ConfigError(f"SchedulerEstimate: 'spec' returned {spec!r} for key {key!r}, not a JobSpec")
        return spec

    def predict(self, key: Key) -> float:
        """Return ``max(0, expected_start - now)`` in seconds for a job like ``spec(key)``.

        Raises
        ------
        PredictionUnavailableError
            The backend cannot tell when such a job would start.
        """
        self._initialise()
        now = self.backend.now()
        start = self.backend.expected_start(self._spec_for(key))
        if start is None:
            raise PredictionUnavailableError(
                f"backend {self.backend.name!r} gave no expected start for key {key!r}; "
                "use a learning predictor (e.g. ASAEstimator) for this backend",
                key=key,
            )
        return max(0.0, float(start) - now)

    def observe(self, key: Key, wait: float) -> SchedulerEstimate:
        """Count an observed wait (the scheduler's estimate does not learn); return ``self``."""
        self._initialise()
        _check_wait("SchedulerEstimate", wait)
        self.observations_[key] = self.observations_.get(key, 0) + 1
        return self

    def partial_fit(self, key: Key, wait: float) -> SchedulerEstimate:
        """Alias of :meth:`observe`."""
        return self.observe(key, wait)

    def get_state(self, key: Key) -> dict[str, Any]:
        """Return ``{"format": "SchedulerEstimate/1", "observations": n}``."""
        self._initialise()
        return {"format": "SchedulerEstimate/1", "observations": self.observations_.get(key, 0)}

    def set_state(self, key: Key, state: Mapping[str, Any]) -> SchedulerEstimate:
        """Restore the observation count of ``key``."""
        self._initialise()
        observations = state.get("observations")
        if (
            state.get("format") != "SchedulerEstimate/1"
            or not isinstance(observations, int)
            or observations < 0
        ):
            raise ConfigError(
                f"SchedulerEstimate.set_state(key={key!r}): expected format 'SchedulerEstimate/1' with "
                f"'observations' an integer >= 0; got {dict(state)!r}"
            )
        self.observations_[key] = observations
        return self
