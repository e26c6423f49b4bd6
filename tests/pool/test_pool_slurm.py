"""The pool with agents started by real Slurm jobs (the local test cluster), multi-node via ``srun``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic.allocations import Allocation
from elastic.batch import JobSpec, JobState
from elastic.pool.events import AgentEvent, AgentEventKind
from elastic.pool.pool import Pool
from elastic.pool.tasks import Task, TaskEvent, TaskState
from tests.fixtures.slurm_cluster import LocalSlurmCluster

slurm = pytest.importorskip("elastic.backends.slurm")
pytestmark = pytest.mark.slurm


@pytest.fixture
def backend(slurm_cluster: LocalSlurmCluster, tmp_path: Path) -> Iterator[slurm.SlurmBackend]:
    yield slurm.SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    slurm_cluster.cancel_all()


def joined(pool: Pool) -> list[AgentEvent]:
    return [e for e in pool.events if isinstance(e, AgentEvent) and e.kind is AgentEventKind.JOINED]


def test_two_node_allocation_runs_one_agent_per_node(
    pool: Pool, backend: slurm.SlurmBackend, slurm_cluster: LocalSlurmCluster
) -> None:
    per_node = slurm_cluster.cores_per_node
    alloc = Allocation("a1", cores=2 * per_node, walltime=120.0, nodes=2)
    pool.add_allocation(alloc)
    script = pool.agent_script(alloc)
    assert "srun --nodes=2" in script
    job = backend.submit(JobSpec(cores=alloc.cores, nodes=2, walltime=alloc.walltime, script=script))
    deadline = time.monotonic() + 20
    while len(joined(pool)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [e.detail for e in joined(pool)] == [f"{per_node} cores"] * 2
    futures = [pool.submit(Task.shell("sleep 0.3; echo $ELASTIC_TASK_ID", task_id=f"t{i}")) for i in range(8)]
    assert [f.result(timeout=30).stdout for f in futures] == [f"t{i}\n" for i in range(8)]
    agents = {e.detail for e in pool.events if isinstance(e, TaskEvent) and e.state is TaskState.RUNNING}
    assert len(agents) == 2, "both nodes' agents took tasks"
    pool.drain("a1")
    deadline = time.monotonic() + 20
    while not backend.state(job).state.is_final and time.monotonic() < deadline:
        time.sleep(0.2)
    assert backend.state(job).state is JobState.COMPLETED


def _start(pool: Pool, backend: slurm.SlurmBackend, alloc: Allocation) -> str:
    pool.add_allocation(alloc)
    script = pool.agent_script(alloc)
    job = backend.submit(JobSpec(cores=alloc.cores, walltime=alloc.walltime, script=script))
    pool.allocation_submitted(alloc.alloc_id, job)
    return job


def test_scancel_mid_task_requeues_the_task_elsewhere(
    pool: Pool, backend: slurm.SlurmBackend, tmp_path: Path
) -> None:
    """scancel SIGTERMs every process of the job, the task's too: the task is LOST, not FAILED (H12)."""
    job = _start(pool, backend, Allocation("a1", cores=1, walltime=120.0))
    # The first run sleeps far longer than the cancellation takes to arrive (under load a short task could
    # finish first); the rerun on a2 finds the marker and ends at once.
    marker = tmp_path / "started"
    script = f"if [ -e {marker} ]; then echo done; else touch {marker}; sleep 60; fi"
    future = pool.submit(Task.shell(script, task_id="t"))
    deadline = time.monotonic() + 20
    while not any(isinstance(e, TaskEvent) and e.state is TaskState.RUNNING for e in pool.events):
        assert time.monotonic() < deadline, pool.events
        time.sleep(0.05)
    time.sleep(1.0)  # the task's processes are running
    backend.cancel(job)
    _start(pool, backend, Allocation("a2", cores=1, walltime=120.0))
    assert future.result(timeout=40).stdout == "done\n"
    states = [(e.state, e.alloc_id) for e in pool.events if isinstance(e, TaskEvent)]
    assert (TaskState.LOST, "a1") in states and (TaskState.DONE, "a2") in states
    assert TaskState.FAILED not in [s for s, _ in states]
    (lost,) = [e for e in pool.events if isinstance(e, TaskEvent) and e.state is TaskState.LOST]
    assert "SIGTERM" in lost.detail
