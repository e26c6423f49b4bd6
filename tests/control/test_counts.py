"""The front door's per-stage task counts: right by construction over any order of events, and a stage
whose tasks all ended (one lost with no retry left) gets no walltime follow-up."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import AllocationState
from elastic.control.counts import StageCounts
from elastic.control.live import LiveDemand
from elastic.learners.asa import ASAEstimator
from elastic.metrics import Event, EventKind
from elastic.strategies import Knowledge, RunView, Submit
from elastic.strategies.base import walltime_follow_ups
from tests.strategies.views import alloc, split

_ENDS = (EventKind.TASK_END, EventKind.TASK_FAILED, EventKind.TASK_DROPPED)


@st.composite
def _lives(draw: st.DrawFn) -> tuple[list[tuple[str, str, EventKind | None]], int]:
    """Interleaved lives of tasks: ``(stage, task, kind)``, kind None for the front door taking it."""
    tasks = draw(st.integers(1, 8))
    lives = []
    for i in range(tasks):
        stage = draw(st.sampled_from(["a", "b"]))
        steps: list[EventKind | None] = [None]
        for _ in range(draw(st.integers(0, 2))):  # lost attempts, each queued again by the pool
            steps += [EventKind.TASK_START, EventKind.TASK_LOST]
        end = draw(st.sampled_from(_ENDS))
        steps += [end] if end is EventKind.TASK_DROPPED else [EventKind.TASK_START, end]
        if draw(st.booleans()):
            steps = steps[: draw(st.integers(1, len(steps)))]  # still queued or running at the end
        lives.append([(stage, f"t{i}", k) for k in steps])
    order: list[tuple[str, str, EventKind | None]] = []
    while any(lives):
        live = draw(st.sampled_from([x for x in lives if x]))
        order.append(live.pop(0))  # each task's own events in order, tasks interleaved at random
    return order, tasks


@settings(max_examples=150, deadline=None)
@given(_lives(), st.booleans())
def test_counts_never_go_negative_and_add_up_to_the_tasks_taken(
    lives: tuple[list[tuple[str, str, EventKind | None]], int], held: bool
) -> None:
    order, _ = lives
    demand = LiveDemand("w", record=lambda e: None, clock=lambda: 0.0)
    taken: dict[str, int] = {"a": 0, "b": 0}
    state: dict[str, str] = {}
    for t, (stage, task, kind) in enumerate(order):
        if kind is None:
            taken[stage] += 1
            if held:  # made once its inputs are done
                demand.held(stage, 1, None)
                demand.released(stage, task=task)
            else:
                demand.queued(stage, 1, None, task=task)
            state[task] = "queued"
        else:
            demand.observe(Event(float(t), kind, stage=stage, task=task, cores=1))
            state[task] = {EventKind.TASK_START: "running", EventKind.TASK_LOST: "queued"}.get(kind, "ended")
        for view in demand.stages():
            assert min(view.done, view.running, view.queued or 0, view.outstanding or 0) >= 0
            assert view.queued is not None and view.outstanding is not None
            assert view.done + view.outstanding == taken[view.name]  # every task in exactly one phase
        assert demand.taken() == {s: n for s, n in taken.items() if n}  # what a front-end reads back
    running = sum(1 for s in state.values() if s == "running")
    queued = sum(1 for s in state.values() if s == "queued")
    assert sum(v.running for v in demand.stages()) == running
    assert sum(v.queued or 0 for v in demand.stages()) == queued
    assert demand.outstanding() == running + queued


@settings(max_examples=150, deadline=None)
@given(_lives(), st.booleans(), st.lists(st.integers(0, 3), max_size=6))
def test_the_stages_kept_between_changes_are_the_stages_built_afresh(
    lives: tuple[list[tuple[str, str, EventKind | None]], int], held: bool, announced: list[int]
) -> None:
    # the views are kept while nothing they show changed: after any task event, announcement, update
    # (stages opening and ending on the clock) they are what a fresh build gives
    order, _ = lives
    demand = LiveDemand("w", record=lambda e: None, clock=lambda: 0.0, idle_timeout=2.0)
    for t, (stage, task, kind) in enumerate(order):
        if kind is None and held:
            demand.held(stage, 1, 10.0, after=["c"] if announced else ())
            demand.released(stage, task=task)
        elif kind is None:
            demand.queued(stage, 1, None, task=task)
        else:
            demand.observe(Event(float(t), kind, stage=stage, task=task, cores=1))
        if t < len(announced):
            demand.expect("c", announced[t], cores=2, runtime=5.0)
        _same_as_afresh(demand)
        demand.update(float(t))  # after the views were kept: what update changes must show
        _same_as_afresh(demand)


def _same_as_afresh(demand: LiveDemand) -> None:
    kept = demand.stages()
    assert demand.stages() is kept
    demand._views = (-1, None, ())  # forget them (private: the cache is what is tested)
    assert demand.stages() == kept


def test_a_task_the_front_door_did_not_take_is_counted_from_its_first_event() -> None:
    c = StageCounts()
    c.enqueue("mine")
    c.started("other")  # submitted to the pool directly: nothing queued is taken for it
    assert (c.queued, c.running, c.known) == (1, 1, 2)
    c.ended("other", ok=True)
    assert (c.queued, c.running, c.done, c.known) == (1, 0, 1, 2)


def test_announced_tasks_are_taken_one_by_one_and_refused_below_zero() -> None:
    c = StageCounts()
    c.announce(2)
    c.enqueue("t0")
    assert (c.expected, c.queued, c.outstanding) == (1, 1, 2)
    c.announce(0)  # the front-end sees none left
    c.enqueue("t1")  # came anyway: counted, nothing announced taken
    assert (c.expected, c.queued) == (0, 2)
    with pytest.raises(ValueError, match="-1"):
        c.announce(-1)
    with pytest.raises(ValueError, match="no held task"):
        c.unhold("t2")


def _follow_ups(demand: LiveDemand, state: AllocationState) -> list[Submit]:
    a1 = alloc("a1", "s", 1, 100.0, state, 0.0, 0.0, 100.0)
    records, busy = split((a1,))
    knowledge = Knowledge(demand.plan, waits=ASAEstimator(grid=[10.0, 1e5], policy="greedy"))
    view = RunView(100.0, demand.plan, demand.stages(), records, knowledge, busy)
    return [a for a in walltime_follow_ups(view, ["s"]).actions if isinstance(a, Submit)]


@pytest.mark.parametrize("retried", [False, True])
def test_a_task_lost_with_no_retry_left_gets_no_follow_up(retried: bool) -> None:
    # one task ran on a1 until a1's walltime killed it: with a retry left the pool queues it again and a
    # follow-up is requested for it; with none it failed (LOST then DROPPED) and nothing may run again
    demand = LiveDemand("w", record=lambda e: None, clock=lambda: 0.0, idle_timeout=1e6)
    demand.queued("s", 1, 50.0, task="t")
    demand.observe(Event(1.0, EventKind.TASK_START, stage="s", task="t", cores=1))
    demand.observe(Event(100.0, EventKind.TASK_LOST, stage="s", task="t", cores=1))
    if not retried:
        demand.observe(Event(100.0, EventKind.TASK_DROPPED, stage="s", task="t", cores=1))
    demand.update(100.0)
    (stage,) = demand.stages()
    assert stage.ready and not stage.complete  # the stage stays open: more tasks may come
    submits = _follow_ups(demand, AllocationState.TIMEOUT)
    assert [s.reason for s in submits] == (["walltime"] if retried else [])
