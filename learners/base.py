"""Contracts every learner follows: :class:`Learner`, :class:`WaitPredictor`, :class:`NotFittedError`.

Learners follow scikit-learn's conventions (without depending on it): a keyword-only ``__init__`` stores
the hyperparameters unchanged and does nothing else; hyperparameters are checked against a class-level
``_parameter_constraints`` dict when the learner first learns (:meth:`BaseLearner._validate_params`);
learned state lives in attributes ending in ``_``; :meth:`BaseLearner.get_params` and :func:`clone` work
from the ``__init__`` signature, so the store can rebuild a learner from its parameters.

Queue-wait predictors (the ASA learner and the baselines) are *online* and *keyed*: one predictor
instance holds independent state per key (a job geometry, see :func:`elastic.learners.asa_grid.geometry_key`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

from elastic.errors import ConfigError, ElasticError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BaseLearner",
    "Constraint",
    "InstanceOf",
    "Interval",
    "InvalidParameterError",
    "Key",
    "Learner",
    "NotFittedError",
    "Options",
    "PredictionUnavailableError",
    "WaitDistribution",
    "WaitPredictor",
    "LearnerStateStore",
    "clone",
    "load_shared",
    "observe_shared",
]

Key = str
"""Key of an online learner's independent state, e.g. a geometry key ``"cores=17-32"``."""

_L = TypeVar("_L", bound="BaseLearner")
_W = TypeVar("_W", bound="WaitPredictor")


class NotFittedError(ElasticError, ValueError, AttributeError):
    """A learner was asked to predict before it learned anything (for this key).

    Like scikit-learn's ``NotFittedError`` it is both a ``ValueError`` and an ``AttributeError``.

    Parameters
    ----------
    message : str
        What is missing and what to do (e.g. "call observe(key, wait) first").
    learner : str or None, default None
        Class name of the learner.
    key : str or None, default None
        The key that has no state yet, for keyed learners.
    """

    def __init__(self, message: str, *, learner: str | None = None, key: str | None = None) -> None:
        self.learner = learner
        self.key = key
        super().__init__(message)


