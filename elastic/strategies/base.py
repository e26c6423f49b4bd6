"""The :class:`Strategy` contract and the registry of strategies by name.

A strategy decides *when* to request allocations, *how wide* and for *how long*. It never talks to the
backend: run control (:mod:`elastic.control.controller`) calls :meth:`Strategy.decide` with a read-only
:class:`~elastic.strategies.view.RunView` (stage progress, allocations,
:class:`~elastic.strategies.knowledge.Knowledge`, the queue's priority model) every time something
happened or a wake-up it asked for came, and carries out the returned actions
(:mod:`elastic.strategies.actions`): :class:`Submit` (an allocation for a stage, or for several
consecutive stages), :class:`Cancel` and :class:`Serve` (change the stages a running allocation is kept
for). The same strategy code thus runs on the virtual clock, the scaled clock and Slurm.

Rules every strategy shares are plain functions in :mod:`elastic.strategies.rules`
(:func:`release_idle`, :func:`walltime_follow_ups`). The names of those modules are importable from here
too.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from elastic.errors import ConfigError, UnknownNameError
from elastic.strategies.actions import Action, Cancel, Decision, Serve, Shorten, Submit, merge
from elastic.strategies.rules import (
    cores_waited_for,
    needs_allocation,
    release_idle,
    remaining_work,
    walltime_checks,
    walltime_follow_ups,
)
from elastic.strategies.view import Estimate, Releasing, RunView, StageView

__all__ = [
    "STRATEGY_NAMES",
    "Action",
    "Cancel",
    "Decision",
    "Estimate",
    "Releasing",
    "RunView",
    "Serve",
    "Paced",
    "Settles",
    "Shorten",
    "StageView",
    "Strategy",
    "Submit",
    "WakeAt",
    "make_strategy",
    "strategy_learner",
    "merge",
    "needs_allocation",
    "cores_waited_for",
    "release_idle",
    "remaining_work",
    "walltime_checks",
    "walltime_follow_ups",
]


@runtime_checkable
class Strategy(Protocol):
    """Decides allocation requests; implementations: BigJob, PerStage, ASA."""

    @property
    def name(self) -> str:
        """Registry name, e.g. ``"asa"``."""
        ...

    def decide(self, view: RunView) -> Decision:
        """Return the actions to take now and the latest time to be asked again."""
        ...


WakeAt = Callable[[float], float | None]
"""The wake-up a decision that holds asks for, as a function of the clock (:class:`Settles`)."""


@runtime_checkable
class Settles(Protocol):
    """A strategy that can say until when its decision holds while only the clock moves.

    Run control asks :meth:`settled_until` right after :meth:`Strategy.decide` returned a decision with
    no action without asking the wait learner for a prediction
    (:attr:`~elastic.strategies.knowledge.Knowledge.predictions`); until the time it returns, at every
    poll whose view has the same stages, allocations, busy cores and knowledge, it carries out that
    decision again, with the wake-up it gives for that clock, instead of asking
    (:meth:`~elastic.control.controller.AllocationController.step`). The shared rules' parts are in
    :mod:`elastic.strategies.settle`. A strategy whose decision reads the scheduler's estimate, whose
    answers move with the queue, does not implement it.
    """

    def settled_until(self, view: RunView) -> tuple[float, WakeAt | None]:
        """Return ``(T, wake)``: for every clock ``t`` in ``[view.now, T)`` :meth:`decide` decides alike.

        That is, of a view that differs from ``view`` in its clock only, it returns no action and
        ``wake_at == wake(t)`` (``wake`` None: no wake-up), asks the learner for no prediction and
        changes nothing of the strategy's own state. ``T <= view.now``: no promise. Called only right
        after :meth:`decide` of this same ``view``.
        """
        ...


@runtime_checkable
class Paced(Protocol):
    """A strategy whose decision reads the scheduler's estimate and is asked again only when it may differ.

    Run control keeps a decision of such a strategy that had no action and asked the wait learner for
    nothing while every input of its view is the same, until the decision's own wake-up or its pace,
    whichever comes first; then it asks again. Two changes do not count:

    - tasks' progress: a task of a stage ended or started while no stage became ready, started, ended or
      lost a task, and no allocation became idle or busy
      (:meth:`~elastic.strategies.view.StageView.progressed_from`);
    - a change of the scheduler's queue (:attr:`~elastic.strategies.base.RunView.queue_version`: on the
      mock its own record, on Slurm a digest of ``squeue``) after which every estimate the decision asked
      would start its job when it said (:meth:`~elastic.control.scheduler.WaitEstimates.still`).

    The pace is :attr:`pace` backend seconds, doubled after each kept decision that did nothing, up to
    :data:`~elastic.control.controller.PACE_DOUBLINGS` times, and :attr:`pace` again once a decision
    acts. Unlike :class:`Settles` this is not a promise that the decision would be the same: a rule that
    reads the clock or the tasks' progress alone (how long a held allocation can be kept, a stage's
    predicted end) acts up to a pace later than if asked at every poll.
    """

    @property
    def pace(self) -> float | None:
        """Backend seconds a decision is kept at most (None or 0: asked at every step)."""
        ...


_REGISTRY: dict[str, tuple[str, str, dict[str, Any]]] = {
    "bigjob": ("elastic.strategies.bigjob", "BigJob", {}),
    "perstage": ("elastic.strategies.perstage", "PerStage", {}),
    "asa": ("elastic.strategies.planner", "Planner", {}),
    "asa-paper": ("elastic.strategies.asa", "ASA", {}),
    "asa-after": ("elastic.strategies.asa", "ASA", {"dependency": "after"}),
    "asa-naive": ("elastic.strategies.asa", "ASA", {"dependency": None, "naive": True}),
}

_PAPER_LEARNER = "tuned"
"""The wait learner the paper's ASA variants use unless told otherwise (the ASA learner, with the
learning-rate floor: see :mod:`elastic.learners.choice`)."""

STRATEGY_NAMES: tuple[str, ...] = tuple(_REGISTRY)
"""Names :func:`make_strategy` accepts."""


def strategy_learner(name: str) -> str:
    """Return the wait learner strategy ``name`` runs with (a name of ``WAIT_LEARNERS``).

    The paper's ASA variants (``asa-paper``, ``asa-after``, ``asa-naive``) use the paper's learner, so
    the comparison with the paper stays possible; every other strategy the default learner
    (:data:`elastic.learners.choice.DEFAULT_WAIT_LEARNER`, chosen on the evidence in
    ``docs/results/simulator.md``, "Queue-wait predictors on three traces").

    Raises
    ------
    UnknownNameError
        ``name`` is not registered.
    """
    from elastic.learners.choice import DEFAULT_WAIT_LEARNER

    if name not in _REGISTRY:
        raise UnknownNameError("strategy", name, STRATEGY_NAMES)
    module, _, _ = _REGISTRY[name]
    return _PAPER_LEARNER if module == "elastic.strategies.asa" else DEFAULT_WAIT_LEARNER


def make_strategy(name: str, **options: Any) -> Strategy:
    """Build a strategy by registry name (``bigjob``, ``perstage``, ``asa``, ``asa-paper``, ...).

    Raises
    ------
    UnknownNameError
        ``name`` is not registered; the message lists the names.
    ConfigError
        An option ``name``'s strategy does not take (the message lists those it takes).
    """
    try:
        module, cls, defaults = _REGISTRY[name]
    except KeyError:
        raise UnknownNameError("strategy", name, STRATEGY_NAMES) from None
    factory = getattr(importlib.import_module(module), cls)
    accepted = inspect.signature(factory).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        takes = ", ".join(p for p in accepted if p not in defaults) or "none"
        raise ConfigError(f"strategy {name!r} takes no option {', '.join(unknown)} (its options: {takes})")
    strategy: Strategy = factory(**(defaults | options))
    return strategy
