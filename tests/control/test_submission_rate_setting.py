"""The submission-rate cap as a user's setting (issue 31): ``submission_rate`` on every front-end and CLI.

One :class:`~elastic.Settings` field reaches allocation control everywhere it runs; a bad value is
refused by name before anything starts, and a low rate spaces the batch jobs on the mock backend's
virtual clock.
"""

from __future__ import annotations

import csv
import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from elastic import Elastic, Settings
from elastic.backends.mock import MockBackend
from elastic.cli import main
from elastic.control.rate import SubmissionLimit, submission_limit
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.errors import ConfigError
from elastic.executors.parsl_executor import ElasticExecutor
from elastic.executors.prefect_runner import ElasticTaskRunner
from elastic.strategies.actions import Decision, Submit
from elastic.strategies.base import RunView
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow

WIDE = """
name = "wide"
[[stages]]
name = "a"
tasks = 1
cores = 1
runtime = 600
[[stages]]
name = "b"
tasks = 1
cores = 1
runtime = 600
depends_on = []
[[stages]]
name = "c"
tasks = 1
cores = 1
runtime = 600
depends_on = []
"""
"""Three stages with nothing between them: Per-Stage asks for their three allocations at once."""


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("30", "submission_rate must be jobs a minute (a number in (0, 600]), a SubmissionLimit or None"),
        (True, "submission_rate must be jobs a minute"),
        ([30], "submission_rate must be jobs a minute"),
        (0, "submission_rate must be in (0, 600] jobs a minute, got 0"),
        (-1.0, "submission_rate must be in (0, 600] jobs a minute, got -1.0"),
        (601, "submission_rate must be in (0, 600] jobs a minute, got 601"),
        (float("nan"), "submission_rate must be in (0, 600] jobs a minute, got nan"),
    ],
)
def test_a_bad_rate_is_refused_by_name_by_every_front_end_before_anything_starts(
    value: object, message: str
) -> None:
    threads = set(threading.enumerate())
    for make in (
        lambda: Settings(submission_rate=value),  # type: ignore[arg-type]
        lambda: Elastic("mock", store=False, submission_rate=value),  # type: ignore[arg-type]
        lambda: ElasticExecutor(backend="mock", submission_rate=value),  # type: ignore[arg-type]
        lambda: ElasticTaskRunner("mock", submission_rate=value),
    ):
        with pytest.raises(ConfigError) as info:
            make()
        assert message in str(info.value) and "Elastic: submission_rate" in str(info.value)
    assert not [t.name for t in set(threading.enumerate()) - threads if t.is_alive()]


def test_a_limit_out_of_range_names_its_own_field() -> None:
    with pytest.raises(ConfigError, match=r"SubmissionLimit: burst must be an integer in \[1, 1000\], got 0"):
        SubmissionLimit(burst=0)
    with pytest.raises(ConfigError, match=r"SubmissionLimit: failure_delays must start with 0"):
        SubmissionLimit(failure_delays=(10.0,))


def test_a_number_is_that_many_jobs_a_minute_and_at_most_a_minute_s_worth_at_once() -> None:
    assert submission_limit(0.5) == SubmissionLimit(per_minute=0.5, burst=1)
    assert submission_limit(6) == SubmissionLimit(per_minute=6.0, burst=6)
    assert submission_limit(600) == SubmissionLimit(per_minute=600.0, burst=30)
    assert submission_limit(None) == SubmissionLimit() == submission_limit(30)
    # the settings keep the limit, so every front-end that takes them makes the same cap
    settings = Settings(backend="mock", store=False, submission_rate=6)
    assert settings.submission_rate == SubmissionLimit(per_minute=6.0, burst=6)
    assert ElasticExecutor(settings=settings).settings.submission_rate == settings.submission_rate
    runner = ElasticTaskRunner(settings=settings, submission_rate=2)
    assert runner._config is not None
    assert runner._config.settings.submission_rate == SubmissionLimit(per_minute=2.0, burst=2)


def test_the_front_door_s_allocation_control_uses_the_setting() -> None:
    with Elastic("mock", store=False, progress=False, submission_rate=SubmissionLimit(3, burst=2)) as el:
        rate = el._controller.rate
        assert (rate.per_minute, rate.burst) == (3.0, 2)


class Runaway:
    """A broken strategy: asks for a new allocation at every step, every 0.5 s."""

    name = "runaway"

    def decide(self, view: RunView) -> Decision:
        return Decision((Submit("s", cores=1, walltime=3600.0),), wake_at=view.now + 0.5)


@pytest.mark.parametrize("per_minute", [2.0, 7.5])
def test_a_low_rate_spaces_submissions_on_the_virtual_clock(per_minute: float) -> None:
    workflow = Workflow("w", (Stage("s", tasks=1, cores=1, runtime=1e6),))
    runner = Runner(
        workflow,
        Runaway(),
        MockBackend(nodes=4),
        SimExecution(),
        Knowledge(workflow),
        max_duration=300.0,
        poll_interval=1.0,
        # the backlog off: on 4 nodes every job stays queued, and the rate alone is measured here
        submission_rate=dataclasses.replace(submission_limit(per_minute), max_queued=1_000_000),
    )
    runner.run()
    submits = sorted(a.submit_time or 0.0 for a in runner.controller.allocations)
    burst = submission_limit(per_minute).burst
    assert runner.controller.rate.held > 0 and len(submits) > burst  # held back, slowed, not stopped
    # the documented bound: in any window of T seconds, at most burst + N * T / 60 jobs
    for i, start in enumerate(submits):
        for j in range(i, len(submits)):
            assert j - i + 1 <= burst + per_minute * (submits[j] - start) / 60.0 + 1e-6
    assert len(submits) >= burst + per_minute * 300.0 / 60.0 - 1  # and no slower than the rate
    assert submits[-1] - submits[burst] >= (len(submits) - burst - 1) * 60.0 / per_minute - 1.0


def _submits(tmp_path: Path, *options: str) -> list[float]:
    workflow = tmp_path / "wide.toml"
    workflow.write_text(WIDE, encoding="utf-8")
    events = tmp_path / "events.csv"
    args = ["run", "--workflow", str(workflow), "--strategy", "perstage", "--simulate", "--no-store"]
    assert main([*args, "--no-progress", "--events", str(events), *options]) == 0
    with events.open(encoding="utf-8") as fh:
        return [float(row[0]) for row in csv.reader(fh) if row[1:2] == ["alloc_submit"]]


def test_elastic_run_takes_the_rate_and_spaces_its_jobs(tmp_path: Path) -> None:
    at_once = _submits(tmp_path)
    assert len(at_once) == 3 and max(at_once) == min(at_once)  # Per-Stage asks for the three together
    spaced = _submits(tmp_path, "--submission-rate", "1")
    assert [t - spaced[0] for t in spaced] == [0.0, 60.0, 120.0]


@pytest.mark.parametrize("command", [["run", "--strategy", "asa"], ["compare"]])
@pytest.mark.parametrize("value", ["0", "601", "fast", "nan"])
def test_the_cli_refuses_a_bad_rate_naming_the_option(
    command: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([*command, "--submission-rate", value])
    assert info.value.code == 2
    err: Any = capsys.readouterr().err
    assert f"argument --submission-rate: expected jobs a minute, a number in (0, 600]; got '{value}'" in err