class PredictionUnavailableError(ElasticError, LookupError):
    """A predictor cannot give an estimate right now (e.g. the scheduler gave no expected start).

    Parameters
    ----------
    message : str
        Why, and what to do.
    key : str or None, default None
        The key a prediction was asked for.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        self.key = key
        super().__init__(message)


class InvalidParameterError(ConfigError):
    """A hyperparameter has a value outside its allowed set.

    Parameters
    ----------
    owner : str
        Class name of the learner.
    parameter : str
        Name of the hyperparameter.
    value : object
        The bad value.
    allowed : str
        Human-readable description of the allowed values.
    """

    def __init__(self, owner: str, parameter: str, value: object, allowed: str) -> None:
        self.owner = owner
        self.parameter = parameter
        self.value = value
        self.allowed = allowed
        super().__init__(f"{owner}: parameter {parameter!r} must be {allowed}; got {value!r}")


class Constraint(Protocol):
    """One allowed set of values for a hyperparameter; ``str()`` describes it for error messages."""

    def is_satisfied_by(self, value: object) -> bool:
        """Return whether ``value`` is in the allowed set."""
        ...


@dataclass(frozen=True, slots=True)
class Interval:
    """Real (or integer) numbers between ``low`` and ``high``.

    Parameters
    ----------
    low, high : float or None
        Bounds; ``None`` means unbounded on that side.
    closed : {"both", "left", "right", "neither"}, default "both"
        Which bounds are included.
    integer : bool, default False
        Only integers (``bool`` excluded) are allowed.
    """

    low: float | None
    high: float | None
    closed: str = "both"
    integer: bool = False

    def is_satisfied_by(self, value: object) -> bool:
        """Return whether ``value`` is a finite number inside the interval."""
        if isinstance(value, bool):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.low is not None:
            below = value < self.low if self.closed in ("both", "left") else value <= self.low
            if below:
                return False
        if self.high is not None:
            above = value > self.high if self.closed in ("both", "right") else value >= self.high
            if above:
                return False
        return True

    def __str__(self) -> str:
        kind = "an integer" if self.integer else "a number"
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"{kind} in {left}{low}, {high}{right}"


@dataclass(frozen=True, slots=True)
class Options:
    """One of a fixed set of values (usually strings)."""

    values: frozenset[object]

    def is_satisfied_by(self, value: object) -> bool:
        """Return whether ``value`` is one of the options."""
        try:
            return value in self.values
        except TypeError:  # unhashable
            return False

    def __str__(self) -> str:
        return "one of " + ", ".join(sorted(repr(v) for v in self.values))


@dataclass(frozen=True, slots=True)
class InstanceOf:
    """An instance of ``kind`` (``None`` allowed only when ``None`` is listed separately)."""

    kind: type | tuple[type, ...]
    description: str

    def is_satisfied_by(self, value: object) -> bool:
        """Return whether ``value`` is an instance of ``kind``."""
        return isinstance(value, self.kind)

    def __str__(self) -> str:
        return self.description


class BaseLearner:
    """Mixin giving ``get_params``, ``set_params``, ``repr`` and parameter validation.

    Subclasses declare ``_parameter_constraints``: for each ``__init__`` parameter a list of
    :class:`Constraint` objects (``None`` in the list allows ``None``). Validation happens when the
    learner first learns, never in ``__init__``.
    """

    _parameter_constraints: ClassVar[Mapping[str, Collection[Constraint | None]]] = {}

    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return sorted(
            name
            for name, parameter in signature.parameters.items()
            if name != "self" and parameter.kind is inspect.Parameter.KEYWORD_ONLY
        )

    def get_params(self) -> dict[str, Any]:
        """Return the hyperparameters, as given to ``__init__``.

        Returns
        -------
        dict
            Parameter name -> value.
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self: _L, **params: Any) -> _L:
        """Set hyperparameters (they are validated at the next learning call).

        Raises
        ------
        InvalidParameterError
            A name is not a hyperparameter of this learner.
        """
        names = self._param_names()
        for name, value in params.items():
            if name not in names:
                raise InvalidParameterError(type(self).__name__, name, value, "one of " + ", ".join(names))
            setattr(self, name, value)
        return self

    def _validate_params(self) -> None:
        """Check every hyperparameter against ``_parameter_constraints``.

        Raises
        ------
        InvalidParameterError
            Naming the parameter, the allowed values and the bad value.
        """
        for name, constraints in self._parameter_constraints.items():
            value = getattr(self, name)
            if value is None and None in constraints:
                continue
            real = [c for c in constraints if c is not None]
            if not any(c.is_satisfied_by(value) for c in real):
                allowed = " or ".join([str(c) for c in real] + (["None"] if None in constraints else []))
                raise InvalidParameterError(type(self).__name__, name, value, allowed)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


def clone(learner: _L) -> _L:
    """Return a new, unfitted learner with the same hyperparameters.

    Parameters
    ----------
    learner : BaseLearner
        Any learner.

    Returns
    -------
    BaseLearner
        ``type(learner)(**learner.get_params())``.
    """
    return type(learner)(**learner.get_params())


@runtime_checkable
class Learner(Protocol):
    """What every learner offers: its hyperparameters, readable and settable."""

    def get_params(self) -> dict[str, Any]:
        """Return the hyperparameters as given to ``__init__``."""
        ...


