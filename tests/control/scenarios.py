"""Random scenarios for the control loop: DAG workflows, task widths, faults, every strategy, every shape.

Used by ``tests/control/test_liveness_random.py`` (a few hundred with hypothesis, shrinking any failure to a
small scenario) and ``benchmarks/bench_liveness.py`` (thousands with a seeded generator). Each scenario runs
through the real :class:`~elastic.control.runner.Runner` and
:class:`~elastic.control.controller.AllocationController` on the mock backend's virtual clock, with a real
strategy, and is checked against the invariants of ``docs/never-stall.md``:

- the run completes, every task ending exactly once, or fails with the documented error of a task lost
  more often than its retries allow (heavy-tailed runtimes and outside kills); it never stalls (bounded by
  ``MAX_DURATION``);
- after every decision, every ready stage whose tasks wait for cores has a live allocation kept for it
  (or for the whole workflow) at least as wide as its widest task (no stranded task);
- after the run, none of its batch jobs is queued or running (no leftovers).

A scenario is a plain frozen dataclass so hypothesis can shrink it and a failure can be pasted into a test.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from elastic.allocations import Allocation
from elastic.backends.mock import MockBackend
from elastic.control.controller import AllocationController
from elastic.control.execution import RunResult
from elastic.control.rate import SubmissionLimit
from elastic.control.runner import Runner
from elastic.control.scheduler import eligible_since
from elastic.control.sim_execution import SimExecution
from elastic.learners.choice import make_wait_learner
from elastic.metrics import EventKind
from elastic.pool.tasks import Task
from elastic.simulator.synthetic import synthetic_workload
from elastic.store import Store
from elastic.strategies import Knowledge, MemoryHistory, RunView, make_strategy, strategy_learner
from elastic.strategies.knowledge import TOTAL
from elastic.workflow import Stage, Workflow
from tests.control.live_front import VirtualFrontDoor

__all__ = ["FRONTS", "MAX_DURATION", "Outcome", "Scenario", "StageSpec", "random_scenario", "run_scenario"]

IDLE_GRACE = 60.0
"""Virtual seconds an allocation may stay (pending, or running no task) once every stage it is kept for is
complete: the release rule cancels it at the next decision; two polls of slack."""

FRONTS = ("runner", "runner", "futures", "announce", "loop")
"""How :func:`random_scenario` draws :attr:`Scenario.front` (half declared to the driver, half user code)."""

MAX_DURATION = 60 * 86400.0
"""Virtual seconds after which a run that has not completed counts as stalled."""


@dataclass(frozen=True)
class StageSpec:
    """One stage: ``tasks`` tasks of ``cores`` cores, ``runtime`` s mean (cv ``cv``), after ``after``."""

    tasks: int
    cores: int
    runtime: float
    cv: float = 0.0
    after: tuple[int, ...] = ()
    hint: float = 1.0
    """The stage's declared runtime is ``hint`` x its true mean (tasks longer than their hints: < 1)."""


