"""The per-view indexes of the stages left and the memo of unstarted durations say what a scan would.

The rules read the stages left (:attr:`RunView.open_stages`) and the ready ones
(:attr:`RunView.active_stages`) instead of scanning every stage several times per decision, and the
expected duration of a stage not started from :meth:`Knowledge.unstarted_durations`; both must agree
with the plain computation whatever the stages' states, and the memo must follow every change that moves
an expected duration.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from elastic.allocations import Allocation, AllocationState
from elastic.strategies.allocation_index import AllocationIndexes
from elastic.strategies.base import RunView, StageView
from elastic.strategies.knowledge import TOTAL, Knowledge, MemoryHistory
from elastic.strategies.rules import remaining_work
from elastic.workflow import Stage, Workflow

STATES = st.sampled_from(["waiting", "ready", "running", "done"])


def _view(states: list[str], now: float = 1_000.0) -> RunView:
    workflow = Workflow("w", tuple(Stage(f"s{i}", 2, 1, runtime=60.0 + i) for i in range(len(states))))
    stages = []
    for i, state in enumerate(states):
        ready = None if state == "waiting" else 10.0
        start = 20.0 * i if state in ("running", "done") else None
        end = start + 30.0 if state == "done" and start is not None else None
        stages.append(StageView(f"s{i}", i, 2, 1, (), ready_time=ready, start_time=start, end_time=end))
    return RunView(now, workflow, tuple(stages), (), Knowledge(workflow))


@given(st.lists(STATES, min_size=1, max_size=12))
def test_the_stages_left_and_the_ready_ones_are_the_plain_filters_in_plan_order(states: list[str]) -> None:
    view = _view(states)
    assert view.open_stages == tuple(s for s in view.stages if not s.complete)
    assert view.active_stages == tuple(s for s in view.stages if s.ready and not s.complete)
    assert view.done == all(s.complete for s in view.stages)
    later = view.at(view.now + 5.0)  # the clock alone moves: the same stages, the same answers
    assert later.open_stages == view.open_stages and later.active_stages == view.active_stages
    need = [min(s.width, (s.tasks - s.done) * s.cores) if s.ready else s.width for s in view.open_stages]
    assert view.width_left(TOTAL) == (max(1, *need) if need else 1)


@given(st.lists(STATES, min_size=1, max_size=12))
def test_the_work_left_is_the_sum_of_each_stage_s_expected_work_in_plan_order(states: list[str]) -> None:
    view = _view(states)
    k = view.knowledge
    total = 0.0
    for s in view.stages:
        if s.complete:
            continue
        if s.start_time is None:
            total += k._expected_duration(s.name, 0.0)
        else:
            elapsed = view.now - s.start_time
            total += max(0.0, k._expected_duration(s.name, elapsed) - elapsed)
    assert remaining_work(view, TOTAL) == total  # the same additions in the same order: the same bits


def test_the_memo_of_unstarted_durations_follows_every_change_that_moves_them() -> None:
    workflow = Workflow("w", (Stage("a", 1, 1, runtime=100.0), Stage("b", 1, 1, runtime=50.0)))
    k = Knowledge(workflow, history=MemoryHistory(), min_history=2)
    assert k.expected_duration("a") == 100.0  # the prior, remembered
    assert k.unstarted_durations() == {"a": 100.0}
    k.record_runtime("a", 10.0)
    k.record_runtime("a", 30.0)  # enough history: the mean of the recorded runtimes
    assert "a" not in k.unstarted_durations()
    assert k.expected_duration("a") == 20.0
    k.min_history = 3  # not enough history again: back to the prior
    assert k.expected_duration("a") == 100.0
    k.workflow = Workflow("w", (Stage("a", 1, 1, runtime=70.0), Stage("b", 1, 1, runtime=50.0)))
    assert k.expected_duration("a") == 70.0  # a grown or edited plan has other priors
    k.default_runtime = 5.0
    assert k.unstarted_durations() == {}


_LABELS = ("s0", "s1", "s2", "s3")
_ALLOC_STATES = st.sampled_from(
    [AllocationState.REQUESTED, AllocationState.RUNNING, AllocationState.COMPLETED, AllocationState.TIMEOUT]
)


@st.composite
def _allocations(draw: st.DrawFn) -> tuple[Allocation, ...]:
    out = []
    for i in range(draw(st.integers(0, 10))):
        stage = draw(st.sampled_from(_LABELS))
        serves = tuple(draw(st.lists(st.sampled_from(_LABELS), max_size=3, unique=True)))
        out.append(
            Allocation(f"j{i}", cores=1, walltime=60.0, stage=stage, serves=serves, state=draw(_ALLOC_STATES))
        )
    return tuple(out)


@given(_allocations(), st.data(), st.booleans())
def test_a_view_with_allocations_replaced_indexes_what_a_view_built_afresh_does(
    allocations: tuple[Allocation, ...], data: st.DataObject, kept_order: bool
) -> None:
    # a planner's holds keep running allocations for other stages or release them: the view it reads
    # then has their indexes remade in place, and must answer as one built from its allocations does
    base = _view(["ready", "running", "waiting", "done"])
    view = dataclasses.replace(base, allocations=allocations)
    if kept_order:  # as run control keeps them: the places known
        order = {a.alloc_id: i for i, a in enumerate(allocations)}
        indexes = dataclasses.replace(AllocationIndexes.of(allocations), order=order)
        view = RunView(base.now, base.workflow, base.stages, allocations, base.knowledge, indexes=indexes)
    live = [a for a in allocations if not a.ended]
    changed: dict[str, Allocation] = {}
    for a in data.draw(st.lists(st.sampled_from(live), unique_by=lambda a: a.alloc_id)) if live else []:
        if data.draw(st.booleans()):
            serves = tuple(data.draw(st.lists(st.sampled_from(_LABELS), max_size=3, unique=True)))
            changed[a.alloc_id] = dataclasses.replace(a, serves=serves)
        else:
            changed[a.alloc_id] = dataclasses.replace(a, cancelled=True)
    got = view.replacing(changed)
    want = dataclasses.replace(view, allocations=tuple(changed.get(a.alloc_id, a) for a in allocations))
    assert got.allocations == want.allocations
    assert got.live_allocations == want.live_allocations
    for label in (*_LABELS, "other"):
        assert got.allocations_for(label) == want.allocations_for(label)
        assert got.allocations_serving(label) == want.allocations_serving(label)
        assert got.allocations_serving(label, live_only=True) == want.allocations_serving(
            label, live_only=True
        )
    assert set(got._indexes.by_label) == set(want._indexes.by_label)  # no label left without allocations
    assert got.open_stages == view.open_stages and got.stages is view.stages
    if not changed:
        assert got is view
