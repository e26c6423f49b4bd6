"""ElasticTaskRunner against a real Prefect server: Prefect's features, the staged flow, states in the API."""

from __future__ import annotations

import pickle
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowFilter, FlowFilterName
from prefect.states import Cancelling
from prefect.task_runners import ThreadPoolTaskRunner

from elastic.backends.local import LocalBackend
from elastic.backends.mock import MockBackend
from elastic.errors import ConfigError, UnknownNameError
from elastic.executors.prefect_runner import ElasticTaskRunner
from elastic.metrics import EventKind
from elastic.store import Store
from tests.executors import prefect_flows as flows
from tests.executors.readback import (
    all_final,
    by_task,
    flow_log_messages,
    inputs_of,
    log_messages,
    states_of,
    task_runs,
)
from tests.fixtures.prefect_server import PrefectServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    with LocalBackend(cores=2) as backend:
        yield backend


def test_bad_settings_are_refused_before_any_flow_runs() -> None:
    with pytest.raises(ConfigError, match="unknown backend 'pbs'"):
        ElasticTaskRunner("pbs")
    with pytest.raises(UnknownNameError, match="strategy"):
        ElasticTaskRunner("local", "fastest")
    with pytest.raises(ConfigError, match=r"unknown options \['worker'\]"):
        ElasticTaskRunner(worker=3)
    with pytest.raises(ConfigError, match=r"max_retries is not an option.*retries=N"):
        ElasticTaskRunner(max_retries=3)
    with pytest.raises(ConfigError, match="cancel_poll_interval must be finite seconds > 0"):
        ElasticTaskRunner(cancel_poll_interval=0)
    with pytest.raises(ConfigError, match="job_cores must be a whole number of cores >= 1"):
        ElasticTaskRunner(job_cores=0)
    with pytest.raises(ConfigError, match="idle_timeout must be finite seconds >= 0"):
        ElasticTaskRunner(idle_timeout=-1.0)


def test_a_pickled_runner_keeps_no_backend_and_never_starts_allocations(local: LocalBackend) -> None:
    runner = ElasticTaskRunner(local, "bigjob", store=False)
    copy = pickle.loads(pickle.dumps(runner))  # what a worker gets inside each task run's context
    assert copy.duplicate() is not copy and copy != runner
    with copy.duplicate() as dup:
        assert dup._dispatch is None


def test_prefect_features_behave_as_with_the_thread_pool_runner(
    api: PrefectServer, local: LocalBackend, tmp_path: Path
) -> None:
    expected = flow(task_runner=ThreadPoolTaskRunner(4))(flows.features)(str(tmp_path / "thread"))
    runner = ElasticTaskRunner(local, "bigjob", store=False, poll_interval=1.0)
    got = flow(name="features-elastic", task_runner=runner)(flows.features)(str(tmp_path / "elastic"))
    assert got == expected
    # the parts that show Prefect's semantics, spelled out
    assert got["b"] == 3 and got["mapped"] == [11, 21, 31] and got["retried"] == 3
    assert got["bad"] == "FAILED" and "bad input 7" in got["bad_message"]
    assert got["after_bad"] == ("PENDING", "NotReady")
    assert got["tolerant"] == "ValueError: bad input 7"
    assert got["cached"] == (81, 81, "Cached") and got["return_state"] == ("COMPLETED", 42)
    assert got["async"] == 42 and got["nested"] == 102
    [result] = runner.results
    assert result.status == "completed"
    assert {"inc", "boom", "flaky", "cached_square"} <= {s.name for s in result.metrics.stages}


def test_a_bad_tag_fails_the_flow_before_its_task_runs(api: PrefectServer, local: LocalBackend) -> None:
    def body() -> int:
        return int(flows.inc.with_options(tags=["cores:zero"]).submit(1).result())

    state = flow(task_runner=ElasticTaskRunner(local, store=False))(body)(return_state=True)
    assert state.is_failed()
    with pytest.raises(ConfigError, match=r"task 'inc': tag 'cores:zero': cores must be an integer >= 1"):
        state.result()


