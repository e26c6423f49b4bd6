"""The ASA queue-wait learner (Souza et al., *ASA - The Adaptive Scheduling Algorithm*, Algorithm 1).

The paper's formulas were lost in extraction; this is the reconstruction of issue #3.

The learner keeps, per key (a job geometry, see :func:`~elastic.learners.asa_grid.geometry_key`), a
probability
vector ``p`` over a fixed sorted grid of K candidate waits ``a_1 < ... < a_K``, the loss vector ``L``
accumulated in the current round (mini-batch), the loss the learner itself incurred in that round, and
the round index ``r`` (starting at 1). One observation of a real wait ``w`` is one *case*:

1. every alternative is scored (full information) with a loss in [0, 1], ``l_i(w)``;
2. ``L += l`` and the round's incurred loss grows by the learner's own loss (``p . l`` for the sampling
   policies, the loss of the alternative it would choose for ``greedy``);
3. once the incurred loss exceeds ``round_bound`` the round closes: ``p <- p * exp(-eta_r * L)``,
   normalised, then mixed with a share ``uniform_mix`` of the uniform distribution; ``L <- 0``;
   ``r <- r + 1`` with ``eta_r = max(eta0 / sqrt(r), eta_min)`` (non-increasing, as the convergence
   proof needs).

**Why an optional learning-rate floor.** With ``eta_min = 0`` (the default, the paper's schedule) the
learning rate keeps shrinking, which is what makes the regret vanish in a stationary queue. On a long
non-stationary history it stops the learner from following the queue: on the HPC2N trace the 20-39-core
key of ``tuned`` reaches round ~360,000 (``eta ~ 0.002``) and its hit rate drops to a few percent.
``eta_min > 0`` (e.g. 0.1, predictor ``asa-floor`` of ``elastic waits``) trades the vanishing regret for
a bounded *tracking* regret, the usual choice for drifting targets.

**Why the uniform mix.** Without it, ``p`` of every alternative that lost for a while decays
geometrically towards 0 and, with ``eta_r`` shrinking, a learner that has converged can need thousands
of observations to move when the queue changes. Mixing a share ``uniform_mix`` (default 1 %) of the
uniform distribution after each round keeps every alternative at probability >= ``uniform_mix / K``,
so the log-odds the learner has to overcome after a change are bounded by ``log(K / uniform_mix)``.
This is the *fixed-share* rule of Herbster and Warmuth (1998) also used by Exp3; it costs at most
``uniform_mix`` of the hit rate in a stationary queue.

**Why the incurred loss is an expectation.** For ``default`` and ``tuned`` the incurred loss counted
against ``round_bound`` is ``p . l``, the expectation over the learner's own sampling (the quantity the
paper's Appendix A bounds). Counting the loss of whatever value ``predict`` last returned instead would
make learning depend on how often callers call ``predict``; with the expectation the learned state is a
deterministic function of the observations.

Policies
--------
``"default"``
    ``predict`` samples an index from ``p`` (exploration and exploitation both come from ``p``).
``"tuned"``
    As ``default``, but each observation is applied ``repetitions`` times (default 50, as in the paper),
    which biases the learner toward recent waits and makes it converge fast after a change.
``"greedy"``
    ``predict`` returns the alternative with the smallest accumulated loss
    (``sum_r eta_r L_r`` over closed rounds plus ``eta_r L`` of the open one; ties go to the smallest
    wait, so with no data it predicts 0 s, the Per-Stage behaviour). Because old evidence is weighted
    by the larger early ``eta`` and never forgotten, after the true wait changes (the paper shows a
    drop) greedy keeps predicting the old wait for far longer than the change lasts: it gets stuck.
    This weakness is reproduced on purpose (``tests/learners/test_asa.py``). With the symmetric 0/1 loss
    the same happens after a rise.

Losses
------
``"paper"`` (0 for the closest alternative, 1 for the others) and ``"cost"`` (idle core-seconds of an
early start against seconds of delay): :mod:`elastic.learners.asa_losses`. The grid of candidate waits and the
keys are in :mod:`elastic.learners.asa_grid`, the learned state of a key and its dict form in
:mod:`elastic.learners.asa_state`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError
from elastic.learners.asa_grid import DEFAULT_GRID, key_cores
from elastic.learners.asa_losses import cost_losses, paper_losses
from elastic.learners.asa_state import KeyState, dump_state, load_state
from elastic.learners.base import BaseLearner, InstanceOf, Interval, Key, Options

__all__ = ["POLICIES", "ASAEstimator"]

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

POLICIES: tuple[str, ...] = ("default", "tuned", "greedy")
"""The learner's policies (``ASAEstimator(policy=...)``), in the order the command line lists them."""
_LOSSES = frozenset({"paper", "cost"})


