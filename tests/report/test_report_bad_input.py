"""``elastic compare --out``: bad input is refused (exit 2, clear message) before any run, leaving nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main
from tests.report.report_case import ARGV


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``elastic argv``: it must exit 2 having printed nothing on stdout (no run, no table)."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a bad value with exit code 2
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert out.strip() == "", f"work was done before the refusal: {out[:300]}"
    return err


def test_an_unwritable_out_directory_is_refused_before_any_run(capsys: pytest.CaptureFixture[str]) -> None:
    # /sys is a read-only file system here, for root too (permission bits would not stop root)
    err = refused(capsys, [*ARGV, "--out", "/sys/elastic-report"])
    assert "--out '/sys/elastic-report'" in err and "cannot write" in err
    assert not Path("/sys/elastic-report").exists()


def test_out_must_be_a_directory_whose_parent_exists(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    afile = tmp_path / "report.html"
    afile.write_text("mine")
    err = refused(capsys, [*ARGV, "--out", str(afile)])
    assert "is a file, not a directory" in err
    assert afile.read_text() == "mine"
    missing = tmp_path / "no" / "such" / "dir"
    err = refused(capsys, [*ARGV, "--out", str(missing)])
    assert "does not exist" in err and "create it first" in err
    assert not (tmp_path / "no").exists()


def test_an_unknown_workflow_is_named_with_the_choices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    err = refused(capsys, ["compare", "--workflow", "montage,montag", "--runs", "1", "--out", str(out)])
    assert "'montag'" in err and "montage" in err and "statistics" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--peak-cores", "28,0", "whole numbers of cores >= 1"),
        ("--peak-cores", "28,28", "repeated"),
        ("--peak-cores", "28,many", "whole numbers"),
        ("--scaling", "linear", "invalid choice"),
    ],
)
def test_bad_peak_cores_and_scaling(
    capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    err = refused(capsys, ["compare", "--workflow", "montage", "--runs", "1", option, value])
    assert option in err and message in err


def test_a_peak_wider_than_the_partition_is_refused_before_any_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = ["compare", "--workflow", "blast", "--peak-cores", "8,64", "--processors", "32", "--runs", "1"]
    err = refused(capsys, [*argv, "--out", str(out)])
    assert "'blast' at 64 peak cores needs 64 cores but the partition has 32" in err
    assert not out.exists()


def test_a_peak_the_tasks_cannot_make_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    wf = tmp_path / "pairs.toml"
    wf.write_text('[[stages]]\nname = "wide"\ntasks = 4\ncores = 2\nruntime = 60\n')
    err = refused(capsys, ["compare", "--workflow", str(wf), "--peak-cores", "7", "--runs", "1"])
    assert "cannot be scaled to 7 peak cores" in err and "multiple of 2" in err


def test_csv_and_out_together_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = refused(capsys, [*ARGV, "--out", str(tmp_path / "out"), "--csv", str(tmp_path / "runs.csv")])
    assert "--csv" in err and "runs.csv" in err


def test_a_workflow_at_its_own_width_wider_than_the_partition_runs_in_waves_in_report_mode(
    tmp_path: Path,
) -> None:
    # as without --out (elastic.experiments.simulate_runs): only an asked peak wider than the partition,
    # or a task, is refused
    wide = tmp_path / "wide.json"
    wide.write_text('{"name": "wide", "stages": [{"name": "a", "tasks": 48, "runtime": 300}]}')
    out = tmp_path / "out"
    argv = [
        "compare",
        "--workflow",
        str(wide),
        "--processors",
        "32",
        "--runs",
        "2",
        "--strategies",
        "bigjob,perstage",
    ]
    assert main([*argv, "--out", str(out)]) == 0
    assert (out / "table1.csv").exists()
