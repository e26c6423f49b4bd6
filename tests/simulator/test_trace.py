"""Known-answer, error and property tests of the SWF reader (elastic/simulator/trace.py)."""

from __future__ import annotations

import gzip
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic.errors import ConfigError, TraceError
from elastic.simulator.trace import SWF_FIELDS, read_swf, read_swf_header


def swf_line(
    job: int,
    submit: int,
    wait: int = -1,
    run: int = 100,
    alloc: int = -1,
    req_procs: int = 4,
    req_time: int = -1,
    user: int = 1,
) -> str:
    fields = [job, submit, wait, run, alloc, -1, -1, req_procs, req_time, -1, 1, user, -1, -1, -1, -1, -1, -1]
    return " ".join(str(v) for v in fields)


HEADER = """; Version: 2.2
; Computer: Test cluster
; MaxJobs: 5
; MaxNodes: 4
; MaxProcs: 16
; Queue:  1 first
; Queue:  2 second
;
"""

BODY = [
    swf_line(1, 0, wait=10, run=100, req_procs=4, req_time=200, user=7),
    swf_line(2, 50, wait=-1, run=30, alloc=2, req_procs=-1, req_time=-1, user=-1),
    "; a comment in the middle",
    "",
    swf_line(3, 100, wait=0, run=500, req_procs=16, req_time=400),  # runs past its request
    swf_line(4, 150, run=-1, req_procs=1, req_time=60),  # unknown runtime: dropped
    swf_line(5, 300, run=0, req_procs=9, req_time=-1),  # zero runtime, no request
]


def write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.fixture(params=["plain.swf", "packed.swf.gz"])
def small_trace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return write(tmp_path / request.param, HEADER + "\n".join(BODY) + "\n")


def test_header_fields(small_trace: Path) -> None:
    header = read_swf_header(small_trace)
    assert header.max_procs == 16
    assert header.max_nodes == 4
    assert header.processors == 16
    assert header.fields["Computer"] == "Test cluster"
    assert header.fields["Queue"] == "1 first"  # first occurrence wins
    assert header.lines[0] == "; Version: 2.2"
    assert len(header.lines) == 8


def test_known_answer(small_trace: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="elastic.simulator.trace"):
        w = read_swf(small_trace)
    assert w.processors == 16
    assert w.source == str(small_trace)
    assert w.job_id.tolist() == [1, 2, 3, 5]
    assert w.submit.tolist() == [0.0, 50.0, 100.0, 300.0]
    assert w.cores.tolist() == [4, 2, 16, 9]  # job 2: allocated processors as requested is -1
    assert w.runtime.tolist() == [100.0, 30.0, 500.0, 0.0]
    # requested time kept even when shorter than the runtime; else runtime x ratio, at least 1 s
    assert w.walltime.tolist() == [200.0, 30.0, 400.0, 1.0]
    assert w.user.tolist() == [7, -1, 1, 1]
    assert w.recorded_wait[0] == 10.0 and math.isnan(w.recorded_wait[1]) and w.recorded_wait[2] == 0.0
    assert "dropped 1 of 5 jobs: 1 with unknown runtime" in caplog.text
    for column in (w.submit, w.runtime, w.walltime, w.recorded_wait):
        assert column.dtype == np.float64
    for column in (w.job_id, w.cores, w.user):
        assert column.dtype == np.int64


def test_estimate_ratio_and_use_requested(small_trace: Path) -> None:
    w = read_swf(small_trace, estimate_ratio=1.5)
    assert w.walltime.tolist() == [200.0, 45.0, 400.0, 1.0]
    w = read_swf(small_trace, estimate_ratio=2.0, use_requested=False)
    assert w.walltime.tolist() == [200.0, 60.0, 1000.0, 1.0]


def test_window_rebases_submit_times(small_trace: Path) -> None:
    w = read_swf(small_trace, window=(50, 300))
    assert w.job_id.tolist() == [2, 3]  # 300 is outside: the window is half open
    assert w.submit.tolist() == [0.0, 50.0]
    w = read_swf(small_trace, window=(100, math.inf))
    assert w.job_id.tolist() == [3, 5]
    assert w.submit.tolist() == [0.0, 200.0]


