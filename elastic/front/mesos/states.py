"""Pool task states as Mesos task states: the one table that translates them, at the edge.

A launched task is a pool task pinned to its offer's agent (:mod:`elastic.pool.placement`); the pool reports
its progress as :class:`~elastic.pool.tasks.TaskEvent` records and its outcome through its future. They
become Mesos ``TaskStatus`` updates:

============================  ===================  =======================================================
pool                          Mesos state          reason / message
============================  ===================  =======================================================
QUEUED (accepted, no core)    TASK_STAGING         waiting for a core on its agent
ASSIGNED (sent ahead)         TASK_STARTING        on its agent, waiting for a core there
RUNNING                       TASK_RUNNING         running on its agent
result: exit code 0           TASK_FINISHED        "Command exited with status 0"
ShellTaskError                TASK_FAILED          REASON_COMMAND_EXECUTOR_FAILED, the exit code or signal
TaskLostError (agent gone)    TASK_LOST            REASON_AGENT_DISCONNECTED (no heartbeat) or
                                                   REASON_AGENT_REMOVED (allocation ended, agent left)
TaskKilledError (KILL)        TASK_KILLED          REASON_TASK_KILLED_DURING_LAUNCH if it had not started
front door closed             TASK_KILLED          REASON_FRAMEWORK_REMOVED
other errors                  TASK_FAILED          REASON_COMMAND_EXECUTOR_FAILED, the error
============================  ===================  =======================================================

Launches the master refuses never reach the pool: ``TASK_ERROR`` (``REASON_TASK_INVALID``,
``REASON_TASK_GROUP_INVALID``) for tasks that cannot run, ``TASK_DROPPED`` (frameworks with the
``PARTITION_AWARE`` capability) or ``TASK_LOST`` (others) with ``REASON_INVALID_OFFERS`` for launches on
offers no longer valid: as a Mesos master answers them.
"""

from __future__ import annotations

import base64
import concurrent.futures
from dataclasses import dataclass
from typing import Any

from elastic.pool.pool import PoolClosedError
from elastic.pool.tasks import ShellTaskError, TaskKilledError, TaskLostError, TaskState, how_it_ended

__all__ = ["TERMINAL", "TaskStatus", "outcome_status", "progress_status", "reconciled"]

