"""What the Slurm comparisons share: the busy background queue, the ``--stages`` option and a run's outcome.

``benchmarks/compare_parsl_slurm.py`` and ``benchmarks/compare_prefect_slurm.py`` run the same staged
workflow through two front-ends on the local Slurm cluster (``tests/fixtures/slurm_cluster.py``), beside
the same background jobs.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from any directory

from benchmarks._support import LocalSlurmCluster
from elastic.backends.slurm import SlurmBackend
from elastic.experiments import parse_strategy, shape_cores
from elastic.simulator.synthetic import synthetic_workload
from elastic.workflow import Stage, Workflow

__all__ = [
    "MONTAGE",
    "Background",
    "Outcome",
    "add_options",
    "charge",
    "check_options",
    "marker",
    "parse_stages",
    "elastic_strategy",
    "run_jobs",
    "stage_times",
    "widest_job",
]

MONTAGE = "mProject:8:20,mDiffFit:12:10,mConcatFit:1:10,mBackground:8:15,mAdd:1:20"
"""The default ``--stages``: Montage's shape, ``name:tasks:seconds`` per stage."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One configuration's run: makespan and waits in seconds, core-hours from Slurm's records.

    Slurm keeps a job's start and end in whole seconds, so ``charged`` may fall short of the real holding
    time by up to ``resolution``; a run whose tasks were short and whose jobs were tight can show
    ``charged`` a little under ``used``. Every task ran inside some batch job, so
    ``charged >= used - resolution`` and ``outside == 0`` always hold when the accounting is right.
    """

    config: str
    rep: int
    makespan: float
    charged: float  # core-hours
    used: float
    waits: tuple[float, ...]  # per stage, seconds
    jobs: int
    released: int = 0  # batch jobs ended before the last stage started
    requeued: int = 0  # batch jobs submitted after a mid-flow release
    resolution: float = 0.0  # core-hours Slurm's whole-second records may miss: cores x 1 s per job
    outside: int = 0  # tasks that ran in no batch job counted in ``charged`` (0 unless a job was missed)
    widest_job: int = 0  # cores of the run's widest batch job that ran (the allocation shape)

    @property
    def idle(self) -> float:
        return self.charged - self.used


def summarise(
    outcomes: list[Outcome],
    stages: list[tuple[str, int, float]],
    configs: Sequence[str],
    title: str,
    console: Console,
    *,
    releases: bool = False,
) -> None:
    """Print one row per configuration (in ``configs`` order): mean ± sd over its repetitions.

    ``releases`` adds the columns *released mid-flow* and *requeued* (the Prefect comparison counts them).
    """
    table = Table(title=f"{title} (mean ± sd over repetitions)")
    heads = ["configuration", "runs", "makespan (s)", "core-h charged", "idle core-h", "batch jobs"]
    heads += ["released mid-flow", "requeued"] if releases else []
    for col in heads:
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for name, *_ in stages:
        table.add_column(f"wait {name} (s)", justify="right")

    def ms(values: list[float], fmt: str = ".0f") -> str:
        sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        return f"{np.mean(values):{fmt}} ± {sd:{fmt}}"

    for config in configs:
        rows = [o for o in outcomes if o.config == config]
        if not rows:
            continue
        cells = [config, str(len(rows)), ms([o.makespan for o in rows]), ms([o.charged for o in rows], ".3f")]
        cells += [ms([o.idle for o in rows], ".3f"), ms([float(o.jobs) for o in rows], ".1f")]
        if releases:
            cells += [
                ms([float(o.released) for o in rows], ".1f"),
                ms([float(o.requeued) for o in rows], ".1f"),
            ]
        cells += [ms([o.waits[i] for o in rows]) for i in range(len(stages))]
        table.add_row(*cells)
    console.print(table)


def parse_stages(text: str) -> list[tuple[str, int, float]]:
    """Parse ``--stages``: ``NAME:TASKS:SECONDS,...`` (e.g. ``mProject:4:20,mAdd:1:10``)."""
    stages = []
    for part in text.split(","):
        name, tasks, seconds = part.split(":")
        stages.append((name, int(tasks), float(seconds)))
    return stages


def elastic_strategy(config: str, stages: Sequence[tuple[str, int, float]]) -> tuple[str, int | None]:
    """Return the strategy and ``job_cores`` of an ``elastic-...`` configuration (``elastic-bigjob-split``).

    The shape is read as ``elastic compare`` reads its row labels
    (:func:`~elastic.experiments.parse_strategy`, :func:`~elastic.experiments.shape_cores`): a ``-split``
    configuration submits every allocation wider than half the widest stage (rounded up; one core per task
    here) as batch jobs of at most that many cores; a ``-fine`` one submits each allocation in jobs of one
    task (``job_cores`` 1); any other runs one batch job per allocation (``job_cores`` None).

    >>> elastic_strategy("elastic-perstage-split", [("a", 4, 1.0), ("b", 6, 1.0)])
    ('perstage', 3)
    >>> elastic_strategy("elastic-asa-fine", [("a", 4, 1.0)])
    ('asa', 1)
    >>> elastic_strategy("elastic-asa", [("a", 4, 1.0)])
    ('asa', None)
    """
    strategy, shape = parse_strategy(config.removeprefix("elastic-"))
    workflow = Workflow("stages", tuple(Stage(name, tasks, 1, seconds) for name, tasks, seconds in stages))
    return strategy, shape_cores(workflow, shape)


class Background:
    """Sleep jobs submitted to the cluster at their (Poisson) arrival times, from a thread."""

    def __init__(self, cluster: LocalSlurmCluster, load: float, seed: int) -> None:
        self.workload = synthetic_workload(
            jobs=2000 if load > 0 else 0, processors=cluster.total_cores, utilisation=load or 1.0,
            max_cores=cluster.total_cores // 2, runtime_median=40.0, runtime_sigma=0.6, max_runtime=240.0,
            estimate_ratio=2.0, seed=seed,
        )  # fmt: skip
        self.cluster = cluster
        self.ids: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._submit, daemon=True)

    def start(self) -> None:
        if len(self.workload.submit):
            self._thread.start()

    def _submit(self) -> None:
        w, t0 = self.workload, time.time()
        for at, cores, runtime, walltime in zip(w.submit, w.cores, w.runtime, w.walltime, strict=True):
            if self._stop.wait(max(0.0, t0 + at - time.time())):
                return
            minutes = max(1, math.ceil(walltime / 60))
            out = self.cluster.run(
                ["sbatch", "--parsable", f"--ntasks={cores}", f"--time={minutes}", "--job-name=background",
                 "--output=/dev/null", f"--wrap=sleep {runtime:.1f}"],
                check=False,
            )  # fmt: skip
            if out.returncode == 0:
                self.ids.add(out.stdout.strip().split(";")[0])

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def add_options(parser: argparse.ArgumentParser, configs: Sequence[str], what: str) -> None:
    """Add the options both comparisons take (``--reps``, ``--configs``, ``--stages``, ``--load``, ...)."""
    parser.add_argument("--reps", type=int, default=3, help="repetitions of every configuration (3)")
    parser.add_argument("--configs", default=",".join(configs), help="which configurations, in order")
    parser.add_argument("--stages", default=MONTAGE, help=f"name:tasks:seconds,... (default {MONTAGE})")
    parser.add_argument("--load", type=float, default=0.7, help="background offered load (0.7; 0 = none)")
    parser.add_argument("--warmup", type=float, default=60.0, help=f"seconds of background before the {what}")
    parser.add_argument("--csv", type=Path, help="also write one row per run here")
    parser.add_argument("--workdir", type=Path, help="keep the cluster, run directories and store here")


def check_options(
    parser: argparse.ArgumentParser, args: argparse.Namespace, configs: Sequence[str]
) -> tuple[list[str], list[tuple[str, int, float]]]:
    """Refuse bad common options (``parser.error``); return the configurations chosen and the stages."""
    chosen = args.configs.split(",")
    if bad := set(chosen) - set(configs):
        parser.error(f"--configs: unknown {sorted(bad)}; allowed: {', '.join(configs)}")
    if args.reps < 1:
        parser.error(f"--reps must be >= 1, got {args.reps}")
    try:
        stages = parse_stages(args.stages)
    except ValueError:
        parser.error(f"--stages must be name:tasks:seconds,..., got {args.stages!r}")
    if args.csv is not None and not args.csv.parent.is_dir():
        parser.error(f"--csv: directory {args.csv.parent} does not exist")
    return chosen, stages


def marker(cluster: LocalSlurmCluster) -> int:
    """Return a job id that orders the run's jobs (held, then cancelled at once)."""
    job = int(cluster.run(["sbatch", "--parsable", "--hold", "--wrap=true"]).stdout.split(";")[0])
    cluster.run(["scancel", str(job)])
    return job


