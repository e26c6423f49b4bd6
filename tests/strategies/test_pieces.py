"""A request submitted as several batch jobs asks two waves where that costs no wait, for every strategy."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import AllocationState
from elastic.experiments import default_background, simulate_runs
from elastic.report.scaling import scale_workflow
from elastic.simulator.synthetic import synthetic_workload
from elastic.strategies import TOTAL, BigJob, Knowledge, PerStage, RunView, StageView, Submit
from elastic.strategies.pieces import WAVES, WAVES_SLACK, split_walltime, waves_walltime
from elastic.strategies.planner_rules import SHORTEN_SLACK, _shortened
from elastic.timeline import EventKind
from elastic.workflow import builtin_workflow
from tests.strategies.views import alloc

WF = builtin_workflow("demo3")  # prepare 1x1 (600 s), process 8x1 (1800 s, cv 0.2), merge 1x1 (300 s)


class _Queue:
    """A scheduler's estimate: ``wait(walltime)`` seconds for any width; records what it was asked."""

    def __init__(self, wait: object) -> None:
        self.wait = wait
        self.asked: list[tuple[int, float]] = []

    def __call__(self, cores: int, walltime: float, releasing: object = ()) -> float | None:
        self.asked.append((cores, walltime))
        return self.wait(walltime)  # type: ignore[operator]


