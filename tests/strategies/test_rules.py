"""Strategy decisions on hand-built run views: the timing rules, without a backend."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import AllocationState
from elastic.batch import DependencyKind
from elastic.errors import ConfigError, UnknownNameError
from elastic.learners.asa import ASAEstimator
from elastic.strategies import (
    ASA,
    TOTAL,
    BigJob,
    Knowledge,
    MemoryHistory,
    PerStage,
    RunView,
    StageView,
    Submit,
    make_strategy,
)
from elastic.strategies.actions import Cancel, Shorten
from elastic.strategies.base import release_idle, walltime_checks, walltime_follow_ups
from elastic.strategies.rules import walltimes_so_far
from elastic.workflow import builtin_workflow
from tests.strategies.views import Allocation, alloc, split

WF = builtin_workflow("demo3")  # prepare 1x1 (600 s), process 8x1 (1800 s, cv 0.2), merge 1x1 (300 s)


def _fixed_wait(wait: float) -> ASAEstimator:
    # greedy with no observations predicts the smallest grid value: a deterministic prediction
    return ASAEstimator(grid=[wait, wait + 100_000.0], policy="greedy")


def _stages(**progress: dict[str, float | int | None]) -> tuple[StageView, ...]:
    out = []
    for i, s in enumerate(WF.stages):
        out.append(StageView(s.name, i, s.tasks, s.cores, s.depends_on or (), **progress.get(s.name, {})))  # type: ignore[arg-type]
    return tuple(out)


def _view(
    now: float, stages: tuple[StageView, ...], allocs: tuple[tuple[Allocation, int], ...], wait: float
) -> RunView:
    records, busy = split(allocs)
    return RunView(now, WF, stages, records, Knowledge(WF, waits=_fixed_wait(wait)), busy)


A1_RUNNING = alloc("a1", "prepare", 1, 1000.0, AllocationState.RUNNING, 0.0, 0.0, busy=1)


def test_asa_submits_at_predicted_end_minus_predicted_wait() -> None:
    # prepare started at 0 and is expected to take 600 s (one task: the mean); predicted wait for 8
    # cores is 200 s -> submit "process" at 600 - 200 = 400.
    stages = _stages(prepare={"ready_time": 0.0, "start_time": 0.0, "running": 1})
    asa = ASA()
    early = asa.decide(_view(100.0, stages, (A1_RUNNING,), 200.0))
    assert not [a for a in early.actions if isinstance(a, Submit)]
    assert early.wake_at == pytest.approx(400.0)
    on_time = asa.decide(_view(400.0, stages, (A1_RUNNING,), 200.0))
    (submit,) = [a for a in on_time.actions if isinstance(a, Submit)]
    assert (submit.stage, submit.cores, submit.after, submit.dependency) == (
        "process",
        8,
        ("prepare",),
        DependencyKind.AFTERANY,
    )
    assert submit.predicted_wait == 200.0 and submit.reason == "initial"


def test_asa_plans_the_next_stage_from_a_pending_allocation() -> None:
    # process has a pending allocation (submitted at 400, predicted wait 200 -> ready at 600) and
    # prepare ends ~600, so process is predicted to end at 600 + E[process]; merge is submitted
    # E[process] - wait(merge) before that.
    stages = _stages(prepare={"ready_time": 0.0, "start_time": 0.0, "running": 1})
    a2 = alloc("a2", "process", 8, 3000.0, AllocationState.REQUESTED, 400.0, predicted_wait=200.0)
    asa = ASA()
    view = _view(400.0, stages, (A1_RUNNING, a2), 300.0)
    expected_process = view.knowledge.expected_duration("process")
    assert asa.predicted_end(view, "process") == pytest.approx(600.0 + expected_process)
    decision = asa.decide(view)
    assert decision.wake_at == pytest.approx(600.0 + expected_process - 300.0)


def test_asa_running_stage_uses_progress() -> None:
    # a stage that has outlived its estimate is expected to end soon after now, never in the past
    stages = _stages(prepare={"ready_time": 0.0, "start_time": 0.0, "running": 1})
    view = _view(5000.0, stages, (A1_RUNNING,), 0.0)
    assert ASA().predicted_end(view, "prepare") == pytest.approx(5500.0)  # 1.1 x elapsed


def test_perstage_waits_for_the_stage_to_be_ready() -> None:
    stages = _stages(prepare={"ready_time": 0.0, "start_time": 0.0, "running": 1})
    assert not PerStage().decide(_view(100.0, stages, (A1_RUNNING,), 0.0)).actions
    done = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0},
    )
    a1_idle = alloc("a1", "prepare", 1, 1000.0, AllocationState.RUNNING, 0.0, 0.0)
    actions = PerStage().decide(_view(600.0, done, (a1_idle,), 0.0)).actions
    kinds = sorted(type(a).__name__ for a in actions)
    assert kinds == ["Cancel", "Submit"]
    (submit,) = [a for a in actions if isinstance(a, Submit)]
    assert (submit.stage, submit.cores, submit.after) == ("process", 8, ())


def test_bigjob_is_one_allocation_as_wide_as_the_widest_stage() -> None:
    stages = _stages(prepare={"ready_time": 0.0})
    (submit,) = BigJob().decide(_view(0.0, stages, (), 0.0)).actions
    assert isinstance(submit, Submit) and (submit.stage, submit.cores) == (TOTAL, 8)
    big = alloc("a1", TOTAL, 8, 1e5, AllocationState.RUNNING, 0.0, 0.0, busy=1)
    assert not BigJob().decide(_view(10.0, stages, (big,), 0.0)).actions


def test_release_keeps_busy_allocations_and_drops_pending_ones_of_done_stages() -> None:
    done = _stages(prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1})
    busy = alloc("a1", "prepare", 1, 1000.0, AllocationState.RUNNING, 0.0, 0.0, busy=1)
    pending = alloc("a2", "prepare", 1, 1000.0, AllocationState.REQUESTED, 500.0)
    assert [c.alloc_id for c in release_idle(_view(600.0, done, (busy, pending), 0.0))] == ["a2"]


def test_follow_up_is_presubmitted_ahead_of_the_walltime_by_the_predicted_wait() -> None:
    # process runs on a2 (walltime 1000 s from 600 -> killed at 1600) but needs ~E[process] > 1000 s;
    # the predicted wait is 300 s, margin 60 s -> the follow-up goes out at 1600 - 300 - 60 = 1240.
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "running": 8},
    )
    a2 = alloc("a2", "process", 8, 1000.0, AllocationState.RUNNING, 600.0, 600.0, busy=8)
    before = walltime_follow_ups(_view(700.0, stages, (a2,), 300.0), ["process"])
    assert not before.actions and before.wake_at == pytest.approx(1240.0)
    (submit,) = walltime_follow_ups(_view(1240.0, stages, (a2,), 300.0), ["process"]).actions
    assert isinstance(submit, Submit) and submit.reason == "walltime" and submit.walltime > 1000.0
    # it may start at once: its walltime covers the 360 s until a2 is killed, beyond the sequence's next
    view = _view(1240.0, stages, (a2,), 300.0)
    assert submit.walltime == view.knowledge.walltime("process", [1000.0]) + 360.0
    (late,) = walltime_follow_ups(_view(1500.0, stages, (a2,), 300.0), ["process"]).actions
    assert late.walltime == submit.walltime - 260.0  # type: ignore[attr-defined]
    # a2 seen running past its walltime's end (a poll behind): nothing added, nothing taken away
    (past,) = walltime_follow_ups(_view(1650.0, stages, (a2,), 300.0), ["process"]).actions
    assert past.walltime == submit.walltime - 360.0  # type: ignore[attr-defined]
    # never beyond the partition's limit
    view.knowledge.max_walltime = submit.walltime - 100.0
    (capped,) = walltime_follow_ups(view, ["process"]).actions
    assert capped.walltime == submit.walltime - 100.0  # type: ignore[attr-defined]
    # and an allocation that timed out with work left is replaced at once
    ended = alloc("a2", "process", 8, 1000.0, AllocationState.TIMEOUT, 600.0, 600.0, 1600.0)
    (again,) = walltime_follow_ups(_view(1600.0, stages, (ended,), 300.0), ["process"]).actions
    assert isinstance(again, Submit) and again.reason == "walltime"


def test_a_paced_strategy_looks_again_a_margin_before_a_running_allocation_s_walltime_ends() -> None:
    # Regression: SDSC Blue capacity, BWA 28, run 3: the planner's decisions, paced, came 0.32 h apart;
    # ``cat_bwa`` outlived its allocation in between, and the follow-up went out after the loss
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "running": 8},
    )
    a2 = alloc("a2", "process", 8, 5000.0, AllocationState.RUNNING, 600.0, 600.0, busy=8)  # ends at 5600
    view = _view(700.0, stages, (a2,), 300.0)
    # expected to end well before (process: about 1800 s): no follow-up, nor a wake-up from the rule
    assert walltime_follow_ups(view, ["process"]) == walltime_follow_ups(view, [])
    assert walltime_checks(view, ["process"]) == pytest.approx(5540.0)
    assert view.knowledge.predictions == 0  # no wait asked: a prediction may be drawn at random
    # there, still running (it outlived every estimate), the follow-up goes out before the walltime ends
    (submit,) = walltime_follow_ups(_view(5540.0, stages, (a2,), 300.0), ["process"]).actions
    assert isinstance(submit, Submit) and submit.reason == "walltime"
    # nothing once past it, for a stage not passed, or one whose allocation is pending
    assert walltime_checks(_view(5540.0, stages, (a2,), 300.0), ["process"]) is None
    assert walltime_checks(view, ["merge"]) is None
    pending = alloc("a3", "process", 8, 5000.0, AllocationState.REQUESTED, 650.0)
    assert walltime_checks(_view(700.0, stages, (a2, pending), 300.0), ["process"]) is None
    done = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "end_time": 2400.0, "done": 8},
    )
    assert walltime_checks(_view(2500.0, done, (a2,), 300.0), ["process"]) is None


@pytest.mark.parametrize(("done", "running", "cores"), [(0, 8, 8), (5, 3, 3), (7, 1, 1)])
def test_a_walltime_follow_up_is_as_wide_as_the_tasks_not_done_need(
    done: int, running: int, cores: int
) -> None:
    # process (8 x 1 core) timed out on a2 with ``running`` tasks lost: the follow-up asks for their cores;
    # Big-Job's ("*") for the widest of that and the stages not ready yet (merge: 1 core)
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "done": done},
    )
    ended = alloc("a2", "process", 8, 1000.0, AllocationState.TIMEOUT, 600.0, 600.0, 1600.0)
    view = _view(1600.0, stages, (ended,), 300.0)
    (again,) = walltime_follow_ups(view, ["process"]).actions
    assert isinstance(again, Submit) and again.cores == cores == view.width_left("process")
    assert view.width_left(TOTAL) == cores and view.label_width(TOTAL) == 8
    waiting = _stages(prepare={"ready_time": 0.0, "start_time": 0.0, "done": 0})
    assert _view(0.0, waiting, (), 0.0).width_left(TOTAL) == 8  # process is not ready: its whole width


@pytest.mark.parametrize(
    ("left", "follow_up", "busy", "released"),
    [(300.0, True, 0, True), (300.0, False, 0, False), (300.0, True, 1, False), (5000.0, True, 0, False)],
)
def test_an_idle_allocation_that_cannot_end_its_ready_stage_is_released_once_replaced(
    left: float, follow_up: bool, busy: int, released: bool
) -> None:
    # process (~1800 s of work left, 8 tasks queued) is ready; a2 has ``left`` seconds of walltime and
    # ``busy`` cores running; a3, its walltime follow-up, is pending or not asked yet. The tasks wait for
    # a3 (placement's time rule), so an idle a2 would only idle until killed: every strategy releases it.
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0},
    )
    rows = [alloc("a2", "process", 8, 700.0 + left, AllocationState.RUNNING, 0.0, 0.0, busy=busy)]
    if follow_up:
        rows.append(alloc("a3", "process", 8, 3600.0, AllocationState.REQUESTED, 600.0, reason="walltime"))
    cancelled = [c.alloc_id for c in release_idle(_view(700.0, stages, tuple(rows), 300.0))]
    assert cancelled == (["a2"] if released else [])


def test_registry() -> None:
    assert make_strategy("asa-naive").name == "asa-naive"
    assert isinstance(make_strategy("bigjob"), BigJob)
    with pytest.raises(UnknownNameError, match="unknown strategy 'fast'; choose one of: asa, asa-after"):
        make_strategy("fast")
    with pytest.raises(ConfigError, match="dependency must be one of"):
        ASA(dependency="afterok")


@settings(max_examples=200, deadline=None)
@given(
    done=st.integers(0, 8),
    jobs=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 3)), min_size=1, max_size=10),
)
def test_jobs_split_from_one_request_are_released_down_to_what_the_stage_still_needs(
    done: int, jobs: list[tuple[int, int]]
) -> None:
    # "process" (8 one-core tasks) is running with `done` finished, on jobs split from one request
    # ((cores, busy cores) each, a busy core runs a task): an idle job goes while the other jobs' idle
    # cores can take every task still waiting
    jobs = [(c, min(b, c)) for c, b in jobs]
    running = min(sum(b for _, b in jobs), 8 - done)
    complete = {"end_time": 5000.0} if done == 8 else {}
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "done": done, "running": running, **complete},
    )
    allocs = tuple(
        alloc(f"a{i + 2}", "process", c, 1e4, AllocationState.RUNNING, 600.0, 600.0, busy=b, piece_of="a2")
        for i, (c, b) in enumerate(jobs)
    )
    view = _view(1000.0, stages, allocs, 0.0)
    released = {c.alloc_id for c in release_idle(view)}
    assert all(view.busy_cores(a) == 0 for a in released), "a job running a task was released"
    kept = [(a, b) for a, b in allocs if a.alloc_id not in released]
    idle_kept = sum(a.cores - b for a, b in kept)
    waiting = 8 - done - running
    if done == 8:
        assert all(b > 0 for _, b in kept)  # the stage is done: every idle job goes
    else:
        all_idle = sum(a.cores - b for a, b in allocs)
        assert idle_kept >= min(waiting, all_idle)  # never below what waiting tasks need
        for a, b in kept:  # and no idle job kept that the waiting tasks do not need
            assert b > 0 or idle_kept - a.cores < waiting


@pytest.mark.parametrize(("walltime", "released"), [(1000.0, set()), (1e4, {"a2", "a3"})])
def test_an_idle_piece_is_kept_for_the_tasks_a_job_about_to_run_out_is_running(
    walltime: float, released: set[str]
) -> None:
    # all 8 tasks of "process" run on a1, whose own stage is done (any task runs on any allocation): with
    # 600 s of walltime left, less than a task's estimate, they will be lost and run again, so the idle
    # pieces of process's own request are kept for them (1000Genome 112, HPC2N capacity, run 22); with
    # the walltime to end them, nothing waits for cores and the idle pieces go, as before. A piece of the
    # stage's own request with little walltime left is not counted so: its walltime was asked for these
    # tasks, and they mostly end in time (test below)
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "running": 8},
    )
    busy = alloc("a1", "prepare", 8, walltime, AllocationState.RUNNING, 0.0, 400.0, busy=8)
    pieces = tuple(
        alloc(f"a{i}", "process", 4, 1e4, AllocationState.RUNNING, 600.0, 900.0, piece_of="a2")
        for i in (2, 3)
    )
    view = _view(801.0, stages, (busy, *pieces), 0.0)
    assert (view.knowledge.task_estimate("process") > busy[0].remaining(view.now)) == (not released)
    assert {c.alloc_id for c in release_idle(view)} == released


def test_an_idle_piece_goes_beside_its_own_stages_piece_that_runs_out_soon() -> None:
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "running": 4, "done": 4},
    )
    pieces = (
        alloc("a2", "process", 4, 1000.0, AllocationState.RUNNING, 600.0, 400.0, busy=4, piece_of="a2"),
        alloc("a3", "process", 4, 1e4, AllocationState.RUNNING, 600.0, 900.0, piece_of="a2"),
    )
    view = _view(801.0, stages, pieces, 0.0)
    assert view.knowledge.task_estimate("process") > pieces[0][0].remaining(view.now)
    assert {c.alloc_id for c in release_idle(view)} == {"a3"}


def test_a_job_whose_cores_a_front_end_claimed_is_not_idle() -> None:
    # two one-core jobs of one request, their tasks just ended, one task left: one of them goes, unless
    # their cores are a Mesos framework's (offered to it, or under a task it has not heard the end of),
    # which launches on them at any moment (test_pymesos_mock[asa] on a loaded machine lost its width so)
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "done": 7},
    )
    pieces = tuple(
        alloc(f"a{i}", "process", 1, 1e4, AllocationState.RUNNING, 600.0, 600.0, piece_of="a2")
        for i in (2, 3)
    )
    view = _view(1000.0, stages, pieces, 0.0)
    assert [c.alloc_id for c in release_idle(view)] == ["a2"]
    assert release_idle(dataclasses.replace(view, claimed={"a2": 1, "a3": 1})) == []
    # a claimed job is in use, and its cores are not idle cores another job could be released for
    assert release_idle(dataclasses.replace(view, claimed={"a3": 1})) == []


@pytest.mark.parametrize(
    ("done", "serves", "released"),
    [(4, (), {"a4"}), (0, (), set()), (4, ("process", "merge"), set())],
)
def test_a_waiting_piece_goes_once_the_started_ones_can_take_every_task(
    done: int, serves: tuple[str, ...], released: set[str]
) -> None:
    # "process" (8 one-core tasks) runs 4 on a2, a piece of 4 cores; a4, another piece of the request, still
    # waits. With the other 4 tasks done, nothing waits for cores: a4 would be released idle as it started,
    # and goes before it starts. With them waiting it is kept; so it is where it is kept for ``merge`` too
    # (not ready: its task waits for cores that no started job has idle)
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "running": 4, "done": done},
    )
    pieces = (
        alloc("a2", "process", 4, 1e4, AllocationState.RUNNING, 600.0, 600.0, busy=4, piece_of="a2"),
        alloc("a4", "process", 4, 1e4, AllocationState.REQUESTED, 600.0, piece_of="a2", serves=serves),
    )
    view = _view(1000.0, stages, pieces, 0.0)
    cancels = release_idle(view)
    assert {c.alloc_id for c in cancels} == released
    assert all(c.reason.startswith("not needed: other jobs have idle cores") for c in cancels)


@pytest.mark.parametrize(
    ("left", "asked", "released"), [(900.0, 4000.0, set()), (2100.0, 4000.0, {"a4"}), (900.0, 1500.0, {"a4"})]
)
def test_a_waiting_piece_for_a_re_run_goes_only_where_the_idle_cores_have_the_re_run_s_time_left(
    left: float, asked: float, released: set[str]
) -> None:
    # "process" has one task lost after 1,000 s waiting to run again (the pool places it where 2,000 s
    # are left), and a2's 3 idle cores have ``left`` s. a4, a piece asked ``asked`` s for the re-run,
    # waits: released as surplus where a2 could take the task, or where a4 could not either.
    # Regressions: 1000Genome 112, CTC SP2 capacity, in jobs of one task: the liveness rule's request was
    # released at each poll, asked again, and 7 of 30 runs were given up; HPC2N capacity, run 16: pieces
    # too short for the re-run, kept for it, held back the job that ran it (41.6 h against 13.0 h)
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={
            "ready_time": 600.0,
            "start_time": 600.0,
            "running": 1,
            "done": 6,
            "rerun_floor": 1000.0,
            "rerun_waiting": 1,
        },
    )
    start = 3000.0 + left - 1e4
    pieces = (
        alloc("a2", "process", 4, 1e4, AllocationState.RUNNING, 0.0, start, busy=1, piece_of="a2"),
        alloc("a4", "process", 1, asked, AllocationState.REQUESTED, 2900.0, piece_of="a4", reason="liveness"),
    )
    view = _view(3000.0, stages, pieces, 0.0)
    assert {c.alloc_id for c in release_idle(view)} == released


def test_one_job_per_request_is_kept_whole_until_its_stage_is_done() -> None:
    # without a split, a running allocation with idle cores is kept: it cannot give back part of itself
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "done": 7},
    )
    whole = alloc("a2", "process", 8, 1e4, AllocationState.RUNNING, 600.0, 600.0, busy=1)
    idle = alloc("a3", "process", 2, 1e4, AllocationState.RUNNING, 600.0, 600.0)
    assert release_idle(_view(1000.0, stages, (whole, idle), 0.0)) == []


@pytest.mark.parametrize(
    ("split_job", "waited_on", "cores", "wait", "drained"),
    [
        (True, True, 1, 0.0, True),  # 7 waves of process on 1 core, or 1 on its own job: drain
        (True, True, 8, 0.0, False),  # 8 cores take the 7 waiting tasks in one wave: keep
        (True, True, 1, 1e5, False),  # process's job would wait longer than the 7 waves: keep
        (True, False, 1, 0.0, False),  # nothing waits for it
        (False, True, 1, 0.0, False),  # an allocation in one job keeps its behaviour
    ],
)
def test_a_job_of_a_done_stage_is_drained_when_the_job_waiting_for_it_would_be_faster(
    split_job: bool, waited_on: bool, cores: int, wait: float, drained: bool
) -> None:
    # prepare is done; its job runs a process task (any task may run anywhere) while process's own job
    # depends on it: on 1 core the 7 waiting tasks would run one after the other
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "running": 1},
    )
    extra = {"piece_of": "a1"} if split_job else {}
    old = alloc("a1", "prepare", cores, 1e4, AllocationState.RUNNING, 0.0, 0.0, busy=1, **extra)
    deps = (("a1", DependencyKind.AFTERANY),) if waited_on else ()
    new = alloc("a2", "process", 1, 1e4, AllocationState.REQUESTED, 400.0, dependencies=deps, piece_of="a2")
    cancels = release_idle(_view(700.0, stages, (old, new), wait))
    assert [c.alloc_id for c in cancels] == (["a1"] if drained else [])


def test_a_learned_walltime_request_follows_every_runtime_recorded() -> None:
    # the learned sequence is kept per history: a runtime recorded after a request was asked changes it,
    # to what a knowledge that never asked before says
    wf = builtin_workflow("demo3")
    history = MemoryHistory()
    k = Knowledge(wf, waits=ASAEstimator(random_state=0), history=history)
    for runtime in (100.0, 110.0, 120.0):
        k.record_runtime("process", runtime)
    before = k.walltime("process")
    assert k.walltime("process") == before and k.walltime("process", [before]) > before
    k.record_runtime("process", 5000.0)
    fresh = Knowledge(wf, waits=ASAEstimator(random_state=0), history=history)
    assert k.walltime("process") == fresh.walltime("process") != before
    assert k.walltime("process", [before]) == fresh.walltime("process", [before])


@pytest.mark.parametrize("pieces", [0, -1, 9, 2.0, "2"])
def test_a_request_in_more_pieces_than_cores_or_a_non_whole_number_is_refused(pieces: object) -> None:
    with pytest.raises(ConfigError, match=r"pieces must be a whole number in 1\.\.8"):
        Submit("s", 8, 600.0, pieces=pieces)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="asa: pieces must be a whole number >= 1"):
        make_strategy("asa", pieces=0)
    assert Submit("s", 8, 600.0, pieces=8).pieces == 8


def test_a_follow_up_continues_the_sequence_of_the_walltimes_that_ran_out_not_of_those_we_cancelled() -> None:
    # Regression: CyberShake 28, SDSC Blue capacity, run 25: two requests made early and released unused
    # (10,138 s) pushed the sequence past them, and a lost task's re-run was asked 23,120 s, which waited
    # 28.8 h. The sequence's ``previous`` is what ran out: here the 1,000 s of a2.
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "done": 5},
    )
    early = alloc("a1", "process", 8, 10_138.0, AllocationState.CANCELLED, 0.0, 100.0, 110.0, cancelled=True)
    ended = alloc("a2", "process", 8, 1000.0, AllocationState.TIMEOUT, 600.0, 600.0, 1600.0)
    view = _view(1600.0, stages, (early, ended), 300.0)
    assert walltimes_so_far(view, "process") == [1000.0]
    (again,) = walltime_follow_ups(view, ["process"]).actions
    assert isinstance(again, Submit) and again.walltime == view.knowledge.walltime("process", [1000.0])
    assert again.walltime < view.knowledge.walltime("process", [10_138.0, 1000.0])


def test_the_planner_decides_again_before_a_running_allocation_s_walltime_ends() -> None:
    from elastic.strategies.planner import Planner

    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "running": 8},
    )
    a2 = alloc("a2", "process", 8, 5000.0, AllocationState.RUNNING, 600.0, 600.0, busy=8)
    a3 = alloc("a3", "merge", 1, 3000.0, AllocationState.REQUESTED, 650.0)  # merge is asked for already
    decision = Planner().decide(_view(700.0, stages, (a2, a3), 300.0))
    assert not decision.actions and decision.wake_at == pytest.approx(5540.0)


def _narrowing_view(done: int, pending: tuple[int, ...], started: bool = False) -> RunView:
    """process (8 x 1 core): ``done`` tasks done, the rest running on a2 (killed at 1600 s), and a
    walltime follow-up asked at 700 s still waiting, in jobs of ``pending`` cores (one request)."""
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "done": done, "running": 8 - done},
    )
    a2 = alloc("a2", "process", 8, 1000.0, AllocationState.RUNNING, 600.0, 600.0, busy=8 - done)
    jobs = []
    for i, cores in enumerate(pending):
        state = AllocationState.RUNNING if started and i == 0 else AllocationState.REQUESTED
        start = 900.0 if started and i == 0 else None
        piece = {"piece_of": "a3"} if len(pending) > 1 else {}
        jobs.append(
            alloc(f"a{3 + i}", "process", cores, 2500.0, state, 700.0, start, reason="walltime", **piece)
        )
    return _view(1200.0, stages, (a2, *jobs), 300.0)


@pytest.mark.parametrize(
    ("done", "pending", "started", "narrowed"),
    [
        (7, (8,), False, 1),  # one task left: 1 core, not 8
        (4, (8,), False, 4),  # half the cores: replaced
        (3, (8,), False, None),  # 5 of 8: kept (its place in the queue is worth more)
        (6, (4, 4), False, 2),  # a request in two jobs: both cancelled, one request made
        (6, (4, 4), True, None),  # one of its jobs started: kept
    ],
)
def test_a_waiting_follow_up_twice_as_wide_as_its_tasks_need_is_replaced_by_a_narrower_one(
    done: int, pending: tuple[int, ...], started: bool, narrowed: int | None
) -> None:
    view = _narrowing_view(done, pending, started)
    actions = walltime_follow_ups(view, ["process"]).actions
    if narrowed is None:
        assert not actions
        return
    cancels = [a for a in actions if isinstance(a, Cancel)]
    submits = [a for a in actions if isinstance(a, Submit)]
    assert sorted(c.alloc_id for c in cancels) == [f"a{3 + i}" for i in range(len(pending))]
    (submit,) = submits
    assert (submit.stage, submit.cores, submit.walltime, submit.reason) == (
        "process",
        narrowed,
        2500.0,
        "walltime",
    )
    assert actions.index(submit) > max(actions.index(c) for c in cancels)  # cancelled, then asked


@settings(max_examples=200, deadline=None)
@given(done=st.integers(0, 7), widths=st.lists(st.integers(1, 8), min_size=1, max_size=3))
def test_a_narrowed_follow_up_asks_what_the_tasks_not_done_need_and_never_leaves_them_without(
    done: int, widths: list[int]
) -> None:
    view = _narrowing_view(done, tuple(widths))
    actions = walltime_follow_ups(view, ["process"]).actions
    submits = [a for a in actions if isinstance(a, Submit)]
    cancelled = {a.alloc_id for a in actions if isinstance(a, Cancel)}
    need = view.width_left("process")
    assert need == 8 - done
    # a request is cancelled whole and asked again as wide as the tasks need, or left as it is
    assert cancelled in (set(), {f"a{3 + i}" for i in range(len(widths))})
    assert bool(cancelled) == bool(submits) == (sum(widths) >= 2 * need)
    assert all(s.cores == need and s.walltime == 2500.0 for s in submits)


def test_a_waiting_follow_up_of_a_done_stage_is_not_narrowed_but_left_to_the_release_rule() -> None:
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "end_time": 1100.0, "done": 8},
    )
    a3 = alloc("a3", "process", 8, 2500.0, AllocationState.REQUESTED, 700.0, reason="walltime")
    view = _view(1200.0, stages, (a3,), 300.0)
    assert not walltime_follow_ups(view, ["process"]).actions  # no 1-core request for a stage done
    assert [c.alloc_id for c in release_idle(view)] == ["a3"]


@pytest.mark.parametrize(("since", "floor"), [(600.0, 10_000.0), (4000.0, None), (None, None)])
def test_a_follow_up_asked_ahead_asks_what_the_attempt_it_may_lose_needs_to_run_again(
    since: float | None, floor: float | None
) -> None:
    # process (about 1800 s) outlived every estimate on a2 (5,000 s from 600 s); its oldest running
    # attempt started at ``since``. Lost at a2's end it will have run 5600 - since, and the pool places its
    # re-run by twice that. SDSC Blue capacity, Seismology 28, run 17: ``asa`` asked 37,120 s a minute
    # before the end for a task that had run from the allocation's start (its re-run needed 39,828 s), the
    # liveness rule asked 90,304 s beside it, and that waited 44 h
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={"ready_time": 600.0, "start_time": 600.0, "running": 8, "running_since": since},
    )
    a2 = alloc("a2", "process", 8, 5000.0, AllocationState.RUNNING, 600.0, 600.0, busy=8)
    view = _view(5540.0, stages, (a2,), 300.0)
    sequence = view.knowledge.walltime("process", [5000.0])
    assert sequence < 10_000.0  # the sequence's next value is less than twice the walltime that runs out
    (submit,) = walltime_follow_ups(view, ["process"]).actions
    assert isinstance(submit, Submit) and submit.reason == "walltime"
    assert submit.walltime == (sequence if floor is None else floor) + 60.0  # and the cover until a2 ends


def _uncovering_view(
    followed: AllocationState,
    asked: float,
    done: int = 6,
    cores: int = 2,
    walltime: float = 1000.0,
    rerun_floor: float | None = None,
) -> RunView:
    """process (8 x 1 core): ``done`` tasks done; a2 (``walltime`` s, started at 600 s) runs the rest, or
    ended at 1600 s; a3, the follow-up of ``cores`` cores asked at 1500 s with ``asked`` seconds (the next
    walltime of the sequence and the cover until a2's end), still waits."""
    running = followed is AllocationState.RUNNING
    stages = _stages(
        prepare={"ready_time": 0.0, "start_time": 0.0, "end_time": 600.0, "done": 1},
        process={
            "ready_time": 600.0,
            "start_time": 600.0,
            "done": done,
            "running": (8 - done) * running,
            "rerun_floor": rerun_floor,
        },
    )
    released = {"cancelled": True} if followed is AllocationState.CANCELLED else {}  # by run control
    a2 = alloc("a2", "process", 8, walltime, followed, 600.0, 600.0, None if running else 1600.0, **released)
    a3 = alloc("a3", "process", cores, asked, AllocationState.REQUESTED, 1500.0, reason="walltime")
    return _view(1550.0 if running else 1700.0, stages, (a2, a3), 300.0)


def _next_walltime() -> int:
    """The walltime a follow-up of process asks after a2's 1000 s ran out (no cover)."""
    return math.ceil(_uncovering_view(AllocationState.TIMEOUT, 1.0).knowledge.walltime("process", [1000.0]))


@pytest.mark.parametrize("strategy", [None, "perstage", "asa"])
def test_a_waiting_follow_up_drops_its_cover_once_the_allocation_it_follows_ended(
    strategy: str | None,
) -> None:
    # SDSC Blue capacity, BLAST 28, run 3 (jobs of one task): asa's follow-up of two tasks lost at 2.6 h
    # kept 4,011 s of cover it could no longer use, and started at 32.9 h where Per-Stage's, asked at
    # the walltime's end with 61 s of it, started at 14.3 h. Every strategy that follows walltimes lowers it
    needed = _next_walltime()
    view = _uncovering_view(AllocationState.TIMEOUT, needed + 100.0)
    decision = (
        walltime_follow_ups(view, ["process"]) if strategy is None else make_strategy(strategy).decide(view)
    )
    shortens = [(a.alloc_id, a.walltime) for a in decision.actions if isinstance(a, Shorten)]
    assert shortens == [("a3", needed)]
    assert not [a for a in decision.actions if isinstance(a, (Submit, Cancel))]  # kept at its queue place


def test_a_follow_up_whose_allocation_was_released_after_it_was_asked_keeps_its_place_in_the_sequence() -> (
    None
):
    # the allocation it follows was released once it was asked (it could not end the stage): the
    # sequence is read as when the follow-up was asked. Read without it, it started again: CyberShake 112
    # on the busy synthetic queue, run 27, a 19,102-s follow-up lowered to the first value (4,359 s)
    k = _uncovering_view(AllocationState.CANCELLED, 1.0).knowledge
    needed = k.walltime("process", [4000.0])
    assert k.walltime("process", []) < needed  # the first value: what must not be asked
    view = _uncovering_view(AllocationState.CANCELLED, needed + 100.0, walltime=4000.0)
    shortens = [(a.alloc_id, a.walltime) for a in walltime_follow_ups(view, ["process"]).actions]
    assert shortens == [("a3", needed)]


@pytest.mark.parametrize(("asked", "lowered"), [(9000.0, 6000.0), (6030.0, None)])
def test_an_uncovered_follow_up_keeps_what_its_lost_tasks_need_to_run_again(
    asked: float, lowered: float | None
) -> None:
    # the tasks lost at a2's end ran 3,000 s: the pool places their re-run by twice that. Lowered below
    # it, the follow-up could not take them and the liveness rule asked another beside it (HPC2N capacity,
    # Seismology 28, run 15: 117,271 s asked, started 39 h later)
    view = _uncovering_view(AllocationState.TIMEOUT, asked, rerun_floor=3000.0)
    assert view.knowledge.walltime("process", [1000.0]) < 6000.0  # the floor binds, not the sequence
    shortens = [(a.alloc_id, a.walltime) for a in walltime_follow_ups(view, ["process"]).actions]
    assert shortens == ([] if lowered is None else [("a3", lowered)])


@pytest.mark.parametrize(
    ("followed", "extra"),
    [(AllocationState.RUNNING, 100.0), (AllocationState.TIMEOUT, 30.0), (AllocationState.TIMEOUT, -500.0)],
)
def test_a_follow_up_keeps_its_walltime_while_its_cover_may_be_used_or_it_asks_no_more(
    followed: AllocationState, extra: float
) -> None:
    # while a2 runs the follow-up may start before a2 ends; within a minute of what it needs, or below
    # it (a walltime is never raised), nothing to lower
    view = _uncovering_view(followed, _next_walltime() + extra)
    assert not [a for a in walltime_follow_ups(view, ["process"]).actions if isinstance(a, Shorten)]


def test_a_follow_up_narrowed_once_uncovered_asks_no_cover_either() -> None:
    needed = _next_walltime()
    view = _uncovering_view(AllocationState.TIMEOUT, needed + 100.0, done=7, cores=2)
    actions = walltime_follow_ups(view, ["process"]).actions
    (submit,) = [a for a in actions if isinstance(a, Submit)]
    assert [a.alloc_id for a in actions if isinstance(a, Cancel)] == ["a3"]
    assert (submit.cores, submit.walltime, submit.reason) == (1, needed, "walltime")
    assert not [a for a in actions if isinstance(a, Shorten)]
