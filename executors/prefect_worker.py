"""What a pool worker runs for one Prefect task run of :class:`ElasticTaskRunner`.

The flow process sends a :class:`TaskRunRequest` (the Prefect task, the task run it already created, the
parameters with every upstream future replaced by its final state, the serialised Prefect context and the
Prefect settings as environment variables); a warm worker calls :func:`run_task_run`, which runs Prefect's
own task engine (``prefect.task_engine.run_task_sync``, or ``run_task_async``) with ``return_type="state"``,
as Prefect's process-pool and Dask runners do (``prefect/task_runners.py:623-668``,
``prefect_dask/client.py``), and answers a :class:`TaskRunReply`: the final state and the task run's log
records.

- **Warm**: Prefect is imported once per worker process, not per task; the worker's Prefect clients and
  events connection stay open between tasks.
- **States** go to the API as events from the worker, live (Running, Retrying, Completed, ...); the
  worker waits until its events are sent before it answers, so a task run's final state has left the
  worker when the flow sees it, and releasing the allocation right after loses nothing.
- **Logs** of the task run (``get_run_logger``, ``log_prints``) are sent back with the reply and sent to
  the API by the flow process, as Prefect's process pool forwards them to its parent
  (``prefect/task_runners.py:576-597``): Prefect's batched log worker has no flush short of stopping it.
- **API URL**: the request's environment (``PREFECT_API_URL`` and the flow's other Prefect settings) is
  applied to the worker process before Prefect's background services start, so they talk to the flow's
  server instead of starting an ephemeral one of their own.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TaskRunReply", "TaskRunRequest", "run_task_run"]


@dataclass(frozen=True, slots=True)
class TaskRunRequest:
    """One Prefect task run for a worker.

    Attributes
    ----------
    task : prefect.Task
        The task (for a retry after a lost attempt, a copy with the retries left).
    task_run : prefect.client.schemas.objects.TaskRun
        The task run the flow process created (its id, name, lineage and current state).
    parameters : dict
        Call parameters; upstream futures are replaced by their final states, which the engine resolves
        (so ``allow_failure`` and upstream failures behave as with Prefect's own runners).
    wait_for : list of State or None
        Final states of the ``wait_for`` futures.
    context : bytes
        ``prefect.context.serialize_context()`` from the flow thread at submission, pickled with
        ``cloudpickle`` (once per flow run, see :class:`elastic.executors.prefect_runs.RunContext`).
    env : dict
        Prefect settings as environment variables, applied to the worker process.
    """

    task: Any
    task_run: Any
    parameters: dict[str, Any]
    wait_for: list[Any] | None
    context: bytes
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskRunReply:
    """What a worker answers: the task run's final state and its log records (``LogCreate`` dicts)."""

    state: Any
    logs: list[dict[str, Any]]


_applied_env: dict[str, str] = {}
_logs: list[dict[str, Any]] = []


def _apply_env(env: dict[str, str]) -> None:
    """Make the flow's Prefect settings this process' own (once per worker, again only if they change)."""
    global _applied_env, _client
    if env == _applied_env:
        return
    os.environ.update(env)
    from prefect.context import refresh_global_settings_context

    refresh_global_settings_context()  # Prefect's services read the process-wide settings
    _applied_env = dict(env)
    _client = None  # a client for the new settings


def _capture_logs() -> None:
    from prefect.logging.handlers import set_api_log_sink

    set_api_log_sink(_logs.append)  # this worker only runs task runs of the runner that sends logs home


def _flush_events() -> None:
    """Wait until the events of this process' events worker are sent (``prefect/task_runners.py:655-666``)."""
    from prefect.events.worker import EventsWorker

    with EventsWorker._instance_lock:
        running = bool(EventsWorker._instances)  # type: ignore[misc]
    if running:
        EventsWorker.instance().wait_until_empty()


def _client_context() -> None:
    """Enter one Prefect client context for the life of this worker (its main thread).

    The engine and ``hydrated_context`` otherwise build a new client per task run, each with a new TLS
    context (``prefect/context.py:177,307-317``): most of a short task run's time on a worker.
    """
    global _client
    from prefect.context import SyncClientContext

    if _client is None or SyncClientContext.get() is not _client:
        _client = SyncClientContext()
        _client.__enter__()  # never left: the worker process ends instead


_client: Any = None


def run_task_run(request: TaskRunRequest) -> TaskRunReply:
    """Run one task run with Prefect's task engine in this process; return its final state and logs."""
    _apply_env(request.env)
    _capture_logs()
    _client_context()
    import cloudpickle
    from prefect.task_engine import run_task_async, run_task_sync

    _logs.clear()
    kwargs: dict[str, Any] = dict(
        task=request.task,
        task_run=request.task_run,
        parameters=request.parameters,
        wait_for=request.wait_for,
        return_type="state",
        context=cloudpickle.loads(request.context),
    )
    try:
        state = asyncio.run(run_task_async(**kwargs)) if request.task.isasync else run_task_sync(**kwargs)
    finally:
        _flush_events()
    logs = list(_logs)
    _logs.clear()
    return TaskRunReply(state, logs)
