"""Issue 31: long work shows progress while it runs, not only at its end.

A declared stage of many tasks simulated with ``elastic run --simulate`` printed nothing until its metrics
(a stage of 10 million tasks: nothing for 5 minutes). The run's stage and allocation lines now appear as it
goes, and a line every few seconds says how many task attempts ended, as one decision of a large run (all
its tasks placed and simulated) can take that long alone.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from elastic.backends.mock import MockBackend
from elastic.cli import main
from elastic.cli import run as run_cli
from elastic.control import controller
from elastic.control.rate import SubmissionLimit
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow
from tests.control.test_submission_rate_setting import Runaway

TASKS = 10_000
"""A scaled-down large stage: a few seconds of simulation on a busy 2-core machine."""


def _big(tmp_path: Path) -> Path:
    wf = tmp_path / "big.toml"
    wf.write_text(f'[[stages]]\nname = "a"\ntasks = {TASKS}\ncores = 1\nruntime = 60\n')
    return wf


def test_a_large_simulation_reports_progress_before_it_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        run_cli, "SIM_PROGRESS_INTERVAL", 0.02, raising=False
    )  # the scaled run lasts a second or two
    args = ["run", "--workflow", str(_big(tmp_path)), "--strategy", "perstage", "--simulate", "--no-store"]
    assert main([*args, "--processors", str(2 * TASKS)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "elastic: simulating:" in line]
    assert lines, f"nothing was reported while the run went on: {out}"
    assert all(f"of {TASKS:,} tasks ended" in line for line in lines)
    ended = [int(line.split(" task attempts")[0].rsplit(" ", 1)[1].replace(",", "")) for line in lines]
    # some line was written while tasks were still running: progress during the work, not only at its end
    assert any(n < TASKS for n in ended), lines
    assert ended == sorted(ended)
    assert out.index("elastic: simulating:") < out.index("makespan (s)")


def test_run_simulate_prints_the_runs_lines_before_its_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wf = tmp_path / "small.toml"
    wf.write_text('[[stages]]\nname = "a"\ntasks = 20\ncores = 1\nruntime = 60\n')
    args = ["run", "--workflow", str(wf), "--strategy", "perstage", "--simulate", "--no-store"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "elastic: stage a: ready (20 tasks)" in out
    assert "elastic: allocation a1: running after" in out
    assert out.index("allocation a1: running") < out.index("makespan (s)")
    assert main([*args, "--no-progress"]) == 0
    assert "stage a: ready" not in capsys.readouterr().out


def test_releasing_many_allocations_at_the_end_says_how_far_it_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The release after a failure or SIGTERM (9 minutes once, silent) says how far it is as it goes."""
    monkeypatch.setattr(controller, "RELEASE_PROGRESS", 0.0)  # a line at every step of this short release
    workflow = Workflow("w", (Stage("s", tasks=1, cores=1, runtime=1e6),))
    runner = Runner(
        workflow,
        Runaway(),  # a new allocation every 0.5 s, for ever: stopped by the cap, with 25 to release
        MockBackend(nodes=4),
        SimExecution(),
        Knowledge(workflow),
        max_duration=86400.0,
        poll_interval=1.0,
        submission_rate=SubmissionLimit(per_minute=600, burst=1000, max_allocations=25),
    )
    with caplog.at_level(logging.WARNING, logger="elastic.control.controller"):
        assert runner.run().status == "failed"
    lines = [r.getMessage() for r in caplog.records if "still releasing allocations" in r.getMessage()]
    cancelled = [int(m.split(" of ")[0].rsplit(" ", 1)[1]) for m in lines if "cancelled" in m]
    assert cancelled and min(cancelled) < max(cancelled), lines  # said during the release, not only after
    assert all(" of " in m for m in lines)
