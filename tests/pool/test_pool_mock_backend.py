"""The pool with agents started by the mock backend's pilot jobs (real processes, scaled clock)."""

from __future__ import annotations

import time

import pytest

from elastic.allocations import Allocation, AllocationState
from elastic.batch import JobSpec, JobState
from elastic.pool.events import AgentEvent, AgentEventKind
from elastic.pool.pool import Pool
from elastic.pool.tasks import Task, TaskEvent, TaskState
from tests.pool.conftest import wait_for

mock = pytest.importorskip("elastic.backends.mock")


def cube(x: int) -> int:
    return x**3


def submit_allocation(pool: Pool, backend: mock.MockBackend, alloc: Allocation) -> str:
    pool.add_allocation(alloc)
    job_id: str = backend.submit(
        JobSpec(cores=alloc.cores, walltime=alloc.walltime, script=pool.agent_script(alloc))
    )
    pool.allocation_submitted(alloc.alloc_id, job_id)
    return job_id


def wait_final(backend: mock.MockBackend, job_id: str, timeout: float = 10.0) -> JobState:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state: JobState = backend.state(job_id).state
        if state.is_final:
            return state
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not end within {timeout} s")


def test_pilot_jobs_run_tasks_and_survive_an_external_cancel(pool: Pool) -> None:
    with mock.MockBackend(nodes=2, cores_per_node=2, clock="scaled", speedup=1.0, grace=1.0) as backend:
        job1 = submit_allocation(pool, backend, Allocation("a1", cores=2, walltime=60.0, stage="s1"))
        assert pool.allocation("a1").backend_job_id == job1
        assert [pool.submit(Task.call(cube, (i,))).result(timeout=20) for i in range(3)] == [0, 1, 8]

        slow = pool.submit(Task.call(time.sleep, (1.5,), task_id="slow"))
        wait_for(
            pool, lambda e: isinstance(e, TaskEvent) and e.task_id == "slow" and e.state is TaskState.RUNNING
        )
        backend.cancel(job1)  # like scancel from outside: the agent gets SIGTERM
        left = wait_for(pool, lambda e: isinstance(e, AgentEvent) and e.kind is AgentEventKind.LEFT)
        assert left.detail == "agent got SIGTERM"
        pool.allocation_ended("a1", wait_final(backend, job1))
        assert pool.allocation("a1").state is AllocationState.CANCELLED

        job2 = submit_allocation(pool, backend, Allocation("a2", cores=2, walltime=60.0, stage="s1"))
        assert slow.result(timeout=20) is None
        lost = [e for e in pool.events if isinstance(e, TaskEvent) and e.state is TaskState.LOST]
        assert [(e.task_id, e.alloc_id) for e in lost] == [("slow", "a1")]
        pool.drain("a2")  # the pilot exits by itself: the job completes
        assert wait_final(backend, job2) is JobState.COMPLETED
