"""Issue 31: planning a declared workflow costs at most stages squared, counted in operations (no timing).

A declared chain of 1,000 stages took 141 s to simulate and 5,000 got through 36 stages in 300 s: the
planner's search re-summed every stage left for each one (n squared per decision, n cubed per run), and
stage lookups by name scanned the workflow. Each decision's planning must now read each stage a bounded
number of times (linear per decision; a run has about two decisions per stage), and a whole simulated run
of a chain must grow no faster than the square of its stages.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from elastic.control import demand
from elastic.experiments import simulate_runs
from elastic.simulator.synthetic import synthetic_workload
from elastic.strategies import timing
from elastic.strategies.base import StageView
from elastic.strategies.planner_rules import _beside, _dag_order
from elastic.strategies.search import StagePlan, plan
from elastic.workflow import Stage, Workflow


class _Counted:
    """A stage whose every attribute read is counted in ``reads[0]``."""

    def __init__(self, stage: object, reads: list[int]) -> None:
        self._stage, self._reads = stage, reads

    def __getattr__(self, name: str) -> Any:
        self._reads[0] += 1
        return getattr(self._stage, name)


def _search_reads(n: int) -> int:
    reads = [0]
    stages = [_Counted(StagePlan(f"s{i}", 1 + i % 4, 60.0 + i % 7), reads) for i in range(n)]
    plan(
        cast(list[StagePlan], stages),
        held=2,
        lead=0.0,
        waits=lambda cores, follow_up: np.full(len(timing.PROBS), 30.0 * cores),
        prices=timing.Prices(beta=4.0),
        model=None,
    )
    return reads[0]


def _dag_reads(n: int) -> int:
    reads = [0]
    views = [
        StageView(
            f"s{i}", i, 1 + i % 3, 1, () if i == 0 else (f"s{i - 1}",) + ((f"s{i - 2}",) if i % 5 else ())
        )
        for i in range(n)
    ]
    chain = cast(list[StageView], [_Counted(v, reads) for v in views])
    _beside(_dag_order(chain), [60.0 + i % 11 for i in range(n)])
    return reads[0]


def test_one_search_reads_each_stage_a_bounded_number_of_times() -> None:
    small, large = _search_reads(50), _search_reads(200)
    assert large <= 4.4 * small, (small, large)  # linear: 4x the stages, 4x the reads (n squared: 16x)


def test_ordering_a_dag_and_its_siblings_reads_each_stage_a_bounded_number_of_times() -> None:
    small, large = _dag_reads(200), _dag_reads(800)
    assert large <= 4.4 * small, (small, large)


def _views_made(n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    made = [0]
    original = demand._Stage.view

    def view(self: demand._Stage) -> StageView:
        made[0] += 1
        return original(self)

    monkeypatch.setattr(demand._Stage, "view", view)
    stages = tuple(Stage(f"s{i}", 1 + i % 3, 1, runtime=60.0 + 30 * (i % 4)) for i in range(n))
    background = synthetic_workload(jobs=300, processors=16, utilisation=0.3, max_cores=8, seed=1)
    simulate_runs(Workflow(f"chain{n}", stages), "perstage", runs=1, seed=1, background=background)
    return made[0]


def test_a_simulated_run_remakes_only_the_stage_views_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    # every stage's view remade at each of about 2n steps made each step cost n
    small, large = _views_made(20, monkeypatch), _views_made(60, monkeypatch)
    assert large <= 3.3 * small, (small, large)  # linear: 3x; remade every step: 9x
