"""``asa``'s planning horizon (issue 31): each search plans a bounded number of stages, nothing stalls.

A planner that planned every stage left at each decision made a run of ``n`` stages cost ``n`` squared;
with the horizon a search plans at most :data:`HORIZON` stages (and every ready one), a hold kept across
a long chain is kept for a bounded number of stages, and a workflow within the horizon decides exactly as
with no horizon at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from elastic.errors import ConfigError
from elastic.experiments import simulate_runs
from elastic.simulator.synthetic import synthetic_workload
from elastic.strategies import Knowledge, RunView, StageView
from elastic.strategies import planner as planner_module
from elastic.strategies.base import Decision
from elastic.strategies.planner import Planner
from elastic.strategies.planner_rules import HORIZON, _done_dropped, window, window_after
from elastic.workflow import Stage, Workflow

BACKGROUND = synthetic_workload(jobs=300, processors=16, utilisation=0.3, max_cores=8, seed=1)


def _chain(n: int, *, width: int = 3) -> Workflow:
    stages = tuple(Stage(f"s{i}", 1 + i % width, 1, runtime=60.0 + 30 * (i % 4)) for i in range(n))
    return Workflow(f"chain{n}", stages)


def _dag(n: int) -> Workflow:
    # branches and joins: s{i} after s{i-1}, and every third also after s{i-3}
    stages = [Stage("s0", 4, 1, runtime=120.0)]
    for i in range(1, n):
        deps = (f"s{i - 1}",) + ((f"s{i - 3}",) if i % 3 == 0 and i >= 3 else ())
        stages.append(Stage(f"s{i}", 1 + (i * 5) % 6, 1, runtime=60.0 + 40 * (i % 5), depends_on=deps))
    return Workflow(f"dag{n}", tuple(stages))


class _Record:
    """Each search's stage count, each decision (its repr), and the most labels any allocation had."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.searched: list[int] = []
        self.decisions: list[str] = []
        self.labels = 0
        plan, decide = planner_module.plan, Planner.decide

        def counted(stages: Sequence[Any], **kw: Any) -> Any:
            self.searched.append(len(stages))
            return plan(stages, **kw)

        def recorded(planner: Planner, view: RunView) -> Decision:
            self.labels = max([self.labels, *(len(a.labels) for a in view.allocations)])
            out = decide(planner, view)
            self.decisions.append(repr(out))
            return out

        monkeypatch.setattr(planner_module, "plan", counted)
        monkeypatch.setattr(Planner, "decide", recorded)


