"""Runs whose driver died: found in the store, ended, and their batch jobs still queued cancelled.

A driver killed by SIGKILL (or the machine's OOM killer) cannot end its run: the store keeps it
``running`` and, on a batch system whose jobs outlive their driver (Slurm), its jobs stay queued or
running until their walltime. The front door records, in each run's params, its driver
(:func:`driver_identity`) and the batch jobs it submitted (:class:`~elastic.front.record.RunRecord`). A
run is *abandoned* when its driver was on this host and no longer exists (:func:`abandoned_runs`).

Two callers end such runs:

- every front door on the same store, as it starts (:func:`recover_abandoned`), for the runs of its own
  kind of backend: a local run never ends a dead Slurm run, whose jobs it could not cancel;
- ``elastic store recover``, for all of them, without starting a run (:func:`recover_run`).

A run's jobs are cancelled only where they are still the run's own (:func:`jobs_still_ours`); a run whose
jobs cannot be checked (the queue cannot be read) is left ``running``, so a later attempt still finds them.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elastic.errors import ElasticError

if TYPE_CHECKING:
    from elastic.backends.base import BatchBackend
    from elastic.store import Store
    from elastic.store.resilient import ResilientStore

logger = logging.getLogger(__name__)

__all__ = [
    "OUTLIVE_THEIR_DRIVER",
    "SUBMIT_SLACK",
    "AbandonedRun",
    "Recovered",
    "abandoned_runs",
    "driver_identity",
    "jobs_still_ours",
    "recover_abandoned",
    "recover_run",
]

OUTLIVE_THEIR_DRIVER = frozenset({"slurm"})
"""Backends whose batch jobs go on when the driver dies (a local or mock run's workers end with it)."""

SUBMIT_SLACK = 300.0
"""Seconds between a job's recorded submit time and the batch system's that still make it the same job."""


def driver_identity() -> dict[str, Any]:
    """Return what identifies this driver process in a run's params: host, pid and the pid's start time.

    The start time (``/proc/PID/stat``'s 22nd field, clock ticks after boot) tells a live driver from a
    later process that reuses its pid; None where ``/proc`` does not say.
    """
    return {"host": socket.gethostname(), "pid": os.getpid(), "since": _process_start(os.getpid())}


def _process_start(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[19])  # field 22 of the whole line; the first two are before the ")"
    except (OSError, IndexError, ValueError):
        return None


def _driver_alive(driver: Mapping[str, Any]) -> bool:
    pid = driver.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True  # cannot tell: leave the run alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    since = driver.get("since")
    return since is None or _process_start(pid) in (None, since)


@dataclass(frozen=True)
class AbandonedRun:
    """A run of the store whose driver, on this host, died without ending it.

    Attributes
    ----------
    run_id : int
        The store's id of the run.
    workflow, backend : str
        What the store recorded: the workflow's name and the backend's (``"slurm"``, ``"local"``, ...).
    pid : int or None
        The dead driver's process id.
    jobs : tuple of str
        The batch job ids the run recorded (any state when it last wrote).
    job_meta : Mapping
        Job id -> ``[allocation, submit time]`` of the jobs not known to have ended (empty for a run
        recorded by an older version: its jobs are then checked by name).
    """

    run_id: int
    workflow: str
    backend: str
    pid: int | None
    jobs: tuple[str, ...]
    job_meta: Mapping[str, object]

    @property
    def has_jobs_left(self) -> bool:
        """Whether the run may have left batch jobs behind: a backend whose jobs outlive it, jobs recorded."""
        return self.backend in OUTLIVE_THEIR_DRIVER and bool(self.jobs)


@dataclass(frozen=True)
class Recovered:
    """What :func:`recover_run` did with one abandoned run.

    Attributes
    ----------
    run : AbandonedRun
        The run.
    cancelled : tuple of str
        Its batch jobs cancelled (with ``dry_run``: those that would be).
    ended : bool
        Whether the run is now ``interrupted`` in the store (never with ``dry_run``).
    left : str or None
        Why the run was left ``running``, or None.
    """

    run: AbandonedRun
    cancelled: tuple[str, ...]
    ended: bool
    left: str | None = None


def abandoned_runs(store: Store | ResilientStore) -> list[AbandonedRun]:
    """Return the runs of ``store`` left ``running`` by a driver of this host that no longer exists.

    Runs of other hosts, runs whose driver lives, and runs recorded without a driver (not by the front
    door) are not abandoned.
    """
    runs = store.runs()
    if runs.empty:
        return []
    host = socket.gethostname()
    out: list[AbandonedRun] = []
    running = runs[runs["status"] == "running"]
    for run_id, workflow, backend, params in zip(
        running["run_id"], running["workflow"], running["backend"], running["params"], strict=True
    ):
        if not isinstance(params, dict):
            continue
        driver = params.get("driver")
        if not isinstance(driver, dict) or driver.get("host") != host or _driver_alive(driver):
            continue
        meta = params.get("job_meta")
        pid = driver.get("pid")
        out.append(
            AbandonedRun(
                int(run_id),
                str(workflow),
                str(backend),
                pid if isinstance(pid, int) else None,
                tuple(j for j in params.get("jobs", []) if isinstance(j, str)),
                meta if isinstance(meta, dict) else {},
            )
        )
    return out


def jobs_still_ours(run: AbandonedRun, backend: BatchBackend) -> list[str] | None:
    """Return the recorded jobs of ``run`` still queued or running and still its own; None: cannot tell.

    A job id alone is not enough: the next run may be on another cluster sharing the store, or on the
    same one after its ids were reset, where the id names someone else's job. So a job is the run's
    only where the batch system's queue of the current user (:meth:`BatchBackend.queue`) holds it with
    the name run control gives the recorded allocation (``...-<allocation>``) and a submit time within
    :data:`SUBMIT_SLACK` of the recorded one (``job_meta``). A run recorded without them (an older
    store) has its jobs checked by name only (``elastic-``). Jobs that ended are not returned; with
    ``job_meta``, only its jobs are looked at (those not known to have ended when the run last wrote).
    None where the queue cannot be read.
    """
    try:
        alive = {j.job_id: j for j in backend.queue()}
    except ElasticError as exc:
        logger.warning("run %s: cannot read the queue (%s); its batch jobs are left alone", run.run_id, exc)
        return None
    meta = run.job_meta
    out: list[str] = []
    for job in list(meta) if meta else run.jobs:  # with job_meta, the jobs not known to have ended
        info = alive.get(job)
        if info is None:
            continue  # ended, or not the current user's
        record = meta.get(job)
        if isinstance(record, list) and len(record) == 2:
            alloc, submitted = record
            same = (
                isinstance(alloc, str)
                and info.name.endswith(f"-{alloc}")
                and isinstance(submitted, (int, float))
                and info.submit_time is not None
                and abs(info.submit_time - submitted) <= SUBMIT_SLACK
            )
        else:
            same = info.name.startswith("elastic")
        if same:
            out.append(job)
        else:
            logger.warning(
                "run %s: batch job %s is now %r, not the run's own job: left alone",
                run.run_id,
                job,
                info.name,
            )
    return out


def recover_run(
    store: Store | ResilientStore,
    run: AbandonedRun,
    backend: BatchBackend | None,
    *,
    dry_run: bool = False,
) -> Recovered:
    """Cancel what ``run`` left in ``backend`` that is still its own, then mark it ``interrupted``.

    ``backend`` must be of the run's kind where its jobs outlive the driver
    (:attr:`AbandonedRun.has_jobs_left`); without one, or when the queue cannot be read, the run is left
    ``running`` (``left`` says why), so its jobs are not forgotten. A job that cannot be cancelled is
    logged and the run still ends. ``dry_run``: only say what would be cancelled.
    """
    cancelled: list[str] = []
    if run.has_jobs_left:
        if backend is None or backend.name != run.backend:
            return Recovered(
                run, (), False, f"its jobs are on {run.backend}; recover it with a {run.backend} backend"
            )
        ours = jobs_still_ours(run, backend)
        if ours is None:
            return Recovered(run, (), False, f"{run.backend}'s queue cannot be read")
        if dry_run:
            return Recovered(run, tuple(ours), False)
        for job in ours:
            try:
                backend.cancel(job)
            except ElasticError as exc:
                logger.warning("run %s: cannot cancel its job %s: %s", run.run_id, job, exc)
            else:
                cancelled.append(job)
    if dry_run:
        return Recovered(run, (), False)
    store.finish_run(run.run_id, "interrupted", {}, params={"abandoned": True})
    return Recovered(run, tuple(cancelled), True)


def recover_abandoned(store: Store | ResilientStore, backend: BatchBackend) -> list[int]:
    """End the abandoned runs ``backend`` can clean up; return their ids.

    Called as a front door starts. Runs whose jobs outlive their driver are recovered only by a backend
    of their kind (a Slurm run's jobs by a Slurm backend); the others are left ``running`` with a warning
    naming ``elastic store recover``. Runs on other hosts, and live ones, are never touched.
    """
    out: list[int] = []
    for run in abandoned_runs(store):
        if run.has_jobs_left and run.backend != backend.name:
            logger.warning(
                "run %s of %r was left running by a driver that died (pid %s), with %s jobs that may still "
                "be queued; `elastic store recover` cancels them",
                run.run_id,
                run.workflow,
                run.pid,
                run.backend,
            )
            continue
        done = recover_run(store, run, backend)
        if not done.ended:
            continue  # the queue could not be read: warned, and kept for a later attempt
        logger.warning(
            "run %s of %r was left running by a driver that died (pid %s); marked interrupted%s",
            run.run_id,
            run.workflow,
            run.pid,
            f", {len(done.cancelled)} of its batch jobs cancelled" if done.cancelled else "",
        )
        out.append(run.run_id)
    return out
