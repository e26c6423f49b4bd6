"""The README's Slurm examples on the local Slurm cluster, exactly as a user writes them (issue 29).

``backend="slurm"`` is the string, so the executor builds its own :class:`SlurmBackend` from the
environment (``SLURM_CONF``) and Parsl's run directory, as in a user's fresh directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import parsl
import pytest
from parsl.config import Config

from executors.parsl_executor import ElasticExecutor
from tests.executors import apps
from tests.fixtures.slurm_cluster import LocalSlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_dir(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A fresh working directory whose environment points at the local cluster, as a user's shell would."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the jobs' workers find the project, as installed
    monkeypatch.setenv("ELASTIC_STORE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    slurm_cluster.cancel_all()
    yield tmp_path
    parsl.clear()
    slurm_cluster.cancel_all()


@pytest.mark.timeout(240)
def test_the_readme_parsl_example_runs_from_a_fresh_directory_regression_29(
    fresh_dir: Path, slurm_cluster: LocalSlurmCluster
) -> None:
    assert not (fresh_dir / "runinfo").exists()
    parsl.load(Config(executors=[ElasticExecutor(backend="slurm", strategy="asa")], strategy="none"))
    try:
        assert apps.add_one(41).result(timeout=180) == 42
    finally:
        parsl.dfk().cleanup()
    assert slurm_cluster.queue() == [], "a job outlived parsl.dfk().cleanup()"
    secret_dir = fresh_dir / "runinfo" / "000" / "elastic"
    assert secret_dir.stat().st_mode & 0o777 == 0o700, "the run's secret directory is private"
    assert list((secret_dir / "slurm").glob("slurm-*.out")), "the job files are under the run directory"
    assert os.environ["SLURM_CONF"] == slurm_cluster.env["SLURM_CONF"]