def test_load_compresses_arrivals(small_trace: Path) -> None:
    w = read_swf(small_trace, window=(50, math.inf), load=2.0)
    assert w.submit.tolist() == [0.0, 25.0, 125.0]
    assert w.runtime.tolist() == [30.0, 500.0, 0.0]  # runtimes untouched


def test_processors_scaling(small_trace: Path) -> None:
    w = read_swf(small_trace, processors=8)
    assert w.processors == 8
    # 4 -> 2, 2 -> 1, 16 -> 8, 9 -> 4.5 -> 5 (half up)
    assert w.cores.tolist() == [2, 1, 8, 5]
    w = read_swf(small_trace, processors=2)
    assert w.cores.tolist() == [1, 1, 2, 1]  # 0.25 -> 0 -> at least 1
    w = read_swf(small_trace, processors=32)
    assert w.cores.tolist() == [8, 4, 32, 18]


def test_max_jobs(small_trace: Path) -> None:
    assert read_swf(small_trace, max_jobs=2).job_id.tolist() == [1, 2]
    with pytest.raises(ConfigError, match="max_jobs must be >= 1"):
        read_swf(small_trace, max_jobs=0)


def test_no_header_uses_widest_job(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = swf_line(1, 0, req_procs=3) + "\n" + swf_line(2, 5, req_procs=12) + "\n"
    path = write(tmp_path / "bare.swf", text)
    with caplog.at_level(logging.WARNING, logger="elastic.simulator.trace"):
        w = read_swf(path)
    assert w.processors == 12
    assert "ASSUMED the machine is as wide as its widest job, 12 cores" in caplog.text
    assert read_swf_header(path).lines == ()


def test_wider_than_machine_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = "; MaxProcs: 8\n" + "\n".join(
        [swf_line(1, 0, req_procs=8), swf_line(2, 1, req_procs=9), swf_line(3, 2, alloc=-1, req_procs=-1)]
    )
    path = write(tmp_path / "wide.swf", text + "\n")
    with caplog.at_level(logging.WARNING, logger="elastic.simulator.trace"):
        w = read_swf(path)
    assert w.job_id.tolist() == [1]
    assert "1 with unknown size, 1 wider than the machine (8 cores)" in caplog.text


def test_unsorted_trace_is_sorted(tmp_path: Path) -> None:
    path = write(tmp_path / "unsorted.swf", "\n".join([swf_line(1, 30), swf_line(2, 10), swf_line(3, 20)]))
    w = read_swf(path)
    assert w.job_id.tolist() == [2, 3, 1]
    assert w.submit.tolist() == [10.0, 20.0, 30.0]


def test_header_only_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.swf", "; MaxProcs: 64\n")
    with pytest.raises(TraceError, match="has no job lines") as info:
        read_swf(path)
    assert info.value.path == str(path)


@pytest.mark.parametrize(
    ("bad", "line", "match"),
    [
        ("1 2 3", 4, r"expected 18 whitespace-separated SWF fields, found 3"),
        (swf_line(9, 9) + " 7", 4, r"found 19"),
        (swf_line(9, 9).replace(" 100 ", " abc ", 1), 4, r"field 4 \(run_time\) is not a finite .*'abc'"),
        (swf_line(9, 9).replace(" 100 ", " nan ", 1), 4, r"field 4 \(run_time\) is not a finite number"),
        (swf_line(9, -5), 4, r"field 2 \(submit_time\) is -5"),
    ],
)
@pytest.mark.parametrize("name", ["bad.swf", "bad.swf.gz"])
def test_malformed_line_named(tmp_path: Path, name: str, bad: str, line: int, match: str) -> None:
    # line 1 header, line 2 job, line 3 blank, line 4 the bad one, line 5 a good job
    text = "; MaxProcs: 8\n" + swf_line(1, 0) + "\n\n" + bad + "\n" + swf_line(2, 100) + "\n"
    path = write(tmp_path / name, text)
    with pytest.raises(TraceError, match=match) as info:
        read_swf(path)
    assert info.value.line == line
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_first_line_short_is_named(tmp_path: Path) -> None:
    path = write(tmp_path / "short.swf", "1 0 0 5\n" + swf_line(2, 1) + "\n")
    with pytest.raises(TraceError, match="found 4") as info:
        read_swf(path)
    assert info.value.line == 1


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file") as info:
        read_swf(tmp_path / "nope.swf")
    assert info.value.line is None


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "broken.swf.gz"
    path.write_bytes(gzip.compress(("\n".join(swf_line(i, i) for i in range(1, 200)) + "\n").encode())[:300])
    with pytest.raises(TraceError):
        read_swf(path)


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("window", (10, 5), "window"),
        ("window", (-1, 5), "window"),
        ("load", 0.0, "load"),
        ("load", math.inf, "load"),
        ("processors", 0, "processors"),
        ("estimate_ratio", -1.0, "estimate_ratio"),
        ("max_jobs", -1, "max_jobs"),
    ],
)
def test_bad_options(small_trace: Path, option: str, value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        read_swf(small_trace, **{option: value})  # type: ignore[arg-type]


def test_swf_fields_are_the_standard_eighteen() -> None:
    assert len(SWF_FIELDS) == 18
    assert SWF_FIELDS[0] == "job_id" and SWF_FIELDS[-1] == "think_time"


# ---------------------------------------------------------------- properties

jobs_strategy = st.lists(
    st.tuples(
        st.integers(0, 10**7),  # submit delta
        st.integers(-1, 10**6),  # wait
        st.integers(0, 10**6),  # runtime
        st.integers(1, 64),  # requested processors
        st.integers(-1, 10**6),  # requested time
        st.integers(-1, 500),  # user
    ),
    max_size=40,
)


def _write_jobs(path: Path, jobs: list[tuple[int, int, int, int, int, int]]) -> list[int]:
    lines, submit, submits = ["; MaxProcs: 64"], 0, []
    for job_id, (delta, wait, run, procs, req, user) in enumerate(jobs, start=1):
        submit += delta
        submits.append(submit)
        lines.append(swf_line(job_id, submit, wait, run, -1, procs, req, user))
    path.write_text("\n".join(lines) + "\n")
    return submits


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=jobs_strategy)
def test_round_trip(tmp_path: Path, jobs: list[tuple[int, int, int, int, int, int]]) -> None:
    path = tmp_path / "rt.swf"
    submits = _write_jobs(path, jobs)
    if not jobs:  # nothing to replay: a clear error, never an empty workload
        with pytest.raises(TraceError, match="no job lines"):
            read_swf(path)
        return
    w = read_swf(path)
    assert len(w) == len(jobs)
    assert w.job_id.tolist() == list(range(1, len(jobs) + 1))
    assert w.submit.tolist() == submits
    assert w.cores.tolist() == [j[3] for j in jobs]
    assert w.runtime.tolist() == [j[2] for j in jobs]
    assert w.walltime.tolist() == [j[4] if j[4] > 0 else max(j[2], 1) for j in jobs]
    assert w.user.tolist() == [j[5] for j in jobs]
    expected_wait = [float(j[1]) if j[1] >= 0 else math.nan for j in jobs]
    np.testing.assert_array_equal(w.recorded_wait, np.array(expected_wait))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    jobs=jobs_strategy,
    start=st.integers(0, 10**8),
    length=st.integers(1, 10**8),
    load=st.floats(0.1, 10.0),
    processors=st.integers(1, 256),
)
def test_window_load_scale_invariants(
    tmp_path: Path,
    jobs: list[tuple[int, int, int, int, int, int]],
    start: int,
    length: int,
    load: float,
    processors: int,
) -> None:
    path = tmp_path / "inv.swf"
    submits = np.array(_write_jobs(path, jobs), dtype=np.float64)
    end = start + length
    inside = (submits >= start) & (submits < end)
    if not inside.any():  # an empty window is an error naming the trace's span
        with pytest.raises(
            TraceError, match="no job lines" if not jobs else "no job is submitted in the window"
        ):
            read_swf(path, window=(start, end), load=load, processors=processors)
        return
    full = read_swf(path)
    w = read_swf(path, window=(start, end), load=load, processors=processors)
    assert w.job_id.tolist() == full.job_id[inside].tolist()
    assert np.all(w.submit >= 0) and np.all(w.submit < length / load + 1e-6)
    np.testing.assert_allclose(w.submit, (submits[inside] - start) / load)
    assert np.all(np.diff(w.submit) >= 0)
    assert np.all((w.cores >= 1) & (w.cores <= processors))
    assert w.processors == processors
    # scaling keeps the order of sizes
    order = np.argsort(full.cores[inside], kind="stable")
    assert np.all(np.diff(w.cores[order]) >= 0)
    np.testing.assert_array_equal(w.runtime, full.runtime[inside])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    jobs=st.integers(0, 30),
    comments=st.lists(st.integers(0, 30), max_size=5),
    position=st.integers(0, 30),
    bad=st.sampled_from(["1 2 3", swf_line(9, 9) + " 1", swf_line(9, 9).replace(" 100 ", " x1 ", 1)]),
    packed=st.booleans(),
)
def test_bad_line_number_property(
    tmp_path: Path, jobs: int, comments: list[int], position: int, bad: str, packed: bool
) -> None:
    lines = [swf_line(i, i) for i in range(1, jobs + 1)]
    for at in comments:
        lines.insert(min(at, len(lines)), "; comment")
    at = min(position, len(lines))
    lines.insert(at, bad)
    path = write(tmp_path / ("p.swf.gz" if packed else "p.swf"), "\n".join(lines) + "\n")
    with pytest.raises(TraceError) as info:
        read_swf(path)
    assert info.value.line == at + 1


