"""``elastic run montage --backend slurm``: the real Montage modules in agents that Slurm batch jobs start.

The local Slurm cluster (the session ``slurm_cluster`` fixture, 4 nodes x 4 cores, partition ``debug``)
runs one allocation per stage under ASA; the mosaic is checked, the run and its stages' runtimes are in
the store, and no job outlives the command.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from elastic.cli import main
from elastic.store import Store
from tests.fixtures.slurm_cluster import LocalSlurmCluster
from tests.workflows.conftest import SMALL
from workflows.demos import DEMOS

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.mark.timeout(400)
def test_montage_on_the_local_slurm_cluster_under_asa(
    slurm_cluster: LocalSlurmCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    slurm_cluster.cancel_all()
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    work = tmp_path / "work"  # on this one machine every node sees it; on a real cluster, a shared one
    work.mkdir()
    args = ["run", "montage", "--strategy", "asa", "--backend", "slurm", "--partition", "debug"]
    args += ["--size", str(SMALL["montage"]), "--workdir", str(work), "--store", url, "--poll", "1"]
    try:
        assert main(args) == 0, capsys.readouterr().out
        out = " ".join(capsys.readouterr().out.split())
        assert "montage under asa on slurm through elastic: checks" in out
        for check in ("dimensions", "no holes", "star flux", "background offsets removed", "preview"):
            assert f"{check} │ pass" in out, check
        assert "montage: every check passed" in out
        with Store(url) as store:
            (run,) = store.runs(workflow="montage").itertuples()
            assert run.status == "completed" and run.backend == "slurm" and run.allocations >= 2
            for stage in DEMOS["montage"].stages:
                assert len(store.stage_runtimes("montage", stage)[0]) == 1, stage
        jobs = subprocess.run(
            ["squeue", "-h", "-o", "%i %T"], env=slurm_cluster.env, capture_output=True, text=True, check=True
        )
        assert jobs.stdout.strip() == "", "a Slurm job outlived the run"
    finally:
        slurm_cluster.cancel_all()