@dataclass(frozen=True)
class Scenario:
    """A workflow, a partition, a strategy, a batch-job shape, faults and a seed."""

    stages: tuple[StageSpec, ...]
    nodes: int = 16
    strategy: str = "asa"
    job_cores: int | None = None
    kills: tuple[float, ...] = ()
    """Backend times (s) at which the oldest running allocation of the run is killed from outside."""
    seed: int = 0
    history: int = 0
    """Runs of the same workflow before this one (they teach runtimes and waits)."""
    remembered: str = "same"
    """What those earlier runs ran under the same workflow name: ``same`` (this workflow), ``other`` (every
    stage named otherwise, as after renaming a script's apps) or ``first`` (its first stage alone, as a
    first attempt that stopped early): a remembered plan that disagrees with the tasks (issue 26)."""

    front: str = "runner"
    """How the workflow reaches control: ``runner`` (declared, the driver makes its tasks: ``elastic run``),
    or user code on the front door (:class:`~tests.control.live_front.VirtualFrontDoor`, undeclared unless
    :attr:`declares`): ``futures`` (every task submitted at once, each after the futures of its inputs'
    tasks: ``Elastic.submit`` with futures as arguments), ``announce`` (held tasks announced with their
    counts, cores and runtimes and submitted once their inputs are done: the Parsl executor and the
    Prefect runner) or ``loop`` (a stage submitted once its inputs are done, nothing announced, no runtime
    given: a plain script)."""
    declares: bool = False
    """On the front door: the workflow is declared (``Elastic(workflow=...)``, runtimes as hinted)."""
    max_queued: int | None = None
    """The backlog: requests waiting in the batch queue at once (None: the default,
    :data:`~elastic.control.rate.DEFAULT_MAX_QUEUED`)."""
    load: float = 0.0
    """Offered load of a synthetic background queue on the partition (0: none): other users' jobs that a
    request waits behind, so that holding cores across a stage can pay."""
    priority: str = "age"
    """How the mock ranks a job held by a dependency once eligible (``age``: from then; ``basic``: at its
    submit place, where ``asa`` chains a request on the allocation before it with ``afterany``)."""

    def workflow(self, name: str = "random") -> Workflow:
        """Return the scenario's workflow (stage ``i`` is ``s{i}``; ``after`` indexes earlier stages)."""
        stages = tuple(
            Stage(
                f"s{i}",
                spec.tasks,
                min(spec.cores, self.nodes),
                runtime=spec.runtime * spec.hint,
                runtime_cv=spec.cv,
                depends_on=tuple(f"s{j}" for j in spec.after if j < i),
            )
            for i, spec in enumerate(self.stages)
        )
        return Workflow(name, stages)

    def backend(self) -> MockBackend:
        """Return the scenario's mock backend: its partition, priority model and background queue."""
        workload = None
        if self.load > 0:
            workload = synthetic_workload(
                jobs=400,
                processors=self.nodes,
                utilisation=self.load,
                max_cores=self.nodes,
                runtime_median=600.0,
                runtime_sigma=1.0,
                seed=self.seed,
            )
        return MockBackend(nodes=self.nodes, priority=self.priority, workload=workload)

    def past_workflow(self, name: str = "random") -> Workflow:
        """Return what the earlier runs (:attr:`history`) ran under the same name (:attr:`remembered`)."""
        workflow = self.workflow(name)
        if self.remembered == "same":
            return workflow
        if self.remembered == "first":
            return Workflow(name, workflow.stages[:1])
        if self.remembered == "other":
            renamed = {s.name: f"old_{s.name}" for s in workflow.stages}
            return Workflow(
                name,
                tuple(
                    replace(
                        s,
                        name=renamed[s.name],
                        depends_on=None if s.depends_on is None else tuple(renamed[d] for d in s.depends_on),
                    )
                    for s in workflow.stages
                ),
            )
        raise ValueError(f"remembered must be 'same', 'other' or 'first', got {self.remembered!r}")


@dataclass
class Outcome:
    """What a scenario's run did, and the invariants it broke (empty: none)."""

    status: str
    makespan: float
    allocations: int
    violations: list[str] = field(default_factory=list)
    detail: str = ""


