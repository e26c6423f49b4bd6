"""The backlog (issue 31): at most ``max_queued`` requests of a run wait in the batch queue at once.

A wide DAG on a small partition had hundreds of requests queued at once (each one costs the batch
system's scheduler, and each decision of ``asa`` that plans around them). Requests over the backlog wait
until a queued one starts; the run is slowed, never stalled, under every strategy and shape.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic import Settings
from elastic.backends.mock import MockBackend
from elastic.cli import main
from elastic.cli.arguments import add_submission_rate_argument
from elastic.control.rate import DEFAULT_MAX_QUEUED, SubmissionLimit, SubmissionRate
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.strategies import STRATEGY_NAMES
from elastic.strategies.actions import Decision
from elastic.strategies.base import RunView
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow
from tests.control.scenarios import Scenario, StageSpec, run_scenario
from tests.control.test_submission_rate_setting import Runaway


def test_the_default_is_documented_and_reaches_the_settings() -> None:
    assert SubmissionLimit().max_queued == DEFAULT_MAX_QUEUED == 32
    settings = Settings(backend="mock", store=False, submission_rate=SubmissionLimit(max_queued=3))
    assert settings.submission_rate is not None and settings.submission_rate.max_queued == 3


@given(
    max_queued=st.integers(1, 5),
    calls=st.lists(st.tuples(st.integers(0, 8), st.integers(1, 4)), min_size=1, max_size=30),
)
@settings(max_examples=200, deadline=None)
def test_a_full_backlog_holds_every_request_and_takes_no_token(
    max_queued: int, calls: list[tuple[int, int]]
) -> None:
    rate = SubmissionRate(per_minute=600, burst=1000, max_queued=max_queued)
    for queued, jobs in calls:
        takes = rate.takes(0.0, queued)
        submitted = rate.submitted
        allowed = rate.allow(0.0, jobs, queued)
        assert allowed == (queued < max_queued)  # tokens are plenty here: the backlog alone decides
        assert rate.submitted == submitted + (jobs if allowed else 0)
        assert rate.retry_at is None  # nothing to wait for but a queued request's start
        # an upper bound on what goes now, one more at most: the room left, or the tokens left; none
        # while the backlog is full
        assert takes == (0 if queued >= max_queued else min(1000 - submitted, max_queued - queued) + 1)


def test_a_runaway_strategy_keeps_at_most_the_backlog_queued_and_goes_on_as_they_start() -> None:
    workflow = Workflow("w", (Stage("s", tasks=1, cores=1, runtime=1e6),))
    runner = Runner(
        workflow,
        Runaway(),  # a new one-core allocation every 0.5 s, an hour each, for ever
        MockBackend(nodes=4),
        SimExecution(),
        Knowledge(workflow),
        max_duration=4 * 3600.0,
        poll_interval=1.0,
        submission_rate=SubmissionLimit(per_minute=600, burst=1000, max_queued=3),
    )
    queued: list[int] = []
    runner.on_iteration = lambda view: queued.append(runner.controller.queued_requests())
    runner.run()
    allocations = runner.controller.allocations
    assert max(queued) <= 3
    for a in allocations:  # never more than 3 waiting for cores, at any submission
        t = a.submit_time or 0.0
        waiting = [
            b
            for b in allocations
            if b is not a
            and (b.submit_time or 0.0) <= t
            and (b.start_time is None or b.start_time > t)
            and (b.end_time is None or b.end_time > t)
        ]
        assert len(waiting) <= 3, (a.alloc_id, [b.alloc_id for b in waiting])
    # slowed, not stopped: more start as the running ones reach their walltime
    assert sum(a.start_time is not None for a in allocations) > 4 and runner.controller.rate.held > 0


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("job_cores", [None, 1])
def test_a_wide_fan_out_over_a_backlog_of_one_completes(strategy: str, job_cores: int | None) -> None:
    # twelve stages ready at once after a first one, on four cores, one request queued at a time
    stages = (
        StageSpec(tasks=2, cores=1, runtime=60.0),
        *[StageSpec(tasks=2, cores=2, runtime=120.0, after=(0,))] * 12,
        StageSpec(tasks=1, cores=4, runtime=60.0, after=tuple(range(1, 13))),
    )
    out = run_scenario(Scenario(stages, nodes=4, strategy=strategy, job_cores=job_cores, max_queued=1))
    assert out.violations == [] and out.status == "completed", out


@given(
    n=st.integers(2, 8),
    cores=st.sampled_from([1, 2, 4]),
    strategy=st.sampled_from(STRATEGY_NAMES),
    max_queued=st.integers(1, 3),
    front=st.sampled_from(["runner", "futures", "announce", "loop"]),
    seed=st.integers(0, 1000),
)
@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_random_fan_outs_over_a_small_backlog_never_stall(
    n: int, cores: int, strategy: str, max_queued: int, front: str, seed: int
) -> None:
    stages = (
        StageSpec(tasks=1, cores=1, runtime=30.0),
        *[StageSpec(tasks=2, cores=cores, runtime=300.0, cv=0.5, after=(0,))] * n,
    )
    scenario = Scenario(stages, nodes=4, strategy=strategy, max_queued=max_queued, front=front, seed=seed)
    out = run_scenario(scenario, check_settled=True)
    assert out.violations == [] and out.status == "completed", (scenario, out)


@pytest.mark.parametrize(
    "argv",
    [
        ["--max-queued", "4", "--submission-rate", "6", "--max-allocations", "9"],
        ["--submission-rate", "6", "--max-allocations", "9", "--max-queued", "4"],
    ],
)
def test_the_option_folds_into_one_limit_whatever_the_order(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    add_submission_rate_argument(parser)
    assert parser.parse_args(argv).submission_rate == SubmissionLimit(
        per_minute=6, burst=6, max_allocations=9, max_queued=4
    )


@pytest.mark.parametrize("value", ["0", "many"])
def test_the_cli_refuses_a_bad_backlog_naming_the_option(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "--strategy", "asa", "--max-queued", value])
    assert info.value.code == 2
    assert "argument --max-queued: " in capsys.readouterr().err


def test_a_paced_planner_is_not_asked_again_while_the_backlog_is_full_and_nothing_changed() -> None:
    # forty hour-long stages ready at once on four cores, one request queued at a time: asa was asked at
    # every 30-s poll while its request waited, planning every ready stage each time
    from elastic.strategies.planner import PACE, Planner

    stages = (
        StageSpec(tasks=1, cores=1, runtime=30.0),
        *[StageSpec(tasks=1, cores=2, runtime=3600.0, after=(0,))] * 40,
    )
    asked: list[tuple[float, object, object, dict[str, int], object, bool]] = []
    original = Planner.decide

    def decide(self: Planner, view: RunView) -> Decision:
        asked.append(
            (view.now, view.allocations, view.stages, dict(view.busy), view.queue_version, view.backlog_full)
        )
        return original(self, view)

    Planner.decide = decide  # type: ignore[method-assign]
    try:
        out = run_scenario(Scenario(stages, nodes=4, strategy="asa", max_queued=1))
    finally:
        Planner.decide = original  # type: ignore[method-assign]
    assert out.status == "completed" and out.violations == [], out
    assert sum(full for *_, full in asked) > 10  # the backlog was full at many decisions
    for before, after in itertools.pairwise(asked):
        if before[5] and after[0] - before[0] < PACE:
            # asked again within the pace: something it reads changed
            assert after[1] is not before[1] or after[2] is not before[2] or after[3:5] != before[3:5]


def test_per_stage_asks_for_nothing_while_the_backlog_is_full_and_keeps_that_decision() -> None:
    from elastic.strategies.base import StageView, Submit
    from elastic.strategies.perstage import PerStage

    wf = Workflow("w", tuple(Stage(f"s{i}", 2, 1, 600.0, depends_on=()) for i in range(3)))
    stages = tuple(StageView(s.name, i, 2, 1, (), ready_time=0.0) for i, s in enumerate(wf.stages))
    view = RunView(100.0, wf, stages, (), Knowledge(wf))
    assert [a.stage for a in PerStage().decide(view).actions if isinstance(a, Submit)] == ["s0", "s1", "s2"]
    assert PerStage().settled_until(view)[0] == view.now  # asked again at once: it must request them
    full = dataclasses.replace(view, backlog_full=True)
    assert PerStage().decide(full).actions == ()
    assert PerStage().settled_until(full)[0] > full.now  # until the allocations change
