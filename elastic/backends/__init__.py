"""Batch backends: the :class:`BatchBackend` protocol, the mock (simulated) backend and Slurm."""

from __future__ import annotations

from elastic.backends.base import BatchBackend
from elastic.batch import Dependency, DependencyKind, JobInfo, JobSpec, JobState, PendingReason

__all__ = [
    "BatchBackend",
    "Dependency",
    "DependencyKind",
    "JobInfo",
    "JobSpec",
    "JobState",
    "PendingReason",
]
