"""What the Prefect API recorded for a flow run: its task runs, their states and logs (waiting for events)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    LogFilter,
    LogFilterFlowRunId,
    LogFilterTaskRunId,
)


def task_runs(
    flow_run_id: Any, until: Callable[[dict[Any, Any]], bool], timeout: float = 60.0
) -> dict[Any, Any]:
    """The flow run's task runs by id once ``until(runs)`` holds (states come as events), or at timeout.

    By id, not by name: Prefect names a task run ``<task>-<3 hex digits>``, so two runs of one task can
    share a name (about 1 in 270 for six runs), and a dict by name would lose one of them.
    """
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
            by_id = {r.id: r for r in runs}
            if until(by_id) or time.monotonic() > deadline:
                return by_id
            time.sleep(0.5)


def all_final(runs: dict[Any, Any]) -> bool:
    """Every task run has a final state (or is Pending NotReady, Prefect's state for a run never run)."""
    return bool(runs) and all(
        r.state is not None and (r.state.is_final() or r.state.name == "NotReady") for r in runs.values()
    )


def states_of(task_run_id: Any) -> list[str]:
    """Names of the states a task run went through, oldest first."""
    with get_client(sync_client=True) as client:
        return [s.name for s in sorted(client.read_task_run_states(task_run_id), key=lambda s: s.timestamp)]


def log_messages(task_run_ids: list[Any], timeout: float = 30.0, expect: str | None = None) -> list[str]:
    """Log messages of the task runs (waiting up to ``timeout`` for one containing ``expect``)."""
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            logs = client.read_logs(log_filter=LogFilter(task_run_id=LogFilterTaskRunId(any_=task_run_ids)))
            messages = [log.message for log in logs]
            if expect is None or any(expect in m for m in messages) or time.monotonic() > deadline:
                return messages
            time.sleep(0.5)


def flow_log_messages(flow_run_id: Any, timeout: float = 30.0, expect: str | None = None) -> list[str]:
    """Log messages of the flow run itself (waiting up to ``timeout`` for one containing ``expect``)."""
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
            messages = [log.message for log in logs]
            if expect is None or any(expect in m for m in messages) or time.monotonic() > deadline:
                return messages
            time.sleep(0.5)


def inputs_of(run: Any) -> dict[str, set[Any]]:
    """A task run's lineage: for each parameter, the ids of the task runs it came from."""
    return {k: {i.id for i in v} for k, v in run.task_inputs.items()}


def by_task(runs: dict[Any, Any]) -> dict[str, list[Any]]:
    """Task runs grouped by task name (the run name without its ``-<key>`` suffix)."""
    grouped: dict[str, list[Any]] = {}
    for r in runs.values():
        grouped.setdefault(r.name.rsplit("-", 1)[0], []).append(r)
    return grouped
