"""What the master keeps of a framework and of each task it launched, and the framework's stage and demand.

A framework's **stage** (the label its tasks and allocations carry) is its label ``elastic.stage``, else its
role when it has one other than ``*``, else its name. Its **demand**, announced to the front door while it
is subscribed (or within its failover timeout) and not suppressed, is the largest of: one task; what is
left of its label ``elastic.tasks`` (tasks it will launch, if it says); and what is left of its latest
``REQUEST`` (the cores it asked for, as tasks of ``elastic.cores`` cores, less the tasks it launched since).
To that come its tasks lost and not launched again yet (:attr:`Framework.lost`): a framework relaunches
what it lost, so a replacement allocation is as wide whether the strategy decides before or after the
relaunches reach it.
Tasks are of ``elastic.cores`` cores each (default 1). One task is enough for every strategy to request an
allocation for a framework that waits for offers; a REQUEST (or the label) sizes it for a gang.

A **gang** that says nothing (TFMesos: it launches on offers as they come, and its tasks wait for one
another, so none ends before all run) is learned: a framework none of whose tasks ended, with tasks
running, not suppressed, that never declined an offer, and no core free to offer it for ``gang_wait``
seconds wants one more core than it holds. Each such step announces one ready task under a stage of its own
(``<stage>+gang<k>``, see :attr:`Framework.growing`), so a strategy that allocates per stage (Per-Stage,
ASA) requests an allocation for it while the framework's first allocation runs, and under Big-Job (whose
allocations are kept for every stage) the never-stall rule does (:mod:`elastic.control.liveness`: a stage
of tasks announced ready, none running, with no core to offer); a launch on that allocation ends the step,
a DECLINE ends it and every later one. A REQUEST, while the framework runs tasks, for more cores than the
stage's allocations have (one sized before the REQUEST arrived) takes such a step at once, for the
difference; with nothing running, the stage itself is such a stage, and the never-stall rule asks for what
its allocations lack.

A framework whose **tasks are wider** than the cores offered (``pymesos.subprocess``'s default task takes
1.01 cpus: two cores) declines every offer and runs nothing, while a real Mesos master would offer it a
whole agent. That is learned too: a framework connected, not suppressed, with nothing launched and not
ended, that declined (for less than :data:`LONG_REFUSAL`) an offer as wide as the widest agent of the
allocations kept for its stage (or for the whole run), none of them pending, for ``gang_wait`` seconds,
takes tasks twice that wide (:attr:`Framework.wide`, its :attr:`~Framework.cores`), up to the widest task
the backend can run (:attr:`elastic.front.door.Elastic.widest_task`; past it, it is logged once that
nothing wider exists). Its stage is announced with tasks that wide, none running, so the never-stall rule
asks for a wider allocation under every strategy, and offers' ``mem`` grows with their cores. A launch on
an offer narrower than what was learned forgets it; REVIVE and SUPPRESS forget the declines seen.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from elastic.front.mesos import events as ev
from elastic.front.mesos.calls import FrameworkInfo
from elastic.front.mesos.fields import BadCallError
from elastic.front.mesos.states import TaskStatus, reconciled
from elastic.front.mesos.updates import UpdateQueue
from elastic.pool.tasks import Task

__all__ = [
    "LABELS",
    "LONG_REFUSAL",
    "MAX_COMPLETED",
    "POOL_PREFIX",
    "Framework",
    "MesosTask",
    "Stream",
    "check_labels",
    "demand",
    "held_cores",
    "stage_of",
]

POOL_PREFIX = "mesos-"
"""Prefix of the pool task ids of launched tasks."""

MAX_COMPLETED = 1000
"""Completed tasks kept per framework for RECONCILE (Mesos: ``max_completed_tasks_per_framework``)."""

LONG_REFUSAL = 3600.0
"""A DECLINE refusing cores this long (seconds) or longer says the framework wants nothing now
(``pymesos.subprocess`` declines for ever while it has nothing to run), not that the offer is too narrow."""

LABELS = ("elastic.stage", "elastic.tasks", "elastic.cores")
"""Framework labels the front door reads (see the module docstring)."""


class Stream(Protocol):
    """A subscription's event stream (the HTTP layer's): ``send`` one record, ``close`` the stream."""

    def send(self, data: bytes) -> None:
        """Queue one RecordIO record; never blocks."""
        ...

    def close(self) -> None:
        """End the stream (the response completes)."""
        ...


@dataclass(slots=True)
class MesosTask:
    """A task a framework launched (mutable: its latest state and pending updates)."""

    task_id: str
    framework_id: str
    agent_id: str
    pool_task: Task
    updates: UpdateQueue
    state: str = ""
    """The latest progress state sent (``TASK_STAGING``, ``TASK_RUNNING``...)."""
    started: bool = False
    ended: bool = False
    """The pool reported it ended; its terminal status is not sent yet (its cores are not offered yet)."""
    terminal: bool = False
    latest: TaskStatus | None = None
    run_id: str | None = None
    """Its executor process's id when it was launched with a custom executor (statuses come from it)."""

    @property
    def cores(self) -> int:
        """Whole cores it takes on its agent."""
        return self.pool_task.cores

    @property
    def allocation(self) -> str:
        """The id of the allocation its agent runs in (an agent is named ``<allocation>/<host>/<pid>``)."""
        return self.agent_id.split("/", 1)[0]


