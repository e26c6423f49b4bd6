"""Contract every registered strategy meets (one suite for all, like the learners' and backends')."""

from __future__ import annotations

import pytest

from elastic.allocations import AllocationState
from elastic.learners.asa import ASAEstimator
from elastic.strategies import (
    STRATEGY_NAMES,
    TOTAL,
    Cancel,
    Knowledge,
    RunView,
    StageView,
    Strategy,
    Submit,
    make_strategy,
)
from elastic.workflow import builtin_workflow
from tests.strategies.views import Allocation, alloc, split

WF = builtin_workflow("demo3")


def _stages(done: int) -> tuple[StageView, ...]:
    """The first ``done`` stages complete, the next one ready."""
    out = []
    t = 0.0
    for i, s in enumerate(WF.stages):
        if i < done:
            out.append(
                StageView(s.name, i, s.tasks, s.cores, s.depends_on or (), s.tasks, 0, t, t, t + 600.0)
            )
            t += 600.0
        elif i == done:
            out.append(StageView(s.name, i, s.tasks, s.cores, s.depends_on or (), ready_time=t))
        else:
            out.append(StageView(s.name, i, s.tasks, s.cores, s.depends_on or ()))
    return tuple(out)


def _view(now: float, done: int, allocs: tuple[tuple[Allocation, int], ...] = ()) -> RunView:
    knowledge = Knowledge(WF, waits=ASAEstimator(grid=[100.0, 1e5], policy="greedy"))
    records, busy = split(allocs)
    return RunView(now, WF, _stages(done), records, knowledge, busy)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_is_a_strategy_named_as_registered(name: str) -> None:
    strategy = make_strategy(name)
    assert isinstance(strategy, Strategy)
    assert strategy.name == name


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_first_decision_requests_cores_for_the_first_stage(name: str) -> None:
    decision = make_strategy(name).decide(_view(0.0, 0))
    submits = [a for a in decision.actions if isinstance(a, Submit)]
    assert submits, "nothing requested at the start: the run could never begin"
    first = submits[0]
    assert first.stage in (TOTAL, "prepare") and first.walltime > 0 and 1 <= first.cores <= WF.max_width
    assert first.reason == "initial"


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_never_requests_for_a_finished_stage_and_releases_idle_allocations(name: str) -> None:
    idle = tuple(
        alloc(f"a{i}", label, 8, 1e4, AllocationState.RUNNING, 0.0, 0.0)
        for i, label in enumerate(("prepare", "process", "merge", TOTAL))
    )
    decision = make_strategy(name).decide(_view(1800.0, 3, idle))
    assert not [a for a in decision.actions if isinstance(a, Submit)]
    assert {a.alloc_id for a in decision.actions if isinstance(a, Cancel)} == {"a0", "a1", "a2", "a3"}


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_a_busy_allocation_of_a_finished_stage_is_kept(name: str) -> None:
    busy = alloc("a1", "prepare", 1, 1e4, AllocationState.RUNNING, 0.0, 0.0, busy=1)
    decision = make_strategy(name).decide(_view(700.0, 1, (busy,)))
    assert "a1" not in {a.alloc_id for a in decision.actions if isinstance(a, Cancel)}
