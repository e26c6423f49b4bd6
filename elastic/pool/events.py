"""What the pool records: agent events, and the union of every event kind (:data:`PoolEvent`).

Task events are :class:`elastic.pool.tasks.TaskEvent`, allocation events
:class:`elastic.allocations.AllocationEvent`; :class:`AgentEvent` records an agent joining, leaving, being
lost or refused.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

from elastic.allocations import AllocationEvent
from elastic.pool.tasks import TaskEvent

__all__ = ["AgentEvent", "AgentEventKind", "PoolEvent"]


class AgentEventKind(str, enum.Enum):
    """What happened to an agent."""

    JOINED = "JOINED"
    """Registered and offered its cores."""
    LEFT = "LEFT"
    """Said goodbye (drained, stopped, signalled)."""
    LOST = "LOST"
    """Stopped sending heartbeats, or its allocation ended under it."""
    REFUSED = "REFUSED"
    """A connection or message was refused (wrong secret, unknown allocation); nothing was run."""


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """An agent joined, left, was lost or was refused."""

    time: float
    alloc_id: str
    agent: str
    kind: AgentEventKind
    detail: str = ""


PoolEvent = Union[TaskEvent, AllocationEvent, AgentEvent]  # noqa: UP007
"""Any event the pool records."""
