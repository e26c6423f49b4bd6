"""Paced decisions (``Paced``, elastic/strategies/base.py): kept while nothing changed, for ``pace`` s."""

from __future__ import annotations

import pytest

from elastic.backends.mock import MockBackend
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.errors import ConfigError
from elastic.metrics import EventKind
from elastic.strategies import Knowledge, RunView
from elastic.strategies.base import Decision, Paced, Settles
from elastic.strategies.perstage import PerStage
from elastic.strategies.planner import PACE, Planner
from elastic.workflow import Stage, Workflow

CHAIN = Workflow(
    "paced",
    (
        Stage("a", 2, 1, runtime=3600.0),
        Stage("b", 1, 1, runtime=1800.0, depends_on=("a",)),
    ),
)


class _Counting:
    """Per-Stage's decisions, paced (not Settles), recording when it was asked; optional wake-ups."""

    name = "counting"

    def __init__(self, pace: float | None, wake_after: float | None = None) -> None:
        self.pace = pace
        self.inner = PerStage()
        self.asked: list[float] = []
        self.wake_after = wake_after
        self.woken: float | None = None

    def decide(self, view: RunView) -> Decision:
        self.asked.append(view.now)
        decision = self.inner.decide(view)
        if self.wake_after is None:
            return decision
        if self.woken is None:
            self.woken = view.now + self.wake_after
        at = self.woken if self.woken > view.now else None
        return Decision(decision.actions, at)


def _run(strategy: _Counting) -> tuple[list[float], float]:
    runner = Runner(CHAIN, strategy, MockBackend(nodes=4), SimExecution(), Knowledge(CHAIN), seed=3)
    result = runner.run()
    assert result.status == "completed"
    ends = [e.time for e in result.events if e.kind is EventKind.TASK_END]
    return ends, result.metrics.makespan


def test_the_stub_is_paced_and_not_settled() -> None:
    assert isinstance(_Counting(60.0), Paced) and not isinstance(_Counting(60.0), Settles)
    assert isinstance(Planner(), Paced) and Planner().pace == PACE


def test_a_paced_strategy_is_asked_less_often_and_runs_the_same() -> None:
    every, paced = _Counting(None), _Counting(600.0)
    ends_every, makespan_every = _run(every)
    ends_paced, makespan_paced = _run(paced)
    # Per-Stage's decision only changes with its inputs: pacing it changes nothing of the run
    assert ends_paced == ends_every and makespan_paced == makespan_every
    assert len(paced.asked) * 5 < len(every.asked)
    gaps = [b - a for a, b in zip(paced.asked, paced.asked[1:], strict=False)]
    assert max(gaps) <= 600.0 + 30.0  # never kept past its pace (plus one poll)


def test_a_changed_input_is_decided_at_once() -> None:
    paced = _Counting(10_000.0)  # longer than the run: only changes and wake-ups ask again
    ends, _ = _run(paced)
    a_end = max(ends[:2])  # stage a's two tasks end; b becomes ready at that step
    assert any(a_end <= t < a_end + 30.0 for t in paced.asked)


def test_a_paced_decision_is_asked_again_at_its_wake_up() -> None:
    paced = _Counting(10_000.0, wake_after=1234.5)
    _run(paced)
    assert paced.woken is not None
    assert any(abs(t - paced.woken) < 1e-6 for t in paced.asked)


@pytest.mark.parametrize("pace", [-1.0, float("inf"), float("nan"), "300"])
def test_planner_refuses_a_bad_pace(pace: object) -> None:
    with pytest.raises(ConfigError, match="pace"):
        Planner(pace=pace)  # type: ignore[arg-type]


def test_planner_pace_zero_or_none_asks_at_every_step() -> None:
    assert Planner(pace=0).pace is None and Planner(pace=None).pace is None