@runtime_checkable
class WaitPredictor(Learner, Protocol):
    """An online, keyed queue-wait predictor (the ASA learner and every baseline).

    ``predict`` is called when an allocation is about to be submitted; ``observe`` once its real wait
    is known (when it started), never earlier.
    """

    def predict(self, key: Key) -> float:
        """Return the predicted queue wait in seconds for an allocation of this key.

        Raises
        ------
        NotFittedError
            Nothing was observed for ``key`` yet (baselines; ASA samples from its prior instead).
        PredictionUnavailableError
            The predictor cannot estimate right now (e.g. the scheduler gave no answer).
        """
        ...

    def observe(self: _W, key: Key, wait: float) -> _W:
        """Learn one observed queue wait (seconds, >= 0) for ``key``; return ``self``."""
        ...

    def partial_fit(self: _W, key: Key, wait: float) -> _W:
        """Alias of :meth:`observe` (scikit-learn's name for one online step)."""
        ...

    def get_state(self, key: Key) -> dict[str, Any]:
        """Return the learned state for ``key`` as a JSON-able dict (the prior state if none)."""
        ...

    def set_state(self: _W, key: Key, state: Mapping[str, Any]) -> _W:
        """Replace the learned state for ``key`` with one from :meth:`get_state`; return ``self``."""
        ...


@runtime_checkable
class WaitDistribution(WaitPredictor, Protocol):
    """A wait predictor that also gives quantiles of the wait it expects, not one value.

    What an allocation planner prices its choices with (an early allocation idles its cores, a late
    one delays the run; the cost of each choice is an expectation over the wait).
    """

    def quantiles(self, key: Key, probs: Sequence[float]) -> npt.NDArray[np.float64]:
        """Return the wait quantiles (seconds) at ``probs`` for an allocation of this key.

        Raises
        ------
        NotFittedError
            Nothing was observed for ``key`` yet.
        """
        ...


class LearnerStateStore(Protocol):
    """The part of :class:`elastic.store.Store` that keeps learner state (any object with it works)."""

    def load_learner_state(self, learner: str, key: str) -> dict[str, Any] | None:
        """Return the saved state of ``learner`` for ``key``, or None."""
        ...

    def update_learner_state(
        self, learner: str, key: str, fn: Callable[[dict[str, Any] | None], Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Atomically replace the state with ``fn(old_state)`` and return it."""
        ...


def _prior_state(predictor: WaitPredictor, key: Key) -> dict[str, Any]:
    return type(predictor)(**predictor.get_params()).get_state(key)


def load_shared(predictor: _W, store: LearnerStateStore, learner: str, key: Key) -> _W:
    """Load the shared state of ``key`` from ``store`` into ``predictor`` (the prior if none is saved).

    Parameters
    ----------
    predictor : WaitPredictor
        Predictor to update in place.
    store : LearnerStateStore
        E.g. :class:`elastic.store.Store`.
    learner : str
        Name the state is saved under, e.g. ``"asa-tuned"``; all workflows using it share the state.
    key : str
        Geometry key (:func:`elastic.learners.asa_grid.geometry_key`).

    Returns
    -------
    WaitPredictor
        ``predictor``.
    """
    state = store.load_learner_state(learner, key)
    return predictor.set_state(key, _prior_state(predictor, key) if state is None else state)


def observe_shared(predictor: _W, store: LearnerStateStore, learner: str, key: Key, wait: float) -> _W:
    """Learn one observed wait into the shared state of ``key``, atomically.

    Inside :meth:`LearnerStateStore.update_learner_state` (the row is locked): load the latest saved
    state into ``predictor``, observe ``wait``, save the result. Concurrent workflows of the same user
    and geometry therefore never lose each other's observations, and ``predictor`` ends up holding the
    up-to-date shared state.

    Parameters
    ----------
    predictor : WaitPredictor
        Predictor to update in place.
    store : LearnerStateStore
        E.g. :class:`elastic.store.Store`.
    learner : str
        Name the state is saved under.
    key : str
        Geometry key.
    wait : float
        Observed queue wait, seconds.

    Returns
    -------
    WaitPredictor
        ``predictor``.
    """

    def update(old: dict[str, Any] | None) -> dict[str, Any]:
        # Starts from `old` every time, so a retried call gives the same result.
        predictor.set_state(key, _prior_state(predictor, key) if old is None else old)
        predictor.observe(key, wait)
        return predictor.get_state(key)

    store.update_learner_state(learner, key, update)
    return predictor
