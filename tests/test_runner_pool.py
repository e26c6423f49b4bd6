"""Whole runs through the real pool: agents are real processes started by the mock backend (scaled clock)."""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Callable

import pytest

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.control.execution import RunResult
from elastic.control.pool_execution import PoolExecution
from elastic.control.runner import Runner
from elastic.learners.asa import ASAEstimator
from elastic.metrics import Event, EventKind
from elastic.pool.events import AgentEvent, AgentEventKind
from elastic.pool.pool import Pool
from elastic.strategies import Knowledge, MemoryHistory, RunView, make_strategy
from elastic.strategies.base import Cancel, Decision, Submit
from elastic.workflow import Stage, Workflow

K = EventKind
SPEEDUP = 20.0  # 20 simulated seconds per real second
TINY = Workflow(
    "tiny",
    (Stage("a", 1, 1, 40.0), Stage("b", 3, 1, 60.0, runtime_cv=0.2), Stage("c", 1, 1, 20.0)),
)


def _run(
    strategy: str,
    knowledge: Knowledge,
    drain_margin: float = 30.0,
    fault: Callable[[MockBackend, PoolExecution, RunView], None] | None = None,
    max_retries: int = 2,
    workflow: Workflow = TINY,
    **options: object,
) -> RunResult:
    """Run ``workflow`` through a real pool on the scaled mock; ``fault`` is called every driver iteration."""
    backend = MockBackend(nodes=8, clock="scaled", speedup=SPEEDUP)
    pool = Pool(drain_margin=drain_margin / SPEEDUP, max_retries=max_retries)
    executor = PoolExecution(backend, speedup=SPEEDUP, pool=pool)
    on_iteration = None if fault is None else functools.partial(fault, backend, executor)
    try:
        runner = Runner(
            workflow, make_strategy(strategy, **options), backend, executor, knowledge, poll_interval=5.0,
            on_iteration=on_iteration,
        )  # fmt: skip
        return runner.run()
    finally:
        executor.close()
        backend.close()


def _assert_lost_tasks_reran_elsewhere(result: RunResult, stage: str) -> list[Event]:
    """Each task of ``stage`` reported lost ran again, on another allocation, to completion."""
    lost = _of(result.events, K.TASK_LOST, stage=stage)
    assert lost, f"no task of stage {stage} was reported lost"
    for e in lost:
        (end,) = _of(result.events, K.TASK_END, task=e.task)
        assert end.allocation != e.allocation
    return lost


def _of(events: tuple[Event, ...], kind: EventKind, **fields: object) -> list[Event]:
    return [e for e in events if e.kind is kind and all(getattr(e, k) == v for k, v in fields.items())]


@pytest.mark.timeout(120)
def test_asa_run_through_the_real_pool_completes_and_presubmits() -> None:
    knowledge = Knowledge(TINY, waits=ASAEstimator(grid=[30.0, 1e5], policy="greedy"))  # predicts 30 s
    result = _run("asa", knowledge, run_waits=False, estimates=False)  # waits priced by it alone
    assert result.status == "completed"
    done = sorted(e.task or "" for e in _of(result.events, K.TASK_END))
    assert done == ["a.0", "b.0", "b.1", "b.2", "c.0"]
    (a_end,) = _of(result.events, K.STAGE_END, stage="a")
    assert _of(result.events, K.ALLOC_SUBMIT, stage="b")[0].time < a_end.time
    # the sleep tasks really ran: stage b's tasks took about their sampled durations (>= 40 s simulated)
    assert result.metrics.stages[1].execution_time > 40.0


@pytest.mark.timeout(120)
def test_walltime_hit_through_the_real_pool_reruns_lost_tasks() -> None:
    history = MemoryHistory()
    for runtime in (28.0, 32.0, 30.0):  # history says b takes ~30 s; it takes ~60 s
        history.add_stage_runtime("tiny", "b", runtime)
    waits = ASAEstimator(grid=[0.0, 1e5], policy="greedy")
    knowledge = Knowledge(TINY, waits=waits, history=history, overhead=5.0)  # first request ~55 s
    # The pool drains 2 s before the kill. On a loaded machine an agent takes seconds of the scaled clock
    # to start, and a follow-up may start too late for its tasks too: more retries than the default two
    # keep this test about the follow-up, not about the machine's load (a task lost more often than its
    # retries ends the run failed: the test below).
    result = _run("perstage", knowledge, drain_margin=2.0, max_retries=8)
    assert result.status == "completed"
    b = _of(result.events, K.ALLOC_SUBMIT, stage="b")
    assert len(b) >= 2 and b[1].note == "walltime" and (b[1].walltime or 0) > (b[0].walltime or 0)
    assert _of(result.events, K.TASK_LOST, stage="b")
    assert {e.task for e in _of(result.events, K.TASK_END, stage="b")} == {"b.0", "b.1", "b.2"}


@pytest.mark.timeout(120)
def test_a_task_that_fails_ends_the_run_failed_instead_of_waiting_for_it_forever() -> None:
    # the execution does not fail fast (as under the front door): the declared workflow cannot complete
    # without the task, so the run ends failed, naming it, and releases its allocations
    broken = Workflow("broken", (Stage("a", 1, 1, 20.0), Stage("b", 2, 1, 20.0, command="exit 3")))
    result = _run("perstage", Knowledge(broken, waits=ASAEstimator(grid=[0.0, 1e5])), workflow=broken)
    assert result.status == "failed"
    assert "task 'b." in result.detail and "failed" in result.detail
    assert _of(result.events, K.TASK_END, task="a.0")
    assert not _of(result.events, K.STAGE_END, stage="b")


