"""``elastic compare`` says which runs its means leave out, and why, when some runs did not complete.

The means pair the strategies over the runs every one of them completed; a workflow whose runs sometimes
outlast the simulated horizon must not read as if those means were over every run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from elastic.cli import main

# one stage of 4 tasks, 50 h each on average (cv 1): passes the horizon check, yet some runs outlast 96 h
LONG = """name = "long"
[[stages]]
name = "a"
tasks = 4
cores = 1
runtime = 180000.0
runtime_cv = 1.0
"""


def test_the_runs_left_out_are_named_with_their_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "long.toml"
    path.write_text(LONG)
    args = ["compare", "--workflow", str(path), "--runs", "6", "--strategies", "bigjob,perstage"]
    assert main([*args, "--shapes", "plain", "--csv", str(tmp_path / "runs.csv")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    runs = pd.read_csv(tmp_path / "runs.csv")
    done = runs[runs["status"] == "completed"].groupby("run")["strategy"].nunique()
    compared = int((done == 2).sum())
    assert 0 < compared < 6  # the seed gives both kinds of run; else this test checks nothing
    assert f"means over the {compared} runs every strategy completed" in out
    line = re.search(r"read over (\d+) of 6 runs; left out: (.*?) best Big-Job", out)
    assert line is not None and int(line.group(1)) == compared
    for strategy, group in runs.groupby("strategy"):
        missed = int((group["status"] == "timeout").sum())
        assert (f"{strategy}: {missed} reached the horizon" in line.group(2)) == (missed > 0)


def test_no_line_when_every_run_completed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--workflow", "demo3", "--runs", "1", "--strategies", "bigjob,perstage"]) == 0
    out = capsys.readouterr().out
    assert "left out" not in out
    assert "means over the 1 run every strategy completed" in " ".join(out.split())


def test_a_comparison_of_no_run_every_strategy_completed_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 20 tasks of 83 h on average (cv 1): within the horizon check, but nearly every run has one past 96 h
    path = tmp_path / "never.toml"
    path.write_text(LONG.replace("tasks = 4", "tasks = 20").replace("180000.0", "300000.0"))
    args = ["compare", "--workflow", str(path), "--runs", "3", "--strategies", "bigjob,perstage"]
    code = main([*args, "--shapes", "plain", "--csv", str(tmp_path / "runs.csv")])
    runs = pd.read_csv(tmp_path / "runs.csv")
    done = runs[runs["status"] == "completed"].groupby("run")["strategy"].nunique()
    assert not (done == 2).any()  # the seed gives no run both completed; else this test checks nothing
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1
    assert "read over 0 of 3 runs" in out and "nothing to compare (exit 1)" in out
    assert (tmp_path / "runs.csv").exists()  # the runs are kept for a look
