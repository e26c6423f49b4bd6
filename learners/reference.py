"""Reference queue-wait predictors that learn nothing: 0 s, and "ask the scheduler".

- :class:`AlwaysZero`: 0 s, i.e. submit an allocation when its cores are needed (Per-Stage's
  behaviour). Every learned predictor has to beat it: on long traces its mean absolute error is lower
  than that of several ASA variants (``elastic waits``).
- :class:`SchedulerEstimate`: the backend's expected start for a job like ours (``sbatch --test-only``
  on Slurm, the simulated queue on the mock backend), minus now.

Both follow the :class:`~elastic.learners.base.WaitPredictor` protocol; ``observe`` only counts the
observations
per key (the state the store keeps), and ``predict`` needs no observation first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from elastic.backends.base import BatchBackend
from elastic.batch import JobSpec
from elastic.errors import ConfigError
from elastic.learners.base import BaseLearner, InstanceOf, Key, PredictionUnavailableError
from elastic.learners.baselines import check_wait

__all__ = ["AlwaysZero", "SchedulerEstimate"]


class _ObservationCounter(BaseLearner):
    """A predictor that learns nothing: its per-key state is how many waits it was shown."""

    def _initialise(self) -> None:
        if not hasattr(self, "observations_"):
            self._validate_params()
            self.observations_: dict[Key, int] = {}

    def observe(self, key: Key, wait: float) -> Any:
        """Count one observed wait (seconds, >= 0) of ``key``; return ``self``.

        Raises
        ------
        ConfigError
            ``wait`` is negative or not finite.
        """
        self._initialise()
        check_wait(type(self).__name__, wait)
        self.observations_[key] = self.observations_.get(key, 0) + 1
        return self

    def partial_fit(self, key: Key, wait: float) -> Any:
        """Alias of :meth:`observe`."""
        return self.observe(key, wait)

    def get_state(self, key: Key) -> dict[str, Any]:
        """Return ``{"format": "<class>/1", "observations": n}``."""
        self._initialise()
        return {"format": f"{type(self).__name__}/1", "observations": self.observations_.get(key, 0)}

    def set_state(self, key: Key, state: Mapping[str, Any]) -> Any:
        """Restore the observation count of ``key``; return ``self``.

        Raises
        ------
        ConfigError
            Wrong format, or a count that is not an integer >= 0.
        """
        self._initialise()
        name = type(self).__name__
        observations = state.get("observations")
        if state.get("format") != f"{name}/1" or not isinstance(observations, int) or observations < 0:
            raise ConfigError(
                f"{name}.set_state(key={key!r}): expected format '{name}/1' with 'observations' an "
                f"integer >= 0; got {dict(state)!r}"
            )
        self.observations_[key] = observations
        return self


class AlwaysZero(_ObservationCounter):
    """Predict a 0 s wait for every key: submit when the cores are needed, as Per-Stage does.

    Attributes
    ----------
    observations_ : dict of str to int
        Observations seen per key.

    Examples
    --------
    >>> AlwaysZero().observe("k", 900.0).predict("k")
    0.0
    """

    def __init__(self) -> None:
        pass

    def predict(self, key: Key) -> float:
        """Return 0.0 seconds."""
        return 0.0


class SchedulerEstimate(_ObservationCounter):
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
            super()._initialise()
            if not isinstance(self.spec, JobSpec) and not callable(self.spec):
                raise ConfigError(
                    f"SchedulerEstimate: parameter 'spec' must be a JobSpec or a callable key -> JobSpec; "
                    f"got {self.spec!r}"
                )

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
