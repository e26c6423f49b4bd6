"""The learned state of one ASA key and its JSON-able form (what the store keeps across runs).

:class:`KeyState` is what :class:`elastic.learners.asa.ASAEstimator` updates for one key (the update itself is
in :mod:`elastic.learners.asa`); :func:`dump_state` and :func:`load_state` convert it to and from the dict of
:meth:`~elastic.learners.asa.ASAEstimator.get_state` / :meth:`~elastic.learners.asa.ASAEstimator.set_state`,
validating every field on the way in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError

__all__ = ["STATE_FORMAT", "KeyState", "dump_state", "load_state"]

FloatArray = npt.NDArray[np.float64]

STATE_FORMAT = "asa/1"
"""Version tag of the dict form; a state with another tag is refused."""


@dataclass(slots=True)
class KeyState:
    """Mutable learned state of one key.

    Attributes
    ----------
    p : ndarray of float64
        Probability of each alternative.
    round_loss : ndarray of float64
        Loss accumulated per alternative in the open round.
    cumulative_loss : ndarray of float64
        ``sum_r eta_r L_r`` over closed rounds (what ``greedy`` minimises).
    incurred : float
        Loss the learner incurred in the open round.
    round : int
        Index of the open round, from 1.
    observations : int
        Waits observed for this key.
    """

    p: FloatArray
    round_loss: FloatArray
    cumulative_loss: FloatArray
    incurred: float
    round: int
    observations: int

    @classmethod
    def prior(cls, k: int) -> KeyState:
        """Return the state of a key never observed: uniform ``p`` over ``k`` alternatives, round 1."""
        return cls(
            p=np.full(k, 1.0 / k),
            round_loss=np.zeros(k),
            cumulative_loss=np.zeros(k),
            incurred=0.0,
            round=1,
            observations=0,
        )


def dump_state(grid: FloatArray, state: KeyState) -> dict[str, Any]:
    """Return ``state``, learned on ``grid``, as a JSON-able dict tagged :data:`STATE_FORMAT`."""
    return {
        "format": STATE_FORMAT,
        "grid": grid.tolist(),
        "p": state.p.tolist(),
        "round_loss": state.round_loss.tolist(),
        "cumulative_loss": state.cumulative_loss.tolist(),
        "incurred": state.incurred,
        "round": state.round,
        "observations": state.observations,
    }


def load_state(grid: FloatArray, state: Mapping[str, Any], where: str) -> KeyState:
    """Return the :class:`KeyState` of a dict from :func:`dump_state`, checked against ``grid``.

    Parameters
    ----------
    grid : ndarray of float64
        The candidate waits of the estimator that will use the state.
    state : mapping
        The dict form.
    where : str
        Prefix of error messages, naming the caller and key.

    Returns
    -------
    KeyState

    Raises
    ------
    ConfigError
        The state has another format or grid, or is not a valid state (names the field).
    """
    if state.get("format") != STATE_FORMAT:
        raise ConfigError(f"{where}: 'format' must be {STATE_FORMAT!r}; got {state.get('format')!r}")
    their_grid = np.asarray(state.get("grid", []), dtype=np.float64)
    if their_grid.shape != grid.shape or not np.allclose(their_grid, grid):
        raise ConfigError(
            f"{where}: the state was learned on another grid ({len(their_grid)} values); "
            "use an estimator with the same 'grid' or discard the state"
        )
    k = len(grid)
    arrays: dict[str, FloatArray] = {}
    for name in ("p", "round_loss", "cumulative_loss"):
        arr = np.asarray(state.get(name, []), dtype=np.float64)
        if arr.shape != (k,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ConfigError(f"{where}: {name!r} must be {k} finite numbers >= 0")
        arrays[name] = arr
    if not math.isclose(float(arrays["p"].sum()), 1.0, rel_tol=1e-9, abs_tol=1e-9):
        raise ConfigError(f"{where}: 'p' must sum to 1; got {arrays['p'].sum()!r}")
    round_ = state.get("round")
    observations = state.get("observations")
    incurred = state.get("incurred")
    if not isinstance(round_, int) or round_ < 1:
        raise ConfigError(f"{where}: 'round' must be an integer >= 1; got {round_!r}")
    if not isinstance(observations, int) or observations < 0:
        raise ConfigError(f"{where}: 'observations' must be an integer >= 0; got {observations!r}")
    if not isinstance(incurred, (int, float)) or not math.isfinite(incurred) or incurred < 0:
        raise ConfigError(f"{where}: 'incurred' must be a finite number >= 0; got {incurred!r}")
    return KeyState(
        p=arrays["p"],  # kept bit for bit so states round-trip exactly
        round_loss=arrays["round_loss"],
        cumulative_loss=arrays["cumulative_loss"],
        incurred=float(incurred),
        round=round_,
        observations=observations,
    )
