"""What a strategy reads: the read-only :class:`RunView` of a run at one moment.

With its :class:`StageView` of each stage, and the scheduler's wait :class:`Estimate` it may ask.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import InitVar, dataclass, field
from typing import Protocol

from elastic.allocations import Allocation
from elastic.errors import UnknownNameError
from elastic.strategies.allocation_index import AllocationIndex, AllocationIndexes
from elastic.strategies.knowledge import TOTAL, Knowledge
from elastic.workflow import Workflow

__all__ = ["AllocationIndex", "AllocationIndexes", "Estimate", "Releasing", "RunView", "StageView"]


@functools.lru_cache(maxsize=8)
def _positions(names: tuple[str, ...]) -> Mapping[str, int]:
    """Return where each name first comes in ``names`` (read-only; shared by the views of one plan).

    A run makes a view each time a stage changed, every one with the same stage names in the same order:
    the index is built once per list of names, not per view (a dict of 5,000 stages built for each of a
    long run's thousands of views was a tenth of its cost).
    """
    return dict(zip(reversed(names), range(len(names) - 1, -1, -1), strict=True))


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
    never counting time when its tasks only waited for cores. A declared stage: its longest task, the
    attempt that completed it (its tasks are released together, so that is its runtime on its own width;
    a lost attempt is run again from scratch, and its seconds are not part of it).
    A front-door stage, whose tasks arrive over time: first start to end, less the gaps when none of its
    tasks ran and some were queued (a gap with nothing queued waits for inputs, and counts), and less the
    seconds when only attempts later lost ran (:func:`~elastic.control.attempts.lost_alone`).
    ``None``: not measured (first start to last end is used)."""
    task_runtime: float | None = None
    """Seconds one of its tasks runs, as the runtime history learns it for placement
    (:meth:`~elastic.strategies.knowledge.Knowledge.task_estimate`): the mean plus one standard deviation
    of the runtimes of its completed tasks (the attempt that completed each). ``None``: none completed, or
    not measured (a front-door stage, whose tasks bring their own estimates)."""
    rerun_end: float | None = None
    """The soonest the stage can end given its tasks whose attempt was lost (their allocation ended): a
    re-run starts from scratch and takes at least as long as the lost attempt had run, so each such task
    not done ends no sooner than its current attempt's start (its loss, while it waits) plus the seconds
    its lost attempts ran. ``None``: no task of it was lost, or all those are done."""
    rerun_floor: float | None = None
    """Seconds of the longest attempt lost by a task of this stage that waits for cores to run again: the
    re-run starts from scratch and takes longer, so an allocation with no more walltime left than this
    would lose it again (:meth:`~elastic.control.attempts.Attempts.rerun_floor`). The pool places it by
    twice that (:func:`~elastic.pool.placement.estimate_after_loss`). ``None``: no such task waits."""
    rerun_waiting: int = 0
    """How many tasks of this stage wait for cores after a lost attempt (those :attr:`rerun_floor` is for)."""
    running_since: float | None = None
    """When the oldest attempt of this stage still running started (None: none runs). Lost when its
    allocation runs out at ``end``, it will have run ``end - running_since`` seconds, and its re-run is
    placed by twice that (:func:`~elastic.pool.placement.estimate_after_loss`): a follow-up asked ahead
    of that end asks at least as much (:func:`~elastic.strategies.rules.walltime_follow_ups`). Progress,
    like :attr:`running` (not compared by :meth:`progressed_from`)."""
    queued: int | None = None
    """Tasks queued for cores now (they could run on any allocation wide enough). ``None``: every task
    neither done nor running (a declared stage's tasks are all released when it is ready); a front-door
    stage also counts tasks that exist but wait for their inputs, which are not queued."""
    outstanding: int | None = None
    """Tasks that may still run: held for their inputs, announced, queued or running (a front-door stage,
    whose :attr:`tasks` may count tasks of a remembered plan that never came). ``None``: every task
    neither done nor running (a declared stage)."""
    awaiting_offers: int = 0
    """Tasks announced ready (:meth:`~elastic.control.live.LiveDemand.expect` with ``ready=True``): they
    could run now but wait for cores to be offered to the front-end that launches them (a Mesos framework
    launches only on offers), so they are not queued in the pool and no core frees for them by itself.
    Counted in :attr:`outstanding`; 0 for a declared stage."""

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

    def progressed_from(self, other: StageView) -> bool:
        """Whether this view differs from ``other`` at most by its tasks' progress.

        Progress: how many tasks are done, running or queued, how many may still run
        (:attr:`outstanding`), and the runtimes learned from them; not when the stage became ready,
        started or ended, how many tasks it has, or its tasks lost or waiting to run again.
        """
        return (
            self.name == other.name
            and self.index == other.index
            and self.tasks == other.tasks
            and self.cores == other.cores
            and self.ready_time == other.ready_time
            and self.start_time == other.start_time
            and self.end_time == other.end_time
            and self.rerun_end == other.rerun_end
            and self.rerun_floor == other.rerun_floor
            and self.rerun_waiting == other.rerun_waiting
            and self.awaiting_offers == other.awaiting_offers
            and self.depends_on == other.depends_on
        )


Releasing = tuple[tuple[str, float], ...]
"""Allocations of a run and when it will release them: ``((alloc_id, backend time), ...)``, sorted."""


class Estimate(Protocol):
    """The scheduler's estimate of a new job's wait, as :attr:`RunView.estimate` gives it.

    ``estimate(cores, walltime, releasing)`` returns the seconds a job of ``cores`` cores and ``walltime``
    seconds submitted now would wait (None: the scheduler cannot say). ``releasing`` gives allocations of
    this run (id, backend time), sorted, that the caller will release at those times: a request for a
    stage that starts once this run's running allocation is released competes for its cores from then
    on, not with that allocation held to its walltime. It is honoured only where a backend can end a job
    early in its estimate (:class:`~elastic.backends.base.EstimatesReleasing`); neither built-in backend
    does, and their estimate holds them to their walltime.
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
        cores and ``walltime`` seconds submitted now would wait (seconds, the backend's
        :meth:`~elastic.backends.base.BatchBackend.expected_start`),
        or None when it cannot say; ``releasing`` names allocations of this run and when they are released
        (:class:`Estimate`). None when the backend gives no estimate a real queue could give (the mock
        backend's recorded modes plan around the recorded schedule, jobs not yet submitted included).
    queue_version : hashable or None, default None
        A value that changes whenever the queue ``estimate`` reads may have changed (a job submitted,
        started, ended, cancelled or released from its hold), so a strategy may reuse what it derived
        from the estimate while it is the same; None when the backend cannot say (nothing is reused).
    indexes : AllocationIndexes or None, default None
        The ``allocations`` by stage, by label and live, when the caller keeps them up to date
        (:class:`AllocationIndex`: run control); None: built from ``allocations``. They must index exactly
        ``allocations``. Given at construction only (``dataclasses.replace`` builds them again).
    submittable : int or None, default None
        At most how many batch jobs the run's submission-rate cap lets through at this step
        (:meth:`~elastic.control.rate.SubmissionRate.takes`; it may be one more than it takes). A request
        beyond them is held back by the cap and asked again at a later step, so a strategy whose requests
        are costly to plan may stop planning them there (:class:`~elastic.strategies.planner.Planner`).
        None: no cap known.
    backlog_full : bool, default False
        The run's backlog is full (:class:`~elastic.control.rate.SubmissionLimit`'s ``max_queued``
        requests wait for cores in the batch queue): no request goes through before one of them starts or
        leaves the queue, which changes :attr:`allocations` (a strategy is asked again then). A request
        made meanwhile is held back.
    claimed : mapping of str to int, default {}
        Cores a front-end promised to a placement it makes itself, by id of running allocation (absent:
        none): a Mesos framework's, from the launch of its task until it heard that the task ended, and
        while they are offered to it (:class:`~elastic.control.execution.ReportsClaims`). They run nothing
        the pool sees, but are not idle: the framework may launch on them at any moment.
    job_widths : callable or None, default None
        ``job_widths(cores, task)``: the widths of the batch jobs run control submits a request of
        ``cores`` asked in one piece as, for tasks of ``task`` cores (the run's ``job_cores`` and
        ``node_cores``: :func:`~elastic.control.scheduler.split_request`); None: one job per request.
        A strategy asks such a request's walltime by its jobs
        (:func:`~elastic.strategies.pieces.split_walltime`).
    """

    now: float
    workflow: Workflow
    stages: tuple[StageView, ...]
    allocations: tuple[Allocation, ...]
    knowledge: Knowledge
    busy: Mapping[str, int] = field(default_factory=dict)
    priority: str | None = None
    estimate: Estimate | None = None
    queue_version: Hashable | None = None
    indexes: InitVar[AllocationIndexes | None] = None
    submittable: int | None = None
    backlog_full: bool = False
    claimed: Mapping[str, int] = field(default_factory=dict)
    job_widths: Callable[[int, int], tuple[int, ...]] | None = field(default=None, repr=False, compare=False)
    _positions: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _indexes: AllocationIndexes = field(init=False, repr=False, compare=False)
    _open: tuple[tuple[StageView, ...], tuple[StageView, ...]] | None = field(
        init=False, repr=False, compare=False, default=None
    )
    _width_left: int | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self, indexes: AllocationIndexes | None) -> None:
        # indexes built once per view: a strategy asks for stages and their allocations by name many times
        # per decision (a linear scan each was most of a long simulated run's decision cost); the stages'
        # positions by name once per list of names (:func:`_positions`)
        object.__setattr__(self, "_positions", _positions(tuple([s.name for s in self.stages])))
        # not a stored field: dataclasses.replace(view, allocations=...) must index the new allocations
        object.__setattr__(
            self, "_indexes", AllocationIndexes.of(self.allocations) if indexes is None else indexes
        )

    def at(self, now: float, submittable: int | None = None) -> RunView:
        """Return this view at ``now``: the same stages, allocations and all, at another clock.

        Its indexes are shared, not built again (run control's view of a step where only the clock moved).
        ``submittable``: the cap's budget at ``now`` (:attr:`submittable`).
        """
        view = object.__new__(RunView)
        for name in RunView.__slots__:
            object.__setattr__(view, name, getattr(self, name))
        object.__setattr__(view, "now", now)
        object.__setattr__(view, "submittable", submittable)
        return view

    def replacing(self, changed: Mapping[str, Allocation]) -> RunView:
        """Return this view with the records of ``changed`` (by id) in place of its allocations' own.

        The same stages and all, and what was found of them (shared, as :meth:`at` does); only the index
        entries of the changed allocations are remade (:meth:`AllocationIndexes.replacing`). This view
        where nothing changed.
        """
        if not changed:
            return self
        view = object.__new__(RunView)
        for name in RunView.__slots__:
            object.__setattr__(view, name, getattr(self, name))
        allocations = tuple([changed.get(a.alloc_id, a) for a in self.allocations])
        object.__setattr__(view, "allocations", allocations)
        object.__setattr__(view, "_indexes", self._indexes.replacing(changed, allocations))
        return view

    @property
    def open_stages(self) -> tuple[StageView, ...]:
        """The stages not complete, in plan order.

        Found once per view (and shared by :meth:`at`): the rules that read every stage left ask for them
        several times per decision, and a run of a long declared workflow makes thousands of decisions
        (a scan of every stage each time made a 5,000-stage run cost hours).
        """
        return self._partition()[0]

    @property
    def active_stages(self) -> tuple[StageView, ...]:
        """The stages ready and not complete, in plan order (found once per view, as :attr:`open_stages`)."""
        return self._partition()[1]

    def _partition(self) -> tuple[tuple[StageView, ...], tuple[StageView, ...]]:
        if self._open is None:
            left = tuple(s for s in self.stages if s.end_time is None)
            object.__setattr__(self, "_open", (left, tuple(s for s in left if s.ready_time is not None)))
        assert self._open is not None
        return self._open

    @property
    def done(self) -> bool:
        """Every stage complete."""
        return not self.open_stages

    def stage(self, name: str) -> StageView:
        """Return the stage called ``name``; raise UnknownNameError."""
        i = self._positions.get(name)
        if i is not None:
            return self.stages[i]
        raise UnknownNameError("stage", name, [s.name for s in self.stages])

    def stage_position(self, name: str) -> int:
        """Return where the stage called ``name`` comes in :attr:`stages`; raise UnknownNameError."""
        i = self._positions.get(name)
        if i is None:
            raise UnknownNameError("stage", name, [s.name for s in self.stages])
        return i

    def has_stage(self, name: str) -> bool:
        """Whether the plan has a stage called ``name``."""
        return name in self._positions

    @property
    def live_allocations(self) -> tuple[Allocation, ...]:
        """The allocations not ended, in submission order."""
        return self._indexes.live

    def allocations_for(self, label: str, *, live_only: bool = False) -> list[Allocation]:
        """Allocations requested for ``label``, in submission order (``live_only``: not ended)."""
        found = self._indexes.by_stage.get(label, ())
        return [a for a in found if not a.ended] if live_only else list(found)

    def allocations_serving(self, label: str, *, live_only: bool = False) -> list[Allocation]:
        """Allocations kept for ``label`` (:attr:`Allocation.labels`), in submission order."""
        found = self._indexes.by_label.get(label, ())
        return [a for a in found if not a.ended] if live_only else list(found)

    def latest_wait(self, cores: int | None = None) -> float | None:
        """Return the queue wait of this run's allocation that started last (None: none has started).

        Among the allocations of ``cores`` cores if one of them started, else among those of the width
        nearest to it (by ratio: 56 is as near to 112 as to 28); no shorter than the wait of a narrower
        allocation that started after that one (a wider job waits at least as long as a narrower one
        in the same queue). ``cores`` None: the latest of any width. A wait counts from when the
        allocation became eligible (its dependency released it), else from its submission.

        A job's wait depends on its width, and the queue changes: the latest wait of any width (the rule
        before) priced a 112-core request, asked as two 56-core pieces, by a 1-core job that had started
        at once, so it was not asked until its stage was ready, where the run's 56-core job had waited
        26 h (HPC2N capacity, Montage 112, run 16: 56.0 h against split Big-Job's 28.4 h); the nearest
        width alone priced a 56-core request by a 28-core job that had started at once 12 h before, where
        a 1-core job had since waited 10 h (CTC capacity, Statistics 56, run 25: 30.6 h against 16.2 h).
        """
        seen = [
            (a.start_time, a.cores, a.queue_wait)
            for a in self.allocations
            if a.queue_wait is not None and a.start_time is not None
        ]
        if not seen:
            return None
        if cores is None:
            return max(seen)[2]

        def far(w: tuple[float, int, float]) -> float:  # how many times wider or narrower than ``cores``
            return abs(math.log(max(w[1], 1) / max(cores, 1)))

        near = min(map(far, seen))
        nearest = max(w for w in seen if far(w) <= near + 1e-9)
        narrower = [w for w in seen if w[1] <= cores and w[0] > nearest[0]]
        return max(nearest[2], max(narrower)[2]) if narrower else nearest[2]

    def busy_cores(self, alloc_id: str) -> int:
        """Cores of allocation ``alloc_id`` running tasks now."""
        return self.busy.get(alloc_id, 0)

    def cores_in_use(self, alloc_id: str) -> int:
        """Cores of allocation ``alloc_id`` running tasks, or promised to a front-end's placement.

        The more of :meth:`busy_cores` and :attr:`claimed`: a front-end's claim covers the cores of its
        tasks that the pool runs too.
        """
        return max(self.busy.get(alloc_id, 0), self.claimed.get(alloc_id, 0))

    def label_done(self, label: str) -> bool:
        """Whether the work of ``label`` (a stage, or ``"*"`` = everything) is complete."""
        return self.done if label == TOTAL else self.stage(label).complete

    def label_width(self, label: str) -> int:
        """Return the width for ``label``: the stage's, or for ``"*"`` the widest stage left."""
        if label == TOTAL:
            return max((s.width for s in self.open_stages), default=1)
        return self.stage(label).width

    def width_left(self, label: str) -> int:
        """Return the cores ``label``'s tasks not done yet need to run at once (at least 1).

        A stage that is not ready needs its whole width; a ready one, its tasks not completed (running or
        queued) times their cores; ``"*"``: the widest of those over the stages left.
        """
        if label == TOTAL and self._width_left is not None:
            return self._width_left  # asked at every decision of a whole-run allocation: found once a view
        stages = self.open_stages if label == TOTAL else (self.stage(label),)
        need = [min(s.width, (s.tasks - s.done) * s.cores) if s.ready else s.width for s in stages]
        width = max(1, *need) if need else 1
        if label == TOTAL:
            object.__setattr__(self, "_width_left", width)
        return width
