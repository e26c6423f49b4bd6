"""Regression tests of issue 11 and the trace cases of issue 10: real-world SWF variety, on made-up files.

Each case once broke on a real archive trace: every wait -1, submit -1, no MaxProcs/MaxNodes header,
unsorted submits, files larger than one parse chunk, a flipped byte in a gzip file, empty files and
windows, zero-runtime jobs in the recorded schedule.
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic.errors import TraceError
from elastic.simulator import swf_io
from elastic.simulator.engine import Engine
from elastic.simulator.fidelity import MODES, simulate_mode
from elastic.simulator.recorded import pinnable
from elastic.simulator.trace import read_swf, read_swf_report, require_recorded_waits


def line(
    job: int, submit: int, wait: int = 5, run: int = 100, procs: int = 4, user: int = 1, queue: int = -1
) -> str:
    fields = [
        job,
        submit,
        wait,
        run,
        procs,
        -1,
        -1,
        procs,
        2 * max(run, 1),
        -1,
        1,
        user,
        -1,
        -1,
        queue,
        -1,
        -1,
        -1,
    ]
    return " ".join(str(v) for v in fields)


def write(path: Path, lines: list[str], header: str = "; MaxProcs: 64\n") -> Path:
    text = header + "\n".join(lines) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


# ---------------------------------------------------------------- every wait -1


def test_all_waits_unknown_replays_but_has_no_recorded_waits(tmp_path: Path) -> None:
    path = write(tmp_path / "model.swf", [line(i, 10 * i, wait=-1) for i in range(1, 6)])
    reading = read_swf_report(path)
    assert len(reading.workload) == 5 and reading.recorded_waits == 0
    assert any("no recorded waits" in note for note in reading.notes)
    engine = Engine(nodes=64, workload=reading.workload)  # a replay needs no recorded waits
    engine.run()
    assert (engine.records()["state"] == "COMPLETED").all()
    with pytest.raises(TraceError, match=r"no recorded waits \(SWF field 3, wait_time") as info:
        require_recorded_waits(reading.workload, "fidelity compares them")
    assert "submit" not in str(info.value).split("elastic simulate")[0]  # blames the wait field only
    assert info.value.path == str(path)


def test_unknown_submit_is_dropped_and_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # line 1 header, lines 2..4 jobs; the job on line 3 has submit -1 (unknown), like some archive logs
    path = write(tmp_path / "nosubmit.swf", [line(1, 0, wait=-1), line(2, -1, wait=-1), line(3, 20, wait=-1)])
    with caplog.at_level(logging.WARNING, logger="elastic.simulator.trace"):
        w = read_swf(path)
    assert w.job_id.tolist() == [1, 3]
    assert "1 with unknown submit time" in caplog.text and "at line 3" in caplog.text


def test_negative_submit_names_field_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "neg.swf", [line(1, 0), line(2, -7)])
    with pytest.raises(TraceError, match=r"field 2 \(submit_time\) is -7") as info:
        read_swf(path)
    assert info.value.line == 3


# ---------------------------------------------------------------- the machine's size


def test_no_size_header_warns_loudly_and_takes_processors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path / "bare.swf", [line(1, 0, procs=60), line(2, 5, procs=8)], header="; Computer: x\n")
    with caplog.at_level(logging.WARNING, logger="elastic.simulator.trace"):
        w = read_swf(path)
    assert w.processors == 60
    assert "ASSUMED the machine is as wide as its widest job, 60 cores" in caplog.text
    assert "--processors" in caplog.text
    reading = read_swf_report(path, processors=806)  # the machine's real size
    assert reading.machine == 806 and reading.machine_from == "processors"
    assert reading.workload.processors == 806
    assert reading.workload.cores.tolist() == [60, 8]  # not scaled: there is no size to scale from
    assert any("806 cores as given" in message for message in reading.warnings)


def test_maxnodes_only_is_a_note_unless_jobs_are_wider(tmp_path: Path) -> None:
    quiet = read_swf_report(write(tmp_path / "n.swf", [line(1, 0, procs=8)], header="; MaxNodes: 16\n"))
    assert quiet.machine_from == "MaxNodes" and not quiet.warnings and quiet.notes
    loud = read_swf_report(
        write(tmp_path / "w.swf", [line(1, 0, procs=8), line(2, 1, procs=32)], "; MaxNodes: 16\n")
    )
    assert loud.dropped == {"wider than the machine": 1}
    assert any("took MaxNodes (16)" in message for message in loud.warnings)


# ---------------------------------------------------------------- order and size of the file


def test_unsorted_submits_are_sorted_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path / "unsorted.swf", [line(1, 30), line(2, 10), line(3, 20), line(4, 5)])
    reading = read_swf_report(path)
    assert reading.workload.job_id.tolist() == [4, 2, 3, 1]
    assert reading.out_of_order == 2
    assert any("2 job lines are submitted before" in m and "first at line 3" in m for m in reading.warnings)


def test_files_are_streamed_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [line(i, i, procs=1 + i % 64) for i in range(1, 101)]
    whole = read_swf(write(tmp_path / "big.swf.gz", jobs))
    monkeypatch.setattr(swf_io, "CHUNK_LINES", 7)  # 15 chunks
    parsed = swf_io.parse_columns(tmp_path / "big.swf.gz")
    assert parsed.shape == (100, len(swf_io.USED_FIELDS))  # only the used fields are kept
    chunked = read_swf(tmp_path / "big.swf.gz")
    np.testing.assert_array_equal(chunked.cores, whole.cores)
    np.testing.assert_array_equal(chunked.submit, whole.submit)
    jobs[60] = "61 61 1 2 3"  # a bad line in the 9th chunk is still named exactly
    with pytest.raises(TraceError, match="found 5") as info:
        read_swf(write(tmp_path / "bad.swf.gz", jobs))
    assert info.value.line == 62


# ---------------------------------------------------------------- damaged files (issue 10)


GOOD = "\n".join(line(i, 13 * i, wait=i % 97, run=50 + i % 500, procs=1 + i % 64) for i in range(1, 3000))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0.05, 0.98), bit=st.integers(0, 7))
def test_flipped_byte_is_a_clear_error(tmp_path: Path, where: float, bit: int) -> None:
    data = bytearray(gzip.compress(("; MaxProcs: 64\n" + GOOD + "\n").encode()))
    at = 10 + int(where * (len(data) - 18))  # inside the deflate data (not the header, not the trailer)
    data[at] ^= 1 << bit
    path = tmp_path / "flipped.swf.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError) as info:  # never zlib.error, EOFError, a numpy or pandas traceback
        read_swf(path)
    assert info.value.path == str(path)
    assert "damaged" in str(info.value) or info.value.line is not None


def test_truncated_gzip_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "cut.swf.gz"
    path.write_bytes(gzip.compress(("; MaxProcs: 64\n" + GOOD + "\n").encode())[:-100])
    with pytest.raises(TraceError, match="gzip data is damaged or truncated"):
        read_swf(path)


# ---------------------------------------------------------------- empty files and windows (issue 10)


def test_empty_file_and_empty_window_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="has no job lines"):
        read_swf(write(tmp_path / "empty.swf", []))
    path = write(tmp_path / "small.swf", [line(1, 100), line(2, 200)])
    with pytest.raises(
        TraceError, match=r"no job is submitted in the window \[1,000, 2,000\).*from 100 s to 200 s"
    ):
        read_swf(path, window=(1000.0, 2000.0))
    with pytest.raises(TraceError, match=r"every one of its 2 jobs was dropped \(2 unknown runtime\)"):
        read_swf(write(tmp_path / "norun.swf", [line(1, 0, run=-1), line(2, 1, run=-1)]))


# ---------------------------------------------------------------- zero-runtime jobs in the recorded schedule


def test_pinnable_ignores_zero_runtime_jobs(tmp_path: Path) -> None:
    # 8 cores. Job 1 (8 cores) runs [0, 100). At 50 a zero-runtime 8-core job and a 2-core job start:
    # the 2-core one would need 10 cores, the zero-runtime one holds none.
    path = write(
        tmp_path / "zero.swf",
        [
            line(1, 0, wait=0, run=100, procs=8),
            line(2, 50, wait=0, run=0, procs=8),
            line(3, 50, wait=0, run=10, procs=2),
            line(4, 60, wait=40, run=30, procs=4, user=2),
        ],
        header="; MaxProcs: 8\n",
    )
    w = read_swf(path)
    assert pinnable(w, np.ones(len(w), dtype=bool)).tolist() == [True, True, False, True]


@pytest.mark.parametrize("mode", MODES[1:])
def test_recorded_modes_run_with_zero_runtime_jobs(tmp_path: Path, mode: str) -> None:
    # The evaluated 4-core job (cores 4:4) queues among pinned ones, two of them zero-runtime and wide.
    jobs = [line(1, 0, wait=0, run=100, procs=8)]
    jobs += [line(2 + k, 10 * k, wait=0, run=0, procs=8) for k in range(1, 6)]
    jobs += [line(10 + k, 10 * k + 5, wait=0, run=20, procs=2) for k in range(1, 6)]
    jobs += [line(20, 30, wait=80, run=50, procs=4, user=3), line(21, 40, wait=100, run=10, procs=4, user=4)]
    w = read_swf(write(tmp_path / "zeros.swf", jobs, header="; MaxProcs: 8\n"))
    result = simulate_mode(w, mode, cores=(4, 4))
    assert len(result.jobs) == 2 and (result.jobs["wait"] >= 0).all()
