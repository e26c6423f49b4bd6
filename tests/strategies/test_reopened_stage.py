"""A stage that completed, was released, and gets work again gets a new allocation under every strategy.

Regression (found with the Mesos front end: a framework that SUPPRESSes, is released, then REVIVEs): Per-Stage
and Big-Job requested an allocation only for a label that never had one, so a front door's stage that got
new tasks after its allocation was released waited forever.
"""

from __future__ import annotations

import pytest

from elastic.allocations import AllocationState
from elastic.strategies import TOTAL, Knowledge, RunView, StageView, Submit, make_strategy
from elastic.workflow import Stage, Workflow
from tests.strategies.views import alloc, split

WF = Workflow("w", (Stage("s", 2, 1, 60.0),))


def view(label: str, stage: StageView, *, cancelled: bool) -> RunView:
    ended = alloc("a1", label, 2, 600.0, AllocationState.CANCELLED, 0.0, 1.0, 50.0, cancelled=cancelled)
    records, busy = split((ended,))
    return RunView(100.0, WF, (stage,), records, Knowledge(WF), busy)


@pytest.mark.parametrize("name", ["perstage", "bigjob", "asa"])
def test_a_released_stage_with_work_again_gets_a_new_allocation(name: str) -> None:
    label = TOTAL if name == "bigjob" else "s"
    reopened = StageView("s", 0, 2, 1, (), done=1, ready_time=0.0, start_time=1.0)
    submits = [
        a
        for a in make_strategy(name).decide(view(label, reopened, cancelled=True)).actions
        if isinstance(a, Submit)
    ]
    assert [s.stage for s in submits] == [label]  # ("initial"; ASA says "resubmit")


@pytest.mark.parametrize("name", ["perstage", "bigjob"])
def test_a_complete_stage_gets_nothing_and_one_ended_under_us_is_replaced_as_lost(name: str) -> None:
    label = TOTAL if name == "bigjob" else "s"
    complete = StageView("s", 0, 2, 1, (), done=2, ready_time=0.0, start_time=1.0, end_time=50.0)
    assert not make_strategy(name).decide(view(label, complete, cancelled=True)).actions
    running = StageView("s", 0, 2, 1, (), done=1, running=0, ready_time=0.0, start_time=1.0)
    submits = [
        a
        for a in make_strategy(name).decide(view(label, running, cancelled=False)).actions
        if isinstance(a, Submit)
    ]
    assert [s.reason for s in submits] == ["lost"]
