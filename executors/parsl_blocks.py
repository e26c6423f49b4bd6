"""Allocations as Parsl blocks: their states in Parsl's terms, and the monitoring messages of their changes.

Parsl's ``BlockProviderExecutor`` reports its blocks' states (``status()``) and sends each change to the
monitoring database's ``block`` table (``poll_facade``).
:class:`~elastic.executors.parsl_executor.ElasticExecutor` does the same with its allocations (an
allocation is a block: its id the block id, its batch job id the job id), with the pure parts here.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from parsl.jobs.states import JobState, JobStatus

from elastic.allocations import Allocation, AllocationState

__all__ = ["JOB_STATES", "block_changes", "block_messages", "block_statuses"]

JOB_STATES = {
    AllocationState.REQUESTED: JobState.PENDING,
    AllocationState.RUNNING: JobState.RUNNING,
    AllocationState.DRAINING: JobState.RUNNING,
    AllocationState.COMPLETED: JobState.COMPLETED,
    AllocationState.FAILED: JobState.FAILED,
    AllocationState.TIMEOUT: JobState.TIMEOUT,
    AllocationState.CANCELLED: JobState.CANCELLED,
}
"""Our allocation states as Parsl's block states (``parsl/jobs/states.py:9-56``)."""


def _rank(state: JobState) -> int:
    """How far on a block state is: pending 0, running 1, ended 2."""
    if state is JobState.PENDING:
        return 0
    return 1 if state is JobState.RUNNING else 2


def block_statuses(allocations: Iterable[Allocation]) -> dict[str, JobStatus]:
    """Every allocation by id as a Parsl block status, with its job, stage, cores and state as message."""
    out = {}
    for a in allocations:
        message = f"job {a.backend_job_id}, stage {a.stage}, {a.cores} cores, {a.state.value.lower()}"
        out[a.alloc_id] = JobStatus(JOB_STATES[a.state], message=message)
    return out


def block_changes(statuses: Mapping[str, JobStatus], sent: dict[str, JobStatus]) -> dict[str, JobStatus]:
    """Return the blocks whose state moved on since last ``sent``, and record them in ``sent``.

    ``statuses`` come from allocation control's records, the one owner of an allocation's state (the
    pool's allocation events only follow what it was told); a block is never sent back to an earlier state.
    """
    changed = {}
    for bid, s in statuses.items():
        last = sent.get(bid)
        if last is None or (_rank(s.state) >= _rank(last.state) and s.state != last.state):
            changed[bid] = sent[bid] = s
    return changed


def block_messages(
    changed: Mapping[str, JobStatus], jobs: Mapping[str, str | None], run_id: Any, label: str
) -> list[dict[str, Any]]:
    """Parsl monitoring's ``BLOCK_INFO`` rows for the ``changed`` blocks (``jobs``: batch job id by block)."""
    now = datetime.datetime.now()
    return [
        {
            "run_id": run_id,
            "status": s.status_name,
            "timestamp": now,
            "executor_label": label,
            "job_id": jobs.get(bid),
            "block_id": bid,
        }
        for bid, s in changed.items()
    ]
