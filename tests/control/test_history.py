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
from elastic.strategies import Knowledge, MemoryHistory, StageView
from elastic.strategies.knowledge import task_label
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


def _lost_once() -> tuple[MemoryHistory, Knowledge, DeclaredDemand]:
    """``WIDE``'s three 100-s tasks lost after 40 s with their allocation, then run again from 500 s."""
    history, knowledge, ex, demand = _run()
    ex.add_allocation("a", cores=3, walltime_end=10_000.0, at=0.0)
    _feed(demand, ex, 40.0)
    ex.allocation_ended("a", at=40.0)  # all three lost after 40 s
    ex.add_allocation("b", cores=3, walltime_end=10_000.0, at=500.0)
    _feed(demand, ex, 1_000.0)
    return history, knowledge, demand


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


def test_a_task_lost_with_its_allocation_records_the_attempt_that_completed_it() -> None:
    # A lost attempt runs again from scratch: the seconds it ran are not part of the runtime a later
    # allocation must cover. Summed in (140 s here), they taught later runs a walltime as long as a loss
    # and a full run together (SDSC Blue capacity, Seismology 56: 41,549 s where 37,777 s started at once).
    history, knowledge, demand = _lost_once()
    (view,) = demand.stages()
    assert view.end_time == pytest.approx(600.0)
    assert view.runtime == pytest.approx(100.0)  # the attempt that completed: not 40 + 100 s, nor 460 s
    learn_runtimes(knowledge, demand.stages(), status="completed", end=600.0, width=3)
    assert list(history.stage_runtimes("wide", "s")[0]) == [pytest.approx(100.0)]


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
    S, E = EventKind.TASK_START, EventKind.TASK_END
    steps = [
        (S, 0.0, "t0"),
        (E, 10.0, "t0"),
        (S, 100.0, "t1"),
        (S, 100.0, "t2"),
        (E, 110.0, "t1"),
        (E, 115.0, "t2"),
    ]
    live, view = _front_door_stage(3, steps)
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


def test_a_front_door_stage_leaves_out_the_seconds_only_a_lost_attempt_ran() -> None:
    # t0 ran 40 s beside t1 and 30 s alone, was lost with its allocation at 70 s, waited for cores until
    # 100 s and ran again from scratch for 100 s: the stage ran 40 s (both) + 100 s (the re-run); the
    # 30 s only the lost attempt ran and the 30 s it waited are not runtime (a declared stage's runtime
    # leaves lost attempts out likewise)
    S, E, L = EventKind.TASK_START, EventKind.TASK_END, EventKind.TASK_LOST
    steps = [
        (S, 0.0, "t0"),
        (S, 0.0, "t1"),
        (E, 40.0, "t1"),
        (L, 70.0, "t0"),
        (S, 100.0, "t0"),
        (E, 200.0, "t0"),
    ]
    _, view = _front_door_stage(2, steps)
    assert (view.start_time, view.end_time) == (0.0, 200.0)
    assert view.runtime == pytest.approx(140.0)


def _front_door_stage(tasks: int, steps: list[tuple[EventKind, float, str]]) -> tuple[LiveDemand, StageView]:
    """Stage "s" of a front door: ``tasks`` tasks queued, then ``steps``; complete once idle after them."""
    live = LiveDemand("live", record=[].append, clock=lambda: 0.0, idle_timeout=1.0)
    for i in range(tasks):
        live.queued("s", 1, None, task=f"t{i}")
    for kind, at, name in steps:
        _task(live, kind, at, name)
    live.update(steps[-1][1])
    live.update(steps[-1][1] + 100.0)  # idle past idle_timeout: complete
    (view,) = live.stages()
    return live, view


def _task(live: LiveDemand, kind: EventKind, at: float, name: str) -> None:
    live.observe(Event(at, kind, stage="s", allocation="a", task=name, cores=1))