# Big-Job under Prefect on the mock queue is a case of tests/workflows/test_matrix.py (every strategy meets
# every front-end there); here the strategies that request an allocation per stage, across which the
# lineage must hold
@pytest.mark.parametrize("strategy", ["perstage", "asa"])
def test_staged_flow_on_the_scaled_mock_queue(strategy: str, api: PrefectServer, tmp_path: Path) -> None:
    width = 6
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    # speedup 2: Big-Job's first walltime is 1.5 x prepare's 1 s estimate + 60 s (scaled), 31 s here; at 20x
    # it was 3 s, less than a worker takes to start and import Prefect on a busy machine: prepare was lost
    # to the walltime (TaskLostError, no retries: Crashed) and the test failed under load.
    with MockBackend(nodes=8, clock="scaled", speedup=2.0) as backend:
        runner = ElasticTaskRunner(backend, strategy, store=store, poll_interval=5.0, idle_timeout=30.0)
        state = flow(name=f"staged-{strategy}", task_runner=runner)(flows.staged)(width, return_state=True)
    assert state.is_completed() and state.result() == sum(i * 10 for i in range(width))

    runs = task_runs(state.state_details.flow_run_id, until=lambda r: len(r) == width + 2 and all_final(r))
    assert {r.state_name for r in runs.values()} == {"Completed"}
    tasks = by_task(runs)
    [prepare], [merge] = tasks["prepare"], tasks["merge"]
    assert len(tasks["process"]) == width
    for r in tasks["process"]:  # lineage: each process run came from prepare
        assert inputs_of(r)["items"] == {prepare.id}
    assert inputs_of(merge)["parts"] == {r.id for r in tasks["process"]}
    assert any("preparing 6 items" in m for m in log_messages([prepare.id], expect="preparing 6 items"))
    # progress by default: the run's stage and allocation lines are the flow run's logs
    progress = flow_log_messages(state.state_details.flow_run_id, expect="run ended")
    assert "stage process: ready" in progress and "run ended: completed" in progress
    assert any(m.startswith("allocation a1") and "requested" in m for m in progress), progress
    assert states_of(prepare.id)[-2:] == ["Running", "Completed"]

    [result] = runner.results
    m = result.metrics
    assert result.status == "completed"
    assert [s.name for s in m.stages] == ["prepare", "process", "merge"]
    assert 0 < m.core_seconds_used <= m.core_seconds_charged
    ends = {e.stage for e in result.events if e.kind is EventKind.STAGE_END}
    assert ends == {"prepare", "process", "merge"}


def _run_in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


def _wait_for(path: Path, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)
    time.sleep(0.2)
    return path.read_text()


@pytest.mark.parametrize("retries", [1, 0])
def test_a_killed_allocation_is_retried_on_another_one_or_crashes(
    retries: int, api: PrefectServer, local: LocalBackend, tmp_path: Path
) -> None:
    runner = ElasticTaskRunner(local, "bigjob", store=False, poll_interval=1.0)
    body = flow(name=f"killed-{retries}", task_runner=runner)(flows.killed_allocation)
    thread, out = _run_in_thread(body, str(tmp_path), retries)
    first = _wait_for(tmp_path / "attempt-1")
    local.cancel(first)  # from outside, as `scancel` or a node failure
    thread.join(timeout=180)
    [(state, message, task_run_id)] = out
    if retries:
        assert state == "COMPLETED"
        second = (tmp_path / "attempt-2").read_text()
        assert second != first, "the retry ran on another allocation"
        names = states_of(task_run_id)
        assert "AwaitingRetry" in names and names[-1] == "Completed"
    else:
        assert state == "CRASHED" and "TaskLostError" in message
        assert not (tmp_path / "attempt-2").exists()
        assert states_of(task_run_id)[-1] == "Crashed"
    [result] = runner.results
    assert not local.queue(), "an allocation outlived the flow run"
    submitted = [e for e in result.events if e.kind is EventKind.ALLOC_SUBMIT]
    assert len(submitted) >= 1 + retries, "the killed allocation was replaced for the retry"


def test_task_runs_the_runner_cancels_stay_under_their_flow_run_after_another_flow_ran(
    api: PrefectServer, local: LocalBackend
) -> None:
    # Runs after another flow run in this process: Prefect's events worker then holds that flow run's
    # context, which a state event takes when the thread emitting it carries no flow run of its own.
    before = flow(
        name="before-the-cancelled-one", task_runner=ElasticTaskRunner(local, "bigjob", store=False)
    )
    assert before(flows.staged)(2, return_state=True).is_completed()
    runner = ElasticTaskRunner(local, "bigjob", store=False, poll_interval=1.0, cancel_poll_interval=1.0)
    name = f"cancelled-after-another-{uuid.uuid4().hex[:8]}"
    body = flow(name=name, task_runner=runner)(flows.long_stage)
    thread, out = _run_in_thread(lambda: body(2, 300.0, return_state=True))
    with get_client(sync_client=True) as client:
        deadline = time.monotonic() + 120
        while not (runs := client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[name])))):
            assert time.monotonic() < deadline, "the flow run never appeared"
            time.sleep(0.2)
        flow_run_id = runs[0].id
        running = task_runs(
            flow_run_id, until=lambda r: sum(x.state_name == "Running" for x in r.values()) == 2
        )
        assert sum(r.state_name == "Running" for r in running.values()) == 2, running
        client.set_flow_run_state(flow_run_id, Cancelling(), force=True)
    thread.join(timeout=60)
    assert not thread.is_alive(), "the flow run did not end after its cancellation"
    assert not out[0].is_completed()
    ended = task_runs(flow_run_id, until=lambda r: len(r) == 3 and all_final(r))
    states = [r.state_name for r in ended.values()]
    assert states == ["Cancelled"] * 3, {r.name: r.state_name for r in ended.values()}
    assert not local.queue(), "an allocation outlived the flow run"


def test_progress_is_an_option_kept_by_each_flow_runs_copy() -> None:
    runner = ElasticTaskRunner("local", progress=False)
    assert runner._config is not None and runner._config.settings.progress is False
    dup = runner.duplicate()
    assert dup._config is not None and dup._config.settings.progress is False
    with pytest.raises(ConfigError, match=r"progress must be True .*False .*or a logger"):
        ElasticTaskRunner("local", progress="loud")
