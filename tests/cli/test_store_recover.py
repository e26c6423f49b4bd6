"""``elastic store recover`` without Slurm: a dead local run is ended, a dead Slurm run is kept for later.

The Slurm case end to end (a driver killed with SIGKILL, its job cancelled) is in
``tests/front/test_recover_slurm.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main
from elastic.front.recovery import driver_identity
from elastic.store import Store
from tests.fixtures.processes import dead_pid


def _dead_driver() -> dict[str, object]:
    return {**driver_identity(), "pid": dead_pid()}


def test_a_dead_local_run_is_ended_and_a_slurm_one_is_kept_when_slurm_does_not_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no squeue here: Slurm's queue cannot be read
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with Store(url) as store:
        local = store.record_run("here", "asa", "local", params={"driver": _dead_driver()})
        meta = {"20": ["a2", 1010.0]}
        slurm = store.record_run(
            "there", "asa", "slurm", params={"driver": _dead_driver(), "jobs": ["20"], "job_meta": meta}
        )
        alive = store.record_run("live", "asa", "local", params={"driver": driver_identity()})
    assert main(["store", "recover", "--store", url, "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert f"run {local} of 'here' (local, driver pid" in out and "would be marked interrupted" in out
    assert f"run {slurm} of 'there' (slurm, driver pid" in out and "left running: slurm's queue" in out
    assert "'live'" not in out
    with Store(url) as store:
        assert set(store.runs()["status"]) == {"running"}
    assert main(["store", "recover", "--store", url]) == 1
    assert f"run {local} of 'here' (local, driver pid" in capsys.readouterr().out
    with Store(url) as store:
        status = dict(zip(store.runs()["run_id"], store.runs()["status"], strict=True))
    assert status == {local: "interrupted", slurm: "running", alive: "running"}


def test_doctor_names_the_runs_left_by_a_dead_driver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with Store(url) as store:
        run = store.record_run("here", "asa", "local", params={"driver": _dead_driver()})
    main(["doctor", "--backend", "local", "--store", url])
    line = next(x for x in capsys.readouterr().out.splitlines() if "store:" in x)
    assert line.startswith("warn") and f"run(s) {run} were left running by a driver that died" in line
    assert "may have left batch jobs" not in line  # a local run's workers end with it
    assert main(["store", "recover", "--store", url]) == 0
    capsys.readouterr()
    main(["doctor", "--backend", "local", "--store", url])
    line = next(x for x in capsys.readouterr().out.splitlines() if "store:" in x)
    assert line.startswith("ok")
