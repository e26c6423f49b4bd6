"""Unmodified pymesos frameworks on the front door with the local Slurm cluster: agents in batch jobs.

The same framework run as ``test_pymesos_mock.py``, on real Slurm jobs; the first allocation is ended with
``scancel`` mid-task.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.allocations import Allocation
from elastic.backends.slurm import SlurmBackend
from elastic.front.mesos import MesosServer
from tests.fixtures.slurm_cluster import LocalSlurmCluster
from tests.front.mesos.test_pymesos_mock import check_framework_run, lost_running

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture
def backend(slurm_cluster: LocalSlurmCluster, tmp_path: Path) -> Iterator[SlurmBackend]:
    slurm_cluster.cancel_all()
    yield SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    slurm_cluster.cancel_all()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
def test_a_pymesos_framework_runs_on_slurm_allocations_the_strategy_chooses(
    strategy: str, backend: SlurmBackend, slurm_cluster: LocalSlurmCluster
) -> None:
    with (
        Elastic(backend, strategy, store=False, poll_interval=1.0, max_cores=3, idle_timeout=20.0) as el,
        MesosServer(el) as server,
    ):

        def scancel(alloc: Allocation) -> None:
            assert alloc.backend_job_id is not None
            subprocess.run(["scancel", alloc.backend_job_id], env=slurm_cluster.env, check=True)

        framework = check_framework_run(el, server, scancel)
        allocations = {a.alloc_id: a for a in el.view().allocations}
    offered = {o.allocation for o in framework.offers}
    if lost_running(framework) >= 2:  # both running tasks lost: a replacement was asked and offered
        # its width depends on which rule asks first: the strategy's follow-up (the first request's and
        # the lost tasks', 3) or the liveness rule (the queued tasks', 2), a race on a loaded machine
        assert len({allocations[a].request for a in offered}) >= 2, (
            "offers came from the first request and from its replacement"
        )
    assert all(allocations[a].backend_job_id for a in offered), "every allocation offered is a Slurm job"
    assert el.result is not None and el.result.status == "completed"
    assert slurm_cluster.queue() == [], "a job outlived shutdown()"
