"""``elastic doctor``: one line per check, exit 1 when one fails; on the local backend, without Slurm on
PATH, and against the local Slurm test cluster."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from elastic.cli import main
from elastic.cli.doctor import Check, check_interpreter, check_port, check_port_from_node
from tests.fixtures.slurm_cluster import LocalSlurmCluster


def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["doctor", *args])
    return code, capsys.readouterr().out.splitlines()


def _line(lines: list[str], what: str) -> str:
    (line,) = [x for x in lines if x[6:].startswith(what)]
    return line


def test_the_local_backend_passes_every_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _doctor(capsys, "--backend", "local", "--store", f"sqlite:///{tmp_path / 's.db'}")
    assert code == 0, lines
    assert _line(lines, "store").startswith("ok") and "s.db" in _line(lines, "store")
    assert _line(lines, "pool port").startswith("ok") and "127.0.0.1" in _line(lines, "pool port")
    assert _line(lines, "agents' interpreter").startswith("ok")
    assert lines[-1] == "everything a run needs is here"
    assert all(len(x.splitlines()) == 1 for x in lines)


def test_slurm_missing_from_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, squeue, ... here
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, lines = _doctor(capsys, "--backend", "slurm", "--store", store, "--python", sys.executable)
    assert code == 1
    slurm = _line(lines, "slurm")
    assert slurm.startswith("FAIL") and "sbatch, squeue, scontrol, scancel not found on PATH" in slurm
    assert lines[-1] == "1 check(s) failed"
    code, lines = _doctor(capsys, "--store", store, "--python", sys.executable)  # auto: the local backend
    assert code == 0 and _line(lines, "backend") == "ok    backend: local"
    assert _line(lines, "slurm").startswith("skip")


def test_failures_are_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing_python = str(tmp_path / "no-python")
    code, lines = _doctor(capsys, "--backend", "local", "--store", "nosuchdb://x", "--python", missing_python)
    assert code == 1
    assert _line(lines, "store").startswith("FAIL")
    assert _line(lines, "agents' interpreter").startswith("FAIL") and "does not start" in lines[-2]
    assert lines[-1] == "2 check(s) failed"
    assert Check("FAIL", "x", "first\n\nsecond\nlast").line() == "FAIL  x: first ... last"


def test_an_interpreter_without_elastic_fails(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, env=env)
    python = tmp_path / "v" / "bin" / "python"  # a fresh virtualenv: no elastic, no pyzmq
    check = check_interpreter(str(python))
    assert check.status == "FAIL", check
    assert "install elastic-hpc in it" in check.detail


def test_a_loopback_pool_address_fails_on_slurm() -> None:
    assert check_port("127.0.0.1", 0, None, slurm=False).status == "ok"
    check = check_port("127.0.0.1", 0, None, slurm=True)
    assert check.status == "FAIL" and "--bind 0.0.0.0" in check.detail


def test_a_bad_port_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["doctor", "--port", "70000"]) == 2
    assert "--port must be" in capsys.readouterr().err
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, lines = _doctor(capsys, "--backend", "local", "--store", store, "--from-node")
    assert code == 0 and _line(lines, "pool port from a compute node").startswith("skip"), lines
    assert main(["doctor", "--from-node-wait", "0"]) == 2
    assert "--from-node-wait must be 1 to 3600 seconds" in capsys.readouterr().err


@pytest.mark.slurm
def test_the_local_slurm_cluster_passes(
    slurm_cluster: LocalSlurmCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in slurm_cluster.env.items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    store = f"sqlite:///{tmp_path / 's.db'}"
    args = ("--backend", "slurm", "--store", store, "--python", sys.executable, "--from-node")
    code, lines = _doctor(capsys, *args)
    assert code == 0, lines
    partition = _line(lines, "slurm partition")
    assert partition.startswith("ok") and "debug:" in partition and "cores" in partition
    assert _line(lines, "slurm site options").startswith("ok")
    assert _line(lines, "pool port from a compute node").startswith("ok"), lines
    # a name the nodes cannot resolve: said, with what to do
    bad = check_port_from_node("0.0.0.0", "no-such-host.invalid", sys.executable, wait=60)
    assert bad.status == "FAIL" and "could not connect to no-such-host.invalid" in bad.detail, bad
    assert "--advertise" in bad.detail


def test_the_interpreter_is_checked_after_worker_init(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "agentpython"  # only on PATH once worker_init ran
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    assert check_interpreter("agentpython").status == "FAIL"
    check = check_interpreter("agentpython", f'export PATH="{bin_dir}:$PATH"')
    assert check.status == "ok" and "after worker_init" in check.what, check


def test_a_slurm_controller_out_of_reach_is_said_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the commands are there, but no slurm.conf or controller answers (what a laptop with the client shows)
    for command in ("sbatch", "squeue", "scancel", "scontrol"):
        fake = tmp_path / command
        fake.write_text(
            "#!/bin/sh\necho 'scontrol: fatal: Could not establish a configuration source' >&2\nexit 1\n"
        )
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, lines = _doctor(capsys, "--backend", "slurm", "--store", store, "--python", sys.executable)
    partition = _line(lines, "slurm partition")
    assert code == 1 and partition.startswith("FAIL") and "configuration source" in partition
    assert "slurmctld" in partition and "SLURM_CONF" in partition, partition
