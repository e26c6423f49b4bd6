"""The :class:`Strategy` contract, the actions it returns, the run view it reads, and the registry.

A strategy decides *when* to request allocations, *how wide* and for *how long*. It never talks to the
backend: run control (:mod:`elastic.control.controller`) calls :meth:`Strategy.decide` with a read-only
:class:`RunView` (stage progress, allocations, :class:`~elastic.strategies.knowledge.Knowledge`, the
queue's priority model) every time something happened or a wake-up it asked for came, and carries out the
returned actions: :class:`Submit` (an allocation for a stage, or for several consecutive stages),
:class:`Cancel` and :class:`Serve` (change the stages a running allocation is kept for). The same strategy
code thus runs on the virtual clock, the scaled clock and Slurm.

Rules every strategy shares live here as plain functions: :func:`release_idle` (give back allocations
whose stages are done) and :func:`walltime_follow_ups` (when an allocation will reach its walltime with work
left, pre-submit the next value of its stage's speculative sequence, ahead of the expiry by the predicted
queue wait; replace allocations that ended under us).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from elastic.allocations import Allocation, AllocationState
from elastic.batch import DependencyKind
from elastic.errors import ConfigError, UnknownNameError
from elastic.strategies.knowledge import TOTAL, Knowledge
from elastic.workflow import Workflow

__all__ = [
    "STRATEGY_NAMES",
    "Action",
    "Cancel",
    "Decision",
    "Estimate",
    "Releasing",
    "RunView",
    "Serve",
    "Shorten",
    "StageView",
    "Strategy",
    "Submit",
    "make_strategy",
    "strategy_learner",
    "merge",
    "needs_allocation",
    "cores_waited_for",
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
    serves : tuple of str, default ()
        Stages the allocation is kept for (it is released once they are all done); ``()`` = ``stage``
        only. ``stage`` labels it in metrics and is resolved by later ``after`` references.
    pieces : int, default 1
        Batch jobs to split the request into, of near-equal width (:attr:`Allocation.piece_of` names the
        first): the pool runs the stages' tasks on whichever have started, an idle piece is released in
        a stage's tail (:func:`release_idle`), and a strategy can keep some pieces across a narrow stage
        and release the others. At most ``cores``.

    Raises
    ------
    ConfigError
        ``pieces`` is not a whole number between 1 and ``cores``.
    """

    stage: str
    cores: int
    walltime: float
    after: tuple[str, ...] = ()
    dependency: DependencyKind = DependencyKind.AFTERANY
    begin: float | None = None
    reason: str = "initial"
    predicted_wait: float | None = None
    serves: tuple[str, ...] = ()
    pieces: int = 1

    def __post_init__(self) -> None:
        if not (isinstance(self.pieces, int) and 1 <= self.pieces <= max(self.cores, 1)):
            raise ConfigError(f"Submit.pieces must be a whole number in 1..{self.cores}, got {self.pieces!r}")


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel (release) an allocation, pending or running."""

    alloc_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Serve:
    """Keep allocation ``alloc_id`` for ``stages`` (replacing the stages it was kept for).

    A planner holds a running allocation across the next stages this way (their tasks run on it, as any
    task may run on any allocation), or gives up a hold it planned; :func:`release_idle` releases the
    allocation once every stage in ``stages`` is done.
    """

    alloc_id: str
    stages: tuple[str, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Shorten:
    """Lower pending allocation ``alloc_id``'s walltime to ``walltime`` seconds (never raise it).

    A request asked with walltime to cover idling before its stage (in case it starts early) no longer
    needs that cover once its stage is ready and it still waits; with a shorter limit it fits backfill
    gaps a longer one does not, at the queue place it has (Slurm: ``scontrol update TimeLimit``). Run
    control does nothing where the backend cannot (:class:`~elastic.backends.base.ShortensWalltime`), or
    once the allocation started.
    """

    alloc_id: str
    walltime: float
    reason: str = ""


Action = Submit | Cancel | Serve | Shorten


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
    runtime: float | None = None
    """Seconds it ran, as the runtime history learns it (:func:`~elastic.control.history.learn_runtimes`),
    never counting time when its tasks only waited for cores. A declared stage: its longest task, that
    task's attempts summed (its tasks are released together, so that is its runtime on its own width).
    A front-door stage, whose tasks arrive over time: first start to end, less the gaps when none of its
    tasks ran and some were queued (a gap with nothing queued waits for inputs, and counts).
    ``None``: not measured (first start to last end is used)."""
    rerun_end: float | None = None
    """The soonest the stage can end given its tasks whose attempt was lost (their allocation ended): a
    re-run starts from scratch and takes at least as long as the lost attempt had run, so each such task
    not done ends no sooner than its current attempt's start (its loss, while it waits) plus the seconds
    its lost attempts ran. ``None``: no task of it was lost, or all those are done."""
    queued: int | None = None
    """Tasks queued for cores now (they could run on any allocation wide enough). ``None``: every task
    neither done nor running (a declared stage's tasks are all released when it is ready); a front-door
    stage also counts tasks that exist but wait for their inputs, which are not queued."""

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


Releasing = tuple[tuple[str, float], ...]
"""Allocations of a run and when it will release them: ``((alloc_id, backend time), ...)``, sorted."""


class Estimate(Protocol):
    """The scheduler's estimate of a new job's wait, as :attr:`RunView.estimate` gives it.

    ``estimate(cores, walltime, releasing)`` returns the seconds a job of ``cores`` cores and ``walltime``
    seconds submitted now would wait (None: the scheduler cannot say). ``releasing`` gives allocations of
    this run (id, backend time), sorted, that the caller will release at those times: a request for a
    stage that starts once this run's running allocation is released competes for its cores from then
    on, not with that allocation held to its walltime. It is honoured where the backend can end a job
    early in its estimate (the mock backend); Slurm's ``sbatch --test-only`` cannot, and there the
    estimate holds them to their walltime.
    """

    def __call__(self, cores: int, walltime: float, releasing: Releasing = ()) -> float | None:
        """Return the estimated wait in seconds, or None."""
        ...


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
    priority : str or None, default None
        How the backend's queue ranks a job held by a dependency or a begin time once it is eligible
        (:mod:`elastic.simulator.priority`: ``"age"``, ``"basic"``, ``"accrue-always"``); None when the
        backend does not say (a planner then assumes ``"age"``: holding buys no queue position).
    estimate : Estimate or None, default None
        ``estimate(cores, walltime, releasing)``: the scheduler's estimate of how long a job of ``cores``
        cores and ``walltime`` seconds submitted now would wait (seconds, from ``sbatch --test-only``),
        or None when it cannot say; ``releasing`` names allocations of this run and when they are released
        (:class:`Estimate`). None when the backend gives no estimate a real queue could give (the mock
        backend's recorded modes plan around the recorded schedule, jobs not yet submitted included).
    """

    now: float
    workflow: Workflow
    stages: tuple[StageView, ...]
    allocations: tuple[Allocation, ...]
    knowledge: Knowledge
    busy: Mapping[str, int] = field(default_factory=dict)
    priority: str | None = None
    estimate: Estimate | None = None

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

    def allocations_serving(self, label: str, *, live_only: bool = False) -> list[Allocation]:
        """Allocations kept for ``label`` (:attr:`Allocation.labels`), in submission order."""
        return [a for a in self.allocations if label in a.labels and not (live_only and a.ended)]

    def latest_wait(self, cores: int | None = None) -> float | None:
        """Return the queue wait of this run's allocation that started last (None: none has started).

        Among the allocations of ``cores`` cores if one of them started, else among all. A wait counts
        from when the allocation became eligible (its dependency released it), else from its submission.
        """
        seen = [(a.start_time, a.cores, a.queue_wait) for a in self.allocations if a.queue_wait is not None]
        same = [w for w in seen if w[1] == cores]
        return max(same or seen)[2] if seen else None

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

    def width_left(self, label: str) -> int:
        """Return the cores ``label``'s tasks not done yet need to run at once (at least 1).

        A stage that is not ready needs its whole width; a ready one, its tasks not completed (running or
        queued) times their cores; ``"*"``: the widest of those over the stages left.
        """
        stages = [s for s in self.stages if not s.complete] if label == TOTAL else [self.stage(label)]
        need = [min(s.width, (s.tasks - s.done) * s.cores) if s.ready else s.width for s in stages]
        return max(1, *need) if need else 1


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
    """Cancel allocations whose stages are all complete: pending ones, and running ones with no task left.

    An allocation's stages are :attr:`Allocation.labels`: the stages a planner keeps it for, else the
    stage it was requested for. A batch job split from a wider request (:attr:`Allocation.piece_of`) is
    also released, idle, as soon as the idle cores of the other running jobs kept for its stages can take
    every task of those stages that waits for cores (:func:`cores_waited_for`): the finished cores of a
    stage's tail, the cores a narrow stage after a wide one does not use. An idle allocation whose
    stages are ready but cannot end on it, each with another allocation asked or running for it (the
    walltime follow-up, which their tasks wait for), is released too (:func:`_replaced`). A job running a
    task is never released by this rule; but one whose stages are done and that a pending job depends
    on is drained (cancelled: it takes no new task and ends with its current one), so that the dependent
    jobs are not held back while it runs the next stage's tasks alone.
    """
    out: list[Cancel] = []
    released: set[str] = set()
    for a in view.allocations:
        labels = a.labels
        if a.ended or not labels:
            continue
        known = [x for x in labels if _known(view, x)]
        if all(view.label_done(x) for x in known):
            what = "stage " + ", ".join(labels) + (" is" if len(labels) == 1 else " are")
            if a.pending:
                out.append(Cancel(a.alloc_id, f"{what} done; not needed any more"))
            elif view.busy_cores(a.alloc_id) == 0:
                out.append(Cancel(a.alloc_id, f"{what} done; releasing idle cores"))
                released.add(a.alloc_id)
            elif a.piece_of is not None and not a.cancelled and _holds_back(view, a.alloc_id):
                out.append(
                    Cancel(a.alloc_id, f"{what} done; the jobs waiting for it would be faster (drained)")
                )
            continue
        if a.cancelled or not a.running or view.busy_cores(a.alloc_id) > 0:
            continue
        if _replaced(view, a, known):
            released.add(a.alloc_id)
            out.append(
                Cancel(a.alloc_id, "cannot end its stage; its tasks wait for the allocation that replaces it")
            )
            continue
        if a.piece_of is None or a.reason in _FOLLOW_UPS:
            # a follow-up idles by design until the jobs it replaces run out of walltime: releasing it
            # for the idle cores those jobs have now made the follow-up rule ask again, for ever, each
            # time with the next (doubled) walltime of the sequence (found by the random scenarios:
            # asa-paper, job_cores=5, 2-core tasks)
            continue
        open_ = {x for x in known if not view.label_done(x)}
        need = max(cores_waited_for(view, x) for x in open_)
        idle = sum(
            b.cores - view.busy_cores(b.alloc_id)
            for b in view.allocations
            if b.running
            and not b.cancelled
            and b.alloc_id != a.alloc_id
            and b.alloc_id not in released
            and open_.intersection(b.labels)
        )
        if idle >= need:
            released.add(a.alloc_id)
            out.append(
                Cancel(
                    a.alloc_id, f"idle; other jobs have idle cores for what {', '.join(sorted(open_))} need"
                )
            )
    return out


_FOLLOW_UPS = frozenset({"walltime", "lost"})
"""Reasons of the requests :func:`walltime_follow_ups` makes."""


def _replaced(view: RunView, a: Allocation, labels: Sequence[str]) -> bool:
    """Whether idle running ``a`` cannot end any of its stages, all ready, and each has another allocation.

    Its stages' tasks then wait for the other (the walltime follow-up): placement's time rule starts a
    task only where its estimate (the stage's expected duration, :meth:`Knowledge.expected_duration`, as
    run control gives it) fits the walltime left while another allocation has the time. Kept, it would
    idle until killed (HPC2N capacity, Statistics 28, run 1: 28 cores for 0.6 h). The same estimate
    placement uses, not the stage's expected work left: an allocation whose agents have not joined yet
    (idle for that reason) is kept wherever its stage's tasks would be placed on it.
    """
    open_ = [x for x in labels if not view.label_done(x)]
    if not open_ or TOTAL in open_ or not all(view.stage(x).ready for x in open_):
        return False
    left = a.remaining(view.now)
    for x in open_:
        if view.knowledge.expected_duration(x) <= left:
            return False
        others = [b for b in view.allocations_serving(x, live_only=True) if b.alloc_id != a.alloc_id]
        if not any(b.piece_of is None or b.piece_of != a.piece_of for b in others):
            return False
    return True


def _holds_back(view: RunView, alloc_id: str) -> bool:
    """Whether a job of a done stage, running a later stage's task, holds back pending jobs it should not.

    Any task may run on any allocation, so the jobs of a done stage take the next stage's tasks while
    that stage's own jobs, submitted with a dependency on them, wait for them to end. With enough of
    them that is free cores; with one or two, they take the tasks a few at a time, wave after wave, while
    the jobs that would take them all at once are held back. Drain them (no new task, cancelled when
    the current one ends) when the waves left on them would take longer than one wave on the dependent
    jobs after their predicted queue wait.
    """
    dependents = [b for b in view.allocations if b.pending and any(d == alloc_id for d, _ in b.dependencies)]
    if not dependents:
        return False
    blockers = {d for b in dependents for d, _ in b.dependencies}
    held = sum(c.cores for c in view.allocations if c.alloc_id in blockers and c.running and not c.cancelled)
    for b in dependents:
        for label in b.labels:
            if not _known(view, label) or view.label_done(label):
                continue
            waiting = cores_waited_for(view, label)
            if held == 0 or waiting == 0:
                continue
            task = view.knowledge.expected_duration(label)
            if math.ceil(waiting / held) * task > task + view.knowledge.predict_wait(b.cores):
                return True
    return False


def cores_waited_for(view: RunView, label: str) -> int:
    """Cores the tasks of ``label`` not running yet need at once (``"*"``: the most of any stage)."""
    if label == TOTAL:
        return max((_waiting(s) for s in view.stages), default=0)
    return _waiting(view.stage(label))


def _waiting(stage: StageView) -> int:
    return 0 if stage.complete else max(0, stage.tasks - stage.done - stage.running) * stage.cores


def _known(view: RunView, label: str) -> bool:
    return label == TOTAL or any(s.name == label for s in view.stages)


def walltime_follow_ups(
    view: RunView,
    labels: Sequence[str],
    *,
    margin: float = 60.0,
    lead: Callable[[int], float] | None = None,
) -> Decision:
    """Follow-up requests for allocations that run out of walltime, or ended under us, with work left.

    For each ``label`` that already had an allocation kept for it (:meth:`RunView.allocations_serving`),
    is ready (its tasks are queued or running) and still has work:

    - no allocation pending or running, and the last one ended without us cancelling it (walltime,
      ``scancel`` from outside, failure): request the next walltime of the sequence now (``"walltime"``
      after a TIMEOUT, else ``"lost"``);
    - the running allocation ends (``start + walltime``) before the expected remaining work: submit the
      next walltime of the sequence at ``walltime_end - lead - margin``, so the new allocation is there
      when the old one is killed (lost tasks re-run on it).

    A follow-up is for ``label`` only, also when the allocation it follows was kept for more stages
    (:attr:`Allocation.labels`): the stages after it are planned by the strategy when they come. It is as
    wide as the label's tasks not done yet need (:meth:`RunView.width_left`), not the stage's width: a
    wide stage whose last task outlives the first request needs one core more, and 56 cores asked for it
    idled 55 of them for the hours that task ran again (BLAST 56 on the busy synthetic queue, run 14:
    150 core-h, and the 56-core request waited 5.4 h where a narrow one backfills).
    Replacing the whole group (as wide as its widest stage, walltime the sum) was measured worse on the
    main job (montage, busy synthetic 64-core queue, 30 runs: ``asa`` 9.66 h and 43.3 core-h against
    6.66 h and 34.4): a wide request with a long walltime waits longer, and holds cores the later
    stages may not need.

    ``lead(cores)`` is how long ahead of its need an allocation of ``cores`` is requested; default the
    predicted wait (:meth:`~elastic.strategies.knowledge.Knowledge.predict_wait`). The planner passes the
    timing rule's lead for a follow-up (:func:`elastic.strategies.timing.lead_time`).
    """
    actions: list[Action] = []
    wake: float | None = None
    k = view.knowledge
    for label in labels:
        mine = view.allocations_serving(label)
        if not mine or view.label_done(label):
            continue
        if label != TOTAL and not view.stage(label).ready:
            continue  # nothing to lose yet: the strategy's own rule (re)submits for stages not ready
        previous = [a.walltime for a in mine if a.stage == label]  # the label's own sequence
        cores = view.width_left(label)
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
        wait = k.predict_wait(cores) if lead is None else lead(cores)
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
    """Concatenate actions and take the earliest wake-up.

    One Submit per stage label at most, and one Cancel or Serve per allocation (first wins; a Serve of
    an allocation also cancelled is dropped).
    """
    actions: list[Action] = []
    labels: set[str] = set()
    touched: set[str] = set()
    wake: float | None = None
    for d in decisions:
        for a in d.actions:
            if isinstance(a, Submit):
                if a.stage in labels:
                    continue
                labels.add(a.stage)
            elif a.alloc_id in touched:
                continue
            else:
                touched.add(a.alloc_id)
            actions.append(a)
        wake = _min(wake, d.wake_at)
    return Decision(tuple(actions), wake)


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
    """
    try:
        module, cls, defaults = _REGISTRY[name]
    except KeyError:
        raise UnknownNameError("strategy", name, STRATEGY_NAMES) from None
    factory = getattr(importlib.import_module(module), cls)
    strategy: Strategy = factory(**(defaults | options))
    return strategy
