"""One stage's task counts, kept by task id so that they are right by construction.

:class:`StageCounts` is where the front door's per-stage counts live
(:class:`~elastic.control.live.LiveDemand` keeps one per stage; everything else reads them from there).
Each task the front door took is in exactly one phase at a time:

- **held**: it exists but waits for its inputs (no task id yet: the task is made when they are done);
- **queued**: in the pool, waiting for cores;
- **running**: an attempt of it runs on an allocation;
- **done** or **failed**: it ended (failed also counts a task dropped while queued: lost too often, or
  cancelled).

A task event moves the task it names from the phase it is in to the next one; nothing is ever taken from a
phase the task is not in, so no count can go below zero and their sum is the number of tasks taken. A task
the counts have not seen (submitted to the pool past the front door) is counted from its first event on.
Announced tasks (``expected``) are not tasks yet but a front-end's estimate; they are kept beside.

Not thread-safe: its owner holds its lock around every call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = ["Phase", "StageCounts"]


class Phase(Enum):
    """Where a task the front door took is (see the module docstring)."""

    QUEUED = "queued"
    RUNNING = "running"


@dataclass(slots=True)
class StageCounts:
    """Task counts of one stage (see the module docstring)."""

    held: int = 0
    """Tasks that wait for their inputs."""
    expected: int = 0
    """Tasks announced by a front-end and not submitted yet (its estimate, replaced at each announcement)."""
    done: int = 0
    failed: int = 0
    _live: dict[str, Phase] = field(default_factory=dict)
    """Queued or running tasks by id (ended ones are only counted)."""
    _queued: int = 0
    _running: int = 0

    @property
    def queued(self) -> int:
        """Tasks queued in the pool for cores."""
        return self._queued

    @property
    def running(self) -> int:
        """Tasks with an attempt running."""
        return self._running

    @property
    def outstanding(self) -> int:
        """Tasks held, announced, queued or running."""
        return self.held + self.expected + self._queued + self._running

    @property
    def taken(self) -> int:
        """Tasks the front door took: held, queued, running, done or failed (not the announced ones).

        It only grows while tasks come in and move from phase to phase; a held task dropped before it was
        queued (its inputs failed, or it was cancelled) is the one thing taken off.
        """
        return self.held + self._queued + self._running + self.done + self.failed

    @property
    def known(self) -> int:
        """Every task counted: taken or announced."""
        return self.taken + self.expected

    # -- from the front door -----------------------------------------------------------------------------

    def hold(self) -> None:
        """Count a task that waits for its inputs."""
        self.held += 1

    def unhold(self, task: str | None) -> None:
        """Queue a held task whose inputs are done as ``task``, or drop it (``None``: it will not run).

        Raises
        ------
        ValueError
            No task is held.
        """
        if self.held == 0:
            raise ValueError("no held task to release")
        self.held -= 1
        if task is not None:
            self.enqueue(task)

    def enqueue(self, task: str) -> None:
        """Count ``task`` as queued in the pool; it is one of the announced tasks, if any are."""
        if self.expected:
            self.expected -= 1  # the announcement counted it; the front-end announces again what it sees
        self._move(task, Phase.QUEUED)

    def announce(self, tasks: int) -> None:
        """Replace the announced count.

        Raises
        ------
        ValueError
            ``tasks`` is negative.
        """
        if tasks < 0:
            raise ValueError(f"cannot announce {tasks} tasks")
        self.expected = tasks

    # -- from task events ---------------------------------------------------------------------------------

    def started(self, task: str) -> None:
        """Count an attempt of ``task`` as running."""
        self._move(task, Phase.RUNNING)

    def lost(self, task: str) -> None:
        """Count ``task`` as queued again: its attempt was lost (then :meth:`ended` if it may not rerun)."""
        self._move(task, Phase.QUEUED)

    def ended(self, task: str, ok: bool) -> None:
        """Count ``task`` as done (``ok``) or failed; also when it failed while queued (dropped)."""
        self._move(task, None)
        if ok:
            self.done += 1
        else:
            self.failed += 1

    def _move(self, task: str, to: Phase | None) -> None:
        was = self._live.pop(task, None)
        if was is Phase.QUEUED:
            self._queued -= 1
        elif was is Phase.RUNNING:
            self._running -= 1
        if to is Phase.QUEUED:
            self._queued += 1
        elif to is Phase.RUNNING:
            self._running += 1
        if to is not None:
            self._live[task] = to
