"""Third-party frameworks, unmodified, on the scaled mock queue and on the local Slurm cluster.

One short case each (``pymesos.subprocess`` with its default task size, two cores learned from its declines:
a custom executor, two remote commands); the full matrix of
frameworks, backends and strategies is ``benchmarks/bench_mesos_thirdparty.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.mock import MockBackend
from elastic.backends.slurm import SlurmBackend
from elastic.front.mesos import MesosServer
from tests.fixtures.slurm_cluster import LocalSlurmCluster
from tests.front.mesos.thirdparty_runs import UpdateLog, run_subprocess

pytestmark = pytest.mark.slow


@pytest.mark.timeout(120)
def test_pymesos_subprocess_runs_unmodified_on_the_scaled_mock_queue_under_asa() -> None:
    with (
        UpdateLog().watching() as log,
        MockBackend(nodes=8, clock="scaled", speedup=5.0) as backend,
        Elastic(backend, "asa", store=False, poll_interval=5.0, idle_timeout=20.0) as el,
        MesosServer(el, gang_wait=1.0) as server,  # its default task: two cores, learned from its declines
    ):
        outcome = run_subprocess(server.address)
        jobs = [a.backend_job_id for a in el.view().allocations]
    assert outcome.ok, (outcome.problems, outcome.output)
    assert not log.problems() and len(log.sent) >= 4, (log.problems(), log.sent)
    assert jobs and all(jobs), "its executors ran in the mock queue's batch jobs"


@pytest.mark.slurm
@pytest.mark.timeout(180)
def test_pymesos_subprocess_runs_unmodified_on_slurm_under_bigjob(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path
) -> None:
    # the cluster starts empty and healed (tests/fixtures/slurm_cluster.py)
    backend = SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    try:
        with (
            UpdateLog().watching() as log,
            Elastic(backend, "bigjob", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
            MesosServer(el, gang_wait=1.0) as server,
        ):
            outcome = run_subprocess(server.address)
            jobs = [a.backend_job_id for a in el.view().allocations]
        assert outcome.ok, (outcome.problems, outcome.output)
        assert not log.problems() and len(log.sent) >= 4, (log.problems(), log.sent)
        assert 1 <= len(jobs) <= 2 and all(jobs), "Big-Job's, and a 2-core one if it was narrower, Slurm jobs"
        assert slurm_cluster.queue() == [], "a job outlived shutdown()"
    finally:
        slurm_cluster.cancel_all()
