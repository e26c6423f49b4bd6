"""The :class:`Strategy` contract, the actions it returns, the run view it reads, and the registry.

A strategy decides *when* to request allocations, *how wide* and for *how long*. It never talks to the
backend: the run driver (:mod:`elastic.control.runner`) calls :meth:`Strategy.decide` with a read-only
:class:`RunView` (stage progress, allocations, :class:`~elastic.strategies.knowledge.Knowledge`) every time
something happened or a wake-up it asked for came, and carries out the returned actions: :class:`Submit`
(an allocation for a stage) and :class:`Cancel`. The same strategy code thus runs on the virtual clock,
the scaled clock and Slurm.

Rules every strategy shares live here as plain functions: :func:`release_idle` (give back allocations
whose stage is done) and :func:`walltime_follow_ups` (when an allocation will reach its walltime with work
left, pre-submit the next value of its stage's speculative sequence, ahead of the expiry by the predicted
queue wait; replace allocations that ended under us).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from elastic.allocations import Allocation, AllocationState
from elastic.batch import DependencyKind
from elastic.errors import UnknownNameError
from elastic.strategies.knowledge import TOTAL, Knowledge
from elastic.workflow import Workflow

__all__ = [
    "STRATEGY_NAMES",
    "Action",
    "Cancel",
    "Decision",
    "RunView",
    "StageView",
    "Strategy",
    "Submit",
    "make_strategy",
    "merge",
    "needs_allocation",
    "release_idle",
    "remaining_work",
    "walltime_follow_ups",
]


@dataclass(frozen=True, slots=True)
class Submit:
    """Request an allocation.

    Parameters
    ----------
    stage : str
        Stage it is for (a label for metrics and release; any task may run on it), or ``"*"``.
    cores : int
        Width.
    walltime : float
        Requested walltime, seconds.
    after : tuple of str, default ()
        Stages whose current allocations it depends on (resolved by the driver to batch job ids).
    dependency : DependencyKind, default AFTERANY
        Kind of the dependencies in ``after``.
    begin : float or None, default None
        Do not start before this backend time.
    reason : str, default "initial"
        ``"initial"``, ``"walltime"`` (follow-up of a walltime), ``"lost"`` (replacement of an allocation
        that ended under us) or ``"resubmit"`` (ASA naive: cancelled for starting too early).
    predicted_wait : float or None, default None
        The queue wait the strategy planned with, if any (for hit/miss metrics).
    """

    stage: str
    cores: int
    walltime: float
    after: tuple[str, ...] = ()
    dependency: DependencyKind = DependencyKind.AFTERANY
    begin: float | None = None
    reason: str = "initial"
    predicted_wait: float | None = None


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel (release) an allocation, pending or running."""

    alloc_id: str
    reason: str = ""


Action = Submit | Cancel


@dataclass(frozen=True, slots=True)
class Decision:
    """What :meth:`Strategy.decide` returns: actions now, and when to be asked again at the latest."""

    actions: tuple[Action, ...] = ()
    wake_at: float | None = None


