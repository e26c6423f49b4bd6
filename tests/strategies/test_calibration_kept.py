"""The calibration keeps what cannot change: the same factor as reading every request again.

:meth:`~elastic.strategies.planner_waits.QueueWaits.calibrated` matched every request the planner made
on an estimate to its batch jobs at every decision (thousands on a 5,000-stage DAG). A request none of
whose jobs still waits, made more than 2 s before any other open request of its stage, is now settled
once and read back. These runs check, at every decision of whole simulated runs on a busy queue, that
the factor is the one a fresh reading of every request gives.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from elastic.experiments import default_background, simulate_runs
from elastic.strategies.base import RunView
from elastic.strategies.planner import Planner
from elastic.strategies.planner_waits import QueueWaits
from elastic.workflow import Stage, Workflow


def _dag(n: int, seed: int) -> Workflow:
    """Random stages of 1-16 cores, each after one or two of the four before it, or none."""
    rng = np.random.default_rng(seed)
    stages = []
    for i in range(n):
        deps = (
            None
            if i == 0
            else tuple(f"s{j}" for j in sorted({int(x) for x in rng.integers(max(0, i - 4), i, 2)}))
        )
        if i and rng.random() < 0.1:
            deps = ()
        cores = int(rng.choice([1, 2, 4]))
        tasks = int(rng.integers(1, 5))
        stages.append(Stage(f"s{i}", tasks, cores, runtime=float(rng.uniform(120, 1800)), depends_on=deps))
    return Workflow(f"dag{n}", tuple(stages))


@pytest.mark.parametrize("seed", [1, 2])
def test_every_decision_reads_the_factor_a_fresh_reading_gives(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = QueueWaits.calibrated
    kept: list[int] = []

    def checked(self: QueueWaits, view: RunView) -> float:
        got = original(self, view)
        fresh = QueueWaits()
        fresh.given = dict(self.given)
        assert got == original(fresh, view), view.now  # the same float: the sums in the same order
        kept.append(len(self._final))
        return got

    monkeypatch.setattr(QueueWaits, "calibrated", checked)
    (result,) = simulate_runs(
        _dag(40, seed), "asa", runs=1, seed=seed, background=default_background(64, seed=seed)
    )
    assert result.status == "completed"
    assert kept and max(kept) >= 10  # most requests were settled and read back, not matched again


def _view(now: float, starts: tuple[float | None, float | None], eligible: float = 0.0) -> RunView:
    from tests.strategies.test_planner import _calibration_view

    view = _calibration_view(now, starts)
    pieces = tuple(
        dataclasses.replace(a, eligible_time=eligible) if a.pending else a for a in view.allocations
    )
    return dataclasses.replace(view, allocations=pieces)


def _planner() -> Planner:
    from tests.strategies.test_planner import _first_request_view

    planner = Planner()
    planner.decide(_first_request_view(wait=3600.0))  # wide1's request, made at 0 on an estimate of an hour
    assert list(planner.queue.given) == [(0.0, "wide1")]
    return planner


def test_a_request_with_a_piece_still_waiting_is_read_again() -> None:
    planner = _planner()
    factor = math.exp(math.log(660.0 / 3660.0) / 2)
    assert planner.queue.calibrated(_view(900.0, (600.0, None))) == pytest.approx(factor)
    assert not planner.queue._final  # its second piece waits: what matches it may still change
    # that piece was made eligible only later (as a job held by a dependency is): no request was made at
    # 0 any more, and the estimate is forgotten, as a fresh reading would
    assert planner.queue.calibrated(_view(1000.0, (600.0, None), eligible=950.0)) == 1.0
    assert not planner.queue.given


def test_a_request_whose_pieces_all_started_is_settled_and_read_back() -> None:
    planner = _planner()
    factor = math.exp(math.log(660.0 / 3660.0) / 2)
    assert planner.queue.calibrated(_view(900.0, (600.0, 800.0))) == pytest.approx(factor)
    assert planner.queue._final == {(0.0, "wide1"): pytest.approx(math.log(660.0 / 3660.0))}
    # read back, not matched again: the view need not even hold its jobs any more
    later = dataclasses.replace(_view(1000.0, (600.0, 800.0)), allocations=())
    assert planner.queue.calibrated(later) == pytest.approx(factor)


def test_requests_of_one_stage_within_2_s_of_each_other_are_not_settled() -> None:
    planner = _planner()
    planner.queue.given[(1.5, "wide1")] = 60.0  # may take the first one's jobs: both stay open
    planner.queue.calibrated(_view(900.0, (600.0, 800.0)))
    assert not planner.queue._final
