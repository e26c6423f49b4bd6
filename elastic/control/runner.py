"""The run driver: one loop that runs a workflow under a strategy on any backend and executor.

Every iteration the driver

1. polls the backend for the state of its open allocations and
   tells the executor about allocations that started or ended, in time order; every real queue wait is fed
   to the learner (:meth:`Knowledge.observe_wait`);
2. collects task events from the executor, completes stages and hands the tasks of newly ready stages to
   the executor;
3. asks the strategy (:meth:`Strategy.decide`) and carries out its actions (submit, cancel);
4. lets the executor place queued tasks, then sleeps with ``backend.sleep`` until the earliest of: the
   strategy's wake-up, the executor's next known event, the next poll.

The same code runs on the mock backend's virtual clock (sleep advances simulated time), its scaled clock
and Slurm (real sleeps). Everything that happens is recorded as :class:`~elastic.metrics.Event` records; the
run's metrics are computed from them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from elastic.backends.base import BatchBackend
from elastic.batch import Dependency, DependencyKind, JobInfo, JobSpec, JobState
from elastic.control.execution import Execution, RunResult, TaskSpec
from elastic.errors import ConfigError
from elastic.metrics import Event, EventKind, compute_metrics
from elastic.strategies.base import (
    AllocationPhase,
    AllocationView,
    Cancel,
    RunView,
    StageView,
    Strategy,
    Submit,
)
from elastic.strategies.knowledge import TOTAL, Knowledge
from elastic.workflow import Workflow

__all__ = ["Runner"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Alloc:
    alloc_id: str
    job_id: str
    stage: str
    cores: int
    walltime: float
    submit_time: float
    reason: str
    predicted_wait: float | None
    start_time: float | None = None
    end_time: float | None = None
    final_state: JobState | None = None
    cancelled_by_us: bool = False
    deps: tuple[tuple[str, DependencyKind], ...] = ()
    begin: float | None = None

    @property
    def phase(self) -> AllocationPhase:
        if self.end_time is not None:
            return AllocationPhase.ENDED
        return AllocationPhase.PENDING if self.start_time is None else AllocationPhase.RUNNING


@dataclass(slots=True)
class _Stage:
    name: str
    index: int
    tasks: int
    cores: int
    depends_on: tuple[str, ...]
    done: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    ready_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    first_start: float | None = None


class Runner:
    """Run one workflow under one strategy.

    Parameters
    ----------
    workflow : Workflow
        What to run.
    strategy : Strategy
        When and how big to request allocations.
    backend : BatchBackend
        Where allocations come from (its clock is the run's clock).
    executor : Execution
        Where tasks run.
    knowledge : Knowledge
        Wait learner and runtime history shared with the strategy.
    seed : int, default 0
        Seeds the sampling of task durations.
    poll_interval : float, default 30.0
        Backend seconds between polls of allocation states.
    max_duration : float or None, default None
        Give up (status ``"timeout"``) after this many backend seconds.
    name : str, default "elastic"
        Prefix of batch job names.
    user : str or None, default None
        Owner of the jobs (mock backend accounting).
    on_iteration : callable or None, default None
        Called with the :class:`RunView` after every iteration (the CLI's live view).
    """

    def __init__(
        self,
        workflow: Workflow,
        strategy: Strategy,
        backend: BatchBackend,
        executor: Execution,
        knowledge: Knowledge,
        *,
        seed: int = 0,
        poll_interval: float = 30.0,
        max_duration: float | None = None,
        name: str = "elastic",
        user: str | None = None,
        on_iteration: Callable[[RunView], None] | None = None,
    ) -> None:
        if not poll_interval > 0:
            raise ConfigError(f"Runner: poll_interval must be > 0 seconds, got {poll_interval!r}")
        self.workflow = workflow
        self.strategy = strategy
        self.backend = backend
        self.executor = executor
        self.knowledge = knowledge
        self.poll_interval = poll_interval
        self.max_duration = max_duration
        self.name = name
        self.user = user
        self.on_iteration = on_iteration
        self._rng = np.random.default_rng(seed)
        self._events: list[Event] = []
        self._allocs: dict[str, _Alloc] = {}
        self._stages = [
            _Stage(s.name, i, s.tasks, s.cores, s.depends_on or ()) for i, s in enumerate(workflow.stages)
        ]
        self._by_name = {s.name: s for s in self._stages}
        self._order = 0
        self._newly_ready: list[_Stage] = []

    # -- recording --------------------------------------------------------------------------------

    def _record(self, event: Event) -> None:
        self._events.append(event)

    @property
    def events(self) -> tuple[Event, ...]:
        """The timeline recorded so far."""
        return tuple(self._events)

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> RunResult:
        """Run the workflow to completion (or ``max_duration``); return the result."""
        start = self.backend.now()
        self._record(Event(start, EventKind.RUN_START, note=self.strategy.name))
        status = "completed"
        try:
            while True:
                now = self.backend.now()
                self._poll(now)
                self._take(self.executor.advance(now))
                self._stage_transitions(now)
                if all(s.end_time is not None for s in self._stages):
                    break
                if self.max_duration is not None and now - start >= self.max_duration:
                    status = "timeout"
                    logger.warning("%s: gave up after %.0f s (max_duration)", self.strategy.name, now - start)
                    break
                decision = self.strategy.decide(self._view(now))
                for action in decision.actions:
                    if isinstance(action, Submit):
                        self._submit(action, now)
                    else:
                        self._cancel(action, now)
                # Tasks of stages that just became ready go to the executor only now, after the strategy
                # released finished allocations, so the pool cannot place them on one being cancelled.
                for stage in self._newly_ready:
                    self._queue_tasks(stage)
                self._newly_ready.clear()
                self._take(self.executor.advance(now))
                if self.on_iteration is not None:
                    self.on_iteration(self._view(now))
                wake = now + self.poll_interval
                for t in (decision.wake_at, self.executor.next_event_time()):
                    if t is not None:
                        wake = min(wake, t)
                self.backend.sleep(max(wake - now, 1e-3))
        finally:
            end = self.backend.now()
            self._shutdown(end)
        self._record(Event(end, EventKind.RUN_END, note=status))
        self._learn_runtimes(status, end)
        metrics = compute_metrics(self._events, stages=self.workflow.names)
        return RunResult(self.workflow.name, self.strategy.name, status, tuple(self._events), metrics)

    # -- allocations --------------------------------------------------------------------------------

    def _poll(self, now: float) -> None:
        open_ = [a for a in self._allocs.values() if a.end_time is None]
        if not open_:
            return
        changes: list[tuple[float, int, _Alloc, JobInfo]] = []
        for a in open_:
            # one state() per open allocation (a few at a time) rather than queue(), which lists every
            # job of the partition (hundreds of background jobs on the mock backend)
            info = self.backend.state(a.job_id)
            if a.start_time is None and info.start_time is not None and info.state is not JobState.PENDING:
                changes.append((max(info.start_time, a.submit_time), 0, a, info))
            if info.state.is_final:
                changes.append((info.end_time if info.end_time is not None else now, 1, a, info))
        for at, kind, a, info in sorted(changes, key=lambda c: (c[0], c[1])):
            self._take(self.executor.advance(at))
            if kind == 0:
                self._started(a, at)
            else:
                self._ended(a, info.state, at)

    def _eligible(self, a: _Alloc, at: float) -> float:
        """When ``a`` could start as far as its dependencies and begin time go (never after ``at``)."""
        eligible = max(a.submit_time, a.begin or a.submit_time)
        for dep_id, kind in a.deps:
            dep = self._allocs[dep_id]
            released = dep.start_time if kind is DependencyKind.AFTER else dep.end_time
            eligible = max(eligible, released if released is not None else at)
        return min(eligible, at)

    def _started(self, a: _Alloc, at: float) -> None:
        a.start_time = at
        eligible = self._eligible(a, at)
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
        self.knowledge.observe_wait(a.cores, at - eligible, submit_time=a.submit_time)
        self.executor.add_allocation(a.alloc_id, a.cores, at + a.walltime, at)
        logger.info(
            "%s: allocation %s (%s, %d cores) started after %.0f s",
            self.strategy.name,
            a.alloc_id,
            a.stage,
            a.cores,
            at - a.submit_time,
        )

    def _ended(self, a: _Alloc, state: JobState, at: float) -> None:
        a.end_time = at
        a.final_state = state
        self._record(Event(at, EventKind.ALLOC_END, stage=a.stage, allocation=a.alloc_id, note=state.value))
        self.executor.allocation_ended(a.alloc_id, at, state)

    def _submit(self, action: Submit, now: float) -> None:
        alloc_id = f"a{len(self._allocs) + 1}"
        deps: list[Dependency] = []
        dep_ids: list[tuple[str, DependencyKind]] = []
        for stage in action.after:
            for other in self._allocs.values():
                if other.stage == stage and other.end_time is None:
                    deps.append(Dependency(action.dependency, other.job_id))
                    dep_ids.append((other.alloc_id, action.dependency))
        spec = JobSpec(
            cores=action.cores,
            walltime=action.walltime,
            name=f"{self.name}-{action.stage if action.stage != TOTAL else 'all'}-{alloc_id}",
            dependencies=tuple(deps),
            begin=action.begin,
            user=self.user,
            script=self.executor.job_script(alloc_id, action.cores, action.walltime, action.stage),
        )
        job_id = self.backend.submit(spec)
        self._allocs[alloc_id] = _Alloc(
            alloc_id,
            job_id,
            action.stage,
            action.cores,
            action.walltime,
            now,
            action.reason,
            action.predicted_wait,
            deps=tuple(dep_ids),
            begin=action.begin,
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
            )
        )
        logger.info(
            "%s: submitted %s for %s: %d cores, walltime %.0f s, deps %s (%s)",
            self.strategy.name,
            alloc_id,
            action.stage,
            action.cores,
            action.walltime,
            [str(d) for d in deps],
            action.reason,
        )

    def _cancel(self, action: Cancel, now: float) -> None:
        a = self._allocs.get(action.alloc_id)
        if a is None or a.end_time is not None:
            return
        logger.info("%s: cancel %s: %s", self.strategy.name, a.alloc_id, action.reason)
        a.cancelled_by_us = True
        self.executor.release(a.alloc_id)
        self.backend.cancel(a.job_id)
        info = self.backend.state(a.job_id)
        if info.state.is_final:
            self._ended(a, info.state, now)

    def _shutdown(self, now: float) -> None:
        for a in self._allocs.values():
            if a.end_time is None:
                self._cancel(Cancel(a.alloc_id, "run over"), now)
                if a.end_time is None:  # the backend has not ended it yet: it is no longer ours
                    self._ended(a, JobState.CANCELLED, now)
        self._take(self.executor.advance(now))

    # -- tasks and stages ---------------------------------------------------------------------------

    def _take(self, events: Sequence[Event]) -> None:
        for e in events:
            self._record(e)
            s = self._by_name.get(e.stage or "")
            if s is None or e.task is None:
                continue
            if e.kind is EventKind.TASK_START:
                s.running.add(e.task)
                if s.first_start is None:
                    s.first_start = e.time
            elif e.kind is EventKind.TASK_END:
                s.running.discard(e.task)
                s.done.add(e.task)
            elif e.kind is EventKind.TASK_LOST:
                s.running.discard(e.task)

    def _stage_transitions(self, now: float) -> None:
        changed = True
        while changed:
            changed = False
            for s in self._stages:
                if s.end_time is None and s.ready_time is not None and len(s.done) == s.tasks:
                    s.end_time = max(
                        (e.time for e in self._events if e.kind is EventKind.TASK_END and e.stage == s.name),
                        default=now,
                    )
                    self._record(Event(s.end_time, EventKind.STAGE_END, stage=s.name))
                    changed = True
                if s.ready_time is None and all(self._by_name[d].end_time is not None for d in s.depends_on):
                    ready = max((self._by_name[d].end_time or now for d in s.depends_on), default=now)
                    s.ready_time = min(ready, now) if s.depends_on else now
                    self._record(Event(s.ready_time, EventKind.STAGE_READY, stage=s.name))
                    self._newly_ready.append(s)
                    changed = True

    def _queue_tasks(self, s: _Stage) -> None:
        stage = self.workflow.stages[s.index]
        durations = stage.sample_runtimes(self._rng)
        # the runtime estimate for placement is what the strategy believes (history, else the workflow's
        # estimate), the same belief its walltime requests come from
        estimate = self.knowledge.expected_duration(s.name)
        for i, d in enumerate(durations):
            self._order += 1
            self.executor.submit(
                TaskSpec(f"{s.name}.{i}", s.name, self._order, stage.cores, estimate, float(d), stage.command)
            )

    def _learn_runtimes(self, status: str, end: float) -> None:
        """Add this run's stage runtimes (first task start to last task end) to the history.

        A stage cut short by the end of the run (``max_duration``) is recorded as censored: it ran at least
        that long. A runtime includes work re-run after a walltime kill, which errs on the long side. The
        total (label ``"*"``, what a Big-Job allocation must hold) is the sum of the stage runtimes, so
        waits between stages under other strategies do not inflate it.
        """
        total = 0.0
        censored = status != "completed"
        for s in self._stages:
            if s.first_start is None:
                continue
            cores = s.tasks * s.cores
            if s.end_time is not None:
                runtime = s.end_time - s.first_start
                self.knowledge.record_runtime(s.name, runtime, cores=cores)
            else:
                runtime = end - s.first_start
                self.knowledge.record_runtime(s.name, runtime, censored=True, cores=cores)
            total += runtime
        if total > 0:
            self.knowledge.record_runtime(TOTAL, total, censored=censored, cores=self.workflow.max_width)

    # -- the strategy's view --------------------------------------------------------------------------

    def _view(self, now: float) -> RunView:
        stages = tuple(
            StageView(
                s.name,
                s.index,
                s.tasks,
                s.cores,
                s.depends_on,
                done=len(s.done),
                running=len(s.running),
                ready_time=s.ready_time,
                start_time=s.first_start,
                end_time=s.end_time,
            )
            for s in self._stages
        )
        allocs = tuple(
            AllocationView(
                a.alloc_id,
                a.stage,
                a.cores,
                a.walltime,
                a.phase,
                a.submit_time,
                a.start_time,
                a.end_time,
                busy_cores=self.executor.busy_cores(a.alloc_id) if a.phase is AllocationPhase.RUNNING else 0,
                reason=a.reason,
                predicted_wait=a.predicted_wait,
                final_state=a.final_state,
                cancelled_by_us=a.cancelled_by_us,
            )
            for a in self._allocs.values()
        )
        return RunView(now, self.workflow, stages, allocs, self.knowledge)
