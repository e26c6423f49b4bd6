"""Reliable status updates: each task's updates in order, each resent until the framework acknowledges it.

As Mesos' status update manager does, a task's updates go out one at a time: the next is sent only once
the framework acknowledged the previous one (``ACKNOWLEDGE`` with its ``uuid``), and an update not
acknowledged within the retry interval is sent again, the interval doubling from ``retry_min`` up to
``retry_max`` (Mesos: 10 s to 10 min). Updates wait while their framework is disconnected and are sent
again when it subscribes anew.
"""

from __future__ import annotations

import dataclasses
import os
from collections import deque

from elastic.front.mesos.states import TaskStatus

__all__ = ["UpdateQueue"]


class UpdateQueue:
    """The pending status updates of one task, oldest first.

    Parameters
    ----------
    retry_min, retry_max : float
        First and longest wait (seconds) before an unacknowledged update is sent again.
    """

    def __init__(self, retry_min: float = 10.0, retry_max: float = 600.0) -> None:
        self.retry_min = retry_min
        self.retry_max = retry_max
        self._pending: deque[TaskStatus] = deque()
        self._sent_at: float | None = None
        self._wait = retry_min

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, status: TaskStatus) -> TaskStatus:
        """Queue ``status`` with a fresh ``uuid``; return it as queued."""
        status = dataclasses.replace(status, uuid=os.urandom(16))
        self._pending.append(status)
        return status

    def ack(self, uuid: bytes) -> bool:
        """Take an acknowledgement; return whether it matched the update in flight (then it is done)."""
        if not self._pending or self._pending[0].uuid != uuid:
            return False
        self._pending.popleft()
        self._sent_at = None
        self._wait = self.retry_min
        return True

    def due(self, now: float) -> TaskStatus | None:
        """Return the update to send now (the first, or again after its retry interval), or None.

        The caller sends it; this records that it was sent at ``now``.
        """
        if not self._pending:
            return None
        if self._sent_at is not None:
            if now - self._sent_at < self._wait:
                return None
            self._wait = min(self._wait * 2, self.retry_max)
        self._sent_at = now
        return self._pending[0]

    def next_due(self) -> float | None:
        """When the update in flight is due again (epoch seconds); None if nothing is in flight."""
        if not self._pending or self._sent_at is None:
            return None if not self._pending else 0.0
        return self._sent_at + self._wait

    def resend(self) -> None:
        """Send the update in flight again at the next :meth:`due` (the framework subscribed anew)."""
        self._sent_at = None
