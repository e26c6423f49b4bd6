"""The allocations-per-run cap (issue 31): a run that would submit more batch jobs than its limit stops.

A strategy that resubmits for ever is slowed by the submission rate; the total caps what it can do in all.
The run then ends ``failed`` with the limit and the way to raise it in the message (the front door fails
its tasks with it), never a run that goes on submitting for hours.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import pytest

from elastic import Elastic, Settings
from elastic.backends.mock import MockBackend
from elastic.cli import main
from elastic.cli.arguments import add_submission_rate_argument
from elastic.control.rate import DEFAULT_MAX_ALLOCATIONS, SubmissionLimit, SubmissionRate
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.errors import ConfigError, LimitReachedError
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow
from tests.control.test_submission_rate_setting import WIDE, Runaway


@pytest.mark.parametrize("field", ["max_allocations", "max_queued"])  # the total, and the backlog
@pytest.mark.parametrize("value", [0, -3, 1_000_001, True, "10", 2.5])
def test_a_bad_cap_is_refused_naming_it_and_its_range(field: str, value: object) -> None:
    for make in (SubmissionLimit, SubmissionRate):
        with pytest.raises(ConfigError, match=rf"{field} must be an integer in \[1, 1,000,000\]"):
            make(**{field: value})


def test_the_default_is_documented_and_reaches_every_front_end() -> None:
    assert SubmissionLimit().max_allocations == DEFAULT_MAX_ALLOCATIONS == 20_000
    settings = Settings(backend="mock", store=False, submission_rate=SubmissionLimit(max_allocations=7))
    assert settings.submission_rate is not None and settings.submission_rate.max_allocations == 7


def test_the_cap_counts_every_job_and_refuses_the_one_over_it() -> None:
    rate = SubmissionRate(per_minute=600, burst=100, max_allocations=5)
    assert rate.allow(0.0, 3) and rate.allow(0.0, 2)
    with pytest.raises(LimitReachedError, match="allocations per run limit reached") as info:
        rate.allow(0.0)
    assert info.value.limit == 5 and "--max-allocations" in str(info.value)
    assert rate.submitted == 5


def test_a_runaway_strategy_ends_its_run_failed_at_the_cap() -> None:
    workflow = Workflow("w", (Stage("s", tasks=1, cores=1, runtime=1e6),))
    runner = Runner(
        workflow,
        Runaway(),  # a new allocation every 0.5 s, for ever
        MockBackend(nodes=4),
        SimExecution(),
        Knowledge(workflow),
        max_duration=86400.0,
        poll_interval=1.0,
        submission_rate=SubmissionLimit(per_minute=600, burst=1000, max_allocations=25),
    )
    result = runner.run()
    assert result.status == "failed"
    assert "allocations per run limit reached" in result.detail and "25" in result.detail
    assert len(runner.controller.allocations) == 25
    assert all(a.ended for a in runner.controller.allocations)  # released on the way out


def _events(tmp_path: Path, *options: str) -> tuple[int, list[float]]:
    workflow = tmp_path / "wide.toml"
    workflow.write_text(WIDE, encoding="utf-8")
    events = tmp_path / "events.csv"
    args = ["run", "--workflow", str(workflow), "--strategy", "perstage", "--simulate", "--no-store"]
    code = main([*args, "--no-progress", "--events", str(events), *options])
    with events.open(encoding="utf-8") as fh:
        return code, [float(row[0]) for row in csv.reader(fh) if row[1:2] == ["alloc_submit"]]


def test_elastic_run_stops_at_max_allocations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, submits = _events(tmp_path, "--max-allocations", "2", "--submission-rate", "1")
    assert code == 1
    assert [t - submits[0] for t in submits] == [0.0, 60.0]  # both options held: spaced, then stopped
    out = capsys.readouterr().out
    assert "the run failed: allocations per run limit reached" in " ".join(out.split())


@pytest.mark.parametrize(
    "argv",
    [
        ["--max-allocations", "3", "--submission-rate", "6"],
        ["--submission-rate", "6", "--max-allocations", "3"],
    ],
)
def test_the_two_options_make_one_limit_whichever_comes_first(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    add_submission_rate_argument(parser)
    assert parser.parse_args(argv).submission_rate == SubmissionLimit(
        per_minute=6, burst=6, max_allocations=3
    )
    assert parser.parse_args([]).submission_rate is None


@pytest.mark.parametrize("value", ["0", "1000001", "many"])
def test_the_cli_refuses_a_bad_cap_naming_the_option(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "--strategy", "asa", "--max-allocations", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --max-allocations: " in err and f"got '{value}'" in err
    assert value != "1000001" or "at most 1,000,000" in err


def _a() -> int:
    return 1


def _b() -> int:
    return 2


def test_the_front_door_fails_its_tasks_with_the_cap_and_takes_no_more() -> None:
    limit = SubmissionLimit(max_allocations=1)
    el = Elastic("mock", "perstage", store=False, progress=False, submission_rate=limit)
    try:
        futures = [el.submit(_a), el.submit(_b)]  # two stages: Per-Stage asks for two allocations at once
        errors = [f.exception(timeout=60) for f in futures]
        assert all(e is not None and "allocations per run limit reached" in str(e) for e in errors)
        with pytest.raises(Exception, match="allocation control failed"):
            el.submit(_a)
    finally:
        el.shutdown(wait=False, cancel_futures=True, status="failed")