def random_scenario(rng: np.random.Generator, *, max_stages: int = 50) -> Scenario:
    """Draw a scenario: a DAG of 1..``max_stages`` stages, widths up to the partition, faults, a strategy."""
    nodes = int(rng.choice([4, 16, 64]))
    n = int(rng.integers(1, max_stages + 1))
    stages = []
    for i in range(n):
        after = tuple(sorted({int(j) for j in rng.integers(0, i, size=int(rng.integers(0, 3)))})) if i else ()
        if i and not after and rng.random() < 0.7:
            after = (i - 1,)  # mostly chains, with parallel branches and joins
        cores = int(rng.choice([1, 1, 1, 2, 4, nodes]))
        stages.append(
            StageSpec(
                tasks=int(rng.integers(1, max(2, nodes // cores) + 3)),
                cores=min(cores, nodes),
                runtime=float(rng.choice([5.0, 60.0, 600.0, 3600.0])) * float(rng.uniform(0.5, 2.0)),
                cv=float(rng.choice([0.0, 0.3, 1.0])),
                after=after,
                hint=float(rng.choice([1.0, 1.0, 0.3, 3.0])),
            )
        )
    from elastic.strategies import STRATEGY_NAMES

    job_cores = None if rng.random() < 0.5 else int(rng.integers(1, nodes + 1))
    kills = tuple(sorted(float(t) for t in rng.uniform(0, 20_000, size=int(rng.integers(0, 3)))))
    scenario = Scenario(
        tuple(stages),
        nodes=nodes,
        strategy=str(rng.choice(STRATEGY_NAMES)),
        job_cores=job_cores,
        kills=kills,
        seed=int(rng.integers(0, 2**31)),
        history=int(rng.integers(0, 2)),
    )
    if scenario.history:  # drawn last: every draw before it, so every scenario without history, is as it was
        scenario = replace(scenario, remembered=str(rng.choice(["same", "other", "first"])))
    front = str(rng.choice(FRONTS))  # drawn after all the above, which are as they were before it existed
    if front != "runner":
        scenario = replace(scenario, front=front, declares=bool(rng.random() < 0.3))
    if rng.random() < 0.3:  # drawn last, as above
        scenario = replace(scenario, priority="basic")
    if rng.random() < 0.3:
        scenario = replace(scenario, load=float(rng.choice([0.5, 0.9])))
    return scenario


def _able(a: Allocation, stage: str, cores: int) -> bool:
    labels = a.labels
    return (stage in labels or TOTAL in labels) and a.cores >= cores


def run_scenario(scenario: Scenario, *, check_settled: bool = False) -> Outcome:
    """Run ``scenario`` (history runs first) and check the invariants on its last run.

    ``check_settled``: ask the strategy at every step even where its last decision holds, and fail where
    it decides otherwise (:attr:`~elastic.control.controller.AllocationController.check_settled`).
    """
    if scenario.front not in ("runner", "futures", "announce", "loop"):
        raise ValueError(f"front must be 'runner', 'futures', 'announce' or 'loop', got {scenario.front!r}")
    workflow = scenario.workflow()
    history = MemoryHistory()
    store = None if scenario.front == "runner" else Store("sqlite://")  # one thread: one database
    # seeded: a failing scenario, printed, replays the same run (the paper's learner samples)
    waits = make_wait_learner(strategy_learner(scenario.strategy), seed=scenario.seed)
    outcome = Outcome("none", math.nan, 0)
    for run in range(scenario.history + 1):
        last = run == scenario.history
        kills = list(scenario.kills) if last else []
        ran = workflow if last else scenario.past_workflow()
        if store is None:
            knowledge = Knowledge(ran, waits=waits, history=history)
            outcome = _run_once(scenario, ran, knowledge, run, kills, check_settled)
        else:
            outcome = _run_live(scenario, ran, store, waits, run, kills, check_settled)
    if store is not None:
        store.close()
    return outcome


class _Checks:
    """The invariants checked after every step of a run, and the outside kills made meanwhile."""

    def __init__(self, backend: MockBackend, kills: list[float]) -> None:
        self.backend = backend
        self.kills = kills
        self.violations: list[str] = []
        self.controller: AllocationController | None = None
        self._last: list[object] = [None, None, ()]  # the stages and allocations checked last, those stranded
        self.idle_check = True
        """Check the release rule (off for ``asa``, whose planner keeps an idle allocation for a stage it
        plans to run there, which the view does not show)."""
        self._chained: set[str] = set()  # pending requests with a dependency, a stage of theirs ready
        self._stranded: list[tuple[float, str]] = []  # each stranded stage's violation, with its time
        self._idle: dict[str, float] = {}  # allocation -> since when it idles with its stages complete
        self._idle_ids: tuple[str, ...] = ()

    def __call__(self, view: RunView) -> None:
        kills, backend, last = self.kills, self.backend, self._last
        while kills and view.now >= kills[0]:
            kills.pop(0)
            live = [a for a in view.allocations if a.running and a.backend_job_id]
            if live:
                backend.cancel(live[0].backend_job_id or "")
        # a request follows no allocation once a stage it is kept for is ready: at the latest after the
        # next step (on the front door a stage may become ready between a step and this check)
        ready = {s.name for s in view.stages if s.ready}
        by_id = {a.alloc_id: a for a in view.allocations}
        chained = {
            a.alloc_id
            for a in view.allocations
            if a.pending
            and not a.cancelled
            and a.dependencies
            and ready.intersection(a.labels)
            and eligible_since(a, by_id, view.now) is None  # a dependency not satisfied yet
        }
        for alloc_id in chained & self._chained:
            self.violations.append(
                f"t={view.now:.0f}: {alloc_id} still follows an allocation, its stage ready"
            )
        self._chained = chained
        assert self.controller is not None
        retry_at = self.controller.rate.retry_at
        if retry_at is not None and retry_at > view.now:
            return  # the submission-rate cap holds requests back until then (documented, issue 31)
        if self.controller.queued_requests() >= self.controller.rate.max_queued:
            return  # the backlog holds requests back until a queued one starts (documented, rate.py)
        if last[0] is not view.stages or last[1] is not view.allocations:  # else only the clock moved
            open_ = [a for a in view.allocations if not a.ended and not a.cancelled]  # once, not per stage
            last[:] = [
                view.stages,
                view.allocations,
                tuple(
                    s.name
                    for s in view.stages
                    if s.ready
                    and not s.complete
                    and (s.queued if s.queued is not None else s.tasks - s.done - s.running) > 0
                    and not any(_able(a, s.name, s.cores) for a in open_)
                ),
            ]
            if self.idle_check:
                self._idle_ids = tuple(
                    a.alloc_id
                    for a in open_
                    if a.labels
                    and (a.pending or view.busy_cores(a.alloc_id) == 0)
                    and all(not view.has_stage(x) or view.label_done(x) for x in a.labels if x != TOTAL)
                    and (TOTAL not in a.labels or view.done)
                )
        for name in last[2]:  # type: ignore[attr-defined]
            self.violations.append(f"t={view.now:.0f}: stage {name} waits with no allocation for it")
            self._stranded.append((view.now, self.violations[-1]))
        idle = self._idle
        for alloc_id in [x for x in idle if x not in self._idle_ids]:
            del idle[alloc_id]
        for alloc_id in self._idle_ids:
            since = idle.setdefault(alloc_id, view.now)
            if view.now - since > IDLE_GRACE:
                self.violations.append(
                    f"t={view.now:.0f}: allocation {alloc_id} idles {view.now - since:.0f} s after its stages"
                    " completed"
                )
                idle[alloc_id] = math.inf  # once

    def after(self, result: RunResult, expected: int, ends: list[str]) -> None:
        """Check how the run ended, and that none of its batch jobs is left."""
        violations = self.violations
        if result.status == "failed" and "was lost" in result.detail:
            # documented: TaskLostError, retries exhausted (the invariant allows it); the run then releases
            # every allocation, and its stages wait with none at the instant it ends
            end = max((e.time for e in result.events), default=math.inf)
            dropped = {v for t, v in self._stranded if t >= end}
            violations[:] = [v for v in violations if v not in dropped]
        elif result.status != "completed":
            violations.append(f"run {result.status} after {result.metrics.makespan:.0f} s: {result.detail}")
        elif len(ends) != expected or len(set(ends)) != expected:
            violations.append(f"{len(ends)} task ends ({len(set(ends))} distinct) for {expected} tasks")
        assert self.controller is not None
        mine = {a.backend_job_id for a in self.controller.allocations}
        left = [j.job_id for j in self.backend.queue() if j.job_id in mine and not j.state.is_final]
        if left:
            violations.append(f"{len(left)} batch jobs left after the run: {left}")


def _run_once(
    scenario: Scenario,
    workflow: Workflow,
    knowledge: Knowledge,
    run: int,
    kills: list[float],
    check_settled: bool = False,
) -> Outcome:
    backend = scenario.backend()
    checks = _Checks(backend, kills)
    checks.idle_check = scenario.strategy != "asa"
    runner = Runner(
        workflow,
        make_strategy(scenario.strategy),
        backend,
        SimExecution(),
        knowledge,
        seed=scenario.seed + run,
        max_duration=MAX_DURATION,
        on_iteration=checks,
        job_cores=scenario.job_cores,
    )
    checks.controller = runner.controller
    runner.controller.check_settled = check_settled
    if scenario.max_queued is not None:
        runner.controller.rate = SubmissionLimit(max_queued=scenario.max_queued).rate()
    result = runner.run()
    ends = [e.task for e in result.events if e.kind is EventKind.TASK_END and e.task is not None]
    checks.after(result, sum(s.tasks for s in workflow.stages), ends)
    count = len(runner.controller.allocations)
    return Outcome(result.status, result.metrics.makespan, count, checks.violations, result.detail)


def _run_live(
    scenario: Scenario,
    workflow: Workflow,
    store: Store,
    waits: object,
    run: int,
    kills: list[float],
    check_settled: bool = False,
) -> Outcome:
    """Run ``workflow`` as user code on the front door (:attr:`Scenario.front`) and check the invariants.

    Also checked: the store's row of the run says how it ended (``completed``, or ``failed`` with the
    documented lost-task error), never ``running``.
    """
    backend = scenario.backend()
    checks = _Checks(backend, kills)
    checks.idle_check = scenario.strategy != "asa"
    door = VirtualFrontDoor(
        workflow.name,
        scenario.strategy,
        backend,
        store,
        waits,
        plan=workflow if scenario.declares else None,
        job_cores=scenario.job_cores,
    )
    checks.controller = door.controller
    door.controller.check_settled = check_settled
    if scenario.max_queued is not None:
        door.controller.rate = SubmissionLimit(max_queued=scenario.max_queued).rate()
    rng = np.random.default_rng([scenario.seed, run])
    program = UserProgram(scenario, workflow, rng)
    result = door.run(program, max_duration=MAX_DURATION, on_iteration=checks)
    dropped = door.execution.dropped  # lost too often: their futures failed, the run went on
    ended = set(door.task_ends)
    if ended & set(dropped):
        checks.violations.append(f"tasks both ended and dropped: {sorted(ended & set(dropped))[:3]}")
    checks.after(result, sum(s.tasks for s in workflow.stages) - len(dropped), door.task_ends)
    runs = store.runs(workflow=workflow.name)
    if runs.empty or str(runs["status"].iloc[-1]) != result.status:
        stored = None if runs.empty else runs["status"].iloc[-1]
        checks.violations.append(f"the store keeps the run as {stored!r}, not {result.status!r}")
    count = len(door.controller.allocations)
    detail = result.detail or (str(next(iter(dropped.values()))) if dropped else "")
    return Outcome(result.status, result.metrics.makespan, count, checks.violations, detail)


class Front(Protocol):
    """What a user's program calls: :class:`elastic.Elastic`'s methods, and a maker of timed tasks."""

    def task(self, stage: str, cores: int, estimate: float | None, duration: float) -> Task:
        """Make a task of ``stage`` that takes ``duration`` seconds."""
        ...

    def submit_task(
        self, task: Task, *, after: Iterable[concurrent.futures.Future[Any]] = ()
    ) -> concurrent.futures.Future[Any]:
        """Run ``task`` after the futures ``after``."""
        ...

    def expect(
        self,
        stage: str,
        tasks: int,
        *,
        cores: int = 1,
        after: Sequence[str] = (),
        ready: bool = False,
        runtime: float | None = None,
    ) -> None:
        """Announce tasks not submitted yet."""
        ...


class UserProgram:
    """A user's program that runs ``workflow`` on the front door, as :attr:`Scenario.front` says.

    Task ``k`` of stage ``s{i}`` runs a duration drawn from the stage's true runtime
    (:attr:`StageSpec.runtime`, spread :attr:`StageSpec.cv`); the runtime given with it, where the program
    gives one, is the hinted one (the workflow's). A task of a stage runs after every task of the stages
    that stage depends on.
    """

    def __init__(self, scenario: Scenario, workflow: Workflow, rng: np.random.Generator) -> None:
        self.style = scenario.front
        self.workflow = workflow
        specs = {f"s{i}": spec for i, spec in enumerate(scenario.stages)}  # a renamed stage is "old_s{i}"
        self._durations = {
            s.name: Stage(
                s.name,
                s.tasks,
                s.cores,
                runtime=specs[s.name.removeprefix("old_")].runtime,
                runtime_cv=s.runtime_cv,
            ).sample_runtimes(rng)
            for s in workflow.stages
        }
        self.futures: dict[str, list[concurrent.futures.Future[object]]] = {}
        self._announced = False
        self._running = 0  # futures not done (done callbacks run in the pool's thread on a real front door)
        self._lock = threading.Lock()

    @property
    def finished(self) -> bool:
        """Every stage submitted and every one of its futures done."""
        return len(self.futures) == len(self.workflow.stages) and self._running == 0

    def _one_done(self, _: concurrent.futures.Future[object]) -> None:
        with self._lock:
            self._running -= 1

    def act(self, door: Front) -> None:
        """Submit what is ready (``futures``: everything at once), announcing held stages (``announce``)."""
        for stage in self.workflow.stages:
            if stage.name in self.futures:
                continue
            deps = stage.depends_on or ()
            inputs = [f for d in deps for f in self.futures.get(d, ())]
            if self.style != "futures" and not (
                all(d in self.futures for d in deps) and all(f.done() for f in inputs)
            ):
                continue
            estimate = None if self.style == "loop" else stage.runtime
            futures = []
            for duration in self._durations[stage.name]:
                task = door.task(stage.name, stage.cores, estimate, float(duration))
                with self._lock:
                    self._running += 1
                future = door.submit_task(task, after=inputs if self.style == "futures" else ())
                future.add_done_callback(self._one_done)
                futures.append(future)
            self.futures[stage.name] = futures
            if self.style == "announce" and self._announced:
                door.expect(stage.name, 0, cores=stage.cores)
        if self.style == "announce" and not self._announced:
            self._announced = True
            for stage in self.workflow.stages:
                if stage.name not in self.futures:
                    door.expect(
                        stage.name,
                        stage.tasks,
                        cores=stage.cores,
                        after=tuple(stage.depends_on or ()),
                        runtime=stage.runtime,
                    )
