"""When the planner's timeline predicts a pending allocation to start."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import AllocationState
from elastic.strategies import timing
from elastic.strategies.knowledge import Knowledge
from elastic.strategies.planner_timeline import Timeline
from elastic.strategies.view import RunView, StageView
from elastic.workflow import builtin_workflow
from tests.strategies.views import alloc, split

WF = builtin_workflow("demo3")  # prepare 1x1 (600 s), process 8x1 (1800 s), merge 1x1 (300 s)


def _timeline(now: float, submit: float, wait: float, forecast: bool = False) -> tuple[Timeline, RunView]:
    stages = tuple(
        StageView(s.name, i, s.tasks, s.cores, s.depends_on or (), ready_time=0.0 if i == 0 else None)
        for i, s in enumerate(WF.stages)
    )
    records, busy = split((alloc("a1", "prepare", 1, 1e4, AllocationState.REQUESTED, submit),))
    view = RunView(now, WF, stages, records, Knowledge(WF), busy)

    def waits(cores: int, follow_up: bool) -> np.ndarray:
        return np.full(len(timing.PROBS), wait)

    return Timeline(view, waits, forecast=forecast), view


def test_a_pending_allocation_starts_when_its_predicted_wait_ends() -> None:
    timeline, view = _timeline(now=600.0, submit=0.0, wait=1000.0)
    assert timeline.ready(view.allocations[0]) == pytest.approx(1000.0)


def test_one_that_waited_past_its_predicted_wait_waits_as_long_again() -> None:
    # heavy-tailed queue waits: not "any moment now" (which made its stage's successors needed early)
    timeline, view = _timeline(now=5000.0, submit=0.0, wait=1000.0)
    assert timeline.ready(view.allocations[0]) == pytest.approx(10000.0)


def test_one_that_waited_past_the_schedulers_estimate_starts_at_once() -> None:
    # the estimate is made now and holds every running job to its walltime: past it, the job is due
    timeline, view = _timeline(now=5000.0, submit=0.0, wait=1000.0, forecast=True)
    assert timeline.ready(view.allocations[0]) == pytest.approx(5000.0)
    timeline, view = _timeline(now=600.0, submit=0.0, wait=1000.0, forecast=True)
    assert timeline.ready(view.allocations[0]) == pytest.approx(1000.0)


@settings(max_examples=100, deadline=None)
@given(
    waited=st.floats(0.0, 1e6, allow_nan=False),
    wait=st.floats(0.0, 1e6, allow_nan=False),
    later=st.floats(1.0, 1e5, allow_nan=False),
    forecast=st.booleans(),
)
def test_the_predicted_start_is_never_before_now_and_never_earlier_for_having_waited_longer(
    waited: float, wait: float, later: float, forecast: bool
) -> None:
    starts = []
    for now in (waited, waited + later):
        timeline, view = _timeline(now=now, submit=0.0, wait=wait, forecast=forecast)
        start = timeline.ready(view.allocations[0])
        assert start >= now
        starts.append(start)
    assert starts[1] >= starts[0] * (1 - 1e-12)  # the mean of equal quantiles may round below them


def _process_view(done: int, allocs: tuple = ()) -> RunView:
    """demo3 at 4000 s: ``prepare`` done, ``process`` ready, ``done`` of its 8 tasks done, none running."""
    stages = (
        StageView("prepare", 0, 1, 1, (), done=1, ready_time=0.0, start_time=0.0, end_time=600.0),
        StageView("process", 1, 8, 1, ("prepare",), done=done, ready_time=600.0, start_time=600.0),
        StageView("merge", 2, 1, 1, ("process",)),
    )
    records, busy = split(allocs)
    return RunView(4000.0, WF, stages, records, Knowledge(WF), busy)


@pytest.mark.parametrize("done", [0, 3, 7])
def test_a_ready_stage_is_planned_as_wide_as_its_tasks_not_done(done: int) -> None:
    # Seismology 56, SDSC Blue capacity, run 11: one lost task of 56 was asked 56 cores again
    view = _process_view(done)
    plans = Timeline(view, lambda cores, follow_up: np.zeros(len(timing.PROBS))).chain_plans(view.stages[1:])
    assert [(p.name, p.cores) for p in plans] == [("process", 8 - done), ("merge", 1)]


def test_the_planner_asks_a_stage_left_without_allocations_for_its_tasks_not_done_only() -> None:
    from elastic.strategies.base import Submit
    from elastic.strategies.planner import Planner

    ended = alloc("a1", "process", 8, 3000.0, AllocationState.TIMEOUT, 600.0, 600.0, 3600.0)
    decision = Planner().decide(_process_view(6, (ended,)))
    asked = [a for a in decision.actions if isinstance(a, Submit) and a.stage == "process"]
    assert [a.cores for a in asked] == [2]
