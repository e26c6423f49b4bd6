"""Simulated task execution for the pure-simulation mode: no processes, backend time only.

:class:`SimExecutor` implements the :class:`~elastic.execution.Executor` contract the real pool's adapter
implements, so the run driver and the strategies cannot tell them apart. Each task takes its sampled
duration (:attr:`TaskSpec.duration`, drawn from its stage's runtime distribution) on the cores of a live
allocation. Placement follows the pool's rules: one queue ordered by stage (earlier stages first, so an
allocation that starts early takes the remaining tasks of the previous stage if they fit), any live
allocation may take any task whose cores fit, and a task is not started on an allocation whose remaining
walltime is shorter than the task's estimate while another allocation, live or requested, has enough. A
task still running when its allocation ends is lost and re-queued (bounded retries).

Completions are kept in a heap of ``(end, seq, ...)`` with ``seq`` from :func:`itertools.count` so ties
resolve in submission order and replays are identical.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from elastic.backends.base import JobState
from elastic.errors import ConfigError, ElasticError
from elastic.execution import RunResult, TaskSpec
from elastic.metrics import Event, EventKind
from elastic.simulator.workload import Workload
from elastic.workflow import Workflow

if TYPE_CHECKING:
    from elastic.strategies.knowledge import RuntimeHistory, WaitStore
    from learners.base import WaitPredictor

__all__ = [
    "DEFAULT_PROCESSORS",
    "SimExecutor",
    "TaskRetriesExhaustedError",
    "default_background",
    "simulate_runs",
    "start_points",
    "window",
]

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
            f"task {task_id!r} was lost {len(allocations)} times (allocations {', '.join(allocations)}): "
            "its allocations end before it can finish; request longer walltimes or raise max_retries"
        )


@dataclass(slots=True)
class _Live:
    alloc_id: str
    cores: int
    walltime_end: float
    free: int
    running: dict[str, tuple[float, TaskSpec]] = field(default_factory=dict)


class SimExecutor:
    """Executor that simulates tasks in backend time.

    Parameters
    ----------
    max_retries : int, default 3
        A task lost more than this many times fails the run (:class:`TaskRetriesExhaustedError`).

    Examples
    --------
    >>> ex = SimExecutor()
    >>> ex.submit(TaskSpec("s.0", "s", 1, cores=1, estimate=10.0, duration=10.0))
    >>> ex.add_allocation("a1", cores=1, walltime_end=100.0, at=5.0)
    >>> [(e.kind.value, e.time) for e in ex.advance(20.0)]
    [('task_start', 5.0), ('task_end', 15.0)]
    """

    def __init__(self, *, max_retries: int = 3) -> None:
        self.max_retries = max_retries
        self._now = float("-inf")
        self._queue: list[tuple[int, int, TaskSpec]] = []
        self._live: dict[str, _Live] = {}
        self._heap: list[tuple[float, int, str, str]] = []  # (end, seq, alloc_id, task_id)
        self._seq = itertools.count()
        self._pending: list[Event] = []
        self._losses: dict[str, list[str]] = {}
        self._requested: dict[str, tuple[int, float]] = {}  # submitted, not started: (cores, walltime)

    # -- the Executor contract -----------------------------------------------------------------------

    def add_allocation(self, alloc_id: str, cores: int, walltime_end: float, at: float) -> None:
        """Allocation ``alloc_id`` started at ``at``; tasks may be placed on it from then on."""
        self._requested.pop(alloc_id, None)
        self._live[alloc_id] = _Live(alloc_id, cores, walltime_end, cores)
        self._run_until(at)
        self._dispatch(max(at, self._now))

    def allocation_ended(self, alloc_id: str, at: float, state: JobState = JobState.CANCELLED) -> None:
        """Allocation ``alloc_id`` ended at ``at``: its running tasks are lost and re-queued."""
        self._run_until(at)
        self._requested.pop(alloc_id, None)
        live = self._live.pop(alloc_id, None)
        if live is None:
            return
        for task_id, (_, task) in sorted(live.running.items()):
            self._pending.append(
                Event(
                    at,
                    EventKind.TASK_LOST,
                    stage=task.stage,
                    allocation=alloc_id,
                    task=task_id,
                    cores=task.cores,
                )
            )
            lost_on = self._losses.setdefault(task_id, [])
            lost_on.append(alloc_id)
            if len(lost_on) > self.max_retries:
                raise TaskRetriesExhaustedError(task_id, lost_on)
            heapq.heappush(self._queue, (task.order, next(self._seq), task))
        self._dispatch(max(at, self._now))

    def job_script(self, alloc_id: str, cores: int, walltime: float, stage: str) -> str | None:
        """Note the requested allocation (for walltime-aware placement); return None: no agent runs."""
        self._requested[alloc_id] = (cores, walltime)
        return None

    def release(self, alloc_id: str) -> None:
        """Nothing to do: on the virtual clock a cancel takes effect before any task is placed again."""

    def submit(self, task: TaskSpec) -> None:
        """Queue ``task`` (placed at the next :meth:`advance`)."""
        heapq.heappush(self._queue, (task.order, next(self._seq), task))

    def advance(self, now: float) -> list[Event]:
        """Complete tasks ending up to ``now`` (placing queued ones as cores free up); return the events."""
        self._run_until(now)
        self._dispatch(max(now, self._now))
        out, self._pending = self._pending, []
        return out

    def next_event_time(self) -> float | None:
        """When the next running task ends."""
        return self._heap[0][0] if self._heap else None

    def busy_cores(self, alloc_id: str) -> int:
        """Cores of ``alloc_id`` running tasks."""
        live = self._live.get(alloc_id)
        return 0 if live is None else live.cores - live.free

    def close(self) -> None:
        """Nothing to release."""

    # -- simulation ---------------------------------------------------------------------------------

    def _run_until(self, t: float) -> None:
        while self._heap and self._heap[0][0] <= t:
            end, _, alloc_id, task_id = heapq.heappop(self._heap)
            live = self._live.get(alloc_id)
            if live is None or task_id not in live.running:
                continue  # lost when its allocation ended
            _, task = live.running.pop(task_id)
            live.free += task.cores
            self._now = max(self._now, end)
            self._pending.append(
                Event(
                    end,
                    EventKind.TASK_END,
                    stage=task.stage,
                    allocation=alloc_id,
                    task=task_id,
                    cores=task.cores,
                )
            )
            self._dispatch(end)
        self._now = max(self._now, t)

    def _dispatch(self, t: float) -> None:
        if not self._queue or not self._live:
            return
        skipped: list[tuple[int, int, TaskSpec]] = []
        while self._queue:
            item = heapq.heappop(self._queue)
            task = item[2]
            target = self._place(task, t)
            if target is None:
                skipped.append(item)
                continue
            target.free -= task.cores
            target.running[task.task_id] = (t, task)
            heapq.heappush(self._heap, (t + task.duration, next(self._seq), target.alloc_id, task.task_id))
            self._pending.append(
                Event(
                    t,
                    EventKind.TASK_START,
                    stage=task.stage,
                    allocation=target.alloc_id,
                    task=task.task_id,
                    cores=task.cores,
                )
            )
        for item in skipped:
            heapq.heappush(self._queue, item)

    def _place(self, task: TaskSpec, t: float) -> _Live | None:
        """Pick the allocation for ``task``: enough free cores, preferring one whose walltime suffices."""
        fits = [a for a in self._live.values() if a.free >= task.cores and a.walltime_end > t]
        if not fits:
            return None
        enough = [a for a in fits if a.walltime_end - t >= task.estimate]
        if enough:
            return enough[0]
        # None has time enough: wait for one that will (live with enough walltime left, or requested with
        # a long enough walltime and enough cores), else run it anyway - it may finish (the estimate is a
        # mean) or be lost and re-run on a follow-up.
        if any(a.walltime_end - t >= task.estimate for a in self._live.values()):
            return None
        if any(c >= task.cores and w >= task.estimate for c, w in self._requested.values()):
            return None
        return fits[0]


# -- the pure-simulation mode ---------------------------------------------------------------------------

DEFAULT_PROCESSORS = 128
"""Cores of the simulated partition when no trace is given."""


def window(workload: Workload, start: float, end: float) -> Workload:
    """Return the background jobs submitted in ``[start, end)``, with submit times shifted by ``-start``.

    ``read_swf(window=...)`` does this while reading a file; here one trace read once is cut into the
    windows of many runs without reading it again.
    """
    keep = (workload.submit >= start) & (workload.submit < end)
    return Workload(
        job_id=workload.job_id[keep],
        submit=workload.submit[keep] - start,
        cores=workload.cores[keep],
        runtime=workload.runtime[keep],
        walltime=workload.walltime[keep],
        user=workload.user[keep],
        recorded_wait=workload.recorded_wait[keep],
        processors=workload.processors,
        source=f"{workload.source} [{start:.0f}, {end:.0f})",
    )


def default_background(processors: int = DEFAULT_PROCESSORS, *, seed: int = 0) -> Workload:
    """Synthetic background load for pure simulation: 90 % offered load on ``processors`` cores."""
    from elastic.simulator.synthetic import synthetic_workload

    return synthetic_workload(
        jobs=6000, processors=processors, utilisation=0.9, max_cores=processors // 2, seed=seed
    )


def start_points(
    background: Workload, runs: int, *, seed: int = 0, warmup: float = 86400.0, horizon: float = 4 * 86400.0
) -> npt.NDArray[np.float64]:
    """Draw where in the background each run starts: uniform, after ``warmup``, ``horizon`` before its end."""
    rng = np.random.default_rng(seed)
    last = float(background.submit[-1]) if len(background) else 0.0
    return rng.uniform(warmup, max(warmup, last - horizon), size=runs)


def simulate_runs(
    workflow: Workflow,
    strategy: str,
    *,
    runs: int = 1,
    seed: int = 0,
    background: Workload | None = None,
    policy: str = "easy",
    mode: str = "replay",
    reserve: int = 0,
    learner: str = "tuned",
    warmup: float = 86400.0,
    horizon: float = 4 * 86400.0,
    poll_interval: float = 30.0,
    strategy_options: Mapping[str, Any] | None = None,
    waits: WaitPredictor | None = None,
    history: RuntimeHistory | None = None,
    wait_store: WaitStore | None = None,
) -> list[RunResult]:
    """Run ``workflow`` ``runs`` times under ``strategy`` in pure simulation (virtual clock, no processes).

    Run ``i`` starts at a point of the background load drawn from ``seed`` (the same points for every
    strategy, so strategies are compared on the same queue states), after ``warmup`` seconds of
    background so the queue is busy. One ASA learner and one runtime history are shared by the runs, in
    order, as in the paper (the strategy learns across runs). Same arguments, same results.

    Parameters
    ----------
    workflow : Workflow
        What to run.
    strategy : str
        Registry name (``bigjob``, ``perstage``, ``asa``, ``asa-naive``).
    runs : int, default 1
        How many runs.
    seed : int, default 0
        Seeds start points, task durations and the learner.
    background : Workload or None, default None
        Background jobs (a trace); ``None`` = :func:`default_background`. The partition has
        ``background.processors`` cores.
    policy : str, default "easy"
        Queue policy of the mock backend (``conservative`` or ``fcfs`` with a recorded ``mode``).
    mode : {"replay", "recorded", "recorded-chain", "calibrated", "capacity"}, default "replay"
        How the background loads the queue (:class:`~elastic.backends.mock.MockBackend` ``mode``):
        the recorded modes need a trace and give waits like the traced centre's.
    reserve : int, default 0
        ``mode="calibrated"``: cores withheld from queued jobs (fit it once with
        :func:`~elastic.simulator.fidelity.calibrate_reserve`).
    learner : {"default", "tuned", "greedy"}, default "tuned"
        Policy of the ASA wait learner.
    warmup, horizon : float
        Background seconds simulated before each run starts, and kept after it.
    poll_interval : float, default 30.0
        Driver poll interval, backend seconds.
    strategy_options : mapping or None
        Extra keyword arguments for the strategy.
    waits, history, wait_store : optional
        Wait learner, runtime history and wait store to use (e.g. the project's store); default a fresh
        ASA learner (policy ``learner``) and an in-memory history.

    Returns
    -------
    list of RunResult
    """
    from elastic.backends.mock import MockBackend
    from elastic.runner import Runner
    from elastic.strategies import Knowledge, MemoryHistory, make_strategy
    from learners.asa import ASAEstimator

    if runs < 1:
        raise ConfigError(f"runs must be >= 1, got {runs}")
    if background is None:
        background = default_background(seed=seed)
    if workflow.max_width > background.processors:
        raise ConfigError(
            f"workflow {workflow.name!r} needs {workflow.max_width} cores but the partition has "
            f"{background.processors}; use a larger trace or --processors"
        )
    starts = start_points(background, runs, seed=seed, warmup=warmup, horizon=horizon)
    if waits is None:
        waits = ASAEstimator(policy=learner, random_state=seed)
    if history is None:
        history = MemoryHistory()
    results = []
    for i, start in enumerate(starts):
        backend = MockBackend(
            nodes=background.processors,
            cores_per_node=1,
            policy=policy,
            workload=window(background, start - warmup, start + horizon),
            start=warmup,
            mode=mode,
            reserve=reserve,
        )
        knowledge = Knowledge(workflow, waits=waits, history=history, wait_store=wait_store, backend="mock")
        runner = Runner(
            workflow,
            make_strategy(strategy, **(strategy_options or {})),
            backend,
            SimExecutor(),
            knowledge,
            seed=seed * 100_003 + i,
            poll_interval=poll_interval,
            max_duration=horizon,
        )
        try:
            results.append(runner.run())
        finally:
            backend.close()
    return results