class ASAEstimator(BaseLearner):
    """Online queue-wait learner of ASA, one independent state per key.

    Parameters
    ----------
    grid : sequence of float or None, default None
        Sorted, distinct candidate waits in seconds (>= 0, at least 2).
        ``None`` = :data:`~elastic.learners.asa_grid.DEFAULT_GRID`.
    policy : {"default", "tuned", "greedy"}, default "default"
        How :meth:`predict` chooses and how observations are applied (see the module docstring).
    repetitions : int, default 50
        For ``policy="tuned"``: how many times each observation is applied (>= 1). Ignored otherwise.
    loss : {"paper", "cost"}, default "paper"
        Loss scoring each alternative against an observed wait (see the module docstring).
    idle_weight : float, default 1.0
        ``loss="cost"``: weight of one idle core-second (>= 0).
    delay_weight : float, default 1.0
        ``loss="cost"``: weight of one second of delay (>= 0).
    cores : int or None, default None
        ``loss="cost"``: cores an early start idles. ``None`` = the bucket's upper bound when the key
        comes from :func:`~elastic.learners.asa_grid.geometry_key`, else 1.
    eta0 : float, default 1.0
        Initial learning rate (> 0); round ``r`` uses ``max(eta0 / sqrt(r), eta_min)``.
    eta_min : float, default 0.0
        Floor of the learning rate (>= 0); 0 is the paper's schedule (see the module docstring).
    round_bound : float, default 1.0
        A round closes once the loss the learner incurred in it exceeds this (> 0).
    uniform_mix : float, default 0.01
        Share of the uniform distribution mixed into ``p`` after each round, in [0, 1).
    random_state : int or None, default None
        Seed of the ``numpy.random.Generator`` used for sampling predictions.

    Attributes
    ----------
    grid_ : ndarray of float64
        The candidate waits in use.
    states_ : dict of str to state
        Learned state per key (read it with :meth:`get_state`).
    rng_ : numpy.random.Generator
        Generator sampling the predictions of ``default`` and ``tuned``.

    Notes
    -----
    ``predict`` for a key never observed samples from the uniform prior (``greedy``: returns the
    smallest grid value, 0 s by default); it does not raise :class:`~elastic.learners.base.NotFittedError`.

    Examples
    --------
    >>> asa = ASAEstimator(policy="tuned", random_state=0)
    >>> for _ in range(5):
    ...     _ = asa.observe("cores=17-32", 600.0)
    >>> asa.predict("cores=17-32")
    600.0
    """

    _parameter_constraints: ClassVar[Mapping[str, Sequence[Any]]] = {
        "grid": [None, InstanceOf((list, tuple, np.ndarray), "a sorted sequence of >= 2 waits >= 0")],
        "policy": [Options(frozenset(POLICIES))],
        "repetitions": [Interval(1, None, integer=True)],
        "loss": [Options(frozenset(_LOSSES))],
        "idle_weight": [Interval(0, None)],
        "delay_weight": [Interval(0, None)],
        "cores": [None, Interval(1, None, integer=True)],
        "eta0": [Interval(0, None, closed="neither")],
        "eta_min": [Interval(0, None)],
        "round_bound": [Interval(0, None, closed="neither")],
        "uniform_mix": [Interval(0, 1, closed="left")],
        "random_state": [None, Interval(0, None, integer=True)],
    }

    def __init__(
        self,
        *,
        grid: Sequence[float] | None = None,
        policy: str = "default",
        repetitions: int = 50,
        loss: str = "paper",
        idle_weight: float = 1.0,
        delay_weight: float = 1.0,
        cores: int | None = None,
        eta0: float = 1.0,
        eta_min: float = 0.0,
        round_bound: float = 1.0,
        uniform_mix: float = 0.01,
        random_state: int | None = None,
    ) -> None:
        self.grid = grid
        self.policy = policy
        self.repetitions = repetitions
        self.loss = loss
        self.idle_weight = idle_weight
        self.delay_weight = delay_weight
        self.cores = cores
        self.eta0 = eta0
        self.eta_min = eta_min
        self.round_bound = round_bound
        self.uniform_mix = uniform_mix
        self.random_state = random_state

    # -- set-up -------------------------------------------------------------------------------------

    def _initialise(self) -> None:
        """Validate hyperparameters and create the learned attributes (first learning call)."""
        if hasattr(self, "grid_"):
            return
        self._validate_params()
        grid = np.asarray(DEFAULT_GRID if self.grid is None else self.grid, dtype=np.float64)
        if (
            grid.ndim != 1
            or len(grid) < 2
            or not np.all(np.isfinite(grid))
            or grid[0] < 0
            or not np.all(np.diff(grid) > 0)
        ):
            raise ConfigError(
                "ASAEstimator: parameter 'grid' must be a strictly increasing sequence of at least 2 "
                f"finite waits >= 0 seconds; got {self.grid!r}"
            )
        if self.loss == "cost" and self.idle_weight == 0 and self.delay_weight == 0:
            raise ConfigError(
                "ASAEstimator: parameters 'idle_weight' and 'delay_weight' must not both be 0 "
                "with loss='cost'"
            )
        self.grid_: FloatArray = grid
        self.states_: dict[Key, KeyState] = {}
        self.rng_: np.random.Generator = np.random.default_rng(self.random_state)

    def _state(self, key: Key) -> KeyState:
        state = self.states_.get(key)
        if state is None:
            state = self.states_[key] = KeyState.prior(len(self.grid_))
        return state

    # -- losses -------------------------------------------------------------------------------------

    def losses(self, key: Key, wait: float) -> FloatArray:
        """Return the loss in [0, 1] of every alternative for an observed ``wait`` of ``key``.

        Parameters
        ----------
        key : str
            Key (used for the core count of ``loss="cost"``).
        wait : float
            Observed wait in seconds, >= 0.

        Returns
        -------
        ndarray of float64
            One loss per grid value.
        """
        self._initialise()
        if self.loss == "paper":
            return paper_losses(self.grid_, wait)
        cores = self.cores if self.cores is not None else (key_cores(key) or 1)
        return cost_losses(
            self.grid_, wait, cores=cores, idle_weight=self.idle_weight, delay_weight=self.delay_weight
        )

    # -- the ASA learner update ---------------------------------------------------------------------

    def _eta(self, round_: int) -> float:
        """Learning rate of round ``round_`` (1-based): ``max(eta0 / sqrt(r), eta_min)``."""
        return max(self.eta0 / math.sqrt(round_), self.eta_min)

    def _greedy_index(self, state: KeyState) -> int:
        eta = self._eta(state.round)
        return int(np.argmin(state.cumulative_loss + eta * state.round_loss))

    def _close_round(self, state: KeyState) -> None:
        eta = self._eta(state.round)
        state.cumulative_loss += eta * state.round_loss
        # Subtracting the minimum leaves the normalised result unchanged and avoids exp underflow.
        weights = state.p * np.exp(-eta * (state.round_loss - state.round_loss.min()))
        p = weights / weights.sum()
        k = len(p)
        state.p = (1.0 - self.uniform_mix) * p + self.uniform_mix / k
        state.round_loss = np.zeros(k)
        state.incurred = 0.0
        state.round += 1

    def _apply(self, state: KeyState, loss: FloatArray, times: int) -> None:
        """Apply one case with loss vector ``loss`` ``times`` times (rounds close as they fill)."""
        remaining = times
        while remaining > 0:
            if (
                remaining > 1
                and self.loss == "paper"
                and self.policy != "greedy"
                and not state.round_loss.any()
            ):
                self._apply_fresh_rounds_01(state, loss, remaining)
                return
            if self.policy == "greedy":
                own = float(loss[self._greedy_index(state)])
                steps = 1
            else:
                # p is constant inside a round, so each repetition incurs the same p . loss: jump
                # straight to the repetition that closes the round (same result as one at a time).
                own = float(state.p @ loss)
                if own > 0:
                    steps = max(1, math.floor((self.round_bound - state.incurred) / own) + 1)
                    steps = min(steps, remaining)
                else:
                    steps = remaining
            state.round_loss += steps * loss
            state.incurred += steps * own
            remaining -= steps
            if state.incurred > self.round_bound:
                self._close_round(state)

    def _apply_fresh_rounds_01(self, state: KeyState, loss: FloatArray, times: int) -> None:
        """Exact shortcut of :meth:`_apply` for the 0/1 loss, starting at an empty round.

        With ``loss = 1 - e_i`` every round of repetitions of this one case scales all alternatives
        but ``i`` by the same factor, normalises and mixes: an affine map ``p_j <- a p_j + b`` shared by
        every ``j != i``. Composing those maps with scalars instead of updating the 53-vector once per
        round makes ``tuned`` (up to 25 rounds per observation) about 20x cheaper; the result is the
        same up to rounding (``tests/learners/test_asa_estimator.py`` checks it).
        """
        i = int(np.argmin(loss))
        k = len(state.p)
        gamma = self.uniform_mix
        q = float(state.p[i])
        scale, shift = 1.0, 0.0  # p_j = scale * p_j(before) + shift for every j != i
        weighted = 0.0  # sum over closed rounds of eta_r * repetitions_r (cumulative_loss += this * loss)
        remaining = times
        round_ = state.round
        open_steps = 0
        while remaining > 0:
            own = 1.0 - q  # p . loss
            if own <= 0:  # only with uniform_mix=0: nothing is ever incurred, the round stays open
                open_steps = remaining
                break
            steps = max(1, math.floor(self.round_bound / own) + 1)
            while own * steps <= self.round_bound:  # guard against rounding in the division
                steps += 1
            if steps > remaining:
                open_steps = remaining
                break
            remaining -= steps
            eta = self._eta(round_)
            weighted += eta * steps
            factor = math.exp(-eta * steps)
            norm = q + own * factor
            a = (1.0 - gamma) * factor / norm
            scale, shift = a * scale, a * shift + gamma / k
            q = (1.0 - gamma) * q / norm + gamma / k
            round_ += 1
        p = scale * state.p + shift
        p[i] = q
        state.p = p / p.sum()
        state.cumulative_loss += weighted * loss
        state.round = round_
        state.round_loss = open_steps * loss
        state.incurred = open_steps * (1.0 - q)

    def observe(self, key: Key, wait: float) -> ASAEstimator:
        """Learn one observed queue wait for ``key`` (the ASA learner update); return ``self``.

        Parameters
        ----------
        key : str
            Geometry key, e.g. from :func:`~elastic.learners.asa_grid.geometry_key`.
        wait : float
            The wait the allocation really had, in seconds (>= 0; values past the grid count as the
            largest alternative).

        Returns
        -------
        ASAEstimator
            ``self``.

        Raises
        ------
        ConfigError
            ``wait`` is negative or not finite, or a hyperparameter is invalid.
        """
        self._initialise()
        if not (isinstance(wait, (int, float, np.floating, np.integer)) and math.isfinite(wait)) or wait < 0:
            raise ConfigError(
                f"ASAEstimator.observe: 'wait' must be a finite number >= 0 seconds; got {wait!r}"
            )
        state = self._state(key)
        times = self.repetitions if self.policy == "tuned" else 1
        self._apply(state, self.losses(key, float(wait)), times)
        state.observations += 1
        return self

    def partial_fit(self, key: Key, wait: float) -> ASAEstimator:
        """Alias of :meth:`observe`."""
        return self.observe(key, wait)

    # -- predictions --------------------------------------------------------------------------------

    def predict_index(self, key: Key) -> int:
        """Return the index into ``grid_`` of the alternative chosen now for ``key``.

        ``default``/``tuned`` sample it from ``p`` (consuming ``rng_``); ``greedy`` takes the smallest
        accumulated loss. A key never observed uses the prior (uniform ``p``, zero losses).
        """
        self._initialise()
        state = self.states_.get(key) or KeyState.prior(len(self.grid_))
        if self.policy == "greedy":
            return self._greedy_index(state)
        index = int(np.searchsorted(np.cumsum(state.p), self.rng_.random() * state.p.sum(), side="right"))
        return min(index, len(self.grid_) - 1)

    def predict(self, key: Key) -> float:
        """Return the predicted queue wait in seconds for an allocation of ``key``.

        Returns
        -------
        float
            One of the grid values.
        """
        index = self.predict_index(key)  # initialises grid_ on a first call
        return float(self.grid_[index])

    def probabilities(self, key: Key) -> FloatArray:
        """Return a copy of ``p`` for ``key`` (uniform for a key never observed)."""
        self._initialise()
        state = self.states_.get(key) or KeyState.prior(len(self.grid_))
        return state.p.copy()

    # -- persistence --------------------------------------------------------------------------------

    def get_state(self, key: Key) -> dict[str, Any]:
        """Return the learned state of ``key`` as a JSON-able dict (the prior for an unseen key).

        The store keeps it across runs and shares it between workflows of the same user and geometry.
        """
        self._initialise()
        state = self.states_.get(key) or KeyState.prior(len(self.grid_))
        return dump_state(self.grid_, state)

    def set_state(self, key: Key, state: Mapping[str, Any]) -> ASAEstimator:
        """Replace the learned state of ``key`` with one returned by :meth:`get_state`.

        Raises
        ------
        ConfigError
            The state has another format or grid, or is not a valid state (names the field).
        """
        self._initialise()
        self.states_[key] = load_state(self.grid_, state, f"ASAEstimator.set_state(key={key!r})")
        return self
