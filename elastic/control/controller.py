"""Allocation control: the one code path that requests, watches and releases allocations.

:class:`AllocationController` asks a :class:`~elastic.strategies.base.Strategy` what to do and does it on a
:class:`~elastic.backends.base.BatchBackend`. Everything that decides or watches allocations lives here, for
every caller: the declared-workflow driver (:class:`~elastic.control.runner.Runner`, behind ``elastic run``
and ``elastic compare``) and the front door (:class:`elastic.front.door.Elastic`, tasks from user code).
What differs between them is only where the work comes from, a :class:`~elastic.control.work.Demand`:

- :class:`~elastic.control.demand.DeclaredDemand`: a declared workflow whose tasks the driver makes itself
  from the stages' runtime models (simulated or sleep tasks);
- :class:`~elastic.control.live.LiveDemand`: tasks submitted by user code at any time, stages learned as
  they come (and from a declared plan or earlier runs).

Each :meth:`AllocationController.step`

1. polls the backend for the state of the open allocations and, in time order, tells the execution about
   allocations that started or ended; every real queue wait (from when the allocation became eligible:
   its dependencies and begin time satisfied) is fed to the learner;
2. hands the task events of the execution to the event sink and to the demand, which updates its stages;
3. asks the strategy with a :class:`~elastic.strategies.base.RunView` and carries out its actions
   (Submit, Cancel, Serve, Shorten): walltime follow-ups and replacements of lost allocations are
   strategy actions like any other, and the liveness rule (:mod:`~elastic.control.liveness`) adds its own;
4. lets the demand hand newly ready work to the execution, and says when to step again at the latest.

Most steps of a long run see nothing new: the same allocations, stages and busy cores, a later clock.
Where the strategy can say until when its decision holds while only the clock moves
(:class:`~elastic.strategies.base.Settles`) and the decision had no action and asked the wait learner
for nothing, that decision is carried out again at those steps instead of asking (the same decision,
so the same run); the backend is only asked for the state of each open job where it says some job may
have changed (:meth:`~elastic.backends.base.ReportsJobChanges.jobs_version`). On the mock backend's
virtual clock that is most of a simulated run's cost. A strategy whose decision reads the scheduler's
estimate (:class:`~elastic.strategies.base.Paced`: the planner) is not asked again while nothing it
reads changed, the queue's version included, until its own wake-up or its pace: not the same decision
at every poll, so its runs were checked on outcomes (``docs/results/strategies.md``).

Over 500 lines because the one code path that requests, watches and releases allocations, and the
reuse of its decisions (which must see every input the decision read), are kept in one class.

Allocations are kept as :class:`~elastic.allocations.Allocation` records on the backend's clock, with
the stages each is kept for (``serves``) and when it became eligible (``eligible_time``); the backend's
:class:`~elastic.batch.JobState` is translated to :class:`~elastic.allocations.AllocationState` here, at
the edge. A wait is learned as a *follow-up* when another allocation of the run had started by the time
this one became eligible, else as a *first* wait (:meth:`~elastic.strategies.knowledge.Knowledge.wait_key`).
What it asks of the scheduler besides submit and cancel is in :mod:`~elastic.control.scheduler`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress

from elastic.allocations import Allocation, AllocationState
from elastic.backends.base import (
    BatchBackend,
    ChangesDependencies,
    NamesJobChanges,
    ReportsJobChanges,
    ShortensWalltime,
)
from elastic.batch import Dependency, DependencyKind, JobInfo, JobSpec, JobState
from elastic.control.execution import Execution, ReportsBusyChanges, ReportsClaims
from elastic.control.history import learn_runtimes
from elastic.control.liveness import combine, unserved
from elastic.control.rate import SubmissionRate
from elastic.control.scheduler import (
    Asked,
    WaitEstimates,
    eligible_by,
    eligible_since,
    failure_note,
    job_nodes,
    priority_model,
    split_request,
    widest_task,
)
from elastic.control.work import CompletesWhenIdle, Demand, EventSink, MakesTasks
from elastic.errors import ConfigError, ElasticError, LimitReachedError
from elastic.limits import MAX_WALLTIME
from elastic.metrics import Event, EventKind
from elastic.strategies.allocation_index import AllocationIndex, AllocationIndexes
from elastic.strategies.base import (
    Action,
    Cancel,
    Decision,
    Paced,
    RunView,
    Serve,
    Settles,
    Shorten,
    StageView,
    Strategy,
    Submit,
    WakeAt,
)
from elastic.strategies.knowledge import TOTAL, Knowledge
from elastic.strategies.settle import SETTLE_MARGIN
from elastic.workflow import Workflow

__all__ = ["RELEASE_PROGRESS", "AllocationController", "Demand", "EventSink", "MakesTasks", "learn_runtimes"]

logger = logging.getLogger(__name__)

PACE_DOUBLINGS = 2
"""Each paced decision that did nothing is kept twice as long as the one before it, up to this many times
doubled (5, 10, then 20 minutes at the planner's pace); after a decision that acted, the pace again.
Chosen for issue 28's cost goal on the 40-stage chain (1.23 s of CPU without, about 0.95 s with), and
checked before it became the default on the five-queue grid (76 of 150 cells met, as without), the
Lublin-Feitelson trace and 30 runs each of the 40-stage chain and the 100-stage DAG (mean makespans
-4 % and +2 %, both within their runs' spread): ``docs/results/strategies.md``, "Paced decisions"."""

RELEASE_PROGRESS = 5.0
"""Real seconds between two lines saying how far the release of every allocation at a run's end is."""

STARTUP_FAILURE = 60.0
"""Backend seconds after its start within which a batch job that fails failed at start (its script)."""

MAX_FAILED_AT_START = 3
"""Batch jobs in a row that fail at start (:data:`STARTUP_FAILURE`) before the run stops.

A job script that fails as it starts fails every job the same way: an agent interpreter that does not
exist on the nodes (``site.python``), a ``worker_init`` line that exits. Found on the local Slurm
cluster: with a wrong ``python``, each job failed in a second, the back-off after failures spaced out the
next ones (30 s, 2 min, 10 min...) and the run waited for ever with ``allocation a1: failed`` as all it
said. Three in a row, with no job in between that ran and ended otherwise, take about 2.5 minutes under
the default back-off; a node that fails one job now and then does not reach it."""


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What a view was made of, and so what a decision made on it read (besides the clock)."""

    plan: Workflow
    stages: tuple[StageView, ...]
    """The demand's stages as read (the view shows those of :attr:`plan`)."""
    allocations: tuple[Allocation, ...]
    indexes: AllocationIndexes
    """The allocations' indexes: a new object whenever an allocation was added or changed."""
    busy: Mapping[str, int]
    version: int
    """:attr:`Knowledge.version`."""
    queue: Hashable | None
    """The estimate's queue version."""
    claimed: Mapping[str, int]
    """Cores promised to a front-end's own placement (:class:`~elastic.control.execution.ReportsClaims`)."""

    def same(self, other: _Inputs, *, queue: bool = True) -> bool:
        """Whether ``other`` holds the same inputs (allocations by identity: each change replaces one).

        ``queue=False``: whatever the estimate's queue (for a decision that does not read it).
        """
        return (
            self._same_run(other)
            and (not queue or self.queue == other.queue)
            and self.busy == other.busy
            and (self.stages is other.stages or self.stages == other.stages)
        )

    def _same_run(self, other: _Inputs) -> bool:
        """Whether ``other`` has the same plan, knowledge, allocations and claims (progress moves none)."""
        return (
            self.plan is other.plan
            and self.version == other.version
            and self.indexes is other.indexes
            and self.claimed == other.claimed
        )

    def progressed_from(self, other: _Inputs) -> bool:
        """Whether ``other`` differs from these inputs at most by tasks' progress (queue aside).

        Progress: each stage's :meth:`~elastic.strategies.view.StageView.progressed_from`, and cores
        busy on each allocation, as long as none became idle or busy.
        """
        if not self._same_run(other) or len(self.stages) != len(other.stages):
            return False
        busy, before = self.busy, other.busy
        if busy != before and (
            busy.keys() != before.keys() or any((n == 0) != (before[a] == 0) for a, n in busy.items())
        ):
            return False
        if self.stages is other.stages:
            return True
        # most stages are the same objects (the demand makes a view again only of a stage that changed)
        return all(a is b or a.progressed_from(b) for a, b in zip(self.stages, other.stages, strict=True))


@dataclass(frozen=True, slots=True)
class _Settled:
    """A decision with no action (woken ``wake(t)``) that holds until ``until`` while ``inputs`` hold."""

    now: float
    until: float
    wake: WakeAt | None
    inputs: _Inputs
    paced: bool = False
    """Kept by :class:`~elastic.strategies.base.Paced` for at most its pace, while its inputs are the same
    but for tasks' progress, and its queue too unless the estimates it asked are (not a promise)."""
    asked: Asked | None = None
    """What a paced decision asked of the scheduler's estimate: once the queue changed, it is kept while
    every answer is the same (:meth:`WaitEstimates.still`)."""


def _earlier(wake: WakeAt | None, at: float) -> WakeAt:
    """Return ``wake``, woken no later than ``at``."""
    if wake is None:
        return lambda _t: at
    inner = wake

    def earlier(t: float) -> float:
        w = inner(t)
        return at if w is None else min(w, at)

    return earlier


def _of_plan(plan: tuple[str, ...], stages: tuple[StageView, ...]) -> tuple[StageView, ...]:
    """Return ``stages`` less those whose name is not in ``plan`` (a plan's stage names), in their order.

    ``stages`` itself where they are the plan's stages, in its order (a declared workflow's always are),
    found by comparing the names in C rather than testing each stage's name in Python (a long plan's
    stages are shown again at each change).
    """
    names = tuple([s.name for s in stages])
    if names == plan:
        return stages
    known = set(plan)
    return tuple(compress(stages, map(known.__contains__, names)))


class _Deferred:
    """A ``with`` block that keeps an :class:`ElasticError` for later instead of stopping the caller.

    For a loop that must finish (releasing every allocation) whatever one step raises; the first error
    is raised by :meth:`raise_first` once the loop is done.
    """

    def __init__(self) -> None:
        self.first: ElasticError | None = None

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, ElasticError):
            self.first = self.first or exc
            return True
        return False

    def raise_first(self) -> None:
        if self.first is not None:
            raise self.first


class AllocationController:
    """Requests, watches and releases the allocations of one run, as its strategy decides.

    Parameters
    ----------
    strategy : Strategy
        When and how big to request allocations.
    backend : BatchBackend
        Where allocations come from (its clock is the run's clock).
    execution : Execution
        Where tasks run; told about every allocation that starts or ends.
    knowledge : Knowledge
        Wait learner and runtime history shared with the strategy.
    demand : Demand
        The work and its progress.
    record : callable
        Event sink: every ALLOC_SUBMIT/START/END and task event goes here.
    poll_interval : float, default 30.0
        Backend seconds between polls of allocation states, at most.
    name : str, default "elastic"
        Prefix of batch job names.
    user : str or None, default None
        Owner of the jobs (mock backend accounting).
    max_cores : int or None, default None
        No allocation is wider (a stage of many small tasks asks for one core per task; on a smaller
        partition, or under a user's cap, it gets this many and runs in waves).
    job_cores, node_cores : int or None, default None
        Most cores in one batch job: a wider request is submitted as several jobs of at most this many
        cores (as dask-jobqueue's ``cores`` per worker job, or HyperQueue's workers per allocation), and
        each job is released on its own once its cores are not needed (a stage's tail, a narrow stage
        after a wide one). More jobs to queue, fewer idle cores held. None: one job per request.
        ``node_cores``: cores per node where jobs are placed on nodes: jobs are then asked in whole nodes.
    """

    def __init__(
        self,
        strategy: Strategy,
        backend: BatchBackend,
        execution: Execution,
        knowledge: Knowledge,
        demand: Demand,
        *,
        record: EventSink,
        poll_interval: float = 30.0,
        name: str = "elastic",
        user: str | None = None,
        max_cores: int | None = None,
        job_cores: int | None = None,
        node_cores: int | None = None,
    ) -> None:
        if not poll_interval > 0:
            raise ConfigError(f"poll_interval must be > 0 backend seconds, got {poll_interval!r}")
        for what, n in (("max_cores", max_cores), ("job_cores", job_cores), ("node_cores", node_cores)):
            if n is not None and n < 1:
                raise ConfigError(f"{what} must be >= 1 or None, got {n!r}")
        self.max_cores, self.job_cores, self.node_cores = max_cores, job_cores, node_cores
        self.strategy = strategy
        self.backend = backend
        self.execution = execution
        self.knowledge = knowledge
        self.demand = demand
        self._makes_tasks = demand if isinstance(demand, MakesTasks) else None
        self._completes_when_idle = demand if isinstance(demand, CompletesWhenIdle) else None
        self.poll_interval = poll_interval
        self.name = name
        self.user = user
        self._record = record
        self._allocs: dict[str, Allocation] = {}
        """The run's allocation records, by id, in submission order: changed only through :meth:`_put`."""
        self._index = AllocationIndex()
        """:attr:`_allocs` by stage, by label and live, for the views (kept up to date by :meth:`_put`)."""
        self._retiring: dict[str, Cancel] = {}
        """Cancelled allocations that still ran a task: the job is cancelled once they are idle."""
        self._unchained_of: tuple[AllocationIndexes, tuple[StageView, ...]] | None = None
        """The allocations and stages :meth:`_unchain_ready` last saw (the same objects: nothing to do)."""
        self._job_ids: dict[str, str] = {}
        self.priority = priority_model(backend)  # the backend's model for held jobs (None: it does not say)
        self._estimate = WaitEstimates(backend, user, self._open_job)
        self._task_cores: dict[str, int] = {}
        """Cores of each known stage's widest task, as of the last view (a request's pieces fit them)."""
        self._task_cores_of: tuple[StageView, ...] | None = None
        """The stages :attr:`_task_cores` was read from (read again only when they changed)."""
        self._task_cores_in: tuple[StageView, ...] = ()
        """The stages of the last view decided on (what :attr:`_task_cores` is read from)."""
        self._shown: tuple[Workflow, tuple[StageView, ...], tuple[StageView, ...]] | None = None
        """The last (plan, the demand's stages, the stages of the view): a long plan's stages are
        filtered again only when the plan or the stages changed."""
        self._plan_names: tuple[Workflow, tuple[str, ...]] | None = None
        """The last plan shown, with its stage names (read once per plan)."""
        self.rate = SubmissionRate()  # the cap every batch job passes (control/rate.py); replaceable
        self._settled: _Settled | None = None
        """The last decision, while it holds (:class:`~elastic.strategies.base.Settles`)."""
        self._view: tuple[_Inputs, RunView] | None = None
        """The last view made, with what it was made of (made again only when that changed)."""
        self._polled: Hashable | None = None
        """The backend's ``jobs_version()`` at the last poll that asked for every open job."""
        self._settles = isinstance(strategy, Settles)
        self._reads_queue = isinstance(strategy, Paced)
        self._pace = strategy.pace if isinstance(strategy, Paced) else None
        """How long a decision of a :class:`~elastic.strategies.base.Paced` strategy is kept at most, unless
        doubled (:data:`PACE_DOUBLINGS`)."""
        self._quiet = 0
        """Paced decisions in a row that did nothing (since the last that acted)."""
        self._failed_at_start = 0
        """Batch jobs in a row that failed within :data:`STARTUP_FAILURE` of their start."""
        self._reports_changes = isinstance(backend, ReportsJobChanges)
        self._names_changes = isinstance(backend, NamesJobChanges)
        self._busy_versioned = isinstance(execution, ReportsBusyChanges)
        self._claims = execution if isinstance(execution, ReportsClaims) else None
        self._busy: tuple[AllocationIndexes, int, dict[str, int]] | None = None
        """The busy cores last read, with the indexes and the execution's ``busy_version()`` they were read
        at (read again only when either changed)."""
        self.check_settled = False
        """Ask the strategy at every step all the same, and raise AssertionError where its decision is not
        the one reused (for tests: :class:`~elastic.strategies.base.Settles` promises it is)."""

    @property
    def allocations(self) -> tuple[Allocation, ...]:
        """Every allocation requested so far, in submission order."""
        return tuple(self._allocs.values())

    def step(self, now: float) -> float | None:
        """Poll, take task events, ask the strategy and act; return when to step again at the latest.

        Returns None when the demand is done (nothing is asked of the strategy then).
        """
        self._poll(now)
        self._advance(now)
        self.demand.update(now)
        if self.demand.done:
            return None
        self._unchain_ready(now)
        decision = self._holds(now)
        if decision is None:
            view = self.view(now)
            if not view.stages:  # nothing known yet (a front door before its first task): nothing to decide
                return now + self.poll_interval
            decision = self._decide(view)
            self._task_cores_in = view.stages
            self.apply(decision, now)
        self.execution.decided()
        if self._makes_tasks is not None:
            self._makes_tasks.dispatch(now)
        self._advance(now)
        self._retire(now)
        wake = now + self.poll_interval
        idle_end = None if self._completes_when_idle is None else self._completes_when_idle.next_idle_end()
        for t in (decision.wake_at, self.execution.next_event_time(), self.rate.pending(now), idle_end):
            if t is not None:
                wake = min(wake, t)
        return wake

    def _decide(self, view: RunView) -> Decision:
        """Ask the strategy (and the liveness rule); keep the decision while it holds (:class:`Settles`)."""
        predictions = self.knowledge.predictions
        paced = bool(self._pace) and view.estimate is not None
        if paced:
            self._estimate.record()
        decision = self.strategy.decide(view)
        added = unserved(view, decision, max_cores=self.max_cores)
        decision = combine(decision, added)
        self._settled = None
        acting = decision.actions
        if not self._settles and acting and view.backlog_full:
            # the backlog holds every request of this decision until a queued one starts or leaves the
            # queue, which changes the run's allocations: a paced strategy is asked again then, not at
            # every poll (a 5,000-stage random DAG kept the backlog full for days, deciding every 16 s)
            acting = tuple(a for a in acting if not isinstance(a, Submit))
        if acting or self.knowledge.predictions != predictions:
            self._quiet = 0
            return decision  # acted, or asked the learner (which may draw at random): ask again next time
        if self._view is None or self._view[1] is not view:
            return decision
        if not self._settles:
            pace = self._pace
            if pace:
                paced_until = view.now + pace * 2 ** min(self._quiet, PACE_DOUBLINGS)
                self._quiet += 1
                at = decision.wake_at
                until = paced_until if at is None else min(paced_until, at)
                if until - SETTLE_MARGIN > view.now:
                    asked = self._estimate.read() if paced else None
                    inputs = self._view[0]
                    self._settled = _Settled(view.now, until, lambda _t: at, inputs, True, asked)
            return decision
        until, wake = self.strategy.settled_until(view)  # type: ignore[attr-defined]
        if added.wake_at is not None:  # the liveness rule's own: where the clock alone turns it
            until = min(until, added.wake_at)
            wake = _earlier(wake, added.wake_at)
        if until - SETTLE_MARGIN > view.now:
            self._settled = _Settled(view.now, until, wake, self._view[0])
        return decision

    def _holds(self, now: float) -> Decision | None:
        """Return the last decision if it holds at ``now`` (nothing but the clock changed), else None."""
        settled = self._settled
        if settled is None or not settled.now <= now < settled.until - SETTLE_MARGIN:
            return None
        # a Settles strategy reads no estimate; a Paced one does, and is kept through tasks' progress
        inputs = self._inputs()
        if not inputs.same(settled.inputs, queue=settled.paced):
            kept = self._paced_kept(inputs, settled) if settled.paced else None
            self._settled = kept
            if kept is None:
                return None
            settled = kept
        decision = Decision((), None if settled.wake is None else settled.wake(now))
        if self.check_settled and not settled.paced:  # a Paced strategy promises nothing
            view = self.view(now)
            predictions = self.knowledge.predictions
            fresh = self.strategy.decide(view)
            fresh = combine(fresh, unserved(view, fresh, max_cores=self.max_cores))
            if fresh != decision or self.knowledge.predictions != predictions:
                raise AssertionError(
                    f"{self.strategy.name} at t={now!r}: decided {fresh} (asked the learner "
                    f"{self.knowledge.predictions - predictions} times), but promised at t={settled.now!r} "
                    f"{decision} until t={settled.until!r}"
                )
        return decision

    def _paced_kept(self, inputs: _Inputs, settled: _Settled) -> _Settled | None:
        """Return the paced decision ``settled`` if kept although ``inputs`` are not those it was made on.

        None where it is not; where the queue moved, the decision compared with the queue of ``inputs``
        from then on.

        Kept where they differ only by tasks' progress (:meth:`_Inputs.progressed_from`: a task ended or
        started, no stage or allocation changed state) and by the queue where that left every estimate the
        decision asked the same (:meth:`~elastic.control.scheduler.WaitEstimates.still`). Like the clock,
        progress moves the stages' predicted ends, which the decision reads at its next pace. On the SDSC
        Blue replay of Montage 775 of 1,058 decisions came after progress alone, and 1 of them acted; on
        the busy synthetic queue 3 of 205 decisions after a change of the queue acted.
        """
        before = settled.inputs
        if not inputs.progressed_from(before):
            return None
        if inputs.queue == before.queue:
            return settled
        if settled.asked is None or not self._estimate.still(settled.asked):
            return None
        # its estimates were asked again of this queue: compared with it from now on
        return dataclasses.replace(settled, inputs=dataclasses.replace(before, queue=inputs.queue))

    def _inputs(self) -> _Inputs:
        """Return what a view made now would be made of."""
        indexes = self._index.snapshot()
        version = self.execution.busy_version() if self._busy_versioned else None  # type: ignore[attr-defined]
        last = self._busy
        if version is not None and last is not None and last[0] is indexes and last[1] == version:
            busy = last[2]
        else:
            busy_cores = self.execution.busy_cores
            busy = {a.alloc_id: busy_cores(a.alloc_id) for a in indexes.live if a.state.is_live}
            if version is not None:
                self._busy = (indexes, version, busy)
        estimate = None if getattr(self.backend, "estimates_see_ahead", False) else self._estimate
        return _Inputs(
            self.demand.plan,
            self.demand.stages(),
            indexes.allocations,
            indexes,
            busy,
            self.knowledge.version,
            # only a strategy that reads the scheduler's estimate (Paced) sees the queue's version: on
            # Slurm it is an squeue, and every other view is the same whatever the queue did
            None if estimate is None or not self._reads_queue else estimate.version(),
            {} if self._claims is None else self._claims.claimed_cores(),
        )

    def apply(self, decision: Decision, now: float) -> None:
        """Carry out the strategy's actions at ``now``."""
        # the backlog's count, read again only after a request went through or a cancel (a decision of a
        # wide DAG asks for hundreds of stages while the backlog holds them all)
        queued: int | None = None
        for action in self._pending_cancels_first(decision.actions):
            if isinstance(action, Submit):
                if self.demand.done:  # the run ended while the strategy decided: nothing needs the cores
                    logger.info("%s: no job for %s: the run is over", self.strategy.name, action.stage)
                    continue
                if queued is None:
                    queued = self.queued_requests()
                if self._submit(action, now, queued):
                    queued = None
            elif isinstance(action, Serve):
                self._serve(action)
            elif isinstance(action, Shorten):
                self._shorten(action)
            else:
                self._cancel(action, now)
                queued = None

    def view(self, now: float) -> RunView:
        """Return what the strategy sees at ``now``."""
        inputs = self._inputs()
        # A live demand's plan grows while the user submits: take it once, show only its stages (a stage
        # that became known after it waits for the next step; later stages come last, so the indexes hold)
        # and let the knowledge estimate from that same plan.
        plan = inputs.plan
        self.knowledge.workflow = plan
        queued = self.queued_requests()
        submittable = self.rate.takes(now, queued)
        if self._view is not None and self._view[0].same(inputs):  # only the clock moved
            view = self._view[1].at(now, submittable)
        else:
            shown = self._shown
            if shown is not None and shown[0] is plan and shown[1] is inputs.stages:
                stages = shown[2]
            else:
                if self._plan_names is None or self._plan_names[0] is not plan:
                    self._plan_names = (plan, plan.names)
                stages = _of_plan(self._plan_names[1], inputs.stages)
                self._shown = (plan, inputs.stages, stages)
            estimate = None if getattr(self.backend, "estimates_see_ahead", False) else self._estimate
            view = RunView(
                now,
                plan,
                stages,
                inputs.allocations,
                self.knowledge,
                inputs.busy,
                self.priority,
                estimate,
                inputs.queue,
                inputs.indexes,
                submittable,
                queued >= self.rate.max_queued,
                inputs.claimed,
                self._job_widths if self.job_cores is not None or self.node_cores is not None else None,
            )
        self._view = (inputs, view)
        return view

    def _put(self, a: Allocation) -> Allocation:
        """Record allocation ``a`` (new, or a new record of one known) and return it."""
        self._allocs[a.alloc_id] = a
        self._index.put(a)
        return a

    def _releasing(self, started: float, said: float, done: str) -> float:
        """Say how far the release is every :data:`RELEASE_PROGRESS` seconds; return when it last said."""
        now = time.monotonic()
        if now - said < RELEASE_PROGRESS:
            return said
        logger.warning(
            "%s: still releasing allocations: %s (%.0f s)", self.strategy.name, done, now - started
        )
        return now

    def _open_job(self, alloc_id: str) -> str | None:
        """Return the batch job id of ``alloc_id`` if it has one and has not ended, else None."""
        a = self._allocs.get(alloc_id)
        return None if a is None or a.ended else self._job_ids.get(alloc_id)

    def shutdown(self, now: float, *, settle: float = 30.0) -> None:
        """Cancel every allocation still open and record its end.

        Parameters
        ----------
        now : float
            Backend time of the end.
        settle : float, default 30.0
            Real seconds to wait for the backend to report the cancelled jobs ended (Slurm takes a few
            seconds to kill a job's processes); after that they are recorded as cancelled anyway.
        """
        # Every allocation is released and recorded whatever happens on the way: the execution may raise
        # for a task that this very release lost once too often (a retries-exhausted error), and stopping
        # there left the other batch jobs queued or running after the run (the liveness benchmark found
        # 14). The first such error is raised once everything is released.
        errors = _Deferred()
        open_ = [a for a in self._allocs.values() if not a.ended]
        started = said = time.monotonic()
        for i, a in enumerate(open_):
            with errors:
                self._cancel(Cancel(a.alloc_id, "run over"), now, kill=True)
            said = self._releasing(started, said, f"{i + 1:,} of {len(open_):,} cancelled")
        deadline = time.monotonic() + settle
        for i, a in enumerate(list(self._allocs.values())):
            said = self._releasing(started, said, f"{i:,} of {len(self._allocs):,} recorded ended")
            while not a.ended and time.monotonic() < deadline:
                info = self.backend.state(self._job_ids[a.alloc_id])
                if info.state.is_final:
                    with errors:
                        self._ended(a, AllocationState.from_job_state(info.state), now)
                else:
                    time.sleep(0.2)
                a = self._allocs[a.alloc_id]
            if not a.ended:  # the backend has not ended it yet: it is no longer ours
                logger.warning(
                    "%s: allocation %s (job %s) is still ending",
                    self.strategy.name,
                    a.alloc_id,
                    a.backend_job_id,
                )
                with errors:
                    self._ended(a, AllocationState.CANCELLED, now)
        with errors:
            self._advance(now)
        errors.raise_first()

    def take_events(self, at: float) -> None:
        """Hand the execution's task events up to ``at`` to the sink and the demand (no strategy step)."""
        self._advance(at)

    def _advance(self, at: float) -> None:
        for event in self.execution.advance(at):
            self._record(event)
            self.demand.observe(event)

    def _retire(self, now: float) -> None:
        """Cancel the drained allocations whose last task has ended (see :meth:`_cancel`)."""
        for alloc_id, action in list(self._retiring.items()):
            a = self._allocs[alloc_id]
            if a.ended:
                del self._retiring[alloc_id]
            elif self.execution.busy_cores(alloc_id) == 0:
                self._cancel(action, now)

    def _poll(self, now: float) -> None:
        if self._reports_changes:
            version = self.backend.jobs_version()  # type: ignore[attr-defined]
            if version != self._polled:
                # only the jobs that changed since the last poll, where the backend names them: every
                # other open job was recorded as it is at that poll (a wide run has thousands pending)
                changed = (
                    self.backend.jobs_changed_since(self._polled)  # type: ignore[attr-defined]
                    if self._names_changes and isinstance(self._polled, int)
                    else None
                )
                self._polled = version
                self._poll_jobs(now, changed)
        else:
            self._poll_jobs(now)
        for a in self._index.snapshot().live:  # pending ones are live; a tuple: _put may run below
            if a.pending and a.eligible_time is None:
                since = eligible_since(a, self._allocs, now)
                if since is not None:
                    self._put(dataclasses.replace(a, eligible_time=since))

    def _poll_jobs(self, now: float, only: frozenset[str] | None = None) -> None:
        """Read the state of every open job (``only``: those ids); record starts and ends in time order."""
        changes: list[tuple[float, int, str, JobInfo]] = []
        for a in self._index.snapshot().live:
            if a.ended or (only is not None and self._job_ids[a.alloc_id] not in only):
                continue
            # one state() per open allocation (a few at a time) rather than queue(), which lists every
            # job of the partition (hundreds of background jobs on the mock backend)
            info = self.backend.state(self._job_ids[a.alloc_id])
            submitted = a.submit_time if a.submit_time is not None else now
            # never before what came first: Slurm's times are whole seconds, so a job that failed in the
            # second it started reads as ending before the start recorded at its submit time's fraction
            began = a.start_time if a.start_time is not None else submitted
            if a.pending and info.start_time is not None and info.state is not JobState.PENDING:
                began = max(info.start_time, submitted)
                changes.append((began, 0, a.alloc_id, info))
            if info.state.is_final:
                ended = info.end_time if info.end_time is not None else now
                changes.append((max(ended, began), 1, a.alloc_id, info))
        # Of the allocations that started at one instant, those kept for a stage whose tasks are queued are
        # offered first: its tasks go to the allocation asked for them, not to one asked for a later stage
        # that happened to start with it (and would then idle all its other cores, busy with one task)
        # (read only where two changes may tie: every stage of a 5,000-stage DAG at each poll that saw one)
        waiting: set[str] = set()
        if len(changes) > 1:
            waiting = {s.name for s in self.demand.stages() if s.ready and not s.complete}

        def order(change: tuple[float, int, str, JobInfo]) -> tuple[float, int, bool]:
            at, kind, alloc_id, _ = change
            return at, kind, not waiting.intersection(self._allocs[alloc_id].labels)

        for at, kind, alloc_id, info in sorted(changes, key=order):
            self._advance(at)
            a = self._allocs[alloc_id]
            if kind == 0:
                self._started(a, at, granted=info.walltime)
            else:
                state = AllocationState.from_job_state(info.state)
                self._ended(a, state, at)
                if a.start_time is not None:
                    self._count_failure(a, a.start_time, info, at, failed=state is AllocationState.FAILED)

    def _count_failure(
        self, a: Allocation, started: float, info: JobInfo, at: float, *, failed: bool
    ) -> None:
        """Say why a started job failed; stop the run at :data:`MAX_FAILED_AT_START` failed at start in a row.

        Raises
        ------
        LimitReachedError
            That many jobs in a row failed within :data:`STARTUP_FAILURE` of their start.
        """
        if not failed:
            self._failed_at_start = 0
            return
        note = failure_note(self.backend, info.job_id)
        said = f"exit code {'unknown' if info.exit_code is None else info.exit_code}" + (
            "" if note is None else f"; {note}"
        )
        logger.warning(
            "%s: allocation %s (job %s) failed %.0f s after it started, %s",
            self.strategy.name,
            a.alloc_id,
            info.job_id,
            at - started,
            said,
        )
        if at - started > STARTUP_FAILURE:
            self._failed_at_start = 0
            return
        self._failed_at_start += 1
        if self._failed_at_start >= MAX_FAILED_AT_START:
            raise LimitReachedError(
                "batch jobs failing at start",
                MAX_FAILED_AT_START,
                f"{self._failed_at_start} batch jobs in a row failed within {STARTUP_FAILURE:.0f} s of their "
                f"start (the last: job {info.job_id}, {said}); the job script fails on the nodes, so every "
                "job would: check the site's python (elastic doctor), worker_init and sbatch lines",
            )

    def _started(self, a: Allocation, at: float, *, offer: bool = True, granted: float | None = None) -> None:
        eligible = eligible_by(a, self._allocs, at)
        # the limit the batch system set, where it differs from the request (Slurm: whole minutes, so 68 s
        # asked run up to 120 s): follow-ups, releases and the pool's drain go by what the job really has
        walltime = granted if granted is not None and granted > a.walltime else a.walltime
        a = self._put(
            dataclasses.replace(
                a.transition(AllocationState.RUNNING, at), eligible_time=eligible, walltime=walltime
            )
        )
        follow_up = any(
            b.alloc_id != a.alloc_id and b.start_time is not None and b.start_time <= eligible
            for b in self._allocs.values()
        )
        self._record(
            Event(
                at,
                EventKind.ALLOC_START,
                stage=a.stage,
                allocation=a.alloc_id,
                cores=a.cores,
                eligible=eligible,
            )
        )
        self.knowledge.observe_wait(a.cores, at - eligible, submit_time=a.submit_time, follow_up=follow_up)
        if offer:
            self.execution.add_allocation(a.alloc_id, a.cores, at + a.walltime, at)
        logger.info(
            "%s: allocation %s (%s, %d cores) started after %.0f s in the queue",
            self.strategy.name,
            a.alloc_id,
            a.stage,
            a.cores,
            at - eligible,
        )

    def _ended(self, a: Allocation, state: AllocationState, at: float) -> None:
        self.rate.ended(at, failed=state is AllocationState.FAILED, ran=a.start_time is not None)
        self._put(a.transition(state, at))
        self._record(Event(at, EventKind.ALLOC_END, stage=a.stage, allocation=a.alloc_id, note=state.value))
        # with the start the backend reported: the execution was not told it when :meth:`_cancel` learned
        # the start and the end at once (it takes it only for an allocation it holds as not started)
        self.execution.allocation_ended(a.alloc_id, at, state, start=a.start_time)

    def _submit(self, action: Submit, now: float, queued: int) -> bool:
        """Submit ``action``'s batch jobs unless the cap or the backlog (``queued``) holds it; say if so."""
        if self.max_cores is not None and action.cores > self.max_cores:
            # its tasks run on the cores allowed in waves; the walltime is the strategy's (asked longer
            # here, the request no longer matched what the strategy asked, and asa-paper asked again and
            # again: a random scenario went from 6 s to over a minute), and follow-ups continue the waves
            logger.info(
                "%s: %s asks for %d cores; requesting the most allowed, %d (its tasks run in waves)",
                self.strategy.name,
                action.stage,
                action.cores,
                self.max_cores,
            )
            action = dataclasses.replace(
                action, cores=self.max_cores, pieces=min(action.pieces, self.max_cores)
            )
        if action.walltime > MAX_WALLTIME:  # e.g. a quantile of a stage of runtime_cv 100: asked at the most
            logger.info(
                "%s: %s asks for %.3g s of walltime; requesting the most allowed, %.3g s",
                self.strategy.name,
                action.stage,
                action.walltime,
                MAX_WALLTIME,
            )
            action = dataclasses.replace(action, walltime=MAX_WALLTIME)
        if self._task_cores_in is not self._task_cores_of:  # read when a request needs it, not every step
            self._task_cores = {st.name: st.cores for st in self._task_cores_in}
            self._task_cores_of = self._task_cores_in
        task = widest_task(self._task_cores, action)  # a task wider than a node is refused (ConfigError)
        widths = split_request(action.cores, action.pieces, self.job_cores, task, self.node_cores)
        # the submission-rate cap and the backlog: asked again at a later step
        if not self.rate.allow(now, len(widths), queued):
            return False
        if len(widths) == 1:
            self._submit_job(action, now)
            return True
        first = f"a{len(self._allocs) + 1}"
        for cores in widths:
            self._submit_job(dataclasses.replace(action, cores=cores, pieces=1), now, piece_of=first)
        return True

    def _job_widths(self, cores: int, task: int) -> tuple[int, ...]:
        """Return the batch jobs a one-piece request of ``cores`` is submitted as (``RunView.job_widths``)."""
        return tuple(split_request(cores, 1, self.job_cores, task, self.node_cores))

    def queued_requests(self) -> int:
        """Return how many of this run's requests wait for cores in the batch queue (the backlog's count).

        A request counts once (its pieces together) while one of its jobs is pending and not held by a
        dependency on another job of the run (eligible, or with no dependency).
        """
        return len(
            {
                a.request
                for a in self._index.snapshot().live
                if a.pending and (a.eligible_time is not None or not a.dependencies)
            }
        )

    def _submit_job(self, action: Submit, now: float, *, piece_of: str | None = None) -> None:
        alloc_id = f"a{len(self._allocs) + 1}"
        deps: list[Dependency] = []
        dep_ids: list[tuple[str, DependencyKind]] = []
        for stage in action.after:
            for other in self._allocs.values():
                if other.stage == stage and not other.ended:
                    deps.append(Dependency(action.dependency, self._job_ids[other.alloc_id]))
                    dep_ids.append((other.alloc_id, action.dependency))
        # registered before the job exists: its agent may start, and join, before sbatch returns
        self.execution.register(alloc_id, action.cores, action.walltime, action.stage)
        spec = JobSpec(
            cores=action.cores,
            walltime=action.walltime,
            name=f"{self.name}-{'all' if action.stage == TOTAL else action.stage}-{alloc_id}",
            nodes=job_nodes(action.cores, self.node_cores),  # whole nodes, placed as such (None: in cores)
            dependencies=tuple(deps),
            begin=action.begin,
            user=self.user,
            script=self.execution.job_script(alloc_id, action.cores, action.walltime, action.stage),
        )
        # Stamped when the request leaves, not at the step's clock read: a live front door may have seen
        # the stage become ready after that read (its tasks arrive from other threads), and the stage before
        # it end after it; on a virtual clock both are the same.
        now = max(now, self.backend.now())
        job_id = self.backend.submit(spec)
        self._job_ids[alloc_id] = job_id
        self.execution.submitted(alloc_id, job_id)
        self._put(
            Allocation(
                alloc_id,
                cores=action.cores,
                walltime=action.walltime,
                stage=action.stage,
                backend_job_id=job_id,
                submit_time=now,
                reason=action.reason,
                predicted_wait=action.predicted_wait,
                dependencies=tuple(dep_ids),
                begin=action.begin,
                serves=action.serves,
                piece_of=piece_of,
                waves=action.waves,
            )
        )
        self._record(
            Event(
                now,
                EventKind.ALLOC_SUBMIT,
                stage=action.stage,
                allocation=alloc_id,
                cores=action.cores,
                walltime=action.walltime,
                predicted_wait=action.predicted_wait,
                note=action.reason,
                job_id=job_id,
                request=piece_of or alloc_id,
            )
        )
        logger.info(
            "%s: submitted %s (job %s) for %s: %d cores, walltime %.0f s, deps %s (%s)",
            self.strategy.name,
            alloc_id,
            job_id,
            action.stage,
            action.cores,
            action.walltime,
            [str(d) for d in deps],
            action.reason,
        )

    def _serve(self, action: Serve) -> None:
        a = self._allocs.get(action.alloc_id)
        if a is None or a.ended:
            return
        logger.info(
            "%s: %s kept for %s (was %s): %s",
            self.strategy.name,
            a.alloc_id,
            ", ".join(action.stages),
            ", ".join(a.labels),
            action.reason,
        )
        self._put(dataclasses.replace(a, serves=action.stages))

    def _unchain_ready(self, now: float) -> None:
        """Drop every dependency of a pending request once a stage it is kept for is ready.

        The dependency (``afterany`` on the allocation before it) keeps the request from starting, and
        being charged, before its stage can use it, while under ``priority/basic`` the job keeps the
        queue place its submission gave it. Once the stage is ready it holds nothing back that the stage
        needs: the job may start as soon as the queue lets it (at that place), while the allocation before
        it runs the stage's first tasks if it is still there, as any allocation may. Otherwise a task of
        the stage placed on that allocation (the pool places tasks as soon as they come, before run
        control's next step) held it, and so the request, until the task ended: on the local Slurm
        cluster ``mDiffFit``'s six jobs waited while ``mProject``'s four ran its tasks in two waves. The
        same holds when the plan keeps that allocation for the request's stage.
        """
        indexes, stages = self._index.snapshot(), self.demand.stages()
        last = self._unchained_of
        if last is not None and last[0] is indexes and last[1] is stages:  # neither changed since
            return
        self._unchained_of = (indexes, stages)
        chained = [b for b in indexes.live if b.dependencies and b.pending and not b.cancelled]
        if not chained:
            return
        ready = {s.name for s in stages if s.ready}
        for b in chained:
            # one its dependencies released already waits in the queue as it is, from when they did
            if ready.intersection(b.labels) and eligible_since(b, self._allocs, now) is None:
                self._unchain(b, now)

    def _unchain(self, b: Allocation, now: float) -> None:
        """Drop every dependency of pending allocation ``b``, where the backend can.

        Where the backend cannot change a pending job's dependencies
        (:class:`~elastic.backends.base.ChangesDependencies`) the request keeps them. Its queue wait counts
        from now, when it became eligible.
        """
        if not isinstance(self.backend, ChangesDependencies):
            return
        self.backend.set_dependencies(self._job_ids[b.alloc_id], ())
        logger.info(
            "%s: %s no longer follows %s: its stage is ready",
            self.strategy.name,
            b.alloc_id,
            ", ".join(d for d, _ in b.dependencies),
        )
        self._put(dataclasses.replace(b, dependencies=(), eligible_time=now))

    def _shorten(self, action: Shorten) -> None:
        """Lower a pending allocation's walltime where the backend can; the record takes what it got."""
        a = self._allocs.get(action.alloc_id)
        if a is None or not a.pending or a.cancelled or not action.walltime < a.walltime:
            return
        if not isinstance(self.backend, ShortensWalltime):
            logger.debug(
                "%s: %s cannot lower walltimes; %s keeps its own",
                self.strategy.name,
                self.backend.name,
                a.alloc_id,
            )
            return
        job_id = self._job_ids[a.alloc_id]
        self.backend.shorten(job_id, action.walltime)
        walltime = self.backend.state(job_id).walltime
        if walltime < a.walltime:
            logger.info(
                "%s: %s walltime lowered from %.0f s to %.0f s: %s",
                self.strategy.name,
                a.alloc_id,
                a.walltime,
                walltime,
                action.reason,
            )
            self._put(dataclasses.replace(a, walltime=walltime))

    def _pending_cancels_first(self, actions: Sequence[Action]) -> list[Action]:
        """Return ``actions`` with its cancels of jobs still pending before its other cancels.

        The cancels take the same places in the list, pending jobs' first, each group in its own order;
        other actions stay where they are. A running job cancelled frees cores the scheduler gives at once
        to the first pending job that fits, and that may be a job of this run the same decision cancels
        next: it starts, and is cancelled having run nothing, and its start reads as a wait of seconds.
        ``asa`` in jobs of one task releasing a request whole (CyberShake 56 on the synthetic queue: 26 of
        ``SeismogramSynthesis``'s 56 jobs started early) had the running jobs' cores start 30 of the
        pending ones before their cancels came.
        """
        allocs = self._allocs

        def not_pending(c: Cancel) -> bool:  # True sorts after False; the sort is stable
            a = allocs.get(c.alloc_id)
            return a is None or not a.pending

        slots = [i for i, action in enumerate(actions) if isinstance(action, Cancel)]
        cancels = sorted((action for action in actions if isinstance(action, Cancel)), key=not_pending)
        out = list(actions)
        for i, c in zip(slots, cancels, strict=True):
            out[i] = c
        return out

    def _cancel(self, action: Cancel, now: float, *, kill: bool = False) -> None:
        """Cancel an allocation; one that still runs a task is drained first and cancelled once idle.

        A strategy cancels a running allocation only when it saw no task on it, but a live pool places
        tasks from its own thread: one may have landed between the strategy's view and this call (even on
        an allocation the view showed pending: its job started since the last poll, and its agent joined),
        and cancelling then would kill it (a lost attempt, a failed task where retries are off). So the
        allocation gets no new task from here on, and the batch job is cancelled when its last task ends
        (:meth:`_retire`). ``kill`` (the run is over) cancels at once.
        """
        a = self._allocs.get(action.alloc_id)
        if a is None or a.ended:
            return
        if not a.cancelled:
            logger.info("%s: cancel %s: %s", self.strategy.name, a.alloc_id, action.reason)
        a = self._put(dataclasses.replace(a, cancelled=True))
        self.execution.release(a.alloc_id)
        # not only ``a.running``: an agent joins, and the pool places tasks on it, as soon as the batch job
        # starts, while this controller learns of the start at its next poll
        if not kill and self.execution.busy_cores(a.alloc_id) > 0:
            logger.info("%s: %s still runs a task; cancelled when it ends", self.strategy.name, a.alloc_id)
            self._retiring[a.alloc_id] = action
            return
        self._retiring.pop(a.alloc_id, None)
        job_id = self._job_ids[a.alloc_id]
        self.backend.cancel(job_id)
        info = self.backend.state(job_id)
        if info.state.is_final:
            # it started since the last poll: too late to offer it, but its start is recorded as the
            # backend reports it (here, and in the execution through :meth:`_ended`), not made up
            if a.pending and info.start_time is not None:
                self._started(a, max(info.start_time, a.submit_time or now), offer=False)
                a = self._allocs[a.alloc_id]
            self._ended(a, AllocationState.from_job_state(info.state), now)
