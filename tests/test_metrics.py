"""Metrics on hand-made timelines (issue 4: known makespan, waits and core-hours)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.errors import ConfigError
from elastic.metrics import (
    Event,
    EventKind,
    MetricsRecorder,
    PredictionOutcome,
    compute_metrics,
    core_seconds_used,
)

K = EventKind


def _timeline() -> list[Event]:
    # Stage A (1 x 1 core) then stage B (2 x 1 core). ASA-like: a2 for B is pre-submitted at 250 while A
    # runs; a2 starts at 350 (idle until A ends at 400); a2 hits its walltime (300 s) at 650 with task
    # B.1 still running -> B.1 lost, follow-up a3 (submitted at 600) re-runs it.
    return [
        Event(0.0, K.RUN_START),
        Event(0.0, K.STAGE_READY, stage="A"),
        Event(0.0, K.ALLOC_SUBMIT, allocation="a1", stage="A", cores=1, walltime=1000.0, note="initial"),
        Event(100.0, K.ALLOC_START, allocation="a1"),
        Event(100.0, K.TASK_START, task="A.0", stage="A", allocation="a1", cores=1),
        Event(
            250.0,
            K.ALLOC_SUBMIT,
            allocation="a2",
            stage="B",
            cores=2,
            walltime=300.0,
            predicted_wait=200.0,
            note="initial",
        ),
        Event(350.0, K.ALLOC_START, allocation="a2"),
        Event(400.0, K.TASK_END, task="A.0", stage="A", allocation="a1", cores=1),
        Event(400.0, K.STAGE_END, stage="A"),
        Event(400.0, K.STAGE_READY, stage="B"),
        Event(400.0, K.ALLOC_END, allocation="a1", note="CANCELLED"),
        Event(400.0, K.TASK_START, task="B.0", stage="B", allocation="a2", cores=1),
        Event(400.0, K.TASK_START, task="B.1", stage="B", allocation="a2", cores=1),
        Event(
            600.0,
            K.ALLOC_SUBMIT,
            allocation="a3",
            stage="B",
            cores=1,
            walltime=600.0,
            predicted_wait=40.0,
            note="walltime",
        ),
        Event(600.0, K.TASK_END, task="B.0", stage="B", allocation="a2", cores=1),
        Event(650.0, K.TASK_LOST, task="B.1", stage="B", allocation="a2", cores=1),
        Event(650.0, K.ALLOC_END, allocation="a2", note="TIMEOUT"),
        Event(660.0, K.ALLOC_START, allocation="a3"),
        Event(660.0, K.TASK_START, task="B.1", stage="B", allocation="a3", cores=1),
        Event(960.0, K.TASK_END, task="B.1", stage="B", allocation="a3", cores=1),
        Event(960.0, K.STAGE_END, stage="B"),
        Event(960.0, K.ALLOC_END, allocation="a3", note="CANCELLED"),
        Event(960.0, K.RUN_END, note="completed"),
    ]


def test_hand_made_timeline() -> None:
    m = compute_metrics(_timeline(), stages=["A", "B"])
    assert m.makespan == 960.0
    # waits: a1 100-0 = 100, a2 350-250 = 100, a3 660-600 = 60 -> 260; stage A 100, stage B 160
    assert m.queue_wait == 260.0
    a, b = m.stages
    assert (a.name, a.queue_wait, b.name, b.queue_wait) == ("A", 100.0, "B", 160.0)
    # perceived: A first start 100 - ready 0 = 100; B first start 400 - ready 400 = 0
    assert (a.perceived_wait, b.perceived_wait, m.perceived_wait) == (100.0, 0.0, 100.0)
    # execution: A 400-100 = 300; B last end 960 - first start 400 = 560
    assert (a.execution_time, b.execution_time) == (300.0, 560.0)
    # charged: a1 1x(400-100)=300 + a2 2x(650-350)=600 + a3 1x(960-660)=300 = 1200 core-seconds
    assert m.core_seconds_charged == 1200.0
    # used: A.0 300 + B.0 200 + B.1 lost 250 + B.1 300 = 1050; idle = 2 cores x 50 s before A ends
    # + 1 core x 50 s after B.0 ends on a2 = 150
    assert m.core_seconds_used == 1050.0
    assert m.overhead_core_seconds == 150.0
    assert math.isclose(m.core_hours_charged, 1200 / 3600)
    assert (m.resubmissions, m.allocations, m.lost_tasks) == (1, 3, 1)
    # a2 predicted 200, got 100: over by 100 > slack max(60, 10) -> over; a3 predicted 40, got 60 -> hit
    assert m.predictions == PredictionOutcome(hits=1, over=1, under=0)
    s = m.summary()
    assert s["B.queue_wait"] == 160.0 and s["prediction_misses"] == 1.0


def test_metrics_do_not_depend_on_event_order_for_distinct_times() -> None:
    ev = _timeline()
    assert compute_metrics(list(reversed(ev)), stages=["A", "B"]) == compute_metrics(ev, stages=["A", "B"])


def test_inconsistent_timelines_are_refused() -> None:
    ev = _timeline()
    with pytest.raises(ConfigError, match="exactly one run_end"):
        compute_metrics([e for e in ev if e.kind is not K.RUN_END])
    with pytest.raises(ConfigError, match="'zz' was never submitted"):
        compute_metrics([*ev, Event(5.0, K.ALLOC_START, allocation="zz")])
    with pytest.raises(ConfigError, match="was not running"):
        core_seconds_used([Event(1.0, K.TASK_END, task="t", allocation="a")])


@st.composite
def _packed_run(draw: st.DrawFn) -> list[Event]:
    """Random allocations, each with tasks packed sequentially on each of its cores inside it."""
    events = [Event(0.0, K.RUN_START)]
    n = draw(st.integers(1, 4))
    end_all = 0.0
    for i in range(n):
        submit = float(draw(st.integers(0, 100)))
        start = submit + draw(st.integers(0, 100))
        cores = draw(st.integers(1, 4))
        length = float(draw(st.integers(1, 200)))
        aid = f"a{i}"
        events += [
            Event(submit, K.ALLOC_SUBMIT, allocation=aid, stage="s", cores=cores, walltime=length),
            Event(start, K.ALLOC_START, allocation=aid),
            Event(start + length, K.ALLOC_END, allocation=aid),
        ]
        for c in range(cores):
            t = start
            for j in range(draw(st.integers(0, 3))):
                d = draw(st.integers(0, 50))
                if t + d > start + length:
                    break
                task = f"{aid}.{c}.{j}"
                end = draw(st.sampled_from([K.TASK_END, K.TASK_END, K.TASK_LOST, K.TASK_FAILED]))
                events += [
                    Event(t, K.TASK_START, task=task, stage="s", allocation=aid, cores=1),
                    Event(t + d, end, task=task, stage="s", allocation=aid, cores=1),
                ]
                t += d
        end_all = max(end_all, start + length)
    events.append(Event(end_all, K.RUN_END))
    return events


@settings(max_examples=200, deadline=None)
@given(_packed_run())
def test_used_never_exceeds_charged_and_waits_are_non_negative(events: list[Event]) -> None:
    m = compute_metrics(events)
    # fed one event at a time, as a live run does, the recorder reaches the same figures
    recorder = MetricsRecorder()
    for e in sorted(events, key=lambda e: e.time):
        recorder.add(e)
    assert repr(recorder.metrics()) == repr(m)  # repr: nan == nan
    used = sum(
        e.cores * (e.time - s.time)
        for s in events
        if s.kind is K.TASK_START
        for e in events
        if e.task == s.task and e.kind in (K.TASK_END, K.TASK_LOST, K.TASK_FAILED)
    )
    assert m.core_seconds_used == pytest.approx(used)  # failed and lost attempts used their cores too
    assert m.lost_tasks == sum(1 for e in events if e.kind is K.TASK_LOST)
    assert 0.0 <= m.core_seconds_used <= m.core_seconds_charged + 1e-9
    assert m.overhead_core_seconds >= -1e-9
    assert m.queue_wait >= 0.0 and m.makespan >= 0.0
    for s in m.stages:
        assert math.isnan(s.execution_time) or s.execution_time >= 0.0
