"""The report ``elastic compare --out`` writes: every run in the CSV, Table 1 consistent with it, valid PNGs,
one self-contained HTML page."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.image import imread

from elastic.report.tables import METRICS
from tests.report.report_case import PEAKS, RUNS, STRATEGIES, WORKFLOWS

FILES = (
    {"runs.csv", "table1.csv", "report.html", "convergence.png"}
    | {f"breakdown-{w}.png" for w in WORKFLOWS}
    | {f"gantt-{w}-{max(PEAKS)}c.png" for w in WORKFLOWS}
)


def test_the_directory_holds_every_file(report_dir: Path) -> None:
    assert {p.name for p in report_dir.iterdir()} == FILES


def test_one_csv_row_per_run(report_dir: Path) -> None:
    runs = pd.read_csv(report_dir / "runs.csv")
    assert len(runs) == len(WORKFLOWS) * len(PEAKS) * len(STRATEGIES) * RUNS
    counts = runs.groupby(["workflow", "cores", "strategy"]).size()
    assert set(counts) == {RUNS}
    assert set(runs["workflow"]) == set(WORKFLOWS)
    assert set(runs["cores"]) == set(PEAKS)
    # each strategy's learner saw its runs in one order across all cells: 0, 1, ..., n - 1
    for _, group in runs.groupby("strategy"):
        assert sorted(group["order"]) == list(range(len(group)))
    assert (runs["makespan"] > 0).all()


def test_table1_agrees_with_the_runs(report_dir: Path) -> None:
    runs = pd.read_csv(report_dir / "runs.csv")
    table = pd.read_csv(report_dir / "table1.csv")
    assert len(table) == len(WORKFLOWS) * len(PEAKS) * len(STRATEGIES)
    assert list(dict.fromkeys(table["strategy"])) == list(STRATEGIES)
    # means and medians over the runs every strategy of the row completed (paired by run index)
    completed = runs[runs["status"] == "completed"]
    count = completed.groupby(["workflow", "cores", "run"])["strategy"].transform("nunique")
    done = completed[count == len(STRATEGIES)]
    assert (table["runs_compared"] <= table["runs_completed"]).all()
    for key, _, divisor in METRICS:
        expected = done.groupby(["workflow", "cores", "strategy"])[key].agg(["mean", "median"]) / divisor
        got = table.set_index(["workflow", "cores", "strategy"])
        for stat in ("mean", "median"):
            joined = expected[stat].to_frame("csv").join(got[f"{key}_{stat}"])
            np.testing.assert_allclose(joined["csv"], joined[f"{key}_{stat}"], rtol=1e-9)
        # % over the best of each row: the best is 0, none is below it, and it is mean / best - 1
        for _, row in got.groupby(level=[0, 1]):
            means = row[f"{key}_mean"].to_numpy()
            over = row[f"{key}_over"].to_numpy()
            best = means.min()
            if best > 0:
                np.testing.assert_allclose(over, means / best - 1, rtol=1e-9)
                assert math.isclose(over.min(), 0.0, abs_tol=1e-12)
    assert (table["runs_total"] == RUNS).all()
    # asa against the best shape of each baseline: its core-hours over the best Per-Stage's
    got = table.set_index(["workflow", "cores", "strategy"])
    for (w, c), row in got.groupby(level=[0, 1]):
        means = row["makespan_mean"].droplevel([0, 1])
        per = means[["perstage", "perstage-split"]].idxmin()
        asa_ch, per_ch = (row.loc[(w, c, s), "core_hours_charged_mean"] for s in ("asa", per))
        expected = asa_ch / per_ch
        assert math.isclose(row.loc[(w, c, "asa"), "x_perstage_core_hours"], expected, rel_tol=1e-9)
        assert row.drop(index=(w, c, "asa"))["x_perstage_core_hours"].isna().all()


def test_every_png_is_a_picture_with_something_drawn(report_dir: Path) -> None:
    for path in sorted(report_dir.glob("*.png")):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path.name
        pixels = imread(path)
        assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400, path.name
        assert pixels[..., :3].std() > 0.05, f"{path.name} is blank"


def test_the_html_page_is_self_contained(report_dir: Path) -> None:
    page = (report_dir / "report.html").read_text(encoding="utf-8")
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert len(sources) == len(list(report_dir.glob("*.png")))
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    # nothing is fetched from elsewhere: no scripts, style sheets, or remote URLs
    assert "<script" not in page and "<link" not in page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    assert page.count('<table class="table1">') == 1
    for w in WORKFLOWS:
        assert f">{w}</th>" in page
