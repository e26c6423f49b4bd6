"""``elastic compare`` says where each strategy's idle core-hours go, and the parts add up."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from elastic.cli import main

PARTS = (
    "idle_early_core_hours",
    "idle_between_core_hours",
    "idle_after_core_hours",
    "idle_unused_core_hours",
)


def test_compare_prints_the_idle_split_and_writes_it_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.csv"
    args = ["compare", "--workflow", "demo3", "--runs", "2", "--seed", "3", "--processors", "32"]
    assert (
        main([*args, "--strategies", "bigjob,perstage,asa", "--shapes", "plain,fine", "--csv", str(out)]) == 0
    )
    text = capsys.readouterr().out
    assert "where the idle core-hours go" in text
    for column in ("before its first task", "between its tasks", "after its last task", "ran no task"):
        assert column in text
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["strategy"] for r in rows} >= {"bigjob", "bigjob-fine", "perstage", "perstage-fine", "asa"}
    for r in rows:
        parts = [float(r[k]) for k in PARTS]
        assert min(parts) >= 0.0
        assert sum(parts) == pytest.approx(float(r["overhead_core_hours"]), abs=1e-9)
    # Big-Job's one allocation runs the first stage's tasks the moment it starts and is released after
    # the last one: its idle cores are all between its tasks (the narrower stages it is held across)
    for r in rows:
        if r["strategy"] == "bigjob":
            assert float(r["idle_between_core_hours"]) > 0.0
            assert float(r["idle_early_core_hours"]) == pytest.approx(0.0, abs=1e-9)
            assert float(r["idle_unused_core_hours"]) == 0.0