@pytest.mark.timeout(120)
def test_agent_killed_mid_task_the_tasks_rerun_and_the_run_completes() -> None:
    killed: list[str] = []

    def kill_stage_b_agent(backend: MockBackend, executor: PoolExecution, view: RunView) -> None:
        running = [a.alloc_id for a in view.allocations if a.stage == "b" and view.busy_cores(a.alloc_id) > 0]
        if killed or not running:
            return
        for e in executor.pool.events:
            if isinstance(e, AgentEvent) and e.kind is AgentEventKind.JOINED and e.alloc_id == running[0]:
                os.kill(int(e.agent.rsplit("/", 1)[1]), signal.SIGKILL)  # agent names end in their pid
                killed.append(e.agent)
                return

    knowledge = Knowledge(TINY, waits=ASAEstimator(grid=[0.0, 1e5], policy="greedy"))
    result = _run("asa", knowledge, fault=kill_stage_b_agent)
    assert killed and result.status == "completed"
    _assert_lost_tasks_reran_elsewhere(result, "b")


@pytest.mark.timeout(120)
def test_allocation_cancelled_from_outside_mid_task_the_tasks_rerun_and_the_run_completes() -> None:
    """scancel from outside: the pilot's processes get SIGTERM; its tasks are lost, not failed (H12)."""
    cancelled: list[str] = []

    def cancel_busy_stage_b_allocation(backend: MockBackend, executor: PoolExecution, view: RunView) -> None:
        busy = [a.alloc_id for a in view.allocations if a.stage == "b" and view.busy_cores(a.alloc_id) > 0]
        if cancelled or not busy:
            return
        (job,) = [j for j in backend.queue() if j.name.endswith(f"-{busy[0]}")]
        backend.cancel(job.job_id)  # not through the strategy: the runner learns it from the backend
        cancelled.append(busy[0])

    knowledge = Knowledge(TINY, waits=ASAEstimator(grid=[0.0, 1e5], policy="greedy"))
    result = _run("perstage", knowledge, fault=cancel_busy_stage_b_allocation)
    assert cancelled and result.status == "completed"
    lost = _assert_lost_tasks_reran_elsewhere(result, "b")
    assert {e.allocation for e in lost} == set(cancelled)


class _CancelsWhenThePoolRunsATask:
    """Asks one allocation; cancels it while its view still calls it pending but the pool runs a task there.

    The pool places tasks from its own thread as soon as an agent joins, and the controller learns that the
    batch job started only at its next poll: a strategy may cancel an allocation it believes pending that
    already runs a task. ``blocker`` holds the partition's only node so that the view it decides on shows
    the allocation pending; it then frees the node, waits (real time) until the pool runs the task on the
    allocation, and cancels.
    """

    name = "cancel-race"

    def __init__(self, backend: MockBackend, executor: PoolExecution, blocker: str) -> None:
        self.backend, self.executor, self.blocker = backend, executor, blocker
        self.raced: list[str] = []

    def decide(self, view: RunView) -> Decision:
        if not view.allocations:
            return Decision((Submit("a", 1, 600.0),))
        a = view.allocations[0]  # (the liveness rule asks another once this one is cancelled)
        if self.raced or not a.pending:
            return Decision()
        self.backend.cancel(self.blocker)
        deadline = time.monotonic() + 60
        while self.executor.busy_cores(a.alloc_id) == 0:
            assert time.monotonic() < deadline, "the pool never ran the task on the allocation"
            time.sleep(0.05)
        self.raced.append(a.alloc_id)
        return Decision((Cancel(a.alloc_id, "believed pending"),))


@pytest.mark.timeout(120)
def test_cancelling_an_allocation_seen_pending_that_already_runs_a_task_waits_for_the_task() -> None:
    """No attempt is lost: the batch job is cancelled once the task the pool placed there has ended."""
    backend = MockBackend(nodes=1, clock="scaled", speedup=SPEEDUP)
    executor = PoolExecution(backend, speedup=SPEEDUP)
    workflow = Workflow("one", (Stage("a", 1, 1, 100.0),))
    try:
        blocker = backend.submit(JobSpec(cores=1, walltime=10_000.0, name="blocker"))
        strategy = _CancelsWhenThePoolRunsATask(backend, executor, blocker)
        knowledge = Knowledge(workflow, waits=ASAEstimator(grid=[0.0, 1e5], policy="greedy"))
        runner = Runner(
            workflow, strategy, backend, executor, knowledge, poll_interval=5.0, max_duration=600.0
        )
        result = runner.run()
    finally:
        executor.close()
        backend.close()
    assert strategy.raced == ["a1"]
    assert result.status == "completed", result.detail
    assert not _of(result.events, K.TASK_LOST)
    (task_end,) = _of(result.events, K.TASK_END)
    (alloc_end,) = _of(result.events, K.ALLOC_END, allocation="a1")
    assert task_end.allocation == "a1" and alloc_end.time >= task_end.time
