"""Behaviour unchanged: a fixed-seed ``elastic compare`` gives the very numbers it gave before.

A small comparison (demo3, 2 runs per strategy, seed 3, synthetic background load on a 32-core machine,
where the queue makes jobs wait) runs once here and its per-run CSV is compared number by number with
``tests/data/compare_demo3_seed3.csv``. A refactoring must leave every number as it was; a change of
behaviour (a strategy's rule, the planner's cost, the simulator) changes some, and this test says which.

The Big-Job and Per-Stage rows depend only on the baselines, the simulator and the metrics; the ASA rows
also on the planner and the learner, so an intended change there fails only ``test_asa_rows_are_unchanged``.
When a change of numbers is intended, regenerate the expected file with this one command (from the
repository root) and commit it with the change that explains it::

    python -m elastic compare --workflow demo3 --runs 2 --seed 3 --strategies bigjob,perstage,asa \
        --shapes plain --processors 32 --csv tests/data/compare_demo3_seed3.csv

``tests/data/compare_demo3_seed3_weight1.csv`` is the same comparison at ``--weight 1``, ``asa``'s
default before it became 0.1: the option must give back exactly what the planner gave at that weight.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from elastic.cli import main

EXPECTED = Path(__file__).resolve().parents[1] / "data" / "compare_demo3_seed3.csv"
WEIGHT_1 = EXPECTED.with_name("compare_demo3_seed3_weight1.csv")
ARGS = [
    "compare",
    "--workflow",
    "demo3",
    "--runs",
    "2",
    "--seed",
    "3",
    "--strategies",
    "bigjob,perstage,asa",
    "--shapes",
    "plain",
    "--processors",
    "32",
]
KEYS = ("strategy", "run", "status")
"""Columns compared as text; every other column is a number."""

Rows = list[dict[str, str]]


def _read(path: Path) -> Rows:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _differences(got: Rows, expected: Rows) -> list[str]:
    """Every cell of ``got`` that is not the one of ``expected`` (the same row order and columns).

    Numbers are equal to 1e-9 relative: the last bits of a float may differ between maths libraries,
    while any change of behaviour moves a makespan or a wait by far more.
    """
    if len(got) != len(expected):
        return [f"{len(got)} rows, expected {len(expected)}"]
    found = []
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if g.keys() != e.keys():
            return [f"columns {list(g)}, expected {list(e)}"]
        where = f"row {i} ({e['strategy']} run {e['run']})"
        for column, want in e.items():
            have = g[column]
            if column in KEYS:
                same = have == want
            else:
                a, b = float(have), float(want)
                same = (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
            if not same:
                found.append(f"{where} {column}: {have}, expected {want}")
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    out = tmp_path_factory.mktemp("compare") / "runs.csv"
    assert main([*ARGS, "--csv", str(out)]) == 0
    return _read(out)


def _of(rows: Rows, strategies: set[str]) -> Rows:
    return [r for r in rows if r["strategy"] in strategies]


def test_the_baselines_rows_are_unchanged(runs: Rows) -> None:
    expected = _read(EXPECTED)
    assert list(runs[0]) == list(expected[0]), "the CSV's columns changed"
    baselines = {"bigjob", "perstage"}
    assert _differences(_of(runs, baselines), _of(expected, baselines)) == []


def test_asa_rows_are_unchanged(runs: Rows) -> None:
    assert _differences(_of(runs, {"asa"}), _of(_read(EXPECTED), {"asa"})) == []


def test_the_expected_file_is_a_real_comparison() -> None:
    # every strategy completed every run, and the queue made some of them wait: numbers worth comparing
    expected = _read(EXPECTED)
    assert [(r["strategy"], r["run"]) for r in expected] == [
        (s, str(i)) for s in ("bigjob", "perstage", "asa") for i in range(2)
    ]
    assert all(r["status"] == "completed" for r in expected)
    assert any(float(r["queue_wait"]) > 0 for r in expected)


def test_a_changed_number_is_found() -> None:
    expected = _read(EXPECTED)
    changed = [dict(r) for r in expected]
    changed[3]["makespan"] = repr(float(changed[3]["makespan"]) * (1 + 1e-6))
    assert _differences(expected, expected) == []
    assert _differences(changed, expected) == [
        f"row 3 (perstage run 1) makespan: {changed[3]['makespan']}, expected {expected[3]['makespan']}"
    ]


def test_weight_1_gives_back_the_rows_asa_gave_at_weight_1(tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    assert main([*ARGS, "--weight", "1", "--csv", str(out)]) == 0
    assert _differences(_read(out), _read(WEIGHT_1)) == []
    # and the default weight's differ there: the option reaches the planner
    assert _differences(_of(_read(EXPECTED), {"asa"}), _of(_read(WEIGHT_1), {"asa"}))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--strategies", "bigjob,perstage", "--weight", "1"], "--weight is asa's option"),
        (["--weight", "0"], "expected a finite number > 0"),
        (["--weight", "nan"], "expected a finite number > 0"),
        (["--weight", "1e307"], "--weight must be <= 1e+06"),  # accepted, it made every asa run fail
    ],
)
def test_a_weight_that_would_change_nothing_or_is_no_price_is_refused_before_any_run(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.csv"
    args = [*ARGS[: ARGS.index("--strategies")], *ARGS[ARGS.index("--strategies") + 2 :], *extra]
    code: int | str | None
    try:
        code = main([*args, "--csv", str(out)])
    except SystemExit as exit:  # argparse's refusal of the value itself
        code = exit.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # nothing ran
