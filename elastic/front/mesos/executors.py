"""Custom executors: the Mesos v1 executor HTTP API, served by the front door for every agent.

A task launched with an ``ExecutorInfo`` (``TaskInfo.executor``, type ``CUSTOM`` or none) runs its
executor's command as one pool task on the offer's agent, with the environment a Mesos agent gives an
executor: ``MESOS_AGENT_ENDPOINT`` (this front door's ``host:port``, which serves ``POST /api/v1/executor``),
``MESOS_FRAMEWORK_ID``, ``MESOS_EXECUTOR_ID``, ``MESOS_DIRECTORY`` and ``MESOS_SANDBOX`` (a fresh directory,
the command's working directory, removed when the executor exits; left behind when it is killed),
``MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD``, plus the executor command's own ``environment``. pymesos'
``MesosExecutorDriver`` speaks the API:

- the executor's SUBSCRIBE opens its event stream: SUBSCRIBED (its ExecutorInfo, the FrameworkInfo, the
  agent), then LAUNCH with the task;
- its UPDATE calls become the task's status updates to the framework (state, message, reason, ``data``);
  the framework's ACKNOWLEDGE of one is relayed to the executor as ACKNOWLEDGED;
- the framework's KILL becomes a KILL event; its MESSAGE calls reach the executor as MESSAGE events, and the
  executor's MESSAGE calls reach the framework (``frameworkMessage``);
- once the task's terminal update is acknowledged (or the framework is removed) the executor gets SHUTDOWN
  and its stream closes; an executor that exits before its task ended makes it ``TASK_FAILED``
  (``REASON_EXECUTOR_TERMINATED``).

Differences from a Mesos agent, each a documented limitation:

- **One executor per task.** Every task with an ExecutorInfo starts its own executor process, holding
  ``ceil(task cpus + executor cpus)`` cores; a Mesos agent would send a second task with the same executor
  id on the same agent to the running executor. One endpoint serves every agent, so the executor sees its id
  with a random suffix (``MESOS_EXECUTOR_ID`` = ``ID.<hex>``), which is also what entitles its calls; the
  framework sees the id it gave.
- Executor ``container`` (images, volumes), ``uris`` (fetching), secrets in the environment, checkpointing
  and executor re-registration after an agent restart are not supported: such tasks get ``TASK_ERROR``
  naming the field. Executors of ``type: DEFAULT`` run only in ``LAUNCH_GROUP`` operations (their tasks'
  commands run directly).
"""

from __future__ import annotations

import base64
import binascii
import secrets
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic.front.mesos.fields import (
    BadCallError,
    UnsupportedCallError,
    id_value,
    items,
    json_object,
    number,
    obj,
    optional_string,
    shown,
    string,
)
from elastic.front.mesos.frameworks import Stream
from elastic.front.mesos.states import TERMINAL, TaskStatus

__all__ = [
    "EXECUTOR_CALLS",
    "ExecutorCall",
    "ExecutorRun",
    "SHUTDOWN_GRACE",
    "executor_command",
    "parse_executor_call",
]

EXECUTOR_CALLS = ("SUBSCRIBE", "UPDATE", "MESSAGE")
"""Executor calls served (Mesos' ``executor.proto``)."""

SHUTDOWN_GRACE = 5.0
"""Seconds an executor has to exit after SHUTDOWN (``MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD``)."""

_STATES = frozenset({"TASK_STARTING", "TASK_RUNNING", "TASK_KILLING", *TERMINAL} - {"TASK_DROPPED"})
"""States an executor may report (``TASK_STAGING`` is the master's, the partition states are the agent's)."""


@dataclass(frozen=True, slots=True)
class ExecutorCall:
    """One executor call: ``kind`` (SUBSCRIBE, UPDATE, MESSAGE) and what it carries."""

    kind: str
    framework_id: str
    executor_id: str
    status: TaskStatus | None = None
    """UPDATE: the task's status as the executor gave it (its ``uuid`` is the executor's)."""
    data: bytes | None = None
    """MESSAGE: the bytes for the framework."""


@dataclass(slots=True)
class ExecutorRun:
    """One running executor process and its task (mutable)."""

    run_id: str
    """The executor id the process sees (the framework's, with a random suffix)."""
    framework_id: str
    executor_id: str
    """The framework's executor id."""
    agent_id: str
    info: Mapping[str, Any]
    """The ExecutorInfo as the framework gave it."""
    task: Mapping[str, Any]
    """The TaskInfo as the framework gave it (sent with LAUNCH)."""
    task_id: str
    stream: Stream | None = None
    stream_id: str | None = None
    launched: bool = False
    """LAUNCH was sent."""
    killed: bool = False
    """The framework asked to kill the task before the executor subscribed (sent after LAUNCH)."""
    done: bool = False
    """SHUTDOWN was sent, or the process ended: no more events."""
    acks: dict[bytes, bytes] = field(default_factory=dict)
    """Uuid of an update sent to the framework to the executor's uuid of the same update."""
    pool_task_id: str = ""
    """The pool task running the executor's command."""
    shutdown_at: float | None = None
    """When SHUTDOWN was sent (its process is killed if still there after the grace period)."""


def new_run_id(executor_id: str) -> str:
    """Return the id an executor process sees: the framework's id with a random suffix (unguessable)."""
    return f"{executor_id}.{secrets.token_hex(8)}"


