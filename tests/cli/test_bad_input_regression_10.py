"""Issue 10, the command line: bad input gets a clear error (exit 2) before any work, never after it.

Each case crashed with a traceback, ran for minutes, allocated tens of GB, silently replaced a value or
lost a computed result before the fix. Every refusal must name the option (or file, line and field),
the bad value and what is allowed, and must come before the work: no table printed, no file left.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.cli import main
from elastic.cli.outputs import check_output, write_output
from elastic.errors import ConfigError, TraceError
from elastic.experiments import MAX_RUNS, default_background, start_points
from elastic.learners.toptimal import MAX_TOPTIMAL_POINTS, toptimal
from elastic.learners.walltime_baselines import MAX_SAMPLED_RUNTIMES
from elastic.simulator.synthetic import MAX_JOBS, synthetic_workload
from elastic.store import Store, StoreError
from elastic.workflow import MAX_RUNTIME_CV, Stage, load_workflow

#: A small SWF trace with recorded waits: 400 jobs of 16-32 cores on a 64-core machine, 10 min apart.
TINY_SWF = "; MaxProcs: 64\n" + "".join(
    f"{i} {i * 600} {(i % 7) * 60} {1800 + i} {16 + (i % 3) * 8} -1 -1 {16 + (i % 3) * 8} 3600 -1 1 "
    f"{i % 5} -1 -1 -1 -1 -1 -1\n"
    for i in range(1, 401)
)

RUN_SIMULATED = ["run", "--workflow", "demo3", "--strategy", "bigjob", "--simulate", "--no-store"]


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``elastic argv``; it must exit 2 having printed nothing on stdout; return stderr."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a bad value with exit code 2
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert out.strip() == "", f"work was done before the refusal: {out[:300]}"
    return err


@pytest.fixture()
def tiny_trace(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.swf"
    path.write_text(TINY_SWF)
    return path


# -- files: binary workflow and runtimes files, absurd fields -------------------------------------------


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_binary_workflow_file_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    path = tmp_path / f"wf{suffix}"
    path.write_bytes(b"# a workflow\n# more\nname = \xff\xfe\x00\x99\n")
    err = refused(capsys, ["compare", "--workflow", str(path), "--runs", "1"])
    assert f"{path}:3: byte 0xff is not UTF-8 text" in err
    with pytest.raises(ConfigError, match=r"wf\.\w+:3: byte 0xff"):
        load_workflow(path)


def test_binary_runtimes_file_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.txt"
    path.write_bytes(b"3600\n7200 1\n\x89PNG\r\n")
    err = refused(capsys, ["walltime", "--runtimes", str(path), "--upper", "10000"])
    assert f"{path}:3: byte 0x89 is not UTF-8 text" in err
    from elastic.cli.walltime import read_runtimes

    with pytest.raises(TraceError) as exc:
        read_runtimes(str(path))
    assert exc.value.line == 3


def test_a_runtime_beyond_a_year_is_refused_before_a_real_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a real run has no horizon: it asked a walltime of 1.5e300 s, whose end overflowed the job script's
    # arithmetic, and its tasks slept for ever on an allocation drained at once
    path = tmp_path / "long.toml"
    path.write_text('[[stages]]\nname = "a"\ntasks = 2\ncores = 1\nruntime = 1e300\n')
    err = refused(capsys, ["run", "--workflow", str(path), "--strategy", "bigjob", "--no-store"])
    assert "stages[0]" in err and "runtime 1e+300 s is more than a year" in err


def test_huge_runtime_cv_is_refused_with_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cv.toml"
    path.write_text('[[stages]]\nname = "a"\ntasks = 2\ncores = 1\nruntime = 10\nruntime_cv = 1e300\n')
    err = refused(capsys, ["compare", "--workflow", str(path), "--runs", "1"])
    assert "stages[0]" in err and "runtime_cv must be a number >= 0 and <= 100" in err and "1e+300" in err


@settings(max_examples=60, deadline=None)
@given(
    cv=st.floats(0.0, MAX_RUNTIME_CV),
    runtime=st.floats(1.0, 1e7),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_allowed_runtime_cv_samples_finite_positive_durations(
    cv: float, runtime: float, seed: int
) -> None:
    # The bound is where sampling stops making sense, not an arbitrary cut: inside it every sampled
    # duration is a finite number of seconds > 0.
    stage = Stage("s", tasks=200, cores=1, runtime=runtime, runtime_cv=cv)
    durations = stage.sample_runtimes(np.random.default_rng(seed))
    assert np.all(np.isfinite(durations)) and np.all(durations > 0)


def test_a_command_that_is_not_a_string_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cmd.json"
    path.write_text('{"stages": [{"name": "a", "tasks": 1, "cores": 1, "runtime": 10, "command": 5}]}')
    err = refused(capsys, ["run", "--workflow", str(path), "--strategy", "asa", "--simulate", "--no-store"])
    assert "stages[0]" in err and "command must be a non-empty shell command string" in err and "got 5" in err


# -- the store ------------------------------------------------------------------------------------------


def test_store_directory_that_cannot_be_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ELASTIC_STORE_URL", f"sqlite:///{blocker}/sub/elastic.db")
    with pytest.raises(StoreError, match="cannot create the store's directory"):
        Store()
    err = refused(capsys, ["run", "--workflow", "demo3", "--strategy", "asa", "--simulate"])
    assert f"{blocker}/sub" in err and "--store URL" in err


@pytest.mark.parametrize(
    "extra",
    [
        ["--backend", "slurm", "--simulate"],  # was refused only after the run was recorded
        ["--simulate", "--mode", "capacity"],  # a recorded mode without --trace: likewise
        ["--simulate", "--load", "2"],  # --load without --trace
    ],
)
def test_run_arguments_are_refused_before_the_run_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    refused(capsys, ["run", "--workflow", "demo3", "--strategy", "asa", "--store", url, *extra])
    with Store(url) as store:
        assert store.runs().empty  # no run left "running" forever


# -- output files: checked first, so a computed result is never lost -------------------------------


def _output_cases(trace: Path, target: str) -> list[list[str]]:
    return [
        ["simulate", "--jobs", "300", "--out", f"{target}.csv"],
        ["fidelity", "--trace", str(trace), "--out", f"{target}.csv"],
        ["compare", "--runs", "1", "--strategies", "bigjob", "--csv", f"{target}.csv"],
        ["waits", "--trace", str(trace), "--csv", f"{target}.csv"],
        ["waits", "--convergence", f"{target}.png", "--iterations", "50"],
        [*RUN_SIMULATED, "--events", f"{target}.csv"],
    ]


@pytest.mark.parametrize("case", range(6))
@pytest.mark.parametrize("where", ["missing-dir", "under-a-file"])
def test_unwritable_outputs_are_refused_before_the_work(
    tmp_path: Path, tiny_trace: Path, capsys: pytest.CaptureFixture[str], case: int, where: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    parent = tmp_path / "no" / "such" if where == "missing-dir" else blocker
    argv = _output_cases(tiny_trace, str(parent / "result"))[case]
    err = refused(capsys, argv)
    option = next(a for a in argv if a in ("--out", "--csv", "--events", "--convergence"))
    assert option in err and str(parent) in err
    assert ("does not exist" if where == "missing-dir" else "is not a directory") in err
    assert not (tmp_path / "no").exists()  # nothing created either


@pytest.mark.skipif(not Path("/sys").is_dir(), reason="needs /sys (read-only even for root)")
def test_a_directory_nobody_may_write_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # Permission bits say nothing for root: the check tries to create the file.
    err = refused(capsys, ["compare", "--runs", "1", "--csv", "/sys/elastic-result.csv"])
    assert "--csv '/sys/elastic-result.csv': cannot write this file" in err


def test_an_output_that_is_a_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, ["simulate", "--jobs", "100", "--out", str(tmp_path)])
    assert "--out must end in .csv or .parquet" in err
    err = refused(capsys, ["compare", "--runs", "1", "--csv", str(tmp_path)])
    assert "is a directory" in err


def test_unknown_figure_format_is_refused_before_the_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, ["waits", "--convergence", "figure.txt"])
    assert "--convergence must end in" in err and ".png" in err and "'figure.txt'" in err


def test_check_output_changes_nothing(tmp_path: Path) -> None:
    existing = tmp_path / "old.csv"
    existing.write_text("kept\n")
    before = existing.stat()
    assert check_output(str(existing), "--csv") == existing
    assert existing.read_text() == "kept\n" and existing.stat().st_mtime_ns == before.st_mtime_ns
    fresh = tmp_path / "new.csv"
    assert check_output(str(fresh), "--csv") == fresh
    assert not fresh.exists()
    assert check_output(None, "--csv") is None


def test_a_write_that_fails_after_the_work_keeps_the_result(tmp_path: Path) -> None:
    attempts: list[Path] = []

    def write(path: Path) -> None:
        attempts.append(path)
        if len(attempts) == 1:
            raise OSError(28, "No space left on device")
        path.write_text("the result\n")

    with pytest.raises(ConfigError, match="No space left on device") as exc:
        write_output(tmp_path / "out.csv", "--csv", write)
    rescue = attempts[1]
    try:
        assert str(rescue) in str(exc.value) and rescue.suffix == ".csv"
        assert rescue.read_text() == "the result\n"
    finally:
        rescue.unlink()


# -- sizes: bounded, with the limit in the message ------------------------------------------------------


def test_runs_beyond_the_limit_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, ["compare", "--runs", "10000000000"])  # was 75 GB of start points
    assert "argument --runs" in err and f"at most {MAX_RUNS:,}" in err and "'10000000000'" in err
    err = refused(capsys, ["compare", "--runs", str(MAX_RUNS + 1)])
    assert f"at most {MAX_RUNS:,}" in err
    with pytest.raises(ConfigError, match=f"runs must be in \\[1, {MAX_RUNS:,}\\]"):
        start_points(default_background(64), MAX_RUNS + 1)


def test_synthetic_jobs_beyond_the_limit_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, ["simulate", "--jobs", "1000000000"])  # was 7 GB up front
    assert "argument --jobs" in err and f"at most {MAX_JOBS:,}" in err
    with pytest.raises(ConfigError, match=f"at most {MAX_JOBS:,}"):
        synthetic_workload(jobs=MAX_JOBS + 1)


def test_toptimal_points_beyond_the_limit_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["walltime", "--dist", "norm", "--mu", "5", "--upper", "10"]
    err = refused(capsys, [*argv, "--points", "1000000"])  # ran silently for minutes
    assert "argument --points" in err and f"at most {MAX_TOPTIMAL_POINTS:,}" in err
    err = refused(capsys, [*argv, "--at-points", "1000000"])
    assert "argument --at-points" in err
    n = MAX_TOPTIMAL_POINTS + 1
    values = np.arange(n + 1, dtype=float)
    with pytest.raises(ConfigError, match=f"use at most {MAX_TOPTIMAL_POINTS:,} points"):
        toptimal(values, np.full(n + 1, 1.0 / (n + 1)))


def test_sampled_histories_beyond_the_limit_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["walltime", "--dist", "norm", "--mu", "5", "--upper", "10"]
    err = refused(capsys, [*argv, "--history", "100000000"])  # was a 745 GB allocation
    assert "argument --history" in err and f"at most {MAX_SAMPLED_RUNTIMES:,}" in err
    err = refused(capsys, [*argv, "--samples", "2000000", "--history", "10"])
    assert "--samples 2,000,000 x --history 10" in err


# -- values that were silently replaced or ignored, and values no command can use -----------------------


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["compare", "--seed", "-1"], "--seed"),
        (["simulate", "--seed", "-1"], "--seed"),
        (
            ["run", "--workflow", "demo3", "--strategy", "asa", "--simulate", "--no-store", "--seed", "-1"],
            "--seed",
        ),
        (["walltime", "--dist", "norm", "--mu", "5", "--upper", "10", "--seed", "-1"], "--seed"),
        (["waits", "--convergence", "c.png", "--seed", "-1"], "--seed"),
        (["compare", "--runs", "1", "--processors", "0"], "--processors"),
        (
            ["run", "--workflow", "demo3", "--strategy", "asa", "--simulate", "--no-store", "--poll", "0"],
            "--poll",
        ),
        (
            ["run", "--workflow", "demo3", "--strategy", "asa", "--simulate", "--no-store", "--poll", "inf"],
            "--poll",
        ),
        (["run", "--workflow", "demo3", "--strategy", "asa", "--no-store", "--speedup", "inf"], "--speedup"),
        (["compare", "--runs", "1", "--learner", "bogus"], "--learner"),
        (["compare", "--runs", "1", "--policy", "bogus"], "--policy"),
        (["compare", "--runs", "1", "--reserve", "-1"], "--reserve"),
        (["simulate", "--jobs", "100", "--load", "inf"], "--load"),
        (["walltime", "--dist", "norm", "--mu", "5", "--upper", "10", "--alpha", "nan"], "--alpha"),
        (["walltime", "--dist", "norm", "--mu", "inf", "--upper", "10"], "--mu"),
        (["walltime", "--dist", "norm", "--mu", "5", "--upper", "0"], "--upper"),
        (["walltime", "--dist", "norm", "--mu", "5", "--upper", "10", "--lower", "-1"], "--lower"),
        (["walltime", "--dist", "norm", "--mu", "5", "--upper", "10", "--history", "0"], "--history"),
        (["waits", "--convergence", "c.png", "--iterations", "4"], "--iterations"),
        (["waits", "--convergence", "c.png", "--iterations", "1000000000"], "--iterations"),
        (["fidelity", "--trace", "t.swf", "--capacity-window", "0"], "--capacity-window"),
        (["traces", "info", "t.swf", "--load", "0"], "--load"),
        (["traces", "info", "t.swf", "--processors", "0"], "--processors"),
        (["traces", "download", "hpc2n", "--timeout", "0", "--base-url", "http://127.0.0.1:9/"], "--timeout"),
    ],
)
def test_bad_option_values_are_refused_naming_the_option(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    option: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written anywhere, least of all the checkout
    err = refused(capsys, argv)
    bad = argv[argv.index(option) + 1]
    assert f"argument {option}" in err and repr(bad) in err
    assert os.listdir(tmp_path) == []


def test_load_with_synthetic_background_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, ["compare", "--runs", "1", "--load", "2"])
    assert "--load 2 scales a trace's arrival rate: give --trace PATH" in err


def test_options_a_trace_makes_meaningless_are_refused(
    tiny_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, ["simulate", "--trace", str(tiny_trace), "--jobs", "500"])
    assert "--jobs 500 sets the size of the synthetic load" in err
    err = refused(capsys, ["simulate", "--trace", str(tiny_trace), "--reserve", "8"])
    assert "--reserve applies to --mode calibrated only" in err
    err = refused(capsys, ["waits", "--convergence", "c.png", "--csv", "table.csv"])
    assert "--csv, --window and --processors apply to the trace evaluation" in err
    err = refused(
        capsys, ["simulate", "--trace", str(tiny_trace), "--mode", "calibrated", "--capacity-window", "8h"]
    )
    assert "--capacity-window applies to --mode capacity only" in err  # was refused after the fitting
    err = refused(capsys, ["fidelity", "--trace", str(tiny_trace), "--modes", "replay", "--reserve", "8"])
    assert "add calibrated to --modes" in err


def test_download_folder_that_cannot_be_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # Refused before anything is fetched: the base URL points at a port nothing listens on.
    argv = [
        "traces",
        "download",
        "hpc2n",
        "--dest",
        str(blocker / "sub"),
        "--base-url",
        "http://127.0.0.1:9/",
    ]
    err = refused(capsys, argv)
    assert f"{blocker / 'sub'}: cannot write the download there" in err and "--dest" in err
