"""The messages between the pool and its agents: one frozen dataclass per kind.

:mod:`elastic.pool.protocol` is the only module that turns them into bytes and back;
:mod:`elastic.pool.sockets` sends and receives them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from elastic.pool.tasks import Task, TaskResult

__all__ = [
    "MESSAGE_TYPES",
    "Bye",
    "Drain",
    "Heartbeat",
    "KillTasks",
    "Message",
    "Register",
    "Report",
    "RunTasks",
    "Stop",
    "TaskLost",
    "TasksReturned",
    "Welcome",
]


@dataclass(frozen=True, slots=True)
class Register:
    """Agent -> pool, first message: "I run inside allocation ``alloc_id`` and offer ``cores`` cores"."""

    alloc_id: str
    cores: int
    hostname: str
    pid: int
    walltime_end: float | None = None
    """Epoch seconds when the allocation will be killed, when the agent knows it."""


@dataclass(frozen=True, slots=True)
class Welcome:
    """Pool -> agent, answer to :class:`Register`: the agent is in, with these timings."""

    heartbeat_interval: float
    pool_timeout: float
    """The agent exits when it hears nothing from the pool for this long (seconds)."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Either way, every ``heartbeat_interval``: "I am alive"; agents list the tasks they run."""

    running: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunTasks:
    """Pool -> agent: run these tasks on your cores (placed on cores that are free)."""

    tasks: tuple[Task, ...]


@dataclass(frozen=True, slots=True)
class KillTasks:
    """Pool -> agent: kill these tasks (their process groups) if they run; give them back if they wait."""

    task_ids: tuple[str, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Report:
    """Agent -> pool: tasks that started since the last report, and tasks that ended (results)."""

    started: tuple[str, ...] = ()
    """Ids of tasks that began running on a worker or in a child."""
    done: tuple[TaskResult, ...] = ()
    """Results (values or exceptions) of tasks that ended."""


@dataclass(frozen=True, slots=True)
class TasksReturned:
    """Agent -> pool: tasks it was sent but will not start (it drains or stops); queue them elsewhere."""

    task_ids: tuple[str, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class TaskLost:
    """Agent -> pool: a task was killed because this agent is being stopped; run it again elsewhere.

    Sent for a task whose process died by a signal while the agent was stopping (SIGTERM from the batch
    system at the walltime or on ``scancel``, or a :class:`Stop`), so that the pool re-queues it instead of
    failing it.
    """

    task_id: str
    cause: str
    """What killed it, in words (e.g. "killed by SIGTERM; the agent got SIGTERM")."""


@dataclass(frozen=True, slots=True)
class Drain:
    """Pool -> agent: take no new tasks; finish the running ones, then leave."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class Stop:
    """Pool -> agent: kill the running tasks and leave now.

    ``reason`` says why; :meth:`ended` builds the one sent when the agent's allocation has ended (to its
    agents, and to one that registers after the end: a job that started as it was cancelled), an
    agent's normal end.

    Examples
    --------
    >>> Stop.ended("CANCELLED").reason, Stop.ended("CANCELLED").allocation_ended
    ('allocation ended CANCELLED', True)
    >>> Stop("pool closed").allocation_ended
    False
    """

    reason: str = ""

    @classmethod
    def ended(cls, state: str) -> Stop:
        """Return the stop sent because the allocation ended in ``state`` (e.g. ``"CANCELLED"``)."""
        return cls(f"{_ENDED}{state}")

    @property
    def allocation_ended(self) -> bool:
        """Whether it was sent because the agent's allocation ended (:meth:`ended`)."""
        return self.reason.startswith(_ENDED)


_ENDED = "allocation ended "


@dataclass(frozen=True, slots=True)
class Bye:
    """Agent -> pool: I am leaving (drained, stopped, or out of walltime)."""

    reason: str = ""


Message = Union[  # noqa: UP007
    Register, Welcome, Heartbeat, RunTasks, KillTasks, Report, TasksReturned, TaskLost, Drain, Stop, Bye
]
"""Any message of the protocol."""

MESSAGE_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        Register,
        Welcome,
        Heartbeat,
        RunTasks,
        KillTasks,
        Report,
        TasksReturned,
        TaskLost,
        Drain,
        Stop,
        Bye,
    )
}
"""Message classes by the type name sent on the wire."""
