"""Metrics that add up (issue 28, item 6): a request's wait, the run's perceived wait, "gap closed"."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.metrics import (
    GAP_MIN_SHARE,
    Event,
    EventKind,
    allocation_waits,
    compute_metrics,
    format_gap,
    gap_closed,
    request_waits,
    union_length,
)

K = EventKind


def _split_run() -> list[Event]:
    # Stage A asks for 4 cores as two 2-core pieces (request a1): a1 starts at 10, a2 at 50. A third
    # piece a3 of the same request is cancelled before it starts. Stage B's own request a4 waits 20 s.
    return [
        Event(0.0, K.RUN_START),
        Event(0.0, K.STAGE_READY, stage="A"),
        Event(0.0, K.ALLOC_SUBMIT, allocation="a1", request="a1", stage="A", cores=2, walltime=500.0),
        Event(0.0, K.ALLOC_SUBMIT, allocation="a2", request="a1", stage="A", cores=2, walltime=500.0),
        Event(0.0, K.ALLOC_SUBMIT, allocation="a3", request="a1", stage="A", cores=2, walltime=500.0),
        Event(10.0, K.ALLOC_START, allocation="a1"),
        Event(10.0, K.TASK_START, task="A.0", stage="A", allocation="a1", cores=2),
        Event(50.0, K.ALLOC_START, allocation="a2"),
        Event(60.0, K.ALLOC_END, allocation="a3", note="CANCELLED"),
        Event(100.0, K.TASK_END, task="A.0", stage="A", allocation="a1", cores=2),
        Event(100.0, K.ALLOC_END, allocation="a1"),
        Event(100.0, K.ALLOC_END, allocation="a2"),
        Event(100.0, K.STAGE_READY, stage="B"),
        Event(100.0, K.ALLOC_SUBMIT, allocation="a4", stage="B", cores=1, walltime=500.0),
        Event(120.0, K.ALLOC_START, allocation="a4"),
        Event(120.0, K.TASK_START, task="B.0", stage="B", allocation="a4", cores=1),
        Event(150.0, K.TASK_END, task="B.0", stage="B", allocation="a4", cores=1),
        Event(150.0, K.ALLOC_END, allocation="a4"),
        Event(150.0, K.RUN_END),
    ]


def test_a_request_waits_until_its_last_piece_started_and_pieces_are_not_summed() -> None:
    ev = _split_run()
    assert allocation_waits(ev) == {"a1": 10.0, "a2": 50.0, "a4": 20.0}
    assert request_waits(ev) == {"a1": 50.0, "a4": 20.0}  # a3 never started: no wait
    m = compute_metrics(ev, stages=["A", "B"])
    assert m.queue_wait == 70.0  # not 10 + 50 + 20 = 80
    assert [(s.name, s.queue_wait) for s in m.stages] == [("A", 50.0), ("B", 20.0)]
    # the stage's work started on the first piece: its perceived wait is 10 s, below its queue wait
    assert [s.perceived_wait for s in m.stages] == [10.0, 20.0]
    assert m.perceived_wait == 30.0


def test_a_piece_held_by_a_dependency_waits_from_its_eligibility() -> None:
    ev = [
        Event(0.0, K.RUN_START),
        Event(0.0, K.ALLOC_SUBMIT, allocation="a1", request="a1", stage="s", cores=1),
        Event(0.0, K.ALLOC_SUBMIT, allocation="a2", request="a1", stage="s", cores=1),
        Event(30.0, K.ALLOC_START, allocation="a1", eligible=20.0),
        Event(45.0, K.ALLOC_START, allocation="a2", eligible=20.0),
        Event(60.0, K.RUN_END),
    ]
    assert request_waits(ev) == {"a1": 25.0}
    assert compute_metrics(ev).queue_wait == 25.0


def test_overlapping_stage_waits_count_once() -> None:
    # two parallel stages ready at 0 wait 0-40 and 10-60: the run waited 60 s, not 90
    ev = [Event(0.0, K.RUN_START), Event(0.0, K.ALLOC_SUBMIT, allocation="a", cores=2)]
    ev += [Event(0.0, K.STAGE_READY, stage=s) for s in ("x", "y")]
    ev += [
        Event(10.0, K.ALLOC_START, allocation="a"),
        Event(40.0, K.TASK_START, task="x0", stage="x", allocation="a", cores=1),
        Event(60.0, K.TASK_START, task="y0", stage="y", allocation="a", cores=1),
        Event(70.0, K.TASK_END, task="x0", stage="x", allocation="a", cores=1),
        Event(70.0, K.TASK_END, task="y0", stage="y", allocation="a", cores=1),
        Event(70.0, K.RUN_END),
    ]
    m = compute_metrics(ev)
    assert [s.perceived_wait for s in m.stages] == [40.0, 60.0]
    assert m.perceived_wait == 60.0


@st.composite
def _dag_run(draw: st.DrawFn) -> tuple[list[Event], list[tuple[int, int]], list[tuple[int, list[int]]]]:
    """A random timeline: stages ready, started and ended at integer times, each on one request of pieces.

    Returns the events, each stage's ``(ready, first start)`` and each request's ``(submit, piece starts)``.
    """
    events: list[tuple[float, int, Event]] = [(0.0, 0, Event(0.0, K.RUN_START))]
    waits: list[tuple[int, int]] = []
    requests: list[tuple[int, list[int]]] = []
    end_all = 0
    for i in range(draw(st.integers(1, 6))):
        stage = f"s{i}"
        ready = draw(st.integers(0, 60))
        start = ready + draw(st.integers(0, 40))
        end = start + draw(st.integers(1, 30))
        submit = draw(st.integers(0, start))
        starts = [start] + [draw(st.integers(submit, end)) for _ in range(draw(st.integers(0, 2)))]
        waits.append((ready, start))
        requests.append((submit, starts))
        rid = f"r{i}"
        events.append((float(ready), 1, Event(float(ready), K.STAGE_READY, stage=stage)))
        for j, piece_start in enumerate(starts):
            aid = f"{rid}.{j}"
            events += [
                (
                    float(submit),
                    2,
                    Event(float(submit), K.ALLOC_SUBMIT, allocation=aid, request=rid, stage=stage),
                ),
                (float(piece_start), 3, Event(float(piece_start), K.ALLOC_START, allocation=aid)),
                (float(end), 6, Event(float(end), K.ALLOC_END, allocation=aid)),
            ]
        task = Event(
            float(start), K.TASK_START, task=f"{stage}.0", stage=stage, allocation=f"{rid}.0", cores=1
        )
        events += [
            (float(start), 4, task),
            (
                float(end),
                5,
                Event(float(end), K.TASK_END, task=task.task, stage=stage, allocation=task.allocation),
            ),
        ]
        end_all = max(end_all, end)
    events.append((float(end_all), 7, Event(float(end_all), K.RUN_END)))
    return [e for _, _, e in sorted(events, key=lambda x: (x[0], x[1]))], waits, requests


@settings(max_examples=300, deadline=None)
@given(_dag_run())
def test_perceived_wait_is_the_union_of_the_stage_waits_and_within_the_makespan(
    run: tuple[list[Event], list[tuple[int, int]], list[tuple[int, list[int]]]],
) -> None:
    events, waits, requests = run
    m = compute_metrics(events)
    assert 0.0 <= m.perceived_wait <= m.makespan
    # brute force on a grid of unit steps: second [t, t + 1) counts when some ready stage had not started
    covered = sum(1 for t in range(int(m.makespan)) if any(r <= t < s for r, s in waits))
    assert m.perceived_wait == covered
    assert m.perceived_wait <= sum(s.perceived_wait for s in m.stages)
    # each request waits until its last piece started, once, however many pieces it has
    assert m.queue_wait == sum(max(starts) - submit for submit, starts in requests)
    assert m.queue_wait <= sum(allocation_waits(events).values())
    assert all(0.0 <= w <= m.makespan for w in request_waits(events).values())


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=8))
def test_union_length_matches_a_grid(pairs: list[tuple[int, int]]) -> None:
    intervals = [(float(min(a, b)), float(max(a, b))) for a, b in pairs]
    covered = sum(1 for t in range(51) if any(a <= t < b for a, b in intervals))
    assert union_length(intervals) == covered


@pytest.mark.parametrize(
    ("bigjob", "perstage", "other", "expected"),
    [
        (4.0, 8.0, 5.0, 0.75),
        (4.0, 8.0, 3.0, 1.25),  # faster than Big-Job: more than the whole gap
        (4.0, 8.0, 9.0, -0.25),  # slower than Per-Stage
        (20.0, 20.0 + 20.0 * GAP_MIN_SHARE, 3.0, math.nan),  # a gap of exactly 5 % (1 h) is too small
        (20.0, 21.0 + 1e-6, 20.0, 1.0),  # just above it counts
        (8.0, 4.0, 5.0, math.nan),  # Per-Stage faster: no gap to close
        (math.nan, 8.0, 5.0, math.nan),
    ],
)
def test_gap_closed_only_where_the_gap_exceeds_five_percent(
    bigjob: float, perstage: float, other: float, expected: float
) -> None:
    got = gap_closed(bigjob, perstage, other)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)
    assert format_gap(got) == ("n/a" if math.isnan(expected) else f"{expected * 100:.0f} %")


def test_the_gap_is_measured_against_the_better_makespan() -> None:
    # 4.1 - 4.0 is 2.5 % of 4.0: n/a (the 1,226 % came from such a gap)
    assert format_gap(gap_closed(4.0, 4.1, 1.0)) == "n/a"
    assert format_gap(gap_closed(4.0, 4.4, 4.2)) == "50 %"


@st.composite
def _packed_allocations(
    draw: st.DrawFn,
) -> tuple[list[Event], list[tuple[int, int, int, list[tuple[int, int]]]]]:
    """A random timeline of allocations each running tasks in core slots, at integer times.

    Each allocation starts at ``start``, ends at ``end`` and runs, on each of its cores, a sequence of
    one-core tasks within ``[start, end]`` (maybe none: it came early, idled after, or ran nothing). Returns
    the events and each allocation's ``(cores, start, end, task intervals)``.
    """
    events: list[tuple[float, int, Event]] = [(0.0, 0, Event(0.0, K.RUN_START))]
    allocs: list[tuple[int, int, int, list[tuple[int, int]]]] = []
    end_all = 0
    n = 0
    for i in range(draw(st.integers(1, 5))):
        aid = f"a{i}"
        cores = draw(st.integers(1, 3))
        start = draw(st.integers(0, 40))
        end = start + draw(st.integers(0, 40))
        events += [
            (0.0, 1, Event(0.0, K.ALLOC_SUBMIT, allocation=aid, stage="s", cores=cores)),
            (float(start), 2, Event(float(start), K.ALLOC_START, allocation=aid)),
            (float(end), 5, Event(float(end), K.ALLOC_END, allocation=aid)),
        ]
        spans: list[tuple[int, int]] = []
        for _ in range(cores):
            t = start
            for _ in range(draw(st.integers(0, 3))):
                a = draw(st.integers(t, end))
                b = draw(st.integers(a, end))
                if b == a:
                    break
                task = f"t{n}"
                n += 1
                events += [
                    (
                        float(a),
                        4,
                        Event(float(a), K.TASK_START, task=task, stage="s", allocation=aid, cores=1),
                    ),
                    (float(b), 3, Event(float(b), K.TASK_END, task=task, stage="s", allocation=aid, cores=1)),
                ]
                spans.append((a, b))
                t = b
        allocs.append((cores, start, end, spans))
        end_all = max(end_all, end)
    events.append((float(end_all), 6, Event(float(end_all), K.RUN_END)))
    return [e for _, _, e in sorted(events, key=lambda x: (x[0], x[1]))], allocs


@settings(max_examples=300, deadline=None)
@given(_packed_allocations())
def test_the_idle_parts_add_up_to_the_idle_core_seconds_and_match_a_grid(
    run: tuple[list[Event], list[tuple[int, int, int, list[tuple[int, int]]]]],
) -> None:
    events, allocs = run
    m = compute_metrics(events)
    parts = m.idle
    assert min(parts.early, parts.between, parts.after, parts.unused) >= 0.0
    assert parts.total == pytest.approx(m.overhead_core_seconds)
    # brute force on unit steps: each idle core-second of an allocation, by where it falls in its tasks
    grid = {"early": 0, "between": 0, "after": 0, "unused": 0}
    for cores, start, end, spans in allocs:
        for t in range(start, end):
            idle = cores - sum(1 for a, b in spans if a <= t < b)
            if not spans:
                grid["unused"] += idle
            elif t < min(a for a, _ in spans):
                grid["early"] += idle
            elif t >= max(b for _, b in spans):
                grid["after"] += idle
            else:
                grid["between"] += idle
    assert (parts.early, parts.between, parts.after, parts.unused) == (
        grid["early"],
        grid["between"],
        grid["after"],
        grid["unused"],
    )
    # the jobs that started and ran no task: those whose cores are the unused part
    assert m.unused_jobs == sum(1 for _, start, end, spans in allocs if not spans)


def test_the_idle_parts_name_what_each_strategy_pays_for() -> None:
    # the split run above: a1 runs A's task from its start to its end; a2 (a piece of the same request)
    # starts 40 s later and runs nothing; a3 never starts (charged nothing); a4 runs B's task throughout
    m = compute_metrics(_split_run(), stages=["A", "B"])
    assert (m.idle.early, m.idle.between, m.idle.after) == (0.0, 0.0, 0.0)
    assert m.idle.unused == 2 * 50.0  # a2's two cores from 50 to 100
    assert m.unused_jobs == 1  # a2 (a3 never started)
    summary = m.summary()
    assert summary["idle_unused_core_hours"] == pytest.approx(100.0 / 3600.0)
    assert summary["overhead_core_hours"] == pytest.approx(
        sum(summary[f"idle_{k}_core_hours"] for k in ("early", "between", "after", "unused"))
    )
