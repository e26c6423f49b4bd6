"""``elastic walltime`` end to end through ``elastic.cli.main`` (issue 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main
from elastic.cli.walltime import continuous_distribution, read_runtimes
from elastic.errors import ConfigError, TraceError, UnknownNameError


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["walltime", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if name in line)


def test_table1_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        *[
            "--dist",
            "truncnorm",
            "--mu",
            "8",
            "--sigma",
            "2",
            "--lower",
            "0",
            "--upper",
            "20",
            "--points",
            "200",
            "--zeta",
            "0.5",
            "--at-points",
            "46",
            "--unit",
            "h",
        ],
    )
    assert code == 0
    assert "10.8, 13.4, 15.4, 17.1, 18.7, 20" in row(out, "TOptimal")
    assert "13.0435, 20" in row(out, "ATOptimal (zeta=0.5)")
    for name in ("Classical HPC", "Neuroscience", "MASI"):
        assert name in out
    assert "20.0000" in row(out, "Classical HPC")  # always reserves the 20 h upper bound
    assert "E[makespan], zeta=0.5" in out
    # Expected cost column: TOptimal (11.94 h) is cheaper than every baseline.
    costs = {name: float(row(out, name).split("│")[3]) for name in ("TOptimal", "Classical", "Neuro", "MASI")}
    assert costs["TOptimal"] == pytest.approx(11.9375, abs=1e-4)
    assert costs["TOptimal"] < min(costs["Classical"], costs["Neuro"], costs["MASI"])


def test_any_scipy_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dist", "lognorm", "--param", "s=0.5", "--scale", "3600", "--upper", "20000")
    assert code == 0
    assert "lognorm on [0, 20000] s" in out
    assert row(out, "TOptimal").split("│")[2].strip().endswith("20000")


def test_runtimes_file_with_censoring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.txt"
    path.write_text("# runtime seconds, censored\n100\n200 0\n\n300\n400 1  # killed at 400 s\n250\n")
    code, out, _ = run(capsys, "--runtimes", str(path), "--upper", "600", "--points", "60")
    assert code == 0
    assert "5 runs from" in out and "1 censored" in out
    assert "replay cost" in out
    assert "(next run)" in row(out, "Neuroscience")  # the sequence the file's history gives now
    assert "400, 600 (next run)" in row(out, "Neuroscience")


def test_bad_runtimes_line_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.txt"
    path.write_text("100\n200 1\nabc\n")
    code, _, err = run(capsys, "--runtimes", str(path))
    assert code == 2
    assert f"{path}:3: runtime 'abc' is not a number of seconds" in err
    path.write_text("100 2\n")
    with pytest.raises(TraceError, match=r":1: censored flag must be 0 or 1; got '2'"):
        read_runtimes(str(path))
    path.write_text("# nothing\n")
    with pytest.raises(TraceError, match="no runtimes found"):
        read_runtimes(str(path))


def test_largest_run_killed_needs_upper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.txt"
    path.write_text("100\n400 1\n")
    code, _, err = run(capsys, "--runtimes", str(path))
    assert code == 2 and "give --upper" in err and "upper=" not in err


def test_unknown_distribution_lists_close_matches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UnknownNameError) as info:
        continuous_distribution("lognrm")
    assert "lognorm" in info.value.allowed
    assert len(info.value.allowed) < 20
    code, _, err = run(capsys, "--dist", "lognrm", "--upper", "10")
    assert code == 2 and "unknown distribution 'lognrm'" in err


def test_distribution_parameter_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="lognorm needs --param s=VALUE"):
        continuous_distribution("lognorm")
    with pytest.raises(ConfigError, match="takes shape parameters: s"):
        continuous_distribution("lognorm", ["k=1"])
    with pytest.raises(ConfigError, match="not a number"):
        continuous_distribution("lognorm", ["s=x"])
    with pytest.raises(ConfigError, match="rejects"):
        continuous_distribution("lognorm", ["s=-1"])
    code, _, err = run(capsys, "--dist", "lognorm", "--param", "s=0.5")
    assert code == 2 and "--upper is required" in err
    code, _, err = run(capsys, "--dist", "norm", "--mu", "5", "--upper", "10", "--zeta", "1.5")
    assert code == 2 and "zeta must be in [0, 1)" in err
