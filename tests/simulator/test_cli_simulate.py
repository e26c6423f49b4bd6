"""``elastic simulate`` end to end (synthetic load and the real HPC2N trace)."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from elastic.cli import main
from elastic.cli.values import parse_duration, parse_window


def test_synthetic_to_csv(tmp_path, capsys):
    out = tmp_path / "jobs.csv"
    assert main(["simulate", "--jobs", "400", "--processors", "64", "--seed", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "utilisation" in text and "by job size" in text
    assert "priority model" in text and " age " in text  # the default, printed
    rec = pd.read_csv(out)
    assert len(rec) == 400
    assert (rec["start"] >= rec["submit"]).all()
    assert rec["cores"].max() <= 64


def test_trace_window_policy_parquet(hpc2n_trace, tmp_path, capsys):
    out = tmp_path / "jobs.parquet"
    code = main(
        [
            "simulate",
            "--trace",
            str(hpc2n_trace),
            "--window",
            "0h:720h",
            "--policy",
            "conservative",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    rec = pd.read_parquet(out)
    assert 1000 < len(rec) < 2000
    assert rec["submit"].max() < 720 * 3600
    assert "conservative" in capsys.readouterr().out


def test_speculative_reports_runs(hpc2n_trace, capsys):
    assert main(["simulate", "--trace", str(hpc2n_trace), "--window", "0h:240h", "--speculative"]) == 0
    assert "speculative runs" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--out", "x.txt"], "--out must end in .csv or .parquet, got 'x.txt'"),
        (["--window", "0h:1h"], "--window needs --trace"),
        (["--policy", "fcfs", "--speculative"], "speculative backfilling works only with policy 'easy'"),
    ],
)
def test_errors(argv, message, capsys):
    assert main(["simulate", "--jobs", "10", *argv]) == 2
    assert message in capsys.readouterr().err


def test_parsers():
    assert parse_duration("720h") == 720 * 3600.0
    assert parse_window(":1d") == (0.0, 86400.0)
    for bad in ("1h", "2h:1h", "x:1h"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_window(bad)