# ---------------------------------------------------------------- real traces

REAL_TRACES = {
    # file: (job lines in the file, counted with `zcat | grep -vc '^;'`; jobs kept; MaxProcs)
    "HPC2N-2002-2.2-cln.swf.gz": (202_871, 202_871, 240),
    "SDSC-BLUE-2000-4.2-cln.swf.gz": (243_306, 232_562, 1152),  # 10,744 have runtime -1
    "CTC-SP2-1996-3.1-cln.swf.gz": (77_222, 77_222, 338),  # header MaxRecords says 79,302 before cleaning
    "lublin_256.swf.gz": (10_000, 10_000, 256),
}


@pytest.mark.parametrize("name", sorted(REAL_TRACES))
def test_real_traces(traces_dir: Path, name: str) -> None:
    path = traces_dir / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    lines, kept, procs = REAL_TRACES[name]
    with gzip.open(path, "rt", encoding="latin-1") as fh:
        assert sum(1 for line in fh if line.strip() and not line.lstrip().startswith(";")) == lines
    w = read_swf(path)
    assert len(w) == kept
    assert w.processors == procs
    assert np.all(np.diff(w.submit) >= 0)
    assert np.all((w.cores >= 1) & (w.cores <= procs))
    assert np.all(w.walltime > 0) and np.all(w.runtime >= 0)


def test_hpc2n(hpc2n_trace: Path) -> None:
    w = read_swf(hpc2n_trace)
    assert (len(w), w.processors) == (202_871, 240)
    assert w.job_id[0] == 11 and w.submit[0] == 342_072.0 and w.cores[0] == 32
    assert w.walltime[0] == 43_200.0 and w.runtime[0] == 43_306.0 and w.recorded_wait[0] == 32.0
    day = read_swf(hpc2n_trace, window=(342_072, 342_072 + 86_400))
    assert day.submit[0] == 0.0 and np.all(day.submit < 86_400)
