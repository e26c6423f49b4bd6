"""``elastic run montage|blast|statistics``: checks, metrics, exit codes, bad input refused early."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from elastic.backends._proctrack import process_tree
from elastic.cli import main
from elastic.cli.run_demo import DEMO_NAMES, FRONTEND_NAMES
from elastic.store import Store
from elastic.workflows.demos import DEMOS
from elastic.workflows.frontends import FRONTENDS
from tests.workflows.conftest import SMALL


def _shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: str, script: str) -> None:
    """Put a stand-in for ``program`` first on PATH (the allocations' processes inherit it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / program
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_the_names_in_the_help_are_the_demos_and_front_ends() -> None:
    assert set(DEMO_NAMES) == set(DEMOS) and FRONTEND_NAMES == FRONTENDS


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_demo_prints_its_checks_and_metrics_and_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    events = tmp_path / "events.csv"
    args = ["run", "blast", "--strategy", "perstage", "--backend", "local", "--size", "2"]
    assert (
        main([*args, "--workdir", str(tmp_path), "--store", url, "--events", str(events), "--poll", "1"]) == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    assert "blast under perstage on local through elastic: checks" in out
    assert "planted matches found │ pass" in out and "blast: every check passed" in out
    assert "blast under perstage on local through elastic: completed" in out
    assert "stage blastn: execution / queue wait / perceived wait (s)" in out
    with Store(url) as store:
        (run,) = store.runs(workflow="blast").itertuples()
        assert run.status == "completed" and run.strategy == "perstage" and run.makespan > 0
        assert len(store.stage_runtimes("blast", "blastn")[0]) == 1
    assert set(pd.read_csv(events)["kind"]) >= {"run_start", "run_end"}
    (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith("blast-")]
    assert (folder / "hits.tsv").exists()


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", DEMO_NAMES)
def test_each_demo_on_the_scaled_mock_queue_is_checked_and_recorded(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default busy synthetic queue, its clock 60 times real time, as `elastic run DEMO` runs it.
    url = f"sqlite:///{tmp_path / 'store.db'}"
    args = ["run", name, "--strategy", "asa", "--backend", "mock", "--size", str(SMALL[name])]
    code = main([*args, "--workdir", str(tmp_path), "--store", url])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    out = " ".join(captured.out.split())
    assert f"{name}: every check passed" in out and "mock queue: priority age" in out
    assert f"{name} under asa on mock through elastic: completed" in out
    with Store(url) as store:
        (run,) = store.runs(workflow=name).itertuples()
        assert run.status == "completed" and run.strategy == "asa" and run.makespan > 0
        for stage in DEMOS[name].stages:  # what simulated comparisons draw on
            runtimes, censored = store.stage_runtimes(name, stage)
            assert len(runtimes) == 1 and runtimes[0] >= 0 and not censored.any(), stage


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_failed_check_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An mBackground that copies its input unchanged: the workflow completes, the offsets stay.
    _shim(
        tmp_path,
        monkeypatch,
        "mBackground",
        'cp "$2" "$3" && cp "${2%.fits}_area.fits" "${3%.fits}_area.fits"\n'
        'echo \'[struct stat="OK", module="mBackground"]\'\n',
    )
    args = ["run", "montage", "--strategy", "bigjob", "--backend", "local", "--size", "2"]
    assert main([*args, "--workdir", str(tmp_path), "--no-store", "--poll", "1"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "background offsets removed │ FAIL" in out and "montage: a check FAILED" in out
    assert "montage under bigjob on local through elastic: completed" in out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_failed_program_ends_the_run_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _shim(tmp_path, monkeypatch, "blastn", "echo 'out of cheese' >&2\nexit 3\n")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    args = ["run", "blast", "--strategy", "perstage", "--backend", "local", "--size", "1", "--poll", "1"]
    assert main([*args, "--workdir", str(tmp_path), "--store", url]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "the run failed:" in out and "exited with code 3: out of cheese" in out
    with Store(url) as store:
        (run,) = store.runs(workflow="blast").itertuples()
        assert run.status == "failed"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["blast", "--size", "0"], r"blast: size must be an integer in \[1, 2000\].*got 0"),
        (["montage", "--size", "31"], r"montage: size must be an integer in \[2, 30\]"),
        (["blast", "--workdir", "/proc"], "--workdir '/proc' cannot be written"),
        (["blast", "--workdir", "/no/such/dir"], "--workdir '/no/such/dir' does not exist"),
        (["blast", "--workflow", "demo3"], "give either a demo .* or --workflow FILE_OR_NAME, not both"),
        ([], "give either a demo"),
        (["--workflow", "demo3", "--size", "3"], "--size applies to the demos"),
        (["--workflow", "demo3", "--frontend", "parsl"], "--frontend applies to the demos"),
        (["blast", "--simulate"], "--simulate runs no program"),
        (["blast", "--backend", "pbs"], "unknown backend 'pbs'"),
        (["blast", "--backend", "local", "--trace", "x.swf"], "--trace sets the mock backend's background"),
        (["blast", "--backend", "local", "--priority", "basic"], "--priority sets the mock backend's queue"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    url = f"sqlite:///{tmp_path / 'store.db'}"
    args = ["run", "--strategy", "asa", "--store", url, *extra]
    if "--workdir" not in extra:
        args += ["--workdir", str(work)]
    assert main(args) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not list(work.iterdir()) and not (tmp_path / "store.db").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["cybershake"], r"argument DEMO: invalid choice: 'cybershake' \(choose from 'montage', 'blast'"),
        (["blast", "--size", "x"], r"argument --size: invalid int value: 'x'"),
        (["blast", "--frontend", "dask"], r"argument --frontend: invalid choice: 'dask'"),
    ],
)
def test_unknown_demos_and_malformed_options_are_refused_by_the_parser(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with pytest.raises(SystemExit) as info:
        main(["run", "--strategy", "asa", "--store", url, "--workdir", str(tmp_path), *extra])
    assert info.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("frontend", ["parsl", "prefect"])
def test_a_front_end_without_its_elastic_executor_is_refused(
    frontend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # an installation without Elastic's executors: importing the module fails (a None entry in
    # sys.modules makes ``import`` raise ImportError)
    module = {"parsl": "elastic.executors.parsl_executor", "prefect": "elastic.executors.prefect_runner"}[
        frontend
    ]
    monkeypatch.setitem(sys.modules, module, None)
    args = ["run", "blast", "--strategy", "asa", "--frontend", frontend, "--workdir", str(tmp_path)]
    assert main([*args, "--no-store"]) == 2
    assert f"--frontend {frontend} runs on Elastic's" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigterm_ends_a_demo_interrupted_and_leaves_nothing_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    cmd = [sys.executable, "-m", "elastic", "run", "montage", "--strategy", "bigjob", "--backend", "local"]
    cmd += ["--size", "6", "--workdir", str(tmp_path), "--store", url, "--poll", "1"]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _running(proc.pid, "mProject"):
        time.sleep(0.1)
    family = [p.pid for p in process_tree(proc.pid) if p.pid != proc.pid]
    assert family, "no agent or task process started"
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 130, proc.stderr.read().decode() if proc.stderr else ""
    time.sleep(1.0)
    alive = [p for p in family if Path(f"/proc/{p}").exists() and "zombie" not in _status(p)]
    assert not alive, f"processes outlived the run: {alive}"
    with Store(url) as store:
        (row,) = store.runs(workflow="montage").itertuples()
        assert row.status == "interrupted"


def _running(pid: int, program: str) -> bool:
    for p in process_tree(pid):
        try:
            if program in Path(f"/proc/{p.pid}/cmdline").read_text():
                return True
        except OSError:
            pass
    return False


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"
