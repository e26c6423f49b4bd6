"""Regression tests of issues 10 and 11: every command that reads a trace fails clearly on a bad one.

A damaged gzip file, an empty file, an empty window, a trace without recorded waits or without a machine
size: each command (``simulate``, ``fidelity``, ``waits``, ``traces info``, ``compare --trace``, ``run
--trace``) exits 2 with one line naming the file, before any work, never with a traceback or a table of
NaN.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from elastic.cli import main
from elastic.experiments import start_points
from elastic.simulator.trace import read_swf


def _line(job: int, submit: int, wait: int = 30, run: int = 600, procs: int = 32, user: int = 1) -> str:
    return f"{job} {submit} {wait} {run} {procs} -1 -1 {procs} {2 * run} -1 1 {user} -1 -1 -1 -1 -1 -1"


def _text(jobs: int = 400, first: int = 0, header: str = "; MaxProcs: 64\n", wait: int | None = None) -> str:
    rows = [
        _line(
            i,
            first + 600 * i,
            wait=(i * 37) % 3000 if wait is None else wait,
            procs=(16, 32, 64)[i % 3],
            user=i % 9,
        )
        for i in range(1, jobs + 1)
    ]
    return header + "\n".join(rows) + "\n"


def _commands(path: Path) -> list[list[str]]:
    p = str(path)
    return [
        ["simulate", "--trace", p],
        ["fidelity", "--trace", p, "--modes", "replay"],
        ["waits", "--trace", p, "--predictors", "last"],
        ["traces", "info", p],
        ["compare", "--trace", p, "--runs", "1", "--workflow", "demo3", "--strategies", "perstage"],
        ["run", "--trace", p, "--simulate", "--workflow", "demo3", "--strategy", "perstage"],
    ]


COMMANDS = ["simulate", "fidelity", "waits", "traces info", "compare", "run"]


def _fails_clearly(argv: list[str], capsys: pytest.CaptureFixture[str], *, match: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert match in err, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=COMMANDS)
@pytest.mark.parametrize("where", [0.1, 0.5, 0.97])
def test_flipped_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str], index: int, where: float) -> None:
    data = bytearray(gzip.compress(_text(3000).encode()))
    data[10 + int(where * (len(data) - 18))] ^= 0x10
    path = tmp_path / "flipped.swf.gz"
    path.write_bytes(bytes(data))
    err = _fails_clearly(_commands(path)[index], capsys, match=str(path))
    assert "damaged or truncated" in err or f"{path}:" in err


@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=COMMANDS)
def test_empty_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], index: int) -> None:
    path = tmp_path / "empty.swf"
    path.write_text("; MaxProcs: 64\n;\n")
    _fails_clearly(_commands(path)[index], capsys, match=f"{path}: has no job lines")


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--window", "1000d:2000d"],
        ["waits", "--window", "1e9", "2e9"],
        ["traces", "info", "--window", "1e9", "2e9"],
    ],
    ids=["simulate", "waits", "traces info"],
)
def test_empty_window(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    path = tmp_path / "t.swf"
    path.write_text(_text(50))
    full = (
        [*argv[:1], "--trace", str(path), *argv[1:]]
        if argv[0] != "traces"
        else [*argv[:2], str(path), *argv[2:]]
    )
    _fails_clearly(full, capsys, match="no job is submitted in the window")


def test_waits_outside_every_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.swf"
    path.write_text(_text(50))
    _fails_clearly(["waits", "--trace", str(path), "--cores", "2"], capsys, match="choose --cores")


@pytest.mark.parametrize(
    "argv",
    [
        ["fidelity", "--modes", "capacity"],
        ["waits"],
        ["compare", "--runs", "1", "--mode", "capacity"],
        ["simulate", "--mode", "capacity"],
    ],
    ids=["fidelity", "waits", "compare", "simulate"],
)
def test_no_recorded_waits_names_the_wait_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = tmp_path / "model.swf"
    path.write_text(_text(50, wait=-1))
    err = _fails_clearly([argv[0], "--trace", str(path), *argv[1:]], capsys, match="no recorded waits")
    assert "field 3, wait_time" in err and "submit time" not in err  # once blamed on the submit field


def test_simulate_replays_a_trace_without_recorded_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "model.swf"
    path.write_text(_text(50, wait=-1))
    assert main(["simulate", "--trace", str(path)]) == 0
    assert "50 (50 started)" in capsys.readouterr().out


def test_missing_size_header_is_loud_and_processors_is_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bare.swf"
    path.write_text(_text(50, header="; Computer: unknown\n"))
    assert main(["simulate", "--trace", str(path)]) == 0
    captured = capsys.readouterr()
    assert "elastic simulate: warning:" in captured.err and "ASSUMED" in captured.err
    assert "64 cores" in captured.out  # the widest job
    assert main(["simulate", "--trace", str(path), "--processors", "806"]) == 0
    captured = capsys.readouterr()
    assert "806 cores" in captured.out and "806 cores as given" in captured.err
    assert main(["traces", "info", str(path), "--processors", "806", "--no-header"]) == 0
    out = capsys.readouterr().out
    assert "given with --processors" in out and "806" in out


def test_traces_info_reports_assumptions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bare.swf"
    rows = [_line(1, 50), _line(2, 10), _line(3, -1, run=5), _line(4, 70, run=-1)]
    path.write_text("\n".join(rows) + "\n")
    assert main(["traces", "info", str(path), "--no-header"]) == 0
    out = capsys.readouterr().out
    for expected in (
        "ASSUMED: the widest job",
        "1 unknown submit time, 1 unknown runtime",
        "1 job lines (sorted)",
    ):
        assert expected in out, out


def test_compare_start_points_count_from_the_first_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    year = 365 * 86400
    path = tmp_path / "late.swf"
    path.write_text(_text(2000, first=year))
    background = read_swf(path)
    starts = start_points(background, 20, seed=0)
    assert np.all(starts >= year + 86400) and np.all(starts <= background.submit[-1])
    argv = ["compare", "--trace", str(path), "--runs", "3", "--mode", "capacity", "--workflow", "demo3"]
    assert main(argv) == 0, capsys.readouterr().err
