"""Issue 31: traces beyond the ones tuned on.

An absurd field (a runtime of 1e20 s) is reported with its line instead of printing a mean wait of
millions of hours; a headerless trace whose recorded schedule runs more cores at once than the size
assumed says so and suggests ``--processors``, which ``elastic fidelity`` now accepts as its warning
tells the user.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.cli import main
from elastic.errors import TraceError
from elastic.limits import MAX_PROCESSORS, MAX_TRACE_SECONDS
from elastic.simulator.trace import read_swf_report, recorded_peak


def line(job: int, submit: float, wait: float = 5, run: float = 100, procs: float = 4) -> str:
    fields = [job, submit, wait, run, procs, -1, -1, procs, 3600, -1, 1, 1, -1, -1, -1, -1, -1, -1]
    return " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in fields)


def write(path: Path, lines: list[str], header: str = "; MaxProcs: 64\n") -> Path:
    path.write_text(header + "; a comment\n\n" + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("field", "values", "shown"),
    [
        ("run_time", {"run": 1e20}, "field 4 (run_time) is 1e+20 s, more than 100 years"),
        ("wait_time", {"wait": 4e9}, "field 3 (wait_time) is 4e+09 s, more than 100 years"),
        ("submit_time", {"submit": 1e12}, "field 2 (submit_time) is 1e+12 s, more than 100 years"),
        ("allocated_processors", {"procs": 1e9}, "field 5 (allocated_processors) is 1e+09 processors"),
    ],
)
def test_an_absurd_field_is_reported_with_its_line(
    tmp_path: Path, field: str, values: dict[str, float], shown: str
) -> None:
    lines = [line(i, 10.0 * i) for i in range(1, 6)]
    lines[3] = line(4, **{"submit": 30.0, **values})
    swf = write(tmp_path / "t.swf", lines)
    with pytest.raises(TraceError, match="more than") as err:
        read_swf_report(swf)
    assert err.value.line == 7  # the 4th job line, after the header, a comment and a blank line
    assert shown in str(err.value) and "limits in elastic.limits" in str(err.value)


def test_times_up_to_the_limit_are_read(tmp_path: Path) -> None:
    swf = write(tmp_path / "t.swf", [line(1, 0.0, run=MAX_TRACE_SECONDS), line(2, 1.0, procs=64.0)])
    assert read_swf_report(swf).workload.runtime[0] == MAX_TRACE_SECONDS
    assert MAX_PROCESSORS >= 10_000_000


def _overlapping(n: int, width: int) -> list[str]:
    """``n`` jobs of ``width`` cores that all run at once (submitted together, no wait, long runs)."""
    return [line(i, float(i), wait=0.0, run=10_000.0, procs=float(width)) for i in range(1, n + 1)]


def test_a_headerless_trace_whose_schedule_is_wider_than_its_widest_job_says_so(tmp_path: Path) -> None:
    swf = write(tmp_path / "t.swf", _overlapping(7, 32), header="")
    reading = read_swf_report(swf)
    assert reading.machine == 32 and reading.machine_from == "widest job"
    (said,) = [w for w in reading.warnings if "at once" in w]
    assert "runs up to 224 cores at once" in said and "7.0x the 32 cores assumed" in said
    assert "give --processors 224" in said


def test_a_size_given_at_least_as_wide_as_the_schedule_raises_nothing(tmp_path: Path) -> None:
    swf = write(tmp_path / "t.swf", _overlapping(7, 32), header="")
    assert not [w for w in read_swf_report(swf, processors=224).warnings if "at once" in w]
    (said,) = [w for w in read_swf_report(swf, processors=100).warnings if "at once" in w]
    assert "2.2x the 100 cores given" in said
    # a header's size is the machine's: the schedule is not second-guessed
    headed = write(tmp_path / "h.swf", _overlapping(7, 32), header="; MaxProcs: 64\n")
    assert not [w for w in read_swf_report(headed).warnings if "at once" in w]


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 5), st.integers(1, 30), st.integers(1, 8)),
        min_size=1,
        max_size=30,
    )
)
@settings(max_examples=100, deadline=None)
def test_the_recorded_peak_is_the_most_cores_running_at_any_instant(
    jobs: list[tuple[int, int, int, int]],
) -> None:
    raw = np.zeros((len(jobs), 9))
    raw[:, 1:5] = jobs  # submit, wait, run, allocated processors
    peak = recorded_peak(raw)
    assert peak is not None
    # brute force on the integer grid: a job runs on [start, end)
    best = max(sum(c for s, w, r, c in jobs if s + w <= t < s + w + r) for t in range(0, 100))
    assert peak[0] == best
    assert sum(c for s, w, r, c in jobs if s + w <= peak[1] < s + w + r) == best


def test_fidelity_takes_processors_as_its_warning_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    swf = write(tmp_path / "t.swf", _overlapping(7, 32), header="")
    assert main(["fidelity", "--trace", str(swf), "--cores", "32:32", "--modes", "replay"]) == 0
    err = capsys.readouterr().err
    assert "give its size with processors / --processors N" in " ".join(err.split())
    code = main(
        ["fidelity", "--trace", str(swf), "--cores", "32:32", "--modes", "replay", "--processors", "224"]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "as given (processors / --processors)" in " ".join(captured.err.split())
    assert "at once" not in captured.err


def test_waits_takes_processors_as_the_warning_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    swf = write(tmp_path / "t.swf", _overlapping(7, 32), header="")
    code = main(
        ["waits", "--trace", str(swf), "--cores", "32", "--predictors", "last", "--processors", "224"]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "at once" not in captured.err  # the size given covers the recorded schedule


TRACE_COMMANDS = {
    "simulate": ["simulate", "--trace", "T"],
    "compare": ["compare", "--trace", "T"],
    "run": ["run", "--workflow", "demo3", "--strategy", "asa", "--trace", "T"],
    "fidelity": ["fidelity", "--trace", "T"],
    "waits": ["waits", "--trace", "T"],
    "traces info": ["traces", "info", "T"],
    "reproduce asa": ["reproduce", "asa", "--trace", "T"],
}


def test_every_subcommand_reading_a_trace_takes_processors() -> None:
    from elastic.cli import _parser

    for name, argv in TRACE_COMMANDS.items():
        args = _parser([argv[0]]).parse_args([*argv, "--processors", "224"])
        assert args.processors == 224, name


def test_the_trace_commands_listed_are_every_one_with_a_trace() -> None:
    # a new subcommand module that reads a trace must join TRACE_COMMANDS (and so take --processors);
    # arguments.py reads it for compare and run (add_background_arguments), listed above
    import elastic.cli as cli

    root = Path(cli.__file__).parent
    readers = {p.stem for p in root.glob("*.py") if re.search(r"read_trace\(|read_swf", p.read_text())}
    assert readers - {"arguments"} == {"fidelity", "simulate", "traces", "waits", "reproduce"}
