"""What a run leaves in the runtime history: each stage's runtime, never the time its tasks only waited."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.control.demand import DeclaredDemand
from elastic.control.history import learn_runtimes
from elastic.control.live import LiveDemand
from elastic.control.sim_execution import SimExecution
from elastic.learners.asa import ASAEstimator
from elastic.metrics import Event, EventKind
from elastic.strategies import Knowledge, MemoryHistory
from elastic.workflow import Stage, Workflow

WIDE = Workflow("wide", (Stage("s", tasks=3, cores=1, runtime=100.0, runtime_cv=0.0),))


def _run(wf: Workflow = WIDE, seed: int = 0) -> tuple[MemoryHistory, Knowledge, SimExecution, DeclaredDemand]:
    """A declared run's parts, its stages' tasks queued at 0 s: history, knowledge, execution, demand."""
    history = MemoryHistory()
    knowledge = Knowledge(wf, waits=ASAEstimator(random_state=0), history=history)
    ex = SimExecution()
    events: list[Event] = []
    demand = DeclaredDemand(wf, ex, knowledge, events.append, np.random.default_rng(seed))
    demand.update(0.0)
    demand.dispatch(0.0)
    return history, knowledge, ex, demand


def _feed(demand: DeclaredDemand, ex: SimExecution, now: float) -> None:
    for event in ex.advance(now):
        demand.observe(event)
    demand.update(now)


def test_a_stage_run_one_task_after_another_on_a_narrow_allocation_records_its_longest_task() -> None:
    # Regression: HPC2N capacity, montage at 56 cores, `asa`: a wide stage ran its 56 tasks one after
    # another on the 1-core allocation of a later stage that started first. First start to last end
    # (14 h) went into the history; the next runs asked for walltimes that long, and a 56-core
    # allocation that started at once took no task because its walltime was "too short".
    history, knowledge, ex, demand = _run()
    ex.add_allocation("narrow", cores=1, walltime_end=10_000.0, at=0.0)
    _feed(demand, ex, 1_000.0)
    (view,) = demand.stages()
    assert (view.start_time, view.end_time) == (0.0, 300.0)  # three tasks in turn
    assert view.runtime == pytest.approx(100.0)
    learn_runtimes(knowledge, demand.stages(), status="completed", end=300.0, width=3)
    runtimes, censored = history.stage_runtimes("wide", "s")
    assert list(runtimes) == [pytest.approx(100.0)] and not censored.any()
    total, _ = history.stage_runtimes("wide", "*")
    assert list(total) == [pytest.approx(100.0)]


def test_a_task_lost_with_its_allocation_counts_its_attempts_summed() -> None:
    history, knowledge, ex, demand = _run()
    ex.add_allocation("a", cores=3, walltime_end=10_000.0, at=0.0)
    _feed(demand, ex, 40.0)
    ex.allocation_ended("a", at=40.0)  # all three lost after 40 s
    ex.add_allocation("b", cores=3, walltime_end=10_000.0, at=500.0)
    _feed(demand, ex, 1_000.0)
    (view,) = demand.stages()
    assert view.end_time == pytest.approx(600.0)
    assert view.runtime == pytest.approx(140.0)  # 40 s lost + 100 s again, not the 460 s between
    learn_runtimes(knowledge, demand.stages(), status="completed", end=600.0, width=3)
    assert list(history.stage_runtimes("wide", "s")[0]) == [pytest.approx(140.0)]


def test_a_stage_cut_short_is_censored_from_its_first_start() -> None:
    history, knowledge, ex, demand = _run()
    ex.add_allocation("narrow", cores=1, walltime_end=10_000.0, at=10.0)
    _feed(demand, ex, 150.0)  # one task done, one running
    learn_runtimes(knowledge, demand.stages(), status="timeout", end=150.0, width=3)
    runtimes, censored = history.stage_runtimes("wide", "s")
    assert list(runtimes) == [pytest.approx(140.0)] and list(censored) == [True]


@settings(max_examples=40, deadline=None)
@given(tasks=st.integers(1, 8), cores=st.integers(1, 8), seed=st.integers(0, 10_000))
def test_the_recorded_runtime_is_the_longest_task_whatever_the_cores(
    tasks: int, cores: int, seed: int
) -> None:
    wf = Workflow("w", (Stage("s", tasks=tasks, cores=1, runtime=100.0, runtime_cv=1.0),))
    history, knowledge, ex, demand = _run(wf, seed)
    ex.add_allocation("a", cores=cores, walltime_end=1e9, at=0.0)
    events = ex.advance(1e7)
    for event in events:
        demand.observe(event)
    demand.update(1e7)
    start = {e.task: e.time for e in events if e.kind is EventKind.TASK_START}
    ran = [e.time - start[e.task] for e in events if e.kind is EventKind.TASK_END]
    (view,) = demand.stages()
    assert view.end_time is not None and view.start_time is not None and len(ran) == tasks
    assert view.runtime == pytest.approx(max(ran))
    assert view.runtime <= view.end_time - view.start_time + 1e-9
    if cores >= tasks:  # every task had its core from the start: the same as first start to last end
        assert view.runtime == pytest.approx(view.end_time - view.start_time)
    learn_runtimes(knowledge, demand.stages(), status="completed", end=view.end_time, width=tasks)
    assert list(history.stage_runtimes("w", "s")[0]) == [pytest.approx(max(ran))]


def test_a_front_door_stage_leaves_out_the_time_its_queued_tasks_waited_for_cores() -> None:
    # One task of "s" ran early (on an allocation that was already there), the other two once their own
    # allocation started 100 s later: first start to last end is 115 s, the stage ran 10 + 15 s.
    events: list[Event] = []
    live = LiveDemand("live", record=events.append, clock=lambda: 0.0, idle_timeout=1.0)
    for i in range(3):
        live.queued("s", 1, None, task=f"t{i}")

    _task(live, EventKind.TASK_START, 0.0, "t0")
    _task(live, EventKind.TASK_END, 10.0, "t0")
    _task(live, EventKind.TASK_START, 100.0, "t1")
    _task(live, EventKind.TASK_START, 100.0, "t2")
    _task(live, EventKind.TASK_END, 110.0, "t1")
    _task(live, EventKind.TASK_END, 115.0, "t2")
    live.update(115.0)
    live.update(200.0)  # idle past idle_timeout: complete
    (view,) = live.stages()
    assert (view.start_time, view.end_time) == (0.0, 115.0)
    assert view.runtime == pytest.approx(25.0)
    history = MemoryHistory()
    knowledge = Knowledge(live.plan, waits=ASAEstimator(random_state=0), history=history)
    learn_runtimes(knowledge, live.stages(), status="completed", end=200.0, width=3)
    assert list(history.stage_runtimes("live", "s")[0]) == [pytest.approx(25.0)]


def test_a_front_door_gap_with_nothing_queued_is_runtime_the_stage_waited_for_inputs() -> None:
    # Dataflow: the second task was submitted only after 90 s (its input came from elsewhere); no task of
    # the stage waited for cores, so all of first start to end is the stage's runtime.
    events: list[Event] = []
    live = LiveDemand("live", record=events.append, clock=lambda: 0.0, idle_timeout=1.0)
    live.queued("s", 1, None, task="t0")
    _task(live, EventKind.TASK_START, 0.0, "t0")
    _task(live, EventKind.TASK_END, 10.0, "t0")
    live.queued("s", 1, None, task="t1")
    _task(live, EventKind.TASK_START, 100.0, "t1")
    _task(live, EventKind.TASK_END, 110.0, "t1")
    live.update(110.0)
    live.update(200.0)
    (view,) = live.stages()
    assert view.end_time == 110.0 and view.runtime == pytest.approx(110.0)


def _task(live: LiveDemand, kind: EventKind, at: float, name: str) -> None:
    live.observe(Event(at, kind, stage="s", allocation="a", task=name, cores=1))
