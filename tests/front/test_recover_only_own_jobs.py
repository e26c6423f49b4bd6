"""A run whose driver died has only its own batch jobs cancelled, never a job that took its id.

Found by trying the front door as a user would on two Slurm clusters sharing the default store: a run
killed on the first left job id 19 recorded; the next run, on a fresh second cluster whose ids restart at
1, cancelled that cluster's job 19, another user's ``important-19``. It also counted as cancelled a job
that had already ended.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from elastic.batch import JobInfo, JobState, PendingReason
from elastic.errors import BackendUnavailableError
from elastic.front.recovery import SUBMIT_SLACK, abandoned_runs, driver_identity, recover_abandoned
from elastic.store import Store
from tests.fixtures.processes import dead_pid


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
    return {**driver_identity(), "pid": dead_pid()}


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


class _Local:
    """A backend whose jobs end with their driver (the local one, by name): it cannot cancel Slurm jobs."""

    name = "local"

    def queue(self) -> list[JobInfo]:
        raise AssertionError("a local backend is not asked for a Slurm run's jobs")

    def cancel(self, job_id: str) -> None:
        raise AssertionError("a local backend is not asked to cancel a Slurm run's jobs")


class _Unreadable(_Queue):
    def queue(self) -> list[JobInfo]:
        raise BackendUnavailableError("squeue: Unable to contact slurm controller")


def test_a_run_of_another_kind_of_backend_leaves_a_dead_slurm_run_for_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found reading the recovery: a local run marked a dead Slurm run interrupted, and its jobs were lost."""
    meta = {"20": ["a2", 1010.0]}
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        slurm = store.record_run(
            "w", "asa", "slurm", params={"driver": _dead_driver(), "jobs": list(meta), "job_meta": meta}
        )
        local = store.record_run("v", "asa", "local", params={"driver": _dead_driver()})
        with caplog.at_level(logging.WARNING, logger="elastic.front.recovery"):
            assert recover_abandoned(store, _Local()) == [local]  # type: ignore[arg-type]
        status = dict(zip(store.runs()["run_id"], store.runs()["status"], strict=True))
        assert status == {slurm: "running", local: "interrupted"}
        assert "`elastic store recover` cancels them" in caplog.text
        queue = _Queue([_job("20", "elastic-w-a2", 1010.0)])
        assert recover_abandoned(store, queue) == [slurm]  # type: ignore[arg-type]
    assert queue.cancelled == ["20"]


def test_a_run_whose_queue_cannot_be_read_stays_running_with_its_jobs(tmp_path: Path) -> None:
    meta = {"20": ["a2", 1010.0]}
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        run = store.record_run(
            "w", "asa", "slurm", params={"driver": _dead_driver(), "jobs": list(meta), "job_meta": meta}
        )
        assert recover_abandoned(store, _Unreadable([])) == []  # type: ignore[arg-type]
        (found,) = abandoned_runs(store)
        assert found.run_id == run and found.jobs == ("20",)
        assert list(store.runs()["status"]) == ["running"]
