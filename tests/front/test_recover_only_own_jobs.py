"""A run whose driver died has only its own batch jobs cancelled, never a job that took its id.

Found by trying the front door as a user would on two Slurm clusters sharing the default store: a run
killed on the first left job id 19 recorded; the next run, on a fresh second cluster whose ids restart at
1, cancelled that cluster's job 19, another user's ``important-19``. It also counted as cancelled a job
that had already ended.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from elastic.batch import JobInfo, JobState, PendingReason
from elastic.front.setup import SUBMIT_SLACK, driver_identity, recover_abandoned
from elastic.store import Store


class _Queue:
    """The batch system as recovery reads it: the current user's queued and running jobs; cancels."""

    name = "slurm"

    def __init__(self, jobs: list[JobInfo]) -> None:
        self.jobs = jobs
        self.cancelled: list[str] = []

    def queue(self) -> list[JobInfo]:
        return list(self.jobs)

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


def _job(job_id: str, name: str, submitted: float) -> JobInfo:
    return JobInfo(job_id, name, JobState.PENDING, PendingReason.PRIORITY, 4, 600.0, submitted)


def _dead_driver() -> dict[str, object]:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return {**driver_identity(), "pid": dead.pid}


def test_only_the_runs_own_jobs_still_queued_are_cancelled(tmp_path: Path) -> None:
    meta = {"19": ["a1", 1000.0], "20": ["a2", 1010.0], "21": ["a3", 1020.0], "22": ["a4", 1030.0]}
    queue = _Queue(
        [
            _job("19", "important-19", 5000.0),  # the id came back on another cluster: someone else's
            _job("20", "elastic-work-a2", 1011.0),  # the run's own, still queued
            _job("21", "elastic-work-a3", 1020.0 + SUBMIT_SLACK + 60),  # same name, submitted later
            # 22 ended already: not in the queue, not cancelled, not counted
        ]
    )
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        run = store.record_run(
            "w", "asa", "slurm", params={"driver": _dead_driver(), "jobs": list(meta), "job_meta": meta}
        )
        assert recover_abandoned(store, queue) == [run]  # type: ignore[arg-type]
    assert queue.cancelled == ["20"]


def test_a_run_recorded_without_job_meta_has_jobs_checked_by_name(tmp_path: Path) -> None:
    queue = _Queue([_job("7", "elastic-all-a1", 0.0), _job("8", "someone-else", 0.0)])
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.record_run("w", "bigjob", "slurm", params={"driver": _dead_driver(), "jobs": ["7", "8", "9"]})
        recover_abandoned(store, queue)  # type: ignore[arg-type]
    assert queue.cancelled == ["7"]
