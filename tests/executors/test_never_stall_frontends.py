"""Never stall through the front-ends: Parsl and Prefect runs whose remembered plan disagrees with the tasks,
and the first run's walltime requests when held tasks declare their runtime."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefect import flow, task

import elastic
from elastic.backends.local import LocalBackend
from elastic.executors.parsl_executor import ElasticExecutor
from elastic.executors.prefect_runner import ElasticTaskRunner
from elastic.metrics import EventKind
from elastic.store import Store
from tests.executors import apps
from tests.executors import prefect_flows as flows
from tests.fixtures.prefect_server import PrefectServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    with LocalBackend(cores=4) as backend:
        yield backend


@pytest.mark.parametrize("strategy", ["asa", "perstage"])  # every strategy: tests/front/test_never_stall.py
def test_parsl_a_script_whose_apps_changed_since_its_last_run(
    strategy: str, local: LocalBackend, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    # run 1: prepare -> process -> merge (a bash app: its result is its exit code); run 2: one other app
    runs = [(lambda: apps.three_stages(width=2, pause=0.1), 0), (lambda: apps.add_one(41), 42)]
    for run, (body, expected) in enumerate(runs):
        ex = ElasticExecutor(
            backend=local, strategy=strategy, store=url, workflow="edited", poll_interval=1.0
        )
        with apps.loaded(ex, tmp_path / f"run{run}"):
            assert body().result(timeout=120) == expected
        assert ex.front_door.result is not None and ex.front_door.result.status == "completed"
    with Store(url) as store:
        assert list(store.runs(workflow="edited")["status"]) == ["completed", "completed"]


@task
def renamed(x: int) -> int:
    time.sleep(0.2)
    return x + 1


def _renamed_body() -> int:
    return int(renamed.submit(1).result())


@pytest.mark.parametrize("strategy", ["asa"])  # every strategy: tests/front/test_never_stall.py
def test_prefect_a_flow_whose_tasks_changed_since_its_last_run(
    strategy: str, api: PrefectServer, local: LocalBackend, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    name = f"edited-{strategy}"
    first = ElasticTaskRunner(local, strategy, store=store, poll_interval=1.0, idle_timeout=5.0)
    assert flow(name=name, task_runner=first)(flows.staged)(2) == 10
    second = ElasticTaskRunner(local, strategy, store=store, poll_interval=1.0, idle_timeout=5.0)
    state = flow(name=name, task_runner=second)(_renamed_body)(return_state=True)
    assert state.is_completed() and state.result() == 2
    [result] = second.results
    assert result.status == "completed"


@elastic.task(stage="declared", runtime=4.0)
@task
def declared(items: list[int], i: int) -> int:
    time.sleep(0.5)
    return items[i]


def _declared_body(width: int) -> int:
    items = flows.prepare.submit(width)
    parts = declared.map(items=[items] * width, i=list(range(width)))
    return sum(p.result() for p in parts)


def test_prefect_first_run_walltimes_come_from_the_declared_runtimes(
    api: PrefectServer, local: LocalBackend
) -> None:
    runner = ElasticTaskRunner(local, "asa", store=False, poll_interval=1.0, idle_timeout=5.0)
    assert flow(name="declared-runtimes", task_runner=runner)(_declared_body)(3) == 3
    [result] = runner.results
    asked = {
        e.stage: e.walltime
        for e in result.events
        if e.kind is EventKind.ALLOC_SUBMIT and e.stage in ("prepare", "declared")
    }
    # the prior's first request: 1.5 x the declared runtime + 60 s for the agent to start (Knowledge);
    # before runtimes flowed with announced tasks, 'declared' was asked 5,460 s and more
    assert asked["declared"] is not None and asked["declared"] <= 2 * (1.5 * 4.0 + 60.0)