@dataclass(slots=True)
class Framework:
    """A subscribed (or disconnected, within its failover timeout) framework (mutable)."""

    framework_id: str
    info: FrameworkInfo
    stage: str
    principal: str | None = None
    """The principal that subscribed it (None: authentication is off); only it may fail over or call."""
    stream: Stream | None = None
    """Its event stream; None while disconnected."""
    stream_id: str | None = None
    suppressed: bool = False
    disconnected_at: float | None = None
    last_heartbeat: float = 0.0
    tasks: dict[str, MesosTask] = field(default_factory=dict)
    """Its tasks by id, until their terminal update is acknowledged."""
    completed: OrderedDict[str, TaskStatus] = field(default_factory=OrderedDict)
    """Terminal statuses of its last :data:`MAX_COMPLETED` tasks whose terminal update was acknowledged."""
    launched: int = 0
    requested: int = 0
    """Cores its latest REQUEST asked for."""
    launched_at_request: int = 0
    """:attr:`launched` when it sent its latest REQUEST."""
    ended: int = 0
    """Its tasks that ended (any terminal state)."""
    lost: int = 0
    """Its tasks reported lost less the tasks it launched since (at least 0); a DECLINE or SUPPRESS clears it:
    it wants no more cores."""
    starved_since: float | None = None
    """Since when it looks like a gang short of cores (see the module docstring); None: it does not."""
    growing: str | None = None
    """The stage of its current gang step (one ready task announced there), until it launches a task."""
    growing_tasks: int = 1
    """Tasks announced for the current step."""
    steps: int = 0
    """Gang steps taken."""
    declined: bool = False
    """It declined an offer: it turns cores down, so it is never taken for a gang short of them."""
    refused: int = 0
    """Cores of the widest offer it declined (for less than :data:`LONG_REFUSAL`) since it last launched,
    revived or suppressed."""
    narrow_since: float | None = None
    """Since when its offers all look too narrow (see the module docstring); None: they do not."""
    wide: int = 0
    """Cores per task learned from its declines (0: none learned)."""
    gang_told: bool = False
    """It was logged that it waits with every core of the partition (a gang too wide to run)."""
    widest_told: bool = False
    """It was logged that no allocation wider than its declined offers exists."""

    @property
    def cores(self) -> int:
        """Cores per task it announces: label ``elastic.cores`` (default 1), or what its declines taught."""
        return max(int(self.info.labels.get("elastic.cores", 1)), self.wide)

    def emit(self, event: dict[str, Any]) -> None:
        """Send one event on its stream (nothing while it is disconnected)."""
        if self.stream is not None:
            self.stream.send(ev.record(event))

    def update(self, task: MesosTask, status: TaskStatus, now: float) -> None:
        """Record a task's new status and queue it (sent at once if nothing is in flight for the task)."""
        if task.terminal:
            return
        task.latest = task.updates.add(status)
        self.flush(task, now)

    def flush(self, task: MesosTask, now: float) -> None:
        """Send the task's update due now; forget the task once its terminal update is acknowledged."""
        if self.stream is None:
            return
        due = task.updates.due(now)
        if due is not None:
            self.emit(ev.update(due))
        elif task.terminal and not task.updates:
            del self.tasks[task.task_id]
            if task.latest is not None:
                self.completed[task.task_id] = task.latest
                self.completed.move_to_end(task.task_id)
                while len(self.completed) > MAX_COMPLETED:
                    self.completed.popitem(last=False)

    def reconcile(self, task_ids: Iterable[str], now: float, message: str = "") -> None:
        """Send the latest status of each task (unknown: TASK_LOST, or TASK_UNKNOWN if partition-aware).

        A task accepted whose first update is not out yet is TASK_STAGING; one whose terminal update was
        acknowledged keeps its terminal state (among the last :data:`MAX_COMPLETED` of the framework).
        """
        for task_id, latest in self.latest(task_ids, now):
            status = reconciled(task_id, latest, now, partition_aware=self.partition_aware, message=message)
            self.emit(ev.update(status))

    def latest(self, task_ids: Iterable[str], now: float) -> list[tuple[str, TaskStatus | None]]:
        """Return each task's latest status as :meth:`reconcile` reports it (None: unknown)."""
        out: list[tuple[str, TaskStatus | None]] = []
        tasks, completed = self.tasks, self.completed
        for task_id in task_ids:
            task = tasks.get(task_id)
            latest = completed.get(task_id) if task is None else task.latest
            if task is not None and latest is None:
                latest = TaskStatus(
                    task_id,
                    "TASK_STAGING",
                    "SOURCE_MASTER",
                    "accepted; not started yet",
                    None,
                    task.agent_id,
                    now,
                )
            out.append((task_id, latest))
        return out

    def chores(self, now: float, heartbeat_interval: float) -> float:
        """Resend due updates and send a heartbeat if due; return when something is due next."""
        wake = now + heartbeat_interval
        for task in list(self.tasks.values()):
            self.flush(task, now)
            due = task.updates.next_due()
            if due is not None:
                wake = min(wake, due)
        if now - self.last_heartbeat >= heartbeat_interval:
            self.emit(ev.heartbeat())
            self.last_heartbeat = now
        return min(wake, self.last_heartbeat + heartbeat_interval)

    @property
    def partition_aware(self) -> bool:
        """Whether it has the ``PARTITION_AWARE`` capability (TASK_DROPPED, TASK_UNKNOWN, not TASK_LOST)."""
        return "PARTITION_AWARE" in self.info.capabilities


