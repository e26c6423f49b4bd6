"""The staged flow of ``compare_prefect_slurm.py`` (a module, so Slurm-started workers import it by name)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from prefect import task

import elastic

__all__ = ["sleep_for", "stage_task", "staged_flow"]


@task
def sleep_for(seconds: float, i: int) -> tuple[float, float, str]:
    """Sleep ``seconds``; return when it started and ended (epoch seconds) and the batch job it ran in.

    The job id (``SLURM_JOB_ID``, which Elastic's agents and Dask's workers inherit from their batch job;
    ``""`` outside one) lets the comparison say how busy each batch job was.
    """
    start = time.time()
    time.sleep(seconds)
    return start, time.time(), os.environ.get("SLURM_JOB_ID", "")


def stage_task(name: str, seconds: float) -> Any:
    """``sleep_for`` as stage ``name`` (its task name and ``stage:`` tag), with its runtime estimate."""
    t = sleep_for.with_options(name=name, tags=[f"stage:{name}"])
    return elastic.task(t, stage=name, runtime=seconds)  # read by ElasticTaskRunner, ignored by Dask


def staged_flow(stages: Sequence[tuple[str, int, float]]) -> list[list[tuple[float, float, str]]]:
    """Submit every stage at once, each task waiting for every task of the previous stage.

    Returns each stage's (start, end, batch job) per task. Prefect sees the whole graph at once, as in a
    user's flow.
    """
    previous: list[Any] = []
    submitted = []
    for name, tasks, seconds in stages:
        t = stage_task(name, seconds)
        previous = [t.submit(seconds, i, wait_for=previous) for i in range(tasks)]
        submitted.append(previous)
    return [[f.result() for f in stage] for stage in submitted]
