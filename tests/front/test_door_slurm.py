"""The front door on a real Slurm cluster (the session ``slurm_cluster`` fixture): agents in batch jobs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.slurm import SlurmBackend
from elastic.metrics import EventKind
from tests.fixtures.slurm_cluster import LocalSlurmCluster
from tests.front.test_door import three_stages

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def backend(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SlurmBackend]:
    # The tasks are functions of this test package, sent by reference: the workers (started by Slurm in
    # the job's directory) import them, as any user's workers import the user's modules.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    slurm_cluster.cancel_all()
    yield SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    slurm_cluster.cancel_all()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
def test_three_stages_submitted_task_by_task_on_slurm(
    strategy: str, backend: SlurmBackend, slurm_cluster: LocalSlurmCluster
) -> None:
    with Elastic(backend, strategy, workflow="three-slurm", store=False, poll_interval=1.0) as el:
        assert three_stages(el) == sum(i * 10 for i in range(4))
        submitted = [a.backend_job_id for a in el.view().allocations]
    assert el.result is not None and el.result.status == "completed"
    assert all(submitted), "every allocation is a Slurm job"
    assert [s.name for s in el.result.metrics.stages] == ["prepare", "process", "merge"]
    assert {e.stage for e in el.result.events if e.kind is EventKind.STAGE_END} == {
        "prepare",
        "process",
        "merge",
    }
    assert slurm_cluster.queue() == [], "a job outlived shutdown()"
