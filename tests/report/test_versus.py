"""Table 1 over the runs every strategy completed, and strategies read against the best baseline shapes."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from elastic.errors import ConfigError
from elastic.experiments import (
    default_background,
    parse_strategy,
    shaped_strategies,
    simulate_runs,
    split_cores,
)
from elastic.metrics import EventKind
from elastic.report.tables import common_runs, table1, versus_baselines
from elastic.workflow import builtin_workflow


def _runs(rows: list[tuple[str, int, str, float, float]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["strategy", "run", "status", "makespan", "core_hours_charged"])
    frame["makespan"] *= 3600.0
    return frame.assign(workflow="w", cores=8, perceived_wait=0.0)


def test_means_are_over_the_runs_every_strategy_completed_with_each_count_beside() -> None:
    runs = _runs(
        [
            ("a", 0, "completed", 1.0, 10.0),
            ("a", 1, "completed", 9.0, 90.0),  # b gave up on run 1: left out of a's mean too
            ("b", 0, "completed", 2.0, 20.0),
            ("b", 1, "timeout", 96.0, 5.0),
        ]
    )
    assert sorted(zip(common_runs(runs)["strategy"], common_runs(runs)["run"], strict=True)) == [
        ("a", 0),
        ("b", 0),
    ]
    t = table1(runs)
    row = t.cells.loc[("w", 8)]
    assert float(row[("a", "makespan", "mean")]) == 1.0 and float(row[("b", "makespan", "mean")]) == 2.0
    assert [int(row[("a", "runs", k)]) for k in ("completed", "total", "compared")] == [2, 2, 1]
    assert [int(row[("b", "runs", k)]) for k in ("completed", "total", "compared")] == [1, 2, 1]
    text = " ".join(str(c) for table in t.rich_tables() for column in table.columns for c in column._cells)
    assert "1.00 / 1.00 [2/2]" in text and "2.00 (+100%) / 2.00 [1/2]" in text
    assert "2/2 runs completed" in t.html() and "1/2 runs completed" in t.html()


def test_strategies_are_read_against_the_best_shape_of_each_baseline() -> None:
    rows = []
    for run, scale in enumerate((1.0, 1.2)):
        rows += [
            ("bigjob", run, "completed", 6.0 * scale, 42.0),
            ("bigjob-split", run, "completed", 4.0 * scale, 40.0),
            ("perstage", run, "completed", 16.0 * scale, 29.0),
            ("perstage-split", run, "completed", 7.0 * scale, 30.0),
            ("asa", run, "completed", 4.5 * scale, 31.5),
        ]
    t = table1(_runs(rows))
    v = t.versus[("w", 8)]
    assert (v.bigjob, v.perstage) == ("bigjob-split", "perstage-split")
    assert v.gap_closed["asa"] == pytest.approx((7.0 - 4.5) / (7.0 - 4.0))  # not against 6.0 and 16.0
    assert v.core_hours["asa"] == pytest.approx(31.5 / 30.0)
    assert set(v.gap_closed) == {"asa"}
    flat = t.flat().set_index("strategy")
    assert flat.loc["asa", "gap_closed"] == pytest.approx(2.5 / 3.0)
    assert math.isnan(flat.loc["bigjob", "gap_closed"])
    assert "83 %, 1.05x" in t.html()


def test_a_gap_within_five_percent_is_not_a_share() -> None:
    v = versus_baselines({"bigjob": 4.0, "perstage": 4.1, "asa": 1.0}, {"bigjob": 1, "perstage": 2, "asa": 2})
    assert v is not None and math.isnan(v.gap_closed["asa"]) and v.cell("asa") == "n/a, 1.00x"
    assert versus_baselines({"bigjob": 4.0, "asa": 1.0}, {"bigjob": 1.0, "asa": 1.0}) is None


def test_shapes_apply_to_the_baselines_and_name_their_rows() -> None:
    assert shaped_strategies(["bigjob", "perstage", "asa"], ["plain", "split"]) == (
        "bigjob",
        "bigjob-split",
        "perstage",
        "perstage-split",
        "asa",
    )
    assert shaped_strategies(["asa", "perstage"], ["split"]) == ("asa", "perstage-split")
    assert parse_strategy("perstage-split") == ("perstage", "split")
    with pytest.raises(ConfigError, match="unknown allocation shape round"):
        shaped_strategies(["bigjob"], ["round"])
    with pytest.raises(ConfigError, match="fast-split"):
        parse_strategy("fast-split")


def test_a_split_run_submits_pieces_of_at_most_half_the_peak() -> None:
    wf = builtin_workflow("montage")
    background = default_background(64, seed=1)
    (run,) = simulate_runs(wf, "bigjob-split", runs=1, seed=1, background=background)
    submits = [e for e in run.events if e.kind is EventKind.ALLOC_SUBMIT]
    assert split_cores(wf) == 14 and {e.cores for e in submits} == {14}
    assert len({e.request for e in submits}) < len(submits)  # pieces name their request
    (plain,) = simulate_runs(wf, "bigjob", runs=1, seed=1, background=background)
    assert [e.cores for e in plain.events if e.kind is EventKind.ALLOC_SUBMIT] == [28]
    with pytest.raises(ConfigError, match="bigjob-split sets its own job_cores"):
        simulate_runs(wf, "bigjob-split", runs=1, background=background, job_cores=4)