def _run(
    workflow: Workflow, horizon: int | None, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> tuple[_Record, str]:
    with monkeypatch.context() as m:
        record = _Record(m)
        (result,) = simulate_runs(
            workflow,
            "asa",
            runs=1,
            seed=1,
            background=BACKGROUND,
            strategy_options={"horizon": horizon, **options},
        )
    return record, result.status


def test_a_hold_is_planned_over_the_hold_horizon_beyond_the_horizon(monkeypatch: pytest.MonkeyPatch) -> None:
    # a hold's search plans at most 3 of the running stage's successors while more than the horizon's 8
    # stages are left (window_after, below), every one after that; the run completes
    _, status = _run(_chain(30, width=1), 8, monkeypatch, hold_horizon=3)
    assert status == "completed"
    within, _ = _run(_chain(8, width=1), 8, monkeypatch, hold_horizon=3)
    as_before, _ = _run(_chain(8, width=1), 8, monkeypatch)
    assert within.decisions == as_before.decisions  # within the horizon the hold horizon changes nothing


@pytest.mark.parametrize("value", [0, -1, 2.5, True, None])
def test_a_bad_hold_horizon_is_refused_naming_it(value: object) -> None:
    with pytest.raises(ConfigError, match="hold_horizon must be a whole number >= 1"):
        Planner(hold_horizon=value)  # type: ignore[arg-type]


def test_a_hold_reads_the_hold_horizon_once_more_than_the_horizon_is_left() -> None:
    stages = tuple(StageView(f"s{i}", i, 1, 1, (f"s{i - 1}",) if i else ()) for i in range(20))
    wf = Workflow("w", tuple(Stage(s.name, 1, 1, 60.0) for s in stages))
    view = RunView(0.0, wf, stages, (), Knowledge(wf))
    assert [s.name for s in window_after(view, stages[2], 10, 4) or ()] == ["s3", "s4", "s5", "s6"]
    assert len(window_after(view, stages[2], 10) or ()) == 10  # the horizon's, as before
    assert len(window_after(view, stages[2], 10, 40) or ()) == 10  # never more than the horizon
    assert window_after(view, stages[2], 20, 4) is None  # within the horizon: every stage after it


def test_each_search_plans_at_most_the_horizon_and_the_run_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    wide, wide_status = _run(_chain(30), None, monkeypatch)
    near, status = _run(_chain(30), 6, monkeypatch)
    assert wide_status == status == "completed"
    assert max(wide.searched) > 6  # without a horizon a search plans the stages left
    assert near.searched and max(near.searched) <= 6


def test_a_dag_longer_than_the_horizon_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    record, status = _run(_dag(24), 4, monkeypatch)
    assert status == "completed"
    assert max(record.searched) <= 4


@pytest.mark.parametrize("workflow", [_chain(12), _dag(12)], ids=["chain", "dag"])
def test_a_workflow_within_the_horizon_decides_as_without_one(
    workflow: Workflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    bounded, _ = _run(workflow, 12, monkeypatch)
    whole, _ = _run(workflow, None, monkeypatch)
    assert bounded.decisions == whole.decisions


def test_a_hold_across_a_long_chain_is_kept_for_a_bounded_number_of_stages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # one-core stages of one width: one allocation is held across the whole chain
    whole, _ = _run(_chain(40, width=1), None, monkeypatch)
    bounded, status = _run(_chain(40, width=1), 5, monkeypatch)
    assert status == "completed"
    assert whole.labels > 2 * 5 + 1  # kept for every stage it ran
    assert bounded.labels <= 2 * 5 + 1


def _view(n: int, ready: Sequence[int], complete: Sequence[int]) -> RunView:
    workflow = Workflow("w", tuple(Stage(f"s{i}", 1, 1, runtime=60.0) for i in range(n)))
    stages = tuple(
        StageView(
            f"s{i}",
            i,
            1,
            1,
            (),
            ready_time=0.0 if i in ready or i in complete else None,
            end_time=10.0 if i in complete else None,
        )
        for i in range(n)
    )
    return RunView(20.0, workflow, stages, (), Knowledge(workflow))


def test_the_window_is_the_first_stages_left_and_every_ready_one() -> None:
    view = _view(10, ready=[2, 8], complete=[0, 1])
    assert [s.name for s in window(view, None)] == [f"s{i}" for i in range(2, 10)]
    assert [s.name for s in window(view, 8)] == [f"s{i}" for i in range(2, 10)]  # all 8 left fit
    assert [s.name for s in window(view, 3)] == ["s2", "s3", "s4", "s8"]  # s8 is ready: planned too
    assert window_after(view, view.stage("s3"), None) is None
    assert [s.name for s in window_after(view, view.stage("s3"), 3) or ()] == ["s4", "s5", "s6"]


def test_done_stages_are_dropped_from_a_hold_only_beyond_the_horizon() -> None:
    view = _view(10, ready=[6], complete=range(6))
    labels = tuple(f"s{i}" for i in range(8))
    assert _done_dropped(view, labels, None) == labels
    assert _done_dropped(view, labels, 8) == labels  # within the horizon: as it was
    assert _done_dropped(view, labels, 3) == ("s6", "s7")
    done = tuple(f"s{i}" for i in range(6))
    assert _done_dropped(view, done, 3) == ("s5",)  # all done: the latest kept (released as before)


@pytest.mark.parametrize("horizon", [0, -1, "8", 2.5])
def test_a_horizon_that_is_not_a_whole_number_of_at_least_one_is_refused(horizon: object) -> None:
    with pytest.raises(ConfigError, match="horizon"):
        Planner(horizon=horizon)  # type: ignore[arg-type]


def test_the_default_horizon_covers_the_published_workflows() -> None:
    from elastic.workflow import builtin_workflow

    for name in ("montage", "blast", "statistics"):
        assert len(builtin_workflow(name).stages) <= HORIZON
    assert Planner().horizon == HORIZON