def test_a_stage_records_its_tasks_runtime_from_the_attempt_that_completed_each() -> None:
    # a task's runtime is the attempt that completed it (100 s, not the 140 s of both attempts): mean
    # plus one standard deviation of those, recorded under the task label
    history, knowledge, demand = _lost_once()
    (view,) = demand.stages()
    assert view.runtime == pytest.approx(100.0) and view.task_runtime == pytest.approx(100.0)
    learn_runtimes(knowledge, demand.stages(), status="completed", end=600.0, width=3)
    assert list(history.stage_runtimes("wide", task_label("s"))[0]) == [pytest.approx(100.0)]


def test_task_runtime_is_the_mean_plus_one_standard_deviation_of_the_completed_tasks() -> None:
    wf = Workflow("spread", (Stage("s", tasks=40, cores=1, runtime=100.0, runtime_cv=0.5),))
    _, _, ex, demand = _run(wf, seed=4)
    ex.add_allocation("a", cores=40, walltime_end=100_000.0, at=0.0)
    events: list[Event] = []
    for event in ex.advance(10_000.0):
        events.append(event)
        demand.observe(event)
    demand.update(10_000.0)
    ran = np.array([e.time for e in events if e.kind is EventKind.TASK_END])  # all started at 0 s
    (view,) = demand.stages()
    assert len(ran) == 40 and view.task_runtime == pytest.approx(ran.mean() + ran.std())
    assert view.runtime == pytest.approx(ran.max())  # the stage's own: its slowest task


def test_a_task_is_placed_by_a_tasks_estimate_not_by_its_stages_slowest_task() -> None:
    # Regression: BLAST at 112 cores on the HPC2N capacity queue. The stage's history (its slowest task,
    # lost attempts summed) was 2.7x a task's runtime; placed by it, tasks waited for a requested
    # allocation while a live one with time for them idled (and was then released as useless).
    wf = Workflow("w", (Stage("s", tasks=2, cores=1, runtime=4_000.0, runtime_cv=0.0),))
    history = MemoryHistory()
    for _ in range(3):
        history.add_stage_runtime("w", "s", 12_000.0)
        history.add_stage_runtime("w", task_label("s"), 4_000.0)
    knowledge = Knowledge(wf, history=history)
    assert knowledge.expected_duration("s") == pytest.approx(12_000.0)
    assert knowledge.task_estimate("s") == pytest.approx(4_000.0)
    ex = SimExecution()
    ex.register("long", cores=2, walltime=20_000.0, stage="s")  # requested, not started
    ex.add_allocation("short", cores=2, walltime_end=6_000.0, at=0.0)  # 6,000 s: time for a task
    events: list[Event] = []
    demand = DeclaredDemand(wf, ex, knowledge, events.append, np.random.default_rng(0))
    demand.update(0.0)
    demand.dispatch(0.0)
    started = [e for e in ex.advance(1.0) if e.kind is EventKind.TASK_START]
    assert [e.allocation for e in started] == ["short", "short"]


@pytest.mark.parametrize(
    ("stage", "tasks", "expected"),
    [
        ([], [], 5_000.0),  # no history: the model's mean task runtime plus one standard deviation
        ([9_000.0] * 3, [], 5_000.0),  # only stage runtimes (an older history): the model's, below them
        ([9_000.0] * 3, [3_000.0, 4_000.0, 5_000.0], 4_000.0),  # the tasks' own, learned
        ([2_000.0] * 3, [3_000.0] * 3, 2_000.0),  # never more than the stage's expected runtime
    ],
)
def test_task_estimate(stage: list[float], tasks: list[float], expected: float) -> None:
    wf = Workflow("w", (Stage("s", tasks=8, cores=1, runtime=4_000.0, runtime_cv=0.25),))
    history = MemoryHistory()
    for r in stage:
        history.add_stage_runtime("w", "s", r)
    for r in tasks:
        history.add_stage_runtime("w", task_label("s"), r)
    assert Knowledge(wf, history=history).task_estimate("s") == pytest.approx(expected)
