"""Which queue-wait learner runs, by name: the default one and the paper's.

Every caller that builds a wait learner for strategies (``elastic compare``, ``elastic run``, the front
door) builds it here, by one of :data:`WAIT_LEARNERS`:

- ``"ewma"`` (:data:`DEFAULT_WAIT_LEARNER`): :class:`~elastic.learners.ewma.LogEWMA` with weight 0.3 on the
  newest wait. Chosen on the evidence of ``elastic waits`` on three traces
  (``docs/guide/learners.md``, ``docs/results/simulator.md``): its predictions follow the queue (rank
  correlation with the wait that follows at or within 0.02 of the best predictor in 8 of 9 trace x
  geometry cells, against 0.00-0.27 for the ASA learner as the paper schedules it), its MAE is at or
  within 1 % of the lowest in 8 of 9, and it gives quantiles
  (:class:`~elastic.learners.base.WaitDistribution`), which the allocation planner prices its choices with.
- ``"tuned"``, ``"default"``, ``"greedy"``: the paper's learner (:class:`~elastic.learners.asa.ASAEstimator`)
  with that policy and the learning-rate floor ``eta_min=0.1``: with the paper's schedule alone the
  learner freezes on long traces (2 % hits on HPC2N), with the floor it follows the queue
  (``asa-floor`` in the tables of ``docs/results/simulator.md``). The paper's ASA strategies run with
  ``"tuned"``.

Examples
--------
>>> type(make_wait_learner("ewma")).__name__, shared_name("ewma")
('LogEWMA', 'ewma')
>>> learner = make_wait_learner("tuned", seed=1)
>>> type(learner).__name__, learner.eta_min, shared_name("tuned")
('ASAEstimator', 0.1, 'asa')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from elastic.errors import UnknownNameError

if TYPE_CHECKING:
    from elastic.learners.base import WaitPredictor

__all__ = ["DEFAULT_WAIT_LEARNER", "PAPER_ETA_MIN", "WAIT_LEARNERS", "make_wait_learner", "shared_name"]

WAIT_LEARNERS: tuple[str, ...] = ("ewma", "tuned", "default", "greedy")
"""Names :func:`make_wait_learner` accepts."""

DEFAULT_WAIT_LEARNER = "ewma"
"""The learner strategies use unless told otherwise (see the module docstring for why)."""

PAPER_ETA_MIN = 0.1
"""Learning-rate floor of the paper's learner as the strategies run it."""

_EWMA_ALPHA = 0.3


def make_wait_learner(name: str, *, seed: int | None = None) -> WaitPredictor:
    """Return a fresh wait learner by name (:data:`WAIT_LEARNERS`).

    Parameters
    ----------
    name : str
        ``"ewma"``, or an ASA learner policy (``"tuned"``, ``"default"``, ``"greedy"``).
    seed : int or None, default None
        Seeds the ASA learner's sampling (``ewma`` draws nothing).

    Raises
    ------
    UnknownNameError
        ``name`` is not one of :data:`WAIT_LEARNERS`; the message lists them.
    """
    if name == "ewma":
        from elastic.learners.ewma import LogEWMA

        return LogEWMA(alpha=_EWMA_ALPHA)
    if name in WAIT_LEARNERS:
        from elastic.learners.asa import ASAEstimator

        return ASAEstimator(policy=name, eta_min=PAPER_ETA_MIN, random_state=seed)
    raise UnknownNameError("wait learner", name, WAIT_LEARNERS)


def shared_name(name: str) -> str:
    """Return the name a learner's state is shared under in the store.

    The ASA policies share one state, ``"asa"`` (as before the default changed: stores keep what they
    learned); ``ewma`` keeps its own, whose format differs.

    Raises
    ------
    UnknownNameError
        ``name`` is not one of :data:`WAIT_LEARNERS`.
    """
    if name not in WAIT_LEARNERS:
        raise UnknownNameError("wait learner", name, WAIT_LEARNERS)
    return "ewma" if name == "ewma" else "asa"