def _halves(cores: int, task: int) -> tuple[int, ...]:
    """Run control's jobs with ``job_cores`` 4 (tasks of one core here)."""
    return tuple([4] * (cores // 4) + ([cores % 4] if cores % 4 else []))


def _view(queue: _Queue | None, *, split: bool = True, max_walltime: float | None = None) -> RunView:
    stages = tuple(
        StageView(s.name, i, s.tasks, s.cores, s.depends_on or (), ready_time=0.0 if i == 0 else None)
        for i, s in enumerate(WF.stages)
    )
    knowledge = Knowledge(WF, max_walltime=max_walltime)
    return RunView(0.0, WF, stages, (), knowledge, estimate=queue, job_widths=_halves if split else None)


@settings(max_examples=60, deadline=None)
@given(
    short=st.floats(0.0, 1e5),
    extra=st.floats(-1e4, 1e4),
    walltime=st.floats(60.0, 1e5),
    idling=st.floats(0.0, 1e4),
)
def test_two_waves_exactly_where_the_estimate_starts_them_no_later(
    short: float, extra: float, walltime: float, idling: float
) -> None:
    one = walltime + idling
    queue = _Queue(lambda w: short if w <= one else max(0.0, short + extra))
    asked = waves_walltime(_view(queue), 4, walltime, idling)
    long_wait = max(0.0, short + extra)
    expected = walltime * WAVES + idling if long_wait <= short + WAVES_SLACK else one
    assert asked == expected
    assert all(width == 4 for width, _ in queue.asked)


def test_one_wave_without_an_estimate_or_where_the_queue_cannot_say() -> None:
    assert waves_walltime(_view(None), 4, 1000.0) == 1000.0
    assert waves_walltime(_view(_Queue(lambda w: None)), 4, 1000.0) == 1000.0
    # the short request has an estimate, the long one none (beyond what the queue can plan)
    assert waves_walltime(_view(_Queue(lambda w: 0.0 if w <= 1000.0 else None)), 4, 1000.0) == 1000.0


def test_never_beyond_the_partitions_limit() -> None:
    queue = _Queue(lambda w: 0.0)
    assert waves_walltime(_view(queue, max_walltime=1500.0), 4, 1000.0) == 1500.0
    assert waves_walltime(_view(queue, max_walltime=900.0), 4, 1000.0) == 1000.0  # never below one wave


def test_a_request_asked_as_one_job_keeps_its_walltime_and_asks_nothing() -> None:
    queue = _Queue(lambda w: 0.0)
    assert split_walltime(_view(queue, split=False), 8, 1000.0) == 1000.0
    assert split_walltime(_view(queue), 4, 1000.0) == 1000.0  # one job of 4 cores
    assert queue.asked == []
    assert split_walltime(_view(queue), 10, 1000.0) == 2000.0  # jobs of 4, 4 and 2: the widest asked
    assert {width for width, _ in queue.asked} == {4}


@pytest.mark.parametrize("split", [True, False])
def test_per_stage_and_big_job_ask_two_waves_for_split_requests_only(split: bool) -> None:
    view = _view(_Queue(lambda w: 0.0), split=split)
    (stage,) = [s for s in PerStage().decide(view).actions if isinstance(s, Submit)]
    (big,) = [s for s in BigJob().decide(view).actions if isinstance(s, Submit)]
    # Per-Stage asks the ready stage, prepare (1 core: one job however split); Big-Job every stage (8)
    assert (stage.stage, stage.cores, stage.walltime) == ("prepare", 1, view.knowledge.walltime("prepare"))
    assert (big.stage, big.cores) == (TOTAL, 8)
    assert big.walltime == view.knowledge.walltime(TOTAL) * (WAVES if split else 1)
    assert (stage.waves, big.waves) == (1, WAVES if split else 1)  # the record says what was asked


@pytest.mark.parametrize("strategy", ["bigjob", "perstage"])
def test_split_baselines_on_an_idle_mock_queue_ask_two_waves_and_plain_ones_one(strategy: str) -> None:
    """Through run control on the mock queue, where every job starts at once: jobs of a split request ask
    twice what the plain request asks; a 1-core stage's request, one job in either shape, the same."""
    wf = builtin_workflow("montage")  # 28 cores wide: the split shape's jobs are 14 cores
    idle = synthetic_workload(jobs=1, processors=64, utilisation=0.01, max_cores=1, seed=0)

    def initial(label: str) -> dict[int, set[float]]:
        (run,) = simulate_runs(wf, label, runs=1, seed=3, background=idle)
        out: dict[int, set[float]] = {}
        for e in run.events:
            if e.kind is EventKind.ALLOC_SUBMIT and e.note == "initial":
                out.setdefault(int(e.cores or 0), set()).add(float(e.walltime or 0.0))
        return out

    plain, split = initial(strategy), initial(f"{strategy}-split")
    assert split[14] == {WAVES * w for w in plain[28]}
    assert split.get(1) == plain.get(1)


def _waiting_piece(walltime: float, waves: int, estimate: _Queue | None) -> tuple[RunView, float]:
    """A view where ``process`` is ready and a piece of its request, asked ``waves`` waves, still waits."""
    stages = tuple(
        StageView(s.name, i, s.tasks, s.cores, s.depends_on or (), ready_time=0.0 if i < 2 else None)
        for i, s in enumerate(WF.stages)
    )
    stages = (dataclasses.replace(stages[0], done=1, end_time=0.0), *stages[1:])
    piece, _ = alloc("a2", "process", 4, walltime, AllocationState.REQUESTED, 0.0, piece_of="a2", waves=waves)
    knowledge = Knowledge(WF)
    view = RunView(100.0, WF, stages, (piece,), knowledge, estimate=estimate, job_widths=_halves)
    return view, knowledge.walltime("process")


@pytest.mark.parametrize("waves", [1, 2])
def test_a_waiting_piece_drops_its_cover_and_keeps_the_waves_it_asked(waves: int) -> None:
    # the estimate now says two waves would wait a day longer: it is not asked again
    queue = _Queue(lambda w: 0.0 if w <= 3000.0 else 86_400.0)
    one = Knowledge(WF).walltime("process")
    asked = one * waves + 5_000.0  # with 5,000 s of cover to idle until the stage's need
    view, one = _waiting_piece(asked, waves, queue)
    (shorten,) = _shortened(view)
    assert (shorten.alloc_id, shorten.walltime) == ("a2", math.ceil(one * waves))
    assert queue.asked == []
    # asked no more than its waves need (within the slack): left as it is
    view, _ = _waiting_piece(one * waves + SHORTEN_SLACK, waves, queue)
    assert _shortened(view) == []


def test_seismology_28_run_15_keeps_its_second_wave_and_no_piece_runs_out() -> None:
    """The run that showed it (busy synthetic queue): a piece lowered to one wave while it waited lost a
    straggler at 9.8 h and the run took 16.7 h, against both split baselines' 11.1 h."""
    wf = scale_workflow(builtin_workflow("seismology"), 28, scaling="weak")
    runs = simulate_runs(wf, "asa", runs=16, seed=1, background=default_background(64, seed=1))
    timeouts = [e for e in runs[15].events if e.kind is EventKind.ALLOC_END and e.note == "TIMEOUT"]
    assert timeouts == []
    assert runs[15].metrics.makespan < 12 * 3600
