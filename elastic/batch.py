"""The batch vocabulary: job states, pending reasons, dependencies, job specs and snapshots.

This is the ground floor shared by the simulator, the backends, the pool and run control: every batch
system (the mock backend's simulated queue, real Slurm) is described in these records, so nothing above
sees Slurm's strings (only :mod:`elastic.backends` translate them) and the simulator does not depend on
the backends. The contract a backend fulfils, :class:`~elastic.backends.base.BatchBackend`, lives with
the backends.

Times are ``float`` seconds on the backend's own clock: epoch seconds for Slurm, simulated seconds for
the mock backend.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from elastic.errors import ConfigError
from elastic.limits import MAX_WALLTIME

__all__ = [
    "Dependency",
    "DependencyKind",
    "JobInfo",
    "JobSpec",
    "JobState",
    "PartitionInfo",
    "PendingReason",
]


class JobState(str, enum.Enum):
    """State of one batch job (an allocation, or a background job of the mock backend)."""

    PENDING = "PENDING"
    """Waiting in the queue; :class:`PendingReason` says why."""
    RUNNING = "RUNNING"
    """Holding its cores."""
    COMPLETED = "COMPLETED"
    """Ended by itself with exit code 0."""
    FAILED = "FAILED"
    """Ended by itself with a non-zero exit code."""
    TIMEOUT = "TIMEOUT"
    """Killed at its walltime limit. Normal for pilot allocations: the pool drains them before."""
    CANCELLED = "CANCELLED"
    """Cancelled by the user (``scancel``), before or after it started."""
    UNKNOWN = "UNKNOWN"
    """The backend reported a state Elastic does not know; a warning was logged."""

    @property
    def is_final(self) -> bool:
        """Whether the job has ended (it will never change state again)."""
        return self in _FINAL


_FINAL = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.TIMEOUT, JobState.CANCELLED})


class PendingReason(str, enum.Enum):
    """Why a job is pending, following Slurm's reason codes."""

    NONE = "None"
    """Not pending, or no reason given."""
    PRIORITY = "Priority"
    """Jobs ahead of it in the queue come first."""
    RESOURCES = "Resources"
    """It is next, but not enough cores are free."""
    DEPENDENCY = "Dependency"
    """A dependency is not satisfied yet."""
    DEPENDENCY_NEVER_SATISFIED = "DependencyNeverSatisfied"
    """A dependency can no longer be satisfied (e.g. ``afterok`` on a failed job)."""
    BEGIN_TIME = "BeginTime"
    """Its ``--begin`` time has not come yet."""


class DependencyKind(str, enum.Enum):
    """Slurm dependency types supported by every backend."""

    AFTER = "after"
    """Start after the other job has started (or was cancelled)."""
    AFTEROK = "afterok"
    """Start after the other job completed successfully."""
    AFTERANY = "afterany"
    """Start after the other job ended, in any state."""
    AFTERNOTOK = "afternotok"
    """Start after the other job ended in a failed state (FAILED, TIMEOUT, CANCELLED)."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """One dependency of a job on another job of the same backend."""

    kind: DependencyKind
    job_id: str

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.job_id}"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What to submit.

    Parameters
    ----------
    cores : int
        Number of cores (Slurm ``--ntasks`` with one CPU each).
    walltime : float
        Requested walltime limit in seconds, at most :data:`~elastic.limits.MAX_WALLTIME` (100 years); the
        job is killed (TIMEOUT) when it runs longer.
    name : str, default "elastic"
        Job name.
    nodes : int or None, default None
        Number of whole nodes, when the geometry is given in nodes.
    dependencies : tuple of Dependency, default ()
        All must be satisfied before the job may start (Slurm's ``,`` = AND).
    begin : float or None, default None
        Do not start before this backend time (Slurm ``--begin``).
    user : str or None, default None
        Owner, for per-user accounting in the mock backend.
    partition, account, qos : str or None
        Passed through to Slurm unchanged.
    script : str or None, default None
        Shell script body run inside the allocation once it starts (the worker agent). The mock
        backend runs it as a local process; ``None`` means the job holds its cores until it is
        cancelled, reaches ``runtime`` or times out.
    env : Mapping[str, str], default {}
        Extra environment variables for ``script``.
    runtime : float or None, default None
        Mock backend only: the actual runtime in seconds, hidden from the scheduler (simulated jobs).
    """

    cores: int
    walltime: float
    name: str = "elastic"
    nodes: int | None = None
    dependencies: tuple[Dependency, ...] = ()
    begin: float | None = None
    user: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    script: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    runtime: float | None = None

    def __post_init__(self) -> None:
        if self.cores < 1:
            raise ConfigError(f"JobSpec.cores must be >= 1, got {self.cores}")
        if not 0 < self.walltime <= MAX_WALLTIME:
            raise ConfigError(
                f"JobSpec.walltime must be > 0 seconds and at most 100 years ({MAX_WALLTIME:g} s), got "
                f"{self.walltime}"
            )
        if self.nodes is not None and self.nodes < 1:
            raise ConfigError(f"JobSpec.nodes must be >= 1 or None, got {self.nodes}")
        if self.runtime is not None and self.runtime < 0:
            raise ConfigError(f"JobSpec.runtime must be >= 0 seconds or None, got {self.runtime}")


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A snapshot of one job as the backend sees it.

    Attributes
    ----------
    job_id, name : str
        Backend job id and job name.
    state : JobState
        Current state.
    reason : PendingReason
        Why a pending job waits; ``PendingReason.NONE`` once it started or ended. Backends may differ
        on Priority vs Resources for a job behind a full partition.
    cores : int
        Cores the job holds (running or ended) or asks for (pending). For a pending whole-node request
        Slurm may report only the task count until the job starts; use the started value for accounting.
    walltime : float
        Walltime limit in seconds as the backend enforces it (Slurm rounds up to whole minutes).
    submit_time, start_time, end_time : float or None
        Backend-clock times; ``start_time``/``end_time`` are ``None`` until they happen.
    exit_code : int or None
        Exit code of the job script once it ended by itself. For CANCELLED and TIMEOUT jobs it is
        backend-specific (``None`` on the mock, ``-15`` for SIGTERM on Slurm): do not rely on it.
    user : str or None
        Owner, when known.
    """

    job_id: str
    name: str
    state: JobState
    reason: PendingReason
    cores: int
    walltime: float
    submit_time: float
    start_time: float | None = None
    end_time: float | None = None
    exit_code: int | None = None
    user: str | None = None

    @property
    def wait(self) -> float | None:
        """Queue wait in seconds (start - submit), once the job has started."""
        return None if self.start_time is None else self.start_time - self.submit_time


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """Size and limits of the partition a backend submits to."""

    name: str
    nodes: int
    cores_per_node: int
    max_walltime: float | None = None

    @property
    def cores(self) -> int:
        """Total cores of the partition."""
        return self.nodes * self.cores_per_node

    @property
    def node_cores(self) -> int | None:
        """Cores of one node where they bound a job's tasks and shape its pieces, else None.

        A task runs inside one node, and a request split into several jobs is split in whole nodes
        (:func:`~elastic.control.scheduler.split_request`). Nodes of one core are taken as no grouping
        (the mock backend's default, which does not place jobs on nodes).

        Examples
        --------
        >>> PartitionInfo("debug", 4, 4).node_cores, PartitionInfo("mock", 64, 1).node_cores
        (4, None)
        """
        return self.cores_per_node if self.cores_per_node > 1 else None