_LABEL_BOUNDS = {"elastic.tasks": (0, 1_000_000), "elastic.cores": (1, 4096)}


def check_labels(info: FrameworkInfo) -> None:
    """Check the ``elastic.*`` labels of a subscribing framework.

    Raises
    ------
    BadCallError
        ``elastic.tasks`` is not an integer from 0 to 1,000,000 (ASCII digits), ``elastic.cores`` not one
        from 1 to 4096, or an ``elastic.`` label is unknown.
    """
    path = "subscribe.framework_info.labels"
    for key, value in info.labels.items():
        if not key.startswith("elastic."):
            continue
        if key not in LABELS:
            raise BadCallError(f"{path}[{key}]", f"unknown label; the front door reads {', '.join(LABELS)}")
        bounds = _LABEL_BOUNDS.get(key)
        if bounds is None:
            continue
        low, high = bounds
        digits = value.isascii() and value.isdigit() and len(value) <= len(str(high))
        if not (digits and low <= int(value) <= high):
            raise BadCallError(f"{path}[{key}]", f"expected an integer from {low} to {high}, got {value!r}")


def stage_of(info: FrameworkInfo) -> str:
    """Return the framework's stage (see the module docstring)."""
    return info.labels.get("elastic.stage") or (info.role if info.role != "*" else info.name)


def demand(frameworks: Iterable[Framework]) -> dict[str, tuple[int, int]]:
    """Return ``{stage: (tasks wanted and not launched yet, cores per task)}`` (see the module docstring)."""
    out: dict[str, tuple[int, int]] = {}
    for fw in frameworks:
        declared = int(fw.info.labels.get("elastic.tasks", 0))
        requested = -(-fw.requested // fw.cores) - (fw.launched - fw.launched_at_request)
        want = 0 if fw.suppressed else max(1, declared - fw.launched, requested) + fw.lost
        n, cores = out.get(fw.stage, (0, 1))
        out[fw.stage] = (n + want, max(cores, fw.cores))
        if fw.growing is not None and not fw.suppressed:
            out[fw.growing] = (fw.growing_tasks, fw.cores)
    return out


def held_cores(frameworks: Iterable[Framework]) -> dict[str, int]:
    """Return the cores not to offer, by agent name.

    They are those of launched tasks not started yet, and of tasks ended whose terminal status is not sent
    yet (a framework hears that its task ended before it is offered its cores).
    """
    held: dict[str, int] = {}
    for fw in frameworks:
        for task in fw.tasks.values():
            if (task.ended or not task.started) and not task.terminal:
                held[task.agent_id] = held.get(task.agent_id, 0) + task.cores
    return held
