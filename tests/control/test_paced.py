"""Paced decisions (``Paced``, elastic/strategies/base.py): kept while nothing changed, for ``pace`` s."""

from __future__ import annotations

import pytest

from elastic.backends.mock import MockBackend
from elastic.control.controller import PACE_DOUBLINGS
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
    assert max(gaps) <= 600.0 * 2**PACE_DOUBLINGS + 30.0  # never kept past its longest pace (plus one poll)


LONG = Workflow(
    "long",
    (
        Stage("a", 1, 1, runtime=4 * 3600.0),
        Stage("b", 1, 1, runtime=3 * 3600.0, depends_on=("a",)),
    ),
)


def test_the_pace_doubles_while_decisions_do_nothing_and_comes_back_once_one_acts() -> None:
    paced = _Counting(600.0)
    runner = Runner(LONG, paced, MockBackend(nodes=4), SimExecution(), Knowledge(LONG), seed=3)
    assert runner.run().status == "completed"
    gaps = [b - a for a, b in zip(paced.asked, paced.asked[1:], strict=False)]
    longest = 600.0 * 2**PACE_DOUBLINGS
    assert PACE_DOUBLINGS == 2 and longest == 2400.0
    # a is requested at 0 (acted): asked at the next poll (its allocation changed), then kept 5, 10, 20,
    # 20, ... minutes; b is requested at a's end (14,400 s), and the pace starts again at 5 minutes
    assert paced.asked[:5] == [0.0, 30.0, 630.0, 1830.0, 4230.0]
    assert gaps[3:8] == [longest] * 5
    b_asked = paced.asked.index(14_400.0)
    assert gaps[b_asked : b_asked + 4] == [30.0, 600.0, 1200.0, longest]


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


SPREAD = Workflow(
    "spread",
    (
        Stage("a", 6, 1, runtime=1800.0, runtime_cv=0.6),
        Stage("b", 1, 1, runtime=600.0, depends_on=("a",)),
    ),
)


def test_a_task_ending_beside_others_running_is_not_asked_again() -> None:
    """Progress alone (a task ended, its allocation still busy) keeps a paced decision (controller.py)."""
    paced = _Counting(10_000.0)  # longer than the run: only changes and wake-ups ask again
    runner = Runner(SPREAD, paced, MockBackend(nodes=8), SimExecution(), Knowledge(SPREAD), seed=5)
    result = runner.run()
    assert result.status == "completed"
    a_ends = sorted(e.time for e in result.events if e.kind is EventKind.TASK_END and e.stage == "a")
    assert len(set(a_ends)) == 6  # six task ends, at six times
    asked_during = [t for t in paced.asked if a_ends[0] <= t < a_ends[-1]]
    assert asked_during == []  # five of them left the allocation busy: progress
    assert any(a_ends[-1] <= t < a_ends[-1] + 30.0 for t in paced.asked)  # the stage's end is not


def test_every_field_of_a_stage_view_is_progress_or_not() -> None:
    """A field added to StageView must be sorted: a change of any other field is not progress."""
    import dataclasses

    from elastic.strategies.view import StageView

    progress = {"done", "running", "runtime", "task_runtime", "queued", "outstanding", "running_since"}
    base = StageView("a", 0, 4, 1, (), done=1, running=2, ready_time=10.0, start_time=12.0)
    for f in dataclasses.fields(StageView):
        value = getattr(base, f.name)
        if isinstance(value, str):
            other = value + "x"
        elif isinstance(value, tuple):
            other = (*value, "x")
        elif isinstance(value, bool) or value is None:
            other = 7.0
        else:
            other = value + 1
        changed = dataclasses.replace(base, **{f.name: other})
        assert changed.progressed_from(base) is (f.name in progress), f.name
    assert base.progressed_from(base)
