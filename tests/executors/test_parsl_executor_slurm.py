"""ElasticExecutor on the local Slurm cluster (session fixture ``slurm_cluster``, 4 nodes x 4 cores)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic.backends.slurm import SlurmBackend
from elastic.executors.parsl_executor import ElasticExecutor
from elastic.learners.asa import ASAEstimator
from elastic.metrics import EventKind
from elastic.pool.tasks import TaskEvent, TaskState
from elastic.strategies import make_strategy
from tests.executors import apps
from tests.fixtures.slurm_cluster import LocalSlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
K = EventKind


@pytest.fixture
def backend(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SlurmBackend]:
    # the jobs inherit this environment: workers find the test package (and the project) as a user's would
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    slurm_cluster.cancel_all()
    yield SlurmBackend(
        partition="debug", env=slurm_cluster.env, workdir=tmp_path / "jobs", command_timeout=20
    )
    slurm_cluster.cancel_all()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
def test_three_stages_of_parsl_apps_on_slurm(
    strategy: str, backend: SlurmBackend, slurm_cluster: LocalSlurmCluster, tmp_path: Path
) -> None:
    # a learner that predicts a 5 s wait until it has seen real ones, so ASA's pre-submission is checkable
    # (asa prices waits by it, not by Slurm's estimate: 0 s on this idle cluster)
    learner = ASAEstimator(grid=[5.0, 1e5], policy="greedy")
    chosen = make_strategy("asa", estimates=False) if strategy == "asa" else strategy
    ex = ElasticExecutor(
        backend=backend, strategy=chosen, store=False, learner=learner, poll_interval=1.0, plan_interval=0.2
    )
    with apps.loaded(ex, tmp_path / "run") as dfk:
        merged = apps.three_stages(width=6, pause=3.0, runtime=3.0)
        assert merged.result(timeout=240) == 0
        assert Path(merged.stdout).read_text() == f"merged {apps.expected_total(6)}\n"
        jobs = [a.backend_job_id for a in ex.view().allocations]
        dfk.cleanup()
        assert slurm_cluster.queue() == [], "a job outlived parsl.dfk().cleanup()"
    assert all(jobs), "every allocation is a Slurm job"
    result = ex.front_door.result
    assert result is not None and result.status == "completed"
    assert [s.name for s in result.metrics.stages] == ["prepare", "process", "merge"]
    submits = [e for e in result.events if e.kind is K.ALLOC_SUBMIT]
    ends = {e.stage: e.time for e in result.events if e.kind is K.STAGE_END}
    if strategy == "bigjob":
        assert {e.stage for e in submits} == {"*"}
        return
    first = {s: min(e.time for e in submits if e.stage == s) for s in ("prepare", "process", "merge")}
    if strategy == "asa":  # stage k+1's batch job was submitted while stage k still ran
        assert first["process"] < ends["prepare"] and first["merge"] < ends["process"]
    else:
        assert first["process"] >= ends["prepare"] and first["merge"] >= ends["process"]


@pytest.mark.timeout(300)
def test_a_scancelled_allocation_reruns_its_task_without_a_parsl_retry(
    backend: SlurmBackend, slurm_cluster: LocalSlurmCluster, tmp_path: Path
) -> None:
    ex = ElasticExecutor(backend=backend, strategy="bigjob", store=False, poll_interval=1.0)
    running = threading.Event()
    on: list[str] = []

    def started(e: object) -> None:
        if isinstance(e, TaskEvent) and e.state is TaskState.RUNNING and e.alloc_id is not None:
            on.append(e.alloc_id)
            running.set()

    with apps.loaded(ex, tmp_path / "run", retries=0) as dfk:
        ex.front_door.pool.subscribe(started)
        fut = apps.sleep_and_return(8.0, 7)
        assert running.wait(120)
        (alloc,) = [a for a in ex.view().allocations if a.alloc_id == on[0]]
        subprocess.run(["scancel", str(alloc.backend_job_id)], env=slurm_cluster.env, check=True)
        assert fut.result(timeout=240) == 7
        assert fut.task_record["fail_count"] == 0 and fut.task_record["try_id"] == 0  # no Parsl retry
        done = [
            e for e in ex.front_door.pool.events if isinstance(e, TaskEvent) and e.state is TaskState.DONE
        ]
        assert done[-1].attempt == 2 and done[-1].alloc_id != alloc.alloc_id
        dfk.cleanup()
        assert slurm_cluster.queue() == []
