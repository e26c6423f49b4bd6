"""The simulator's job table: one row per job, stored column-wise in plain Python lists.

The event loop touches a few fields of a few jobs per event, hundreds of thousands of times per run.
Plain lists indexed by an integer job index are the fastest structure CPython offers for that (numpy
element access from Python is several times slower, and one object per job costs an allocation and an
attribute lookup per field). The table is turned into a pandas DataFrame only at the end
(:meth:`JobTable.frame`).

Job states are small integers in the loop and :class:`~elastic.batch.JobState` at the edge.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from elastic.batch import DependencyKind, JobState

if TYPE_CHECKING:
    import pandas as pd

    from elastic.simulator.workload import Workload

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "FUTURE",
    "PENDING",
    "RUNNING",
    "STATES",
    "TIMEOUT",
    "DepRecord",
    "JobTable",
]

FUTURE = -1
"""Preloaded background job whose submit time has not come yet (invisible to the backend API)."""
PENDING = 0
"""In the system, not started (or requeued after a failed speculative run)."""
RUNNING = 1
"""Holding its cores."""
COMPLETED = 2
"""Ended by itself within its walltime (or its pilot process exited with code 0)."""
FAILED = 3
"""Its pilot process exited with a non-zero code."""
TIMEOUT = 4
"""Killed at start + walltime."""
CANCELLED = 5
"""Cancelled before or after it started."""

#: State code -> :class:`JobState` (index by code).
STATES: tuple[JobState, ...] = (
    JobState.PENDING,
    JobState.RUNNING,
    JobState.COMPLETED,
    JobState.FAILED,
    JobState.TIMEOUT,
    JobState.CANCELLED,
)

_DEP_CODES = {
    DependencyKind.AFTER: 0,
    DependencyKind.AFTEROK: 1,
    DependencyKind.AFTERANY: 2,
    DependencyKind.AFTERNOTOK: 3,
}


@dataclass(slots=True)
class DepRecord:
    """One dependency of a job on a parent job (mutable: its status changes as the parent runs).

    Attributes
    ----------
    kind : DependencyKind
        The Slurm dependency type.
    parent : int
        Job index of the parent.
    status : int
        0 = not yet satisfied, 1 = satisfied, 2 = can never be satisfied.
    """

    kind: DependencyKind
    parent: int
    status: int = 0

    def evaluate(self, parent_state: int, parent_started: bool) -> int:
        """Return the status this dependency has given the parent's state (Slurm semantics).

        ``after``: the parent started or was cancelled. ``afterok``: the parent COMPLETED (never, if it
        ended otherwise). ``afterany``: the parent ended. ``afternotok``: the parent FAILED, TIMED OUT or
        was CANCELLED (never, if it COMPLETED).
        """
        code = _DEP_CODES[self.kind]
        final = parent_state >= COMPLETED
        if code == 0:
            return 1 if (parent_started or parent_state == CANCELLED) else 0
        if not final:
            return 0
        if code == 1:
            return 1 if parent_state == COMPLETED else 2
        if code == 2:
            return 1
        return 2 if parent_state == COMPLETED else 1


@dataclass(slots=True)
class JobTable:
    """Column-wise store of every job the engine knows (background and submitted ones).

    All list attributes have one entry per job index. Times are simulated seconds; ``nan`` means
    "not yet" (start, end) and ``inf`` runtime means "runs until cancelled or killed at walltime".
    """

    job_id: list[Hashable] = field(default_factory=list)
    name: list[str | None] = field(default_factory=list)
    user: list[Hashable] = field(default_factory=list)
    cores: list[int] = field(default_factory=list)
    whole: list[int] = field(default_factory=list)
    """Whole nodes requested (0 = a cores request, or a nodes request on 1-core nodes)."""
    walltime: list[float] = field(default_factory=list)
    runtime: list[float] = field(default_factory=list)
    submit: list[float] = field(default_factory=list)
    begin: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    state: list[int] = field(default_factory=list)
    rank: list[float] = field(default_factory=list)
    """Queue priority: lower runs first. Assigned on arrival (first come, first served)."""
    background: list[bool] = field(default_factory=list)
    notify: list[bool] = field(default_factory=list)
    """Whether the engine's observer is told when this job starts and ends."""
    exit_code: list[int | None] = field(default_factory=list)
    requeues: list[int] = field(default_factory=list)
    est_end: list[float] = field(default_factory=list)
    """Time the scheduler expects the running job to release its cores (start + walltime, or kill time)."""
    plan_end: list[float] = field(default_factory=list)
    """Time the running job really ends (its event time)."""
    plan_state: list[int] = field(default_factory=list)
    """State the running job ends in at ``plan_end``; PENDING means "requeue" (failed speculation)."""
    speculated: list[bool] = field(default_factory=list)
    attempts: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    """Failed speculative runs of requeued jobs: ``(start, kill time)`` pairs."""
    deps: dict[int, list[DepRecord]] = field(default_factory=dict)
    children: dict[int, list[int]] = field(default_factory=dict)
    dep_pending: dict[int, int] = field(default_factory=dict)
    dep_never: set[int] = field(default_factory=set)

    def __len__(self) -> int:
        return len(self.cores)

    def load(self, workload: Workload) -> None:
        """Append every job of ``workload`` as a not-yet-arrived background job."""
        n = len(workload)
        nan = math.nan
        self.job_id.extend(workload.job_id.tolist())
        self.name.extend([None] * n)
        self.user.extend(workload.user.tolist())
        self.cores.extend(workload.cores.tolist())
        self.whole.extend([0] * n)
        self.walltime.extend(workload.walltime.tolist())
        self.runtime.extend(workload.runtime.tolist())
        self.submit.extend(workload.submit.tolist())
        self.begin.extend([-math.inf] * n)
        self.start.extend([nan] * n)
        self.end.extend([nan] * n)
        self.state.extend([FUTURE] * n)
        self.rank.extend([nan] * n)
        self.background.extend([True] * n)
        self.notify.extend([False] * n)
        self.exit_code.extend([None] * n)
        self.requeues.extend([0] * n)
        self.est_end.extend([nan] * n)
        self.plan_end.extend([nan] * n)
        self.plan_state.extend([PENDING] * n)
        self.speculated.extend([False] * n)

    def append(
        self,
        *,
        job_id: Hashable,
        name: str | None,
        user: Hashable,
        cores: int,
        whole: int,
        walltime: float,
        runtime: float,
        submit: float,
        begin: float,
        background: bool,
        notify: bool,
    ) -> int:
        """Append one job in state FUTURE and return its index."""
        nan = math.nan
        self.job_id.append(job_id)
        self.name.append(name)
        self.user.append(user)
        self.cores.append(cores)
        self.whole.append(whole)
        self.walltime.append(walltime)
        self.runtime.append(runtime)
        self.submit.append(submit)
        self.begin.append(begin)
        self.start.append(nan)
        self.end.append(nan)
        self.state.append(FUTURE)
        self.rank.append(nan)
        self.background.append(background)
        self.notify.append(notify)
        self.exit_code.append(None)
        self.requeues.append(0)
        self.est_end.append(nan)
        self.plan_end.append(nan)
        self.plan_state.append(PENDING)
        self.speculated.append(False)
        return len(self.cores) - 1

    def frame(self) -> pd.DataFrame:
        """Return the per-job records as a DataFrame, one row per job that has arrived.

        Returns
        -------
        pandas.DataFrame
            Columns: ``index, job_id, name, user, cores, submit, begin, start, end, walltime, runtime,
            state, wait, response, background, exit_code, requeues``. ``runtime`` is the actual runtime
            (``inf`` for jobs that run until cancelled or killed), ``state`` a :class:`JobState` value
            string, ``wait = start - submit`` and ``response = end - submit`` (NaN when not yet known).
        """
        import numpy as np
        import pandas as pd

        state = np.asarray(self.state, dtype=np.int64)
        keep = state != FUTURE
        names = np.array([s.value for s in STATES], dtype=object)
        submit = np.asarray(self.submit, dtype=np.float64)
        start = np.asarray(self.start, dtype=np.float64)
        end = np.asarray(self.end, dtype=np.float64)
        frame = pd.DataFrame(
            {
                "index": np.arange(len(state), dtype=np.int64),
                "job_id": pd.Series(self.job_id, dtype=object),
                "name": pd.Series(self.name, dtype=object),
                "user": pd.Series(self.user, dtype=object),
                "cores": np.asarray(self.cores, dtype=np.int64),
                "submit": submit,
                "begin": np.maximum(np.asarray(self.begin, dtype=np.float64), submit),
                "start": start,
                "end": end,
                "walltime": np.asarray(self.walltime, dtype=np.float64),
                "runtime": np.asarray(self.runtime, dtype=np.float64),
                "state": names[np.where(keep, state, 0)],
                "wait": start - submit,
                "response": end - submit,
                "background": np.asarray(self.background, dtype=bool),
                "exit_code": pd.Series(self.exit_code, dtype=object),
                "requeues": np.asarray(self.requeues, dtype=np.int64),
            }
        )
        out: pd.DataFrame = frame.loc[keep].reset_index(drop=True)
        return out
