"""``elastic run DEMO --backend slurm``: the real programs in agents that Slurm batch jobs start.

The local Slurm cluster (the session ``slurm_cluster`` fixture, 4 nodes x 4 cores, partition ``debug``)
runs the allocations ASA asks for: Montage through the front door, BLAST as Parsl apps on
ElasticExecutor and as a Prefect flow on ElasticTaskRunner (skipped, naming the module, while these are
not installed). The output is checked, the run and its stages' runtimes are in the store, and no job
outlives the command.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from elastic.cli import main
from elastic.store import Store
from tests.fixtures.slurm_cluster import LocalSlurmCluster
from tests.workflows.conftest import SMALL
from workflows.demos import DEMOS

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("name", "frontend"), [("montage", "elastic"), ("blast", "parsl"), ("blast", "prefect")]
)
def test_a_demo_on_the_local_slurm_cluster_under_asa(
    name: str,
    frontend: str,
    slurm_cluster: LocalSlurmCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    module = {"parsl": "executors.parsl_executor", "prefect": "executors.prefect_runner"}.get(frontend)
    if module is not None:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            pytest.skip(
                f"{module} cannot be imported ({exc}): the front-end's Elastic adapter is not installed"
            )
    if frontend == "prefect":
        request.getfixturevalue("prefect_api")
    slurm_cluster.cancel_all()
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    work = tmp_path / "work"  # on this one machine every node sees it; on a real cluster, a shared one
    work.mkdir()
    args = ["run", name, "--strategy", "asa", "--backend", "slurm", "--partition", "debug"]
    args += ["--frontend", frontend, "--size", str(SMALL[name]), "--workdir", str(work)]
    try:
        assert main([*args, "--store", url, "--poll", "1"]) == 0, capsys.readouterr().out
        out = " ".join(capsys.readouterr().out.split())
        assert f"{name} under asa on slurm through {frontend}: checks" in out
        checks = {"montage": ("dimensions", "no holes", "star flux", "background offsets removed", "preview")}
        for check in checks.get(name, ("planted matches found", "identity", "position and strand", "decoys")):
            assert f"{check} │ pass" in out, check
        assert f"{name}: every check passed" in out
        with Store(url) as store:
            (run,) = store.runs(workflow=name).itertuples()
            assert run.status == "completed" and run.backend == "slurm" and run.allocations >= 2
            for stage in DEMOS[name].stages:
                assert len(store.stage_runtimes(name, stage)[0]) == 1, stage
        assert slurm_cluster.queue() == [], "a Slurm job outlived the run"
    finally:
        slurm_cluster.cancel_all()
