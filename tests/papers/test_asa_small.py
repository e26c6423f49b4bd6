"""Small version of the ASA paper's Table 1 experiment: the headline's direction and the table's shape."""

from __future__ import annotations

import pytest

from elastic.cli import main
from elastic.errors import ConfigError
from elastic.experiments import default_background
from elastic.papers import asa
from elastic.papers.report import IN_TREND, NOT_REPRODUCED, REPRODUCED


@pytest.fixture(scope="module")
def montage56() -> list[asa.Row]:
    # The synthetic background queues a 56-core job for hours: the regime where the strategies differ.
    return asa.compare(default_background(240, seed=0), runs=2, workflows=("montage",), cores=(56,))


def test_asa_is_faster_than_per_stage_at_no_more_than_big_jobs_core_hours(montage56: list[asa.Row]) -> None:
    (row,) = montage56
    assert row.runs >= 1
    assert row.makespan["asa"] < row.makespan["perstage"]
    assert row.core_hours["asa"] <= row.core_hours["bigjob"]
    # the baselines trade as in the paper: Big-Job the faster, Per-Stage the leaner
    assert row.makespan["bigjob"] < row.makespan["perstage"]
    assert row.core_hours["perstage"] < row.core_hours["bigjob"]


def test_the_report_prints_the_papers_row_beside_ours(montage56: list[asa.Row]) -> None:
    out = asa.report(montage56, runs=2, processors=240, queue="synthetic")
    (table,) = out.tables
    assert len(table.rows) == 3 and all(len(r) == len(table.columns) for r in table.rows)
    assert [r[3] for r in table.rows] == ["1261", "1496", "1280"]  # the paper's makespans, Montage 56
    assert [c.figure for c in out.checks] == ["Table 1, Montage 56", "Table 1, mean over rows"]
    assert out.checks[0].verdict in (REPRODUCED, IN_TREND)
    text = out.markdown()
    assert "Paper beside ours" in text and "Montage | 56 | Big-Job" in text


def test_the_transcription_matches_the_papers_printed_percentages() -> None:
    # Table 1 prints, beside a figure, how far it is above the row's best: a check on the numbers copied.
    t = asa.PAPER_TABLE1
    assert round(t[("montage", 28)]["perstage"][1] / t[("montage", 28)]["asa"][1] - 1, 2) == 0.10
    assert round(t[("montage", 112)]["perstage"][0] / t[("montage", 112)]["asa"][0] - 1, 2) == 0.78
    assert round(t[("blast", 112)]["perstage"][0] / t[("blast", 112)]["asa"][0] - 1, 2) == 0.35
    assert round(t[("statistics", 56)]["bigjob"][2] / t[("statistics", 56)]["asa"][2] - 1, 2) == 1.00
    assert round(t[("statistics", 112)]["perstage"][0] / t[("statistics", 112)]["asa"][0] - 1, 2) == 1.73
    assert len(t) == 9 and all(set(v) == {"bigjob", "perstage", "asa"} for v in t.values())


def _row(asa_makespan: float, asa_core_hours: float) -> asa.Row:
    return asa.Row(
        "montage",
        112,
        {"bigjob": "bigjob", "perstage": "perstage-split", "asa": "asa"},
        {"bigjob": 100.0, "perstage": 150.0, "asa": asa_makespan},
        {"bigjob": 10.0, "perstage": 20.0, "asa": 10.0},
        {"bigjob": 60.0, "perstage": 30.0, "asa": asa_core_hours},
        5,
    )


@pytest.mark.parametrize(
    ("span", "hours", "verdict"),
    [
        (101.0, 30.5, REPRODUCED),  # Big-Job's makespan at Per-Stage's core-hours
        (120.0, 30.0, IN_TREND),  # between the baselines, makespan 20 points off
        (101.0, 45.0, IN_TREND),  # between the baselines, core-hours 50 points off
        (150.0, 30.0, NOT_REPRODUCED),  # Per-Stage's makespan
        (100.0, 60.0, NOT_REPRODUCED),  # Big-Job's core-hours
    ],
)
def test_row_verdicts(span: float, hours: float, verdict: str) -> None:
    assert asa.row_verdict(_row(span, hours)).verdict == verdict


def test_bad_input_is_refused_before_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    background = default_background(240, seed=0)
    with pytest.raises(ConfigError, match="workflows"):
        asa.compare(background, runs=1, workflows=("cybershake",))
    with pytest.raises(ConfigError, match="cores"):
        asa.compare(background, runs=1, cores=(160,))
    monkeypatch.delenv("ELASTIC_TRACES", raising=False)
    assert main(["reproduce", "asa"]) != 0
    assert "--trace" in capsys.readouterr().err
    assert main(["reproduce", "asa", "--trace", "/nonexistent/hpc2n.swf"]) != 0
    assert main(["reproduce", "onthefly", "--trace", "x.swf"]) != 0
    capsys.readouterr()
    assert main(["reproduce", "cp", "--processors", "240"]) != 0
    assert "--processors is the asa reproduction's" in capsys.readouterr().err


def test_a_faster_per_stage_is_named_as_the_reason() -> None:
    row = _row(150.0, 40.0)
    row.makespan.update(bigjob=150.0, perstage=100.0)  # Per-Stage the faster: no trade-off to close
    check = asa.row_verdict(row)
    assert check.verdict == NOT_REPRODUCED and "faster baseline (33 % below" in check.reason
