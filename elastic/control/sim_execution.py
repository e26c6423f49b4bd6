"""Simulated task execution for the pure-simulation mode: no processes, backend time only.

:class:`SimExecution` implements the :class:`~elastic.control.execution.Execution` contract the real pool's
adapter implements, so the run driver and the strategies cannot tell them apart. Each task takes its sampled
duration (:attr:`TaskSpec.duration`, drawn from its stage's runtime distribution) on the cores of a live
allocation. Placement follows the pool's rules: one queue ordered by stage (earlier stages first, so an
allocation that starts early takes the remaining tasks of the previous stage if they fit), any live allocation
may take any task whose cores fit, and a task is not started on an allocation whose remaining walltime is
shorter than the task's estimate while another allocation, live or requested, has enough. A task still running
when its allocation ends is lost and re-queued (bounded retries), with an estimate of at least twice the time
it ran there (:func:`~elastic.pool.placement.estimate_after_loss`).

An allocation takes its first task ``startup`` seconds after its batch job started (default 0): on a real
batch system the job's start is the scheduler's decision, and the agent still has to be launched in it
(``slurmd``'s batch step, the interpreter starting, the agent registering with the pool) before the pool
can place anything there. Its cores are held and its walltime runs from the job's start all the same.
Likewise every task holds its core ``task_overhead`` seconds longer than its duration (default 0): the
pool handing it to the agent, the agent starting its process, and its result coming back.

Completions are kept in a heap of ``(end, seq, ...)`` with ``seq`` from :func:`itertools.count` so ties
resolve in submission order and replays are identical.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from elastic.allocations import AllocationState
from elastic.control.execution import TaskSpec
from elastic.errors import ConfigError, ElasticError
from elastic.metrics import Event, EventKind
from elastic.pool.placement import (
    Offer,
    Room,
    counts_against_retries,
    estimate_after_loss,
    plan_placement,
    usable,
)

if TYPE_CHECKING:
    pass

__all__ = ["SimExecution", "TaskRetriesExhaustedError"]

logger = logging.getLogger(__name__)


class TaskRetriesExhaustedError(ElasticError, RuntimeError):
    """A task was lost more often than allowed.

    Parameters
    ----------
    task_id : str
        The task.
    allocations : list of str
        Allocations it was lost on, in order.
    """

    def __init__(self, task_id: str, allocations: list[str]) -> None:
        self.task_id = task_id
        self.allocations = allocations
        super().__init__(
            f"task {task_id!r} was lost {len(allocations)} times (allocations {', '.join(allocations)}), "
            "more than max_retries without running longer each time: its allocations end before it can "
            "finish; request longer walltimes or raise max_retries"
        )


@dataclass(slots=True)
class _Live:
    alloc_id: str
    cores: int
    walltime_end: float
    free: int
    stage: str | None = None
    ready: float = float("-inf")
    running: dict[str, tuple[float, TaskSpec]] = field(default_factory=dict)


class SimExecution:
    """Execution that simulates tasks in backend time.

    Parameters
    ----------
    max_retries : int, default 3
        A task lost more than this many times fails the run (:class:`TaskRetriesExhaustedError`); a lost
        attempt that outlived what was expected of it is not counted (the pool's rule,
        :func:`~elastic.pool.placement.counts_against_retries`).
    drain_margin : float, default 30.0
        An allocation with this many backend seconds of walltime left or less takes no new task (the
        pool's rule, :func:`~elastic.pool.placement.usable`).
    startup : float, default 0.0
        Backend seconds from an allocation's start until it takes its first task: the pilot's launch and
        its agent's registration, which a simulated run does not otherwise have. 0 places tasks at the
        start. ``benchmarks/slurm_oracle.py --measure-launch`` measures it on a local Slurm cluster.
    task_overhead : float, default 0.0
        Backend seconds every task attempt runs beyond its sampled duration (dispatch to the agent,
        process start, result back); measured by the same benchmark.
    drop_exhausted : bool, default False
        What a task lost more than ``max_retries`` times does: False, fail the run (raise
        :class:`TaskRetriesExhaustedError`, as a declared workflow cannot complete without it); True, drop
        it (a TASK_DROPPED event after its TASK_LOST, the error kept in :attr:`dropped`) and go on, as the
        pool fails only that task's future on the front door.

    Attributes
    ----------
    tasks_ended : int
        Task attempts that ended so far (read by a progress line from another thread, as a long
        simulation goes on: :func:`elastic.experiments.simulate_runs` ``progress``).

    Examples
    --------
    >>> ex = SimExecution()
    >>> ex.submit(TaskSpec("s.0", "s", 1, cores=1, estimate=10.0, duration=10.0))
    >>> ex.add_allocation("a1", cores=1, walltime_end=100.0, at=5.0)
    >>> [(e.kind.value, e.time) for e in ex.advance(20.0)]
    [('task_start', 5.0), ('task_end', 15.0)]
    """

    def __init__(
        self,
        *,
        max_retries: int = 3,
        drain_margin: float = 30.0,
        startup: float = 0.0,
        task_overhead: float = 0.0,
        drop_exhausted: bool = False,
    ) -> None:
        if drain_margin < 0:
            raise ConfigError(f"SimExecution: drain_margin must be >= 0 seconds, got {drain_margin!r}")
        for name, value in (("startup", startup), ("task_overhead", task_overhead)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"SimExecution: {name} must be finite seconds >= 0, got {value!r}")
        self.max_retries = max_retries
        self.drain_margin = drain_margin
        self.startup = float(startup)
        self.task_overhead = float(task_overhead)
        self.drop_exhausted = drop_exhausted
        self.dropped: dict[str, TaskRetriesExhaustedError] = {}
        """Tasks dropped for being lost too often (``drop_exhausted``), with why."""
        self._now = float("-inf")
        self._queue: list[tuple[int, int, TaskSpec]] = []
        self._live: dict[str, _Live] = {}
        self._heap: list[tuple[float, int, str, str]] = []  # (end, seq, alloc_id, task_id)
        self._seq = itertools.count()
        self._pending: list[Event] = []
        self._losses: dict[str, list[str]] = {}
        self._ran: dict[str, list[float]] = {}  # per task, how long each lost attempt ran
        self._counted: dict[str, int] = {}  # per task, its losses counted against max_retries
        self._held: set[str] = set()  # lost tasks waiting for the driver's next decision (decided())
        self._requested: dict[str, tuple[int, float]] = {}  # submitted, not started: (cores, walltime)
        self._stages: dict[str, str] = {}  # submitted, not started: the stage it was requested for
        self._busy_changes = 0
        """Counts the changes of any allocation's busy cores (:meth:`busy_version`)."""
        self._quiet: float | None = None
        """The time of the last placement pass that placed nothing, while nothing it read changed since
        (the queue, the allocations and their free cores, the held tasks): a pass at that same time
        would place nothing again. A step passes over the queue several times at one time."""
        self._quiet_until: float | None = None
        """Found at the first pass after :attr:`_quiet` (:meth:`_placement_holds_until`): every pass
        before it places nothing either, while nothing changed. A run of days polls every 30 s."""
        self.tasks_ended = 0

    @property
    def now(self) -> float:
        """Backend time the simulation of the tasks has reached (``-inf`` before any allocation)."""
        return self._now

    # -- the Execution contract -----------------------------------------------------------------------

    def add_allocation(self, alloc_id: str, cores: int, walltime_end: float, at: float) -> None:
        """Allocation ``alloc_id`` started at ``at``; tasks may be placed on it from then on."""
        self._requested.pop(alloc_id, None)
        stage = self._stages.pop(alloc_id, None)
        self._quiet = self._quiet_until = None
        self._busy_changes += 1
        self._live[alloc_id] = _Live(alloc_id, cores, walltime_end, cores, stage, ready=at + self.startup)
        self._run_until(at)
        self._dispatch(max(at, self._now))

    def allocation_ended(
        self,
        alloc_id: str,
        at: float,
        state: AllocationState = AllocationState.CANCELLED,
        start: float | None = None,
    ) -> None:
        """Allocation ``alloc_id`` ended at ``at``: its running tasks are lost and re-queued.

        ``start`` (the start learned with the end) changes nothing here: no task was dispatched to it.
        """
        self._run_until(at)
        self._quiet = self._quiet_until = None
        self._busy_changes += 1
        self._requested.pop(alloc_id, None)
        self._stages.pop(alloc_id, None)
        live = self._live.pop(alloc_id, None)
        if live is None:
            return
        for task_id, (started, task) in sorted(live.running.items()):
            self._pending.append(_event(EventKind.TASK_LOST, at, alloc_id, task_id, task))
            lost_on = self._losses.setdefault(task_id, [])
            lost_on.append(alloc_id)
            earlier = self._ran.setdefault(task_id, [])
            if counts_against_retries(at - started, earlier, task.estimate):
                self._counted[task_id] = self._counted.get(task_id, 0) + 1
            earlier.append(at - started)
            if self._counted.get(task_id, 0) > self.max_retries:
                if not self.drop_exhausted:
                    raise TaskRetriesExhaustedError(task_id, lost_on)
                self.dropped[task_id] = TaskRetriesExhaustedError(task_id, lost_on)
                self._pending.append(_event(EventKind.TASK_DROPPED, at, alloc_id, task_id, task))
                continue
            estimate = estimate_after_loss(task.estimate, at - started)
            task = dataclasses.replace(task, estimate=task.estimate if estimate is None else estimate)
            bisect.insort(self._queue, (task.order, next(self._seq), task), key=_queue_key)
            # until the driver has decided after this loss (it may ask for an allocation long enough),
            # the task takes only an allocation with the time for it, never the "most time left" one
            self._held.add(task_id)
        self._dispatch(max(at, self._now))

    def register(self, alloc_id: str, cores: int, walltime: float, stage: str) -> None:
        """Note the requested allocation (for walltime-aware placement)."""
        self._requested[alloc_id] = (cores, walltime)
        self._stages[alloc_id] = stage
        self._quiet = self._quiet_until = None

    def submitted(self, alloc_id: str, job_id: str) -> None:
        """Nothing to do: simulated tasks need no batch job id."""

    def job_script(self, alloc_id: str, cores: int, walltime: float, stage: str) -> str | None:
        """Return None: no agent runs."""
        return None

    def decided(self) -> None:
        """Let the tasks lost before the driver's decision take any allocation now.

        As the pool does (:meth:`~elastic.pool.pool.Pool.decided`): a task lost when its allocation ended
        waits for the decision before it may start on an allocation that cannot run it to its end, so a
        follow-up the decision requested is waited for instead of a retry being spent.
        """
        if self._held:
            self._held.clear()
            self._quiet = self._quiet_until = None
            self._dispatch(self._now)

    def release(self, alloc_id: str) -> None:
        """Nothing to do: on the virtual clock a cancel takes effect before any task is placed again."""

    def submit(self, task: TaskSpec) -> None:
        """Queue ``task`` (placed at the next :meth:`advance`)."""
        bisect.insort(self._queue, (task.order, next(self._seq), task), key=_queue_key)
        self._quiet = self._quiet_until = None

    def advance(self, now: float) -> list[Event]:
        """Complete tasks ending up to ``now`` (placing queued ones as cores free up); return the events."""
        self._run_until(now)
        self._dispatch(max(now, self._now))
        out, self._pending = self._pending, []
        return out

    def next_event_time(self) -> float | None:
        """When the next running task ends, or the next started allocation takes tasks (``startup``)."""
        times = [t for t in (self._heap[0][0] if self._heap else None, self._next_ready()) if t is not None]
        return min(times) if times else None

    def busy_cores(self, alloc_id: str) -> int:
        """Cores of ``alloc_id`` running tasks."""
        live = self._live.get(alloc_id)
        return 0 if live is None else live.cores - live.free

    def busy_version(self) -> int:
        """Return a number that changes whenever :meth:`busy_cores` of any allocation may have changed.

        (:class:`~elastic.control.execution.ReportsBusyChanges`.)
        """
        return self._busy_changes

    def close(self) -> None:
        """Nothing to release."""

    # -- simulation ---------------------------------------------------------------------------------

    def _next_ready(self) -> float | None:
        """Return the earliest time after now at which a started allocation becomes ready for tasks."""
        if not self.startup:
            return None
        later = [a.ready for a in self._live.values() if a.ready > self._now]
        return min(later) if later else None

    def _run_until(self, t: float) -> None:
        while True:
            ready = self._next_ready()
            if ready is not None and ready <= t and not (self._heap and self._heap[0][0] < ready):
                self._now = ready
                self._dispatch(ready)
                continue
            if not (self._heap and self._heap[0][0] <= t):
                break
            end, _, alloc_id, task_id = heapq.heappop(self._heap)
            live = self._live.get(alloc_id)
            if live is None or task_id not in live.running:
                continue  # lost when its allocation ended
            _, task = live.running.pop(task_id)
            live.free += task.cores
            self._quiet = self._quiet_until = None
            self._busy_changes += 1
            self._now = max(self._now, end)
            self._pending.append(_event(EventKind.TASK_END, end, alloc_id, task_id, task))
            self.tasks_ended += 1
            self._dispatch(end)
        self._now = max(self._now, t)

    def _dispatch(self, t: float) -> None:
        if not self._queue or not self._live:
            return
        quiet = self._quiet
        if quiet is not None and t >= quiet:
            if t == quiet:
                return
            if self._quiet_until is None:
                self._quiet_until = self._placement_holds_until(quiet)
            if t < self._quiet_until:
                return
        offers = [
            Offer(a.alloc_id.encode(), a.alloc_id, a.free, a.walltime_end - t, a.stage)
            for a in self._live.values()
            if a.free > 0 and a.ready <= t and usable(a.walltime_end - t, self.drain_margin)
        ]
        if not offers:
            self._quiet = t
            return
        # what other allocations have (cores, walltime left) is the same for every task of this pass:
        # found once, not per queued task (hundreds queued on a wide DAG made it most of a run's cost)
        room = Room(self._capacities(t))
        held = self._held
        placed = plan_placement(
            (item[2] for item in self._queue),
            offers,
            lambda task: task.task_id in held or room.has(task),
            room.has,
            kind=lambda task: task.task_id in held,  # all either answer reads besides cores and estimate
        )
        if not placed:
            self._quiet = t
            return
        self._busy_changes += 1
        # the placed tasks come in queue order: found by walking the queue up to the last one only
        queue = self._queue
        positions: list[int] = []
        at = 0
        for task, _ in placed:
            while queue[at][2] is not task:
                at += 1
            positions.append(at)
            at += 1
        for at in reversed(positions):
            del queue[at]
        for task, offer in placed:
            target = self._live[offer.alloc_id]
            target.free -= task.cores
            target.running[task.task_id] = (t, task)
            end = t + task.duration + self.task_overhead
            heapq.heappush(self._heap, (end, next(self._seq), target.alloc_id, task.task_id))
            self._pending.append(_event(EventKind.TASK_START, t, target.alloc_id, task.task_id, task))

    def _placement_holds_until(self, t: float) -> float:
        """Return a time before which a pass places nothing, as the pass at ``t`` did (nothing changed since).

        Between changes of state, a pass reads the clock only in comparisons of an allocation's walltime
        left (``walltime_end - t``) with the drain margin, with a queued task's estimate (or half of it),
        with another's walltime left (which keeps its order) and of a requested allocation's walltime
        with an offer's walltime left; and in the start of an allocation's first task (``startup``). Each
        can change its answer only once its time comes, so the soonest of those times, less a margin for
        rounding, bounds the passes that place nothing. ``t`` itself (no promise) where two allocations
        end within that margin of each other, or where finding the times would cost more than the pass.
        """
        live = list(self._live.values())
        needs = {item[2].estimate or 0.0 for item in self._queue}
        if len(live) * (len(needs) + len(self._requested)) > _MOST_TIMES:
            return t
        ends = sorted(a.walltime_end for a in live)
        if any(0.0 < b - a <= _ROUNDING for a, b in itertools.pairwise(ends)):
            return t
        times = [a.ready for a in live if a.ready > t]
        walltimes = [walltime for _, walltime in self._requested.values()]
        for end in ends:
            times.append(end - self.drain_margin)
            times.extend(end - walltime for walltime in walltimes)
            for need in needs:
                times += (end - need, end - need / 2)
        soonest = min((x for x in times if x > t - 1.0), default=math.inf)  # those long past have flipped
        return max(t, soonest - _ROUNDING)

    def _capacities(self, t: float) -> list[tuple[int, float]]:
        """``(cores, walltime left)`` of every allocation live (not draining) or requested, at ``t``.

        A queued task may wait for one of them (:func:`~elastic.pool.placement.has_room`).
        """
        live = [(a.cores, a.walltime_end - t) for a in self._live.values()]
        return [(c, left) for c, left in live if usable(left, self.drain_margin)] + list(
            self._requested.values()
        )


_ROUNDING = 1e-3
"""Backend seconds of margin on a time found from a walltime end (``SimExecution._placement_holds_until``)."""

_MOST_TIMES = 4096
"""Most (allocations x (kinds of queued task + requested allocations)) for which those times are found."""


def _queue_key(item: tuple[int, int, TaskSpec]) -> tuple[int, int]:
    return item[0], item[1]


def _event(kind: EventKind, at: float, alloc_id: str, task_id: str, task: TaskSpec) -> Event:
    return Event(at, kind, stage=task.stage, allocation=alloc_id, task=task_id, cores=task.cores)
