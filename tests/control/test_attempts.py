"""Per-task attempts (:mod:`elastic.control.attempts`) and the re-run bound both demands report."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.control.attempts import Attempts, lost_alone
from elastic.control.demand import DeclaredDemand
from elastic.control.live import LiveDemand
from elastic.control.sim_execution import SimExecution
from elastic.metrics import Event, EventKind
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow

steps = st.lists(st.tuples(st.sampled_from(["t0", "t1", "t2"]), st.floats(0, 1000)), max_size=30)


@given(steps)
def test_a_task_re_run_ends_no_sooner_than_its_restart_plus_what_its_lost_attempts_ran(
    moves: list[tuple[str, float]],
) -> None:
    # each task cycles start -> lost -> start -> ... ; the model is kept by hand beside it
    a, now = Attempts(), 0.0
    running: dict[str, float] = {}
    spent: dict[str, float] = {}
    lost_at: dict[str, float] = {}
    for task, gap in moves:
        now += gap
        if task in running:
            a.lost(task, now)
            spent[task] = spent.get(task, 0.0) + now - running.pop(task)
            lost_at[task] = now
        else:
            a.start(task, now)
            running[task] = now
        expected = [running.get(t, lost_at.get(t, 0.0)) + s for t, s in spent.items()]
        assert a.rerun_end() == (max(expected) if expected else None)
        assert a.oldest_start() == min(running.values(), default=None)
    for task in sorted(set(running) | set(spent)):
        ran = a.end(task, now + 1.0)
        assert ran == pytest.approx(spent.get(task, 0.0) + (now + 1.0 - running.get(task, now + 1.0)))
    assert a.rerun_end() is None


def test_a_declared_stage_reports_when_its_lost_task_can_end_at_the_soonest() -> None:
    wf = Workflow("w", (Stage("s", tasks=2, cores=1, runtime=100.0),))
    records: list[Event] = []
    demand = DeclaredDemand(wf, SimExecution(), Knowledge(wf), records.append, np.random.default_rng(0))
    demand.update(0.0)
    for task in ("s.0", "s.1"):
        demand.observe(Event(0.0, EventKind.TASK_START, stage="s", allocation="a1", task=task))
    assert demand.stages()[0].rerun_end is None
    assert demand.stages()[0].running_since == 0.0
    demand.observe(Event(300.0, EventKind.TASK_LOST, stage="s", allocation="a1", task="s.1"))
    assert demand.stages()[0].rerun_end == 600.0  # waits for cores: from its loss
    demand.observe(Event(400.0, EventKind.TASK_START, stage="s", allocation="a2", task="s.1"))
    assert demand.stages()[0].rerun_end == 700.0
    assert demand.stages()[0].running_since == 0.0  # s.0 runs since 0 s, s.1 again since 400 s
    demand.observe(Event(750.0, EventKind.TASK_END, stage="s", allocation="a2", task="s.1"))
    assert demand.stages()[0].rerun_end is None


spans = st.lists(
    st.tuples(st.integers(0, 50), st.integers(0, 20)).map(lambda t: (float(t[0]), float(t[0] + t[1])))
)


@given(spans, spans)
def test_lost_alone_is_the_time_only_lost_attempts_ran(
    lost: list[tuple[float, float]], kept: list[tuple[float, float]]
) -> None:
    # on whole seconds, counted second by second
    def covered(at: float, spans: list[tuple[float, float]]) -> bool:
        return any(s <= at < e for s, e in spans)

    expected = sum(1.0 for t in range(80) if covered(t + 0.5, lost) and not covered(t + 0.5, kept))
    assert lost_alone(lost, kept) == expected


def test_a_front_door_stage_reports_when_its_oldest_running_attempt_started() -> None:
    live = LiveDemand("live", record=[].append, clock=lambda: 0.0, idle_timeout=1000.0)
    for name in ("t0", "t1"):
        live.queued("s", 1, None, task=name)

    def step(kind: EventKind, at: float, name: str) -> float | None:
        live.observe(Event(at, kind, stage="s", allocation="a", task=name, cores=1))
        live.update(at)
        (view,) = live.stages()
        return view.running_since

    assert step(EventKind.TASK_START, 10.0, "t0") == 10.0
    assert step(EventKind.TASK_START, 20.0, "t1") == 10.0
    assert step(EventKind.TASK_LOST, 70.0, "t0") == 20.0  # the lost attempt no longer runs
    assert step(EventKind.TASK_START, 100.0, "t0") == 20.0
    assert step(EventKind.TASK_END, 130.0, "t1") == 100.0
    assert step(EventKind.TASK_END, 200.0, "t0") is None