TERMINAL = frozenset(
    {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_ERROR", "TASK_DROPPED", "TASK_GONE"}
)
"""Mesos task states after which a task never changes again."""

_PROGRESS = {
    TaskState.QUEUED: ("TASK_STAGING", "waiting for a core on its agent"),
    TaskState.ASSIGNED: ("TASK_STARTING", "on its agent, waiting for a core there"),
    TaskState.RUNNING: ("TASK_RUNNING", "running"),
}


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """One Mesos ``TaskStatus`` (the body of an UPDATE event, or of a reconciliation answer).

    Attributes
    ----------
    task_id : str
        The framework's id of the task.
    state : str
        ``TASK_RUNNING``, ``TASK_FINISHED``, ...
    source : str
        ``SOURCE_MASTER`` (decided by the front door), ``SOURCE_AGENT`` (the agent was lost),
        ``SOURCE_EXECUTOR`` (the task's own progress).
    message : str
        What happened, in words (the exit code for finished and failed tasks).
    reason : str or None
        A Mesos ``TaskStatus.Reason``.
    agent_id : str or None
        The agent.
    timestamp : float
        Epoch seconds.
    uuid : bytes or None
        Set on updates that are resent until acknowledged; None on the others (reconciliation, refused
        launches), which must not be acknowledged.
    data : bytes or None
        Bytes a custom executor attached to the update (``TaskStatus.data``), relayed as they came.
    labels : tuple of (str, str)
        Labels a custom executor attached to the update (key, value), relayed in order.
    """

    task_id: str
    state: str
    source: str
    message: str
    reason: str | None = None
    agent_id: str | None = None
    timestamp: float = 0.0
    uuid: bytes | None = None
    data: bytes | None = None
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def terminal(self) -> bool:
        """Whether the task never changes again."""
        return self.state in TERMINAL

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form of ``TaskStatus`` (ids as ``{"value": ...}``, ``uuid`` in base64)."""
        out: dict[str, Any] = {
            "task_id": {"value": self.task_id},
            "state": self.state,
            "source": self.source,
            "message": self.message,
            "timestamp": self.timestamp,
        }
        if self.reason is not None:
            out["reason"] = self.reason
        if self.agent_id is not None:
            out["agent_id"] = {"value": self.agent_id}
        if self.uuid is not None:
            out["uuid"] = base64.b64encode(self.uuid).decode()
        if self.data is not None:
            out["data"] = base64.b64encode(self.data).decode()
        if self.labels:
            out["labels"] = {"labels": [{"key": k, "value": v} for k, v in self.labels]}
        return out


def progress_status(task_id: str, agent_id: str, state: TaskState, at: float) -> TaskStatus | None:
    """Return the non-terminal status a pool event stands for (QUEUED, ASSIGNED, RUNNING), else None.

    Terminal statuses come from the task's outcome (:func:`outcome_status`), so each task gets exactly one.
    """
    found = _PROGRESS.get(state)
    if found is None:
        return None
    mesos_state, message = found
    source = "SOURCE_MASTER" if state is TaskState.QUEUED else "SOURCE_EXECUTOR"
    return TaskStatus(task_id, mesos_state, source, message, agent_id=agent_id, timestamp=at)


def outcome_status(
    task_id: str, agent_id: str, future: concurrent.futures.Future[Any], at: float, *, started: bool
) -> TaskStatus:
    """Return the terminal status of a pool task whose future is done (``started``: it ran)."""

    def status(state: str, source: str, message: str, reason: str | None = None) -> TaskStatus:
        return TaskStatus(task_id, state, source, message, reason, agent_id, at)

    if future.cancelled():
        return status(
            "TASK_KILLED", "SOURCE_MASTER", "cancelled before it started", "REASON_TASK_KILLED_DURING_LAUNCH"
        )
    error = future.exception()
    if error is None:
        return status("TASK_FINISHED", "SOURCE_EXECUTOR", "Command exited with status 0")
    if isinstance(error, ShellTaskError):
        return status(
            "TASK_FAILED",
            "SOURCE_EXECUTOR",
            f"Command {how_it_ended(error.returncode)}",
            "REASON_COMMAND_EXECUTOR_FAILED",
        )
    if isinstance(error, TaskKilledError):
        reason = None if started else "REASON_TASK_KILLED_DURING_LAUNCH"
        return status(
            "TASK_KILLED",
            "SOURCE_EXECUTOR" if started else "SOURCE_MASTER",
            f"killed: {error.reason}",
            reason,
        )
    if isinstance(error, TaskLostError):
        cause = error.losses[-1][1] if error.losses else "its agent was lost"
        reason = "REASON_AGENT_DISCONNECTED" if "no heartbeat" in cause else "REASON_AGENT_REMOVED"
        return status("TASK_LOST", "SOURCE_AGENT", cause, reason)
    if isinstance(error, PoolClosedError):
        return status("TASK_KILLED", "SOURCE_MASTER", "the front door shut down", "REASON_FRAMEWORK_REMOVED")
    return status(
        "TASK_FAILED", "SOURCE_EXECUTOR", f"{type(error).__name__}: {error}", "REASON_COMMAND_EXECUTOR_FAILED"
    )


def reconciled(
    task_id: str, latest: TaskStatus | None, at: float, *, partition_aware: bool, message: str = ""
) -> TaskStatus:
    """Return the answer to a reconciliation (or a KILL) for one task: its latest state, or unknown.

    An unknown task is TASK_UNKNOWN for ``PARTITION_AWARE`` frameworks and TASK_LOST for others, as in Mesos.
    These statuses carry no ``uuid``: they are not resent and must not be acknowledged.
    """
    reason = "REASON_RECONCILIATION"
    if latest is not None:
        return TaskStatus(task_id, latest.state, "SOURCE_MASTER", latest.message, reason, latest.agent_id, at)
    state = "TASK_UNKNOWN" if partition_aware else "TASK_LOST"
    return TaskStatus(
        task_id, state, "SOURCE_MASTER", message or "Reconciliation: task is unknown", reason, None, at
    )