Results = Sequence[Sequence[tuple[float, float, str]]]
"""Per stage, per task: ``(start, end, batch job id)`` in seconds since the epoch."""


def stage_times(results: Results, t0: float) -> tuple[float, tuple[float, ...], float]:
    """Return the workflow's end, each stage's wait and the core-hours its tasks used (one core each).

    A stage's wait runs from the previous stage's end (the first stage's: from ``t0``) to its last task's
    start: until the cores for all its tasks were there (the metrics' rule for a request's wait: the last of
    its pieces for the stage's need; every stage of these flows fits its allocation, so none runs in
    waves). To the first task's start, as before, it understated jobs of one task, whose first job starts
    while the others still wait.
    """
    end = max(task[1] for stage in results for task in stage)
    waits, previous_end = [], t0
    for stage in results:
        waits.append(max(task[0] for task in stage) - previous_end)
        previous_end = max(task[1] for task in stage)
    used = sum(task[1] - task[0] for stage in results for task in stage) / 3600
    return end, tuple(waits), used


def run_jobs(
    cluster: LocalSlurmCluster, first_id: int, last_id: int, background: Background
) -> list[tuple[str, Any]]:
    """Return the run's own batch jobs, submitted between two :func:`marker` ids, with Slurm's record.

    Background jobs are left out, and ids ``sbatch --test-only`` used up (never a job).
    """
    slurm = SlurmBackend(env=cluster.env)
    jobs = []
    for job in range(first_id + 1, last_id):
        if str(job) in background.ids:
            continue
        try:
            info = slurm.state(str(job))
        except Exception:  # an id sbatch --test-only used up: never a job
            continue
        if info.name != "background":
            jobs.append((str(job), info))
    return jobs


def charge(jobs: Sequence[tuple[str, Any]]) -> tuple[float, int, float, set[str]]:
    """Return core-hours charged, jobs that ran, their whole-second resolution and their ids.

    Only jobs that started and ended are charged (``cores x (end - start)``).
    """
    charged, count, resolution, counted = 0.0, 0, 0.0, set()
    for job, info in jobs:
        if info.start_time is not None and info.end_time is not None:
            charged += info.cores * (info.end_time - info.start_time) / 3600
            resolution += info.cores / 3600
            counted.add(job)
            count += 1
    return charged, count, resolution, counted


def widest_job(jobs: Sequence[tuple[str, Any]]) -> int:
    """Return the cores of the widest of ``jobs`` that ran (0 if none did): the shape a run used.

    A job cancelled while pending has Slurm's start time equal to its end time (and its request's cores):
    it did not run.
    """
    ran = (
        info.cores
        for _, info in jobs
        if info.start_time is not None and (info.end_time is None or info.end_time > info.start_time)
    )
    return max(ran, default=0)