@dataclass(frozen=True, slots=True)
class StageView:
    """Progress of one stage, read-only."""

    name: str
    index: int
    tasks: int
    cores: int
    depends_on: tuple[str, ...]
    done: int = 0
    running: int = 0
    ready_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None

    @property
    def width(self) -> int:
        """Cores to run every task at once."""
        return self.tasks * self.cores

    @property
    def complete(self) -> bool:
        """Every task completed."""
        return self.end_time is not None

    @property
    def ready(self) -> bool:
        """Its dependencies are done (its tasks are queued or running)."""
        return self.ready_time is not None


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything a strategy may read, at ``now`` (backend seconds).

    Attributes
    ----------
    now : float
        Backend seconds.
    workflow : Workflow
        The plan: the stages known (declared, learned from earlier runs, or seen so far).
    stages : tuple of StageView
        Progress of every stage of the plan, in plan order.
    allocations : tuple of Allocation
        Every allocation requested in this run, in submission order (times on the backend's clock).
    knowledge : Knowledge
        Wait predictions, expected durations, walltime requests.
    busy : mapping of str to int
        Cores running tasks now, by id of running allocation (absent: none).
    """

    now: float
    workflow: Workflow
    stages: tuple[StageView, ...]
    allocations: tuple[Allocation, ...]
    knowledge: Knowledge
    busy: Mapping[str, int] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """Every stage complete."""
        return all(s.complete for s in self.stages)

    def stage(self, name: str) -> StageView:
        """Return the stage called ``name``; raise UnknownNameError."""
        for s in self.stages:
            if s.name == name:
                return s
        raise UnknownNameError("stage", name, [s.name for s in self.stages])

    def allocations_for(self, label: str, *, live_only: bool = False) -> list[Allocation]:
        """Allocations requested for ``label``, in submission order (``live_only``: not ended)."""
        return [a for a in self.allocations if a.stage == label and not (live_only and a.ended)]

    def busy_cores(self, alloc_id: str) -> int:
        """Cores of allocation ``alloc_id`` running tasks now."""
        return self.busy.get(alloc_id, 0)

    def label_done(self, label: str) -> bool:
        """Whether the work of ``label`` (a stage, or ``"*"`` = everything) is complete."""
        return self.done if label == TOTAL else self.stage(label).complete

    def label_width(self, label: str) -> int:
        """Return the width for ``label``: the stage's, or for ``"*"`` the widest stage left."""
        if label == TOTAL:
            return max((s.width for s in self.stages if not s.complete), default=1)
        return self.stage(label).width


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


def remaining_work(view: RunView, label: str) -> float:
    """Return the expected seconds of work left for ``label`` (a stage, or ``"*"``: all stages)."""
    k = view.knowledge
    labels = [s.name for s in view.stages] if label == TOTAL else [label]
    total = 0.0
    for name in labels:
        s = view.stage(name)
        if s.complete:
            continue
        if s.start_time is None:
            total += k.expected_duration(name)
        else:
            elapsed = view.now - s.start_time
            total += max(0.0, k.expected_duration(name, elapsed) - elapsed)
    return total


def needs_allocation(view: RunView, label: str) -> bool:
    """Whether ``label`` needs a first allocation: it has none, or all ended and we released the last.

    The second case is a label whose work was done (its allocation released) and that has work again: a
    front door's stage that gets new tasks after it completed.

    An allocation that ended under us (walltime, ``scancel``) is replaced by :func:`walltime_follow_ups`.
    """
    mine = view.allocations_for(label)
    return not mine or (all(a.ended for a in mine) and mine[-1].cancelled)


def release_idle(view: RunView) -> list[Cancel]:
    """Cancel allocations whose stage is complete: pending ones, and running ones with no task left."""
    out: list[Cancel] = []
    for a in view.allocations:
        if a.ended or a.stage is None or not view.label_done(a.stage):
            continue
        if a.pending:
            out.append(Cancel(a.alloc_id, f"stage {a.stage} is done; not needed any more"))
        elif view.busy_cores(a.alloc_id) == 0:
            out.append(Cancel(a.alloc_id, f"stage {a.stage} is done; releasing idle cores"))
    return out


def walltime_follow_ups(view: RunView, labels: Sequence[str], *, margin: float = 60.0) -> Decision:
    """Follow-up requests for allocations that run out of walltime, or ended under us, with work left.

    For each ``label`` that already had an allocation, is ready (its tasks are queued or running) and
    still has work:

    - no allocation pending or running, and the last one ended without us cancelling it (walltime,
      ``scancel`` from outside, failure): request the next walltime of the sequence now (``"walltime"``
      after a TIMEOUT, else ``"lost"``);
    - the running allocation ends (``start + walltime``) before the expected remaining work: submit the
      next walltime of the sequence at ``walltime_end - predicted wait - margin``, so the new allocation
      is there when the old one is killed (lost tasks re-run on it).
    """
    actions: list[Action] = []
    wake: float | None = None
    k = view.knowledge
    for label in labels:
        mine = view.allocations_for(label)
        if not mine or view.label_done(label):
            continue
        if label != TOTAL and not view.stage(label).ready:
            continue  # nothing to lose yet: the strategy's own rule (re)submits for stages not ready
        previous = [a.walltime for a in mine]
        cores = view.label_width(label)
        if any(a.pending for a in mine):
            continue
        running = [a for a in mine if a.running]
        if not running:
            last = mine[-1]
            if last.cancelled:
                continue
            reason = "walltime" if last.state is AllocationState.TIMEOUT else "lost"
            wait = k.predict_wait(cores)
            actions.append(
                Submit(label, cores, k.walltime(label, previous), reason=reason, predicted_wait=wait)
            )
            continue
        current = max(running, key=lambda a: a.walltime_end or 0.0)
        end = current.walltime_end
        assert end is not None, "a running allocation has a start time"
        if remaining_work(view, label) <= end - view.now:
            continue
        wait = k.predict_wait(cores)
        at = end - wait - margin
        if view.now >= at:
            actions.append(
                Submit(label, cores, k.walltime(label, previous), reason="walltime", predicted_wait=wait)
            )
        else:
            wake = at if wake is None else min(wake, at)
    return Decision(tuple(actions), wake)


def _min(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def merge(*decisions: Decision) -> Decision:
    """Concatenate actions (one Submit per stage label at most, first wins) and take the earliest wake-up."""
    actions: list[Action] = []
    labels: set[str] = set()
    cancelled: set[str] = set()
    wake: float | None = None
    for d in decisions:
        for a in d.actions:
            if isinstance(a, Submit):
                if a.stage in labels:
                    continue
                labels.add(a.stage)
            elif a.alloc_id in cancelled:
                continue
            else:
                cancelled.add(a.alloc_id)
            actions.append(a)
        wake = _min(wake, d.wake_at)
    return Decision(tuple(actions), wake)


_REGISTRY: dict[str, tuple[str, str, dict[str, Any]]] = {
    "bigjob": ("elastic.strategies.bigjob", "BigJob", {}),
    "perstage": ("elastic.strategies.perstage", "PerStage", {}),
    "asa": ("elastic.strategies.asa", "ASA", {}),
    "asa-after": ("elastic.strategies.asa", "ASA", {"dependency": "after"}),
    "asa-naive": ("elastic.strategies.asa", "ASA", {"dependency": None, "naive": True}),
}

STRATEGY_NAMES: tuple[str, ...] = tuple(_REGISTRY)
"""Names :func:`make_strategy` accepts."""


def make_strategy(name: str, **options: Any) -> Strategy:
    """Build a strategy by registry name (``bigjob``, ``perstage``, ``asa``, ``asa-after``, ``asa-naive``).

    Raises
    ------
    UnknownNameError
        ``name`` is not registered; the message lists the names.
    """
    try:
        module, cls, defaults = _REGISTRY[name]
    except KeyError:
        raise UnknownNameError("strategy", name, STRATEGY_NAMES) from None
    factory = getattr(importlib.import_module(module), cls)
    strategy: Strategy = factory(**(defaults | options))
    return strategy
