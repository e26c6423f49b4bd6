"""ElasticTaskRunner on the local Slurm cluster, against a real Prefect server: stages, cancellation."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowFilter, FlowFilterName
from prefect.states import Cancelling

from elastic.backends.slurm import SlurmBackend
from elastic.executors.prefect_runner import ElasticTaskRunner
from elastic.metrics import EventKind
from tests.executors import prefect_flows as flows
from tests.executors.readback import all_final, task_runs
from tests.fixtures.prefect_server import PrefectServer
from tests.fixtures.slurm_cluster import LocalSlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture
def backend(slurm_cluster: LocalSlurmCluster, api: PrefectServer, tmp_path: Path) -> Iterator[SlurmBackend]:
    slurm_cluster.cancel_all()
    yield SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    slurm_cluster.cancel_all()


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("strategy", "job_cores"), [("bigjob", None), ("perstage", None), ("asa", None), ("asa", 2)]
)
def test_staged_flow_on_slurm(
    strategy: str, job_cores: int | None, backend: SlurmBackend, slurm_cluster: LocalSlurmCluster
) -> None:
    width = 6
    runner = ElasticTaskRunner(backend, strategy, store=False, poll_interval=1.0, job_cores=job_cores)
    state = flow(name=f"staged-slurm-{strategy}", task_runner=runner)(flows.staged)(width, return_state=True)
    assert state.is_completed() and state.result() == sum(i * 10 for i in range(width))
    runs = task_runs(state.state_details.flow_run_id, until=lambda r: len(r) == width + 2 and all_final(r))
    assert {r.state_name for r in runs.values()} == {"Completed"}
    [result] = runner.results
    assert [s.name for s in result.metrics.stages] == ["prepare", "process", "merge"]
    submitted = [e for e in result.events if e.kind is EventKind.ALLOC_SUBMIT]
    assert submitted and all(e.allocation for e in submitted)
    if job_cores is not None:  # process's 6 cores came as batch jobs of at most 2
        assert max(e.cores or 0 for e in submitted) <= job_cores and len(submitted) >= width // job_cores
    assert slurm_cluster.queue() == [], "a job outlived the flow run"


def _flow_run_id(name: str, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[name])))
            if runs:
                return runs[0].id
            time.sleep(0.5)
    raise AssertionError(f"no flow run of {name!r}")


@pytest.mark.timeout(400)
def test_cancelling_the_flow_run_cancels_its_task_runs_and_empties_the_queue(
    backend: SlurmBackend, slurm_cluster: LocalSlurmCluster, tmp_path: Path
) -> None:
    runner = ElasticTaskRunner(backend, "perstage", store=False, poll_interval=1.0, cancel_poll_interval=1.0)
    body = flow(name="cancel-me", task_runner=runner)(flows.long_stage)
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(body(4, 300.0, return_state=True)), daemon=True)
    thread.start()
    flow_run_id = _flow_run_id("cancel-me")
    deadline = time.monotonic() + 180
    while not any(line.endswith("RUNNING") for line in slurm_cluster.queue()):
        assert time.monotonic() < deadline, "no allocation started"
        time.sleep(0.5)
    time.sleep(3.0)  # the agents join and start the task runs
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run_id, Cancelling(), force=True)
    cancelled = time.monotonic()
    while slurm_cluster.queue():
        assert time.monotonic() - cancelled < 30, f"jobs left after cancellation: {slurm_cluster.queue()}"
        time.sleep(0.5)
    emptied = time.monotonic() - cancelled
    thread.join(timeout=60)
    assert not thread.is_alive(), "the flow run did not end after its cancellation"
    runs = task_runs(flow_run_id, until=lambda r: len(r) == 5 and all_final(r))
    assert len(runs) == 5 and {r.state_name for r in runs.values()} == {"Cancelled"}, {
        r.name: r.state_name for r in runs.values()
    }
    assert emptied < 30
    [result] = runner.results
    assert result.status == "cancelled"
