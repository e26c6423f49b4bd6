"""``elastic compare --emulate``: the report's experiment with real demo runs on the scaled mock queue."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from elastic.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_an_emulated_report_runs_each_demo_for_real_and_keeps_one_learner_per_strategy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, work = tmp_path / "report", tmp_path / "work"
    work.mkdir()
    args = ["compare", "--workflow", "blast,statistics", "--emulate", "--size", "2", "--peak-cores", "4"]
    # one run per cell: each strategy still runs twice (blast, then statistics), so its learner is carried
    # from one workflow to the next; two runs per cell doubled the time and checked nothing more
    args += ["--strategies", "perstage,asa", "--runs", "1", "--workdir", str(work), "--out", str(out)]
    code = main(args)
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "4 emulated runs" in " ".join(printed.out.split())
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 2 * 2 and set(runs["status"]) == {"completed"}
    assert set(runs["workflow"]) == {"blast", "statistics"} and set(runs["cores"]) == {4}
    assert (runs["makespan"] > 0).all() and (runs["core_hours_charged"] > 0).all()
    # each run generated, ran and checked a demo of its own (a folder per run)
    folders = sorted(p.name.split("-")[0] for p in work.iterdir())
    assert folders == ["blast"] * 2 + ["statistics"] * 2
    html = (out / "report.html").read_text()
    assert "emulation: the real demos (size 2)" in html and "allocations capped at the peak cores" in html
    for strategy, group in runs.groupby("strategy"):  # one learner per strategy, in order, across workflows
        assert sorted(group["order"]) == list(range(2)), strategy


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--workflow", "demo3", "--emulate"],
            "--emulate runs the demo workflows (blast, montage, statistics), not demo3",
        ),
        (["--workflow", "blast", "--emulate", "--size", "0"], "blast: size must be an integer in [1, 2000]"),
        (["--workflow", "blast", "--size", "2"], "--size and --workdir are --emulate's"),
        (
            ["--workflow", "blast", "--emulate", "--runtimes", "store"],
            "--runtimes store is for pure simulation",
        ),
        (
            ["--workflow", "blast", "--emulate", "--speedup", "0"],
            "--speedup must be from 0.01 to 1000 simulated seconds per real second, got 0",
        ),
        (
            ["--workflow", "blast", "--emulate", "--workdir", "/proc/nowhere"],
            "--workdir '/proc/nowhere' does not exist",
        ),
        (["--workflow", "blast", "--emulate", "--workdir", "/proc"], "--workdir '/proc' cannot be written"),
    ],
)
def test_bad_emulation_settings_are_refused_before_any_run(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert main(["compare", *extra, "--runs", "1", "--out", str(out)]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not out.exists() or not any(out.iterdir())


def test_emulation_options_without_emulate_are_refused_by_the_single_table_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compare", "--workflow", "blast", "--size", "2", "--runs", "1"]) == 2
    assert "--size and --workdir are --emulate's" in capsys.readouterr().err