def executor_command(
    run_id: str, framework_id: str, endpoint: str, command: str, *, grace: float = SHUTDOWN_GRACE
) -> str:
    """Return the ``bash -c`` script of an executor process (``command``: its CommandInfo's script)."""
    env = {
        "MESOS_AGENT_ENDPOINT": endpoint,
        "MESOS_FRAMEWORK_ID": framework_id,
        "MESOS_EXECUTOR_ID": run_id,
        "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD": f"{grace:g}secs",
    }
    exports = "; ".join(f"export {k}={shlex.quote(v)}" for k, v in env.items())
    sandbox = (
        'MESOS_SANDBOX="$(mktemp -d "${TMPDIR:-/tmp}/mesos-sandbox-XXXXXX")" || exit 1; '
        'export MESOS_SANDBOX MESOS_DIRECTORY="$MESOS_SANDBOX"'
    )
    # the executor runs in a subshell inside its sandbox, which is removed when it exits
    return (
        f'{exports}; {sandbox}\n(cd "$MESOS_SANDBOX" || exit 1\n{command}\n)\n'
        'status=$?; rm -rf "$MESOS_SANDBOX"; exit $status'
    )


def subscribed(run: ExecutorRun, framework: Mapping[str, Any], agent_host: str) -> dict[str, Any]:
    """Return the executor's SUBSCRIBED event."""
    info = {**run.info, "executor_id": {"value": run.run_id}, "framework_id": {"value": run.framework_id}}
    return {
        "type": "SUBSCRIBED",
        "subscribed": {
            "executor_info": info,
            "framework_info": {**framework, "id": {"value": run.framework_id}},
            "agent_info": {"id": {"value": run.agent_id}, "hostname": agent_host},
            "container_id": {"value": run.run_id},
        },
    }


def launch(run: ExecutorRun) -> dict[str, Any]:
    """Return LAUNCH with the run's task."""
    return {"type": "LAUNCH", "launch": {"task": dict(run.task)}}


def kill(task_id: str) -> dict[str, Any]:
    """Return KILL for a task."""
    return {"type": "KILL", "kill": {"task_id": {"value": task_id}}}


def acknowledged(task_id: str, uuid: bytes) -> dict[str, Any]:
    """Return ACKNOWLEDGED: the framework acknowledged the update with the executor's ``uuid``."""
    return {
        "type": "ACKNOWLEDGED",
        "acknowledged": {"task_id": {"value": task_id}, "uuid": base64.b64encode(uuid).decode()},
    }


def message(data: bytes) -> dict[str, Any]:
    """Return MESSAGE: bytes from the framework."""
    return {"type": "MESSAGE", "message": {"data": base64.b64encode(data).decode()}}


def shutdown() -> dict[str, Any]:
    """Return SHUTDOWN: the executor should kill its tasks and exit."""
    return {"type": "SHUTDOWN"}


def _bytes(value: Any, path: str) -> bytes:
    text = string(value, path)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadCallError(path, f"expected base64 bytes, got {shown(text)}") from None


def _text(value: Any, path: str) -> str:
    """Return an optional string that may be empty (``""`` when absent)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadCallError(path, f"expected a string, got {shown(value)}")
    return value


MAX_LABELS = 64
"""Most labels an executor may attach to one status update."""


def _labels(value: Any, path: str) -> tuple[tuple[str, str], ...]:
    """Return a Mesos ``Labels`` object as ``(key, value)`` pairs (a value may be empty or absent)."""
    if value is None:
        return ()
    listed = items(obj(value, path).get("labels", []), f"{path}.labels")
    if len(listed) > MAX_LABELS:
        raise BadCallError(f"{path}.labels", f"{len(listed)} labels, more than {MAX_LABELS}")
    out = []
    for i, item in enumerate(listed):
        item = obj(item, f"{path}.labels[{i}]")
        out.append(
            (
                string(item.get("key"), f"{path}.labels[{i}].key"),
                _text(item.get("value"), f"{path}.labels[{i}].value"),
            )
        )
    return tuple(out)


def parse_executor_call(body: bytes) -> ExecutorCall:
    """Parse one executor call.

    Raises
    ------
    BadCallError
        Not one JSON object, a field missing or of the wrong type, a state an executor may not report.
    UnsupportedCallError
        A Mesos executor call not served (named).
    """
    raw = json_object(body)
    kind = string(raw.get("type"), "type")
    if kind not in EXECUTOR_CALLS:
        if kind == "HEARTBEAT":
            raise UnsupportedCallError(f"executor call {kind}", EXECUTOR_CALLS)
        raise BadCallError(
            "type", f"unknown executor call {kind!r}; expected one of {', '.join(EXECUTOR_CALLS)}"
        )
    framework_id = id_value(raw.get("framework_id"), "framework_id")
    executor_id = id_value(raw.get("executor_id"), "executor_id")
    if kind == "SUBSCRIBE":
        obj(raw.get("subscribe", {}), "subscribe")
        return ExecutorCall(kind, framework_id, executor_id)
    if kind == "MESSAGE":
        msg = obj(raw.get("message"), "message")
        return ExecutorCall(kind, framework_id, executor_id, data=_bytes(msg.get("data"), "message.data"))
    st = obj(obj(raw.get("update"), "update").get("status"), "update.status")
    state = string(st.get("state"), "update.status.state")
    if state not in _STATES:
        raise BadCallError("update.status.state", f"{state!r} is not a state an executor reports")
    stamp = number(st.get("timestamp", 0))
    data = st.get("data")
    status = TaskStatus(
        id_value(st.get("task_id"), "update.status.task_id"),
        state,
        "SOURCE_EXECUTOR",
        _text(st.get("message"), "update.status.message"),
        optional_string(st.get("reason"), "update.status.reason"),
        None,
        stamp or 0.0,
        _bytes(st.get("uuid"), "update.status.uuid"),
        None if data is None else _bytes(data, "update.status.data"),
        _labels(st.get("labels"), "update.status.labels"),
    )
    return ExecutorCall(kind, framework_id, executor_id, status=status)
