"""The :class:`BatchBackend` protocol: what Elastic needs from a batch system.

Strategies and the pool talk to the mock backend (a simulated Slurm-like queue) and to real Slurm through
this one small contract, so they cannot tell the two apart except by speed. The records it speaks in
(:class:`~elastic.batch.JobSpec`, :class:`~elastic.batch.JobInfo`, :class:`~elastic.batch.JobState`, ...)
are in :mod:`elastic.batch`. Only backends see Slurm's strings.

Times are ``float`` seconds on the backend's own clock (:meth:`BatchBackend.now`): epoch seconds for
Slurm, simulated seconds for the mock backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from elastic.batch import Dependency, JobInfo, JobSpec, PartitionInfo

__all__ = [
    "BatchBackend",
    "ChangesDependencies",
    "EstimatesReleasing",
    "ReportsJobChanges",
    "ShortensWalltime",
]


@runtime_checkable
class BatchBackend(Protocol):
    """What a batch system must offer to Elastic.

    Implementations: :class:`elastic.backends.mock.MockBackend` and
    :class:`elastic.backends.slurm.SlurmBackend`.
    """

    @property
    def name(self) -> str:
        """Short backend name, e.g. ``"mock"`` or ``"slurm"``."""
        ...

    def now(self) -> float:
        """Return the current time on the backend's clock, in seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of backend time pass (a real sleep on Slurm; simulated on the mock)."""
        ...

    def partition(self) -> PartitionInfo:
        """Return the partition jobs are submitted to."""
        ...

    def submit(self, spec: JobSpec) -> str:
        """Submit a job and return its id.

        Raises
        ------
        GeometryError
            The job can never fit the partition.
        DependencyError
            A dependency names an unknown job.
        SubmitError
            Any other refusal.
        """
        ...

    def cancel(self, job_id: str) -> None:
        """Cancel a job (pending or running). Cancelling a finished job does nothing.

        An id the backend never handed out raises ``UnknownJobError`` on the mock backend; Slurm's
        ``scancel`` cannot tell such an id apart, so the Slurm backend does nothing. Callers only cancel
        ids they got from :meth:`submit`.
        """
        ...

    def state(self, job_id: str) -> JobInfo:
        """Return the current state of one job, finished ones included; raise UnknownJobError."""
        ...

    def queue(self) -> list[JobInfo]:
        """Return every pending or running job this backend can see.

        On Slurm these are the calling user's jobs (``squeue --me``); on the mock backend they include
        the simulated background load. Final jobs are never listed.
        """
        ...

    def expected_start(self, spec: JobSpec) -> float | None:
        """When a job like ``spec`` would start if submitted now.

        Both built-in backends compute it the same way: a snapshot of the queue (``squeue`` on Slurm)
        simulated with every job held to its time limit (:mod:`elastic.simulator.snapshot`). Returns
        ``None`` when the backend cannot tell.
        """
        ...


@runtime_checkable
class ShortensWalltime(Protocol):
    """A backend that can lower a pending job's walltime (both built-in ones).

    Slurm lets a user lower, never raise, their job's time limit (``scontrol update TimeLimit=``), and a
    job asked with a shorter limit fits gaps (backfill) a longer one does not, at the queue place it has.
    A planner asks for a walltime that covers idling in case an allocation starts before its stage needs
    it; once the stage is ready and the allocation still waits, that cover is no longer needed.
    """

    def shorten(self, job_id: str, walltime: float) -> None:
        """Lower pending job ``job_id``'s walltime to ``walltime`` seconds.

        A job that started or ended meanwhile, or already asks at most that, is left as it is.
        """
        ...


@runtime_checkable
class ChangesDependencies(Protocol):
    """A backend that can change a pending job's dependencies (both built-in ones).

    Slurm lets a user replace the dependencies of their pending job (``scontrol update Dependency=``,
    empty to clear them), and under ``priority/basic`` the job keeps the rank its submission gave it.
    Run control asks a request ahead to follow (``afterany``) the allocation before it, so that it keeps
    its queue place and cannot start before its stage can use it; once the stage is ready it drops the
    dependency, which would otherwise hold the request while that allocation runs the stage's first tasks.
    """

    def set_dependencies(self, job_id: str, dependencies: Sequence[Dependency]) -> None:
        """Replace pending job ``job_id``'s dependencies by ``dependencies`` (empty: none).

        A job that started or ended meanwhile is left as it is.
        """
        ...


@runtime_checkable
class EstimatesReleasing(Protocol):
    """A backend whose estimate can end some of the caller's own jobs early (no built-in one).

    A planner pricing a request for a stage that starts once its own running allocation is released
    asks how long the request would wait with that allocation released when the planner will release
    it: held to its walltime in the estimate, it would make every such request look long. Neither
    built-in backend is one: their shared estimate (:mod:`elastic.simulator.snapshot`) holds every job,
    the caller's own included, to its time limit, as a real scheduler's would.
    """

    @property
    def estimates_releasing(self) -> bool:
        """Whether :meth:`expected_start` honours ``releasing`` now (False: it would refuse)."""
        ...

    def expected_start(self, spec: JobSpec, *, releasing: Mapping[str, float] | None = None) -> float | None:
        """As :meth:`BatchBackend.expected_start`, with the jobs ``releasing`` names ending at its times."""
        ...


@runtime_checkable
class ReportsJobChanges(Protocol):
    """A backend that can say cheaply whether any job submitted to it may have changed (the mock).

    Run control polls the state of every open job of its run at every step; over a simulated run of days
    that is hundreds of thousands of reads of jobs that did not change. Where the backend gives this,
    it reads them only when the value changed (:meth:`~elastic.control.controller.AllocationController.step`).
    """

    def jobs_version(self) -> int:
        """Return a value that changes whenever a job submitted here may have changed.

        Its state, start, end or time limit, as :meth:`BatchBackend.state` reports them; a new submission
        changes it too. Background jobs do not count.
        """
        ...


@runtime_checkable
class NamesJobChanges(ReportsJobChanges, Protocol):
    """A :class:`ReportsJobChanges` backend that also says which jobs may have changed (the mock).

    A run of a wide workflow has thousands of open jobs, most of them pending for hours: when any one
    changed, run control reads the state of those named here only, not of every open job.
    """

    def jobs_changed_since(self, version: int) -> frozenset[str]:
        """Return the ids of the jobs that may have changed since :meth:`jobs_version` returned ``version``.

        Every job whose state, start, end or time limit changed, or that was submitted, after that call
        (as of the last :meth:`jobs_version`).
        """
        ...
