"""A staged Parsl workflow on a busy local Slurm cluster: HTEX + SlurmProvider beside ElasticExecutor.

On demand, not in CI (about 4 minutes per run). The script starts its own Slurm cluster on this machine
(``tests/fixtures/slurm_cluster.py``: 4 nodes x 4 cores, partition ``debug``, Slurm's default priority
plugin ``priority/basic``: jobs are ranked by submission order, and a job held by a dependency keeps the rank
of its submission once it becomes eligible), keeps its queue busy with background sleep jobs it submits
(``--load`` offered load, Poisson arrivals, 1-8 cores, log-normal runtimes of tens of seconds; the same
sequence for every configuration of one repetition), and runs the same Montage-shaped Parsl workflow
(``--stages``: name:tasks:seconds, each stage's tasks wait for every task of the previous one) under

- ``htex-bigjob``: HTEX + SlurmProvider, one block sized for the widest stage (``nodes_per_block`` nodes,
  ``init_blocks=1``, ``max_blocks=1``, ``Config(strategy="none")``);
- ``htex-bigjob-split``: the same cores as two blocks of half the nodes each (``init_blocks=2``,
  ``max_blocks=2``; one block when the widest stage fits one node): Parsl's Big-Job in the split shape the
  Elastic ``-split`` configurations get (HTEX asks whole nodes, so a block cannot be narrower than one);
- ``htex-auto``: HTEX + SlurmProvider with Parsl's own scaling (``init_blocks=0``, one-node blocks,
  ``max_blocks`` = the nodes of the widest stage, ``Config(strategy="htex_auto_scale")``, Parsl's default
  ``max_idletime`` of 120 s);
- ``elastic-bigjob``, ``elastic-perstage``, ``elastic-asa``: ``ElasticExecutor`` with that strategy, on
  ``SlurmBackend``, apps annotated with ``parsl_resource_specification={"runtime": seconds}``; the runs of one
  invocation share a store, so later repetitions start from the waits and runtimes earlier ones saw;
- ``elastic-bigjob-split``, ``elastic-perstage-split``: the same baselines in ``elastic compare``'s split
  shape (``job_cores`` = half the widest stage, rounded up: :func:`benchmarks.slurm_queue.elastic_strategy`),
  as ``asa`` asks its allocations in pieces; the fair comparison reads ``asa`` against the better shape of
  each baseline;
- ``elastic-asa-split``: ``asa`` under the split baselines' cap (``job_cores`` = half the widest stage): on
  whole nodes its own pieces stay whole nodes, the baselines' cap splits inside one;
- ``elastic-bigjob-fine``, ``elastic-perstage-fine``, ``elastic-asa-fine``: every allocation in jobs of one
  task (``job_cores=1``, ``elastic compare``'s ``fine`` shape), which start in backfill holes a wider job
  waits for. HTEX's finest shape is ``htex-auto``'s one-node blocks.

HTEX workers are told the node has ``cores_per_node`` cores (``PARSL_CORES``): the local cluster's nodes all
live on this 2-core machine, and the tasks only sleep. For each run: makespan (from ``parsl.load``, where HTEX
submits its first block, to the last result), core-hours charged (from Slurm's own job records: cores x (end -
start) of every batch job of the run, in Slurm's whole seconds, so up to cores x 1 s per job short: the CSV's
``core_h_resolution``), the widest batch job that ran (``widest_job_cores``: the shape the run used), idle
core-hours (charged - the tasks' own core-seconds), and per-stage waits (from the last task end of the
previous stage, or ``parsl.load``, to the last task start of the stage: when the cores for all its tasks were
there), all measured by the tasks themselves and by Slurm, whatever the executor. Each task also reports its
batch job (``SLURM_JOB_ID``): ``tasks_outside`` counts tasks whose job was not charged.

    .venv/bin/python benchmarks/compare_parsl_slurm.py [--reps 3] [--configs htex-bigjob,...] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import parsl
from parsl.config import Config
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._support import LocalSlurmCluster  # noqa: E402
from benchmarks.slurm_queue import (  # noqa: E402
    Background,
    Outcome,
    add_options,
    charge,
    check_options,
    elastic_strategy,
    marker,
    run_jobs,
    stage_times,
    summarise,
    widest_job,
)
from elastic.backends.slurm import SlurmBackend  # noqa: E402

CONFIGS = (
    "htex-bigjob",
    "htex-bigjob-split",
    "htex-auto",
    "elastic-bigjob",
    "elastic-bigjob-split",
    "elastic-perstage",
    "elastic-perstage-split",
    "elastic-asa",
    "elastic-asa-split",
    "elastic-bigjob-fine",
    "elastic-perstage-fine",
    "elastic-asa-fine",
)


def _stage_app(name: str) -> Any:
    def run(
        seconds: float, *after: Any, parsl_resource_specification: Any = None
    ) -> tuple[float, float, str]:
        import os
        import time

        start = time.time()
        time.sleep(seconds)
        return start, time.time(), os.environ.get("SLURM_JOB_ID", "")  # workers inherit their job's id

    run.__name__ = run.__qualname__ = name  # the app's name is its stage
    return parsl.python_app(run)


def run_workflow(stages: Sequence[tuple[str, int, float]], annotate: bool) -> list[list[Any]]:
    """Invoke every app at once (each stage after all of the previous one); return per-stage results."""
    previous: list[Any] = []
    futures = []
    for name, tasks, seconds in stages:
        app = _stage_app(name)
        spec = {"runtime": seconds} if annotate else {}
        previous = [app(seconds, *previous, parsl_resource_specification=spec) for _ in range(tasks)]
        futures.append(previous)
    return [[f.result(timeout=3600) for f in stage] for stage in futures]


def htex_blocks(config: str, widest: int, cores_per_node: int) -> tuple[int, int, int]:
    """Return ``(nodes_per_block, init_blocks, max_blocks)`` of an ``htex-...`` configuration.

    ``htex-bigjob``: one block of the widest stage's nodes; ``htex-bigjob-split``: those nodes as two blocks
    of half of them, rounded up (one block if they are one node); ``htex-auto``: none at first, then up to
    that many one-node blocks.

    >>> htex_blocks("htex-bigjob", 6, 4), htex_blocks("htex-bigjob-split", 6, 4)
    ((2, 1, 1), (1, 2, 2))
    >>> htex_blocks("htex-bigjob-split", 12, 4), htex_blocks("htex-bigjob-split", 3, 4)
    ((2, 2, 2), (1, 1, 1))
    """
    nodes = math.ceil(widest / cores_per_node)
    if config == "htex-bigjob":
        return nodes, 1, 1
    if config == "htex-bigjob-split":
        per_block = math.ceil(nodes / 2)
        blocks = math.ceil(nodes / per_block)
        return per_block, blocks, blocks
    return 1, 0, nodes


def make_executor(
    config: str,
    cluster: LocalSlurmCluster,
    stages: Sequence[tuple[str, int, float]],
    run_dir: Path,
    store: str,
) -> Any:
    if config.startswith("elastic-"):
        from elastic.executors.parsl_executor import ElasticExecutor

        backend = SlurmBackend(partition="debug", env=cluster.env, workdir=run_dir / "jobs")
        strategy, job_cores = elastic_strategy(config, stages)
        return ElasticExecutor(
            backend=backend, strategy=strategy, store=store, workflow="compare-montage", poll_interval=2.0,
            job_cores=job_cores,
        )  # fmt: skip
    from parsl.executors import HighThroughputExecutor
    from parsl.launchers import SingleNodeLauncher, SrunLauncher
    from parsl.providers import SlurmProvider

    widest = max(t for _, t, _ in stages)
    per_block, init_blocks, max_blocks = htex_blocks(config, widest, cluster.cores_per_node)
    provider = SlurmProvider(
        partition="debug", nodes_per_block=per_block, init_blocks=init_blocks, min_blocks=0,
        max_blocks=max_blocks, walltime="00:30:00", cmd_timeout=30,
        worker_init=f"export PARSL_CORES={cluster.cores_per_node}",
        launcher=SrunLauncher() if per_block > 1 else SingleNodeLauncher(),
    )  # fmt: skip
    return HighThroughputExecutor(
        label="htex", address="127.0.0.1", max_workers_per_node=cluster.cores_per_node, provider=provider
    )


Stages = list[tuple[str, int, float]]


def one_run(
    config: str, rep: int, cluster: LocalSlurmCluster, stages: Stages, args: argparse.Namespace, out_dir: Path
) -> Outcome:
    cluster.cancel_all(wait=30)
    run_dir = out_dir / f"{config}-{rep}"
    first_id = marker(cluster)
    background = Background(cluster, args.load, seed=rep)
    background.start()
    time.sleep(args.warmup)  # the queue is busy before the workflow comes
    executor = make_executor(config, cluster, stages, run_dir, f"sqlite:///{out_dir / 'store.db'}")
    strategy = "htex_auto_scale" if config == "htex-auto" else "none"
    t0 = time.time()  # before parsl.load: HTEX submits its first block there
    dfk = parsl.load(
        Config(
            executors=[executor],
            run_dir=str(run_dir),
            strategy=strategy,
            initialize_logging=args.workdir is not None,  # parsl.log in each kept run directory
        )
    )
    try:
        results = run_workflow(stages, annotate=config.startswith("elastic-"))
    finally:
        dfk.cleanup()
        parsl.clear()
        background.stop()
    end, waits, used = stage_times(results, t0)
    last_id = marker(cluster)
    cluster.cancel_all(wait=30)
    ours = run_jobs(cluster, first_id, last_id, background)
    charged, jobs, resolution, counted = charge(ours)
    outside = sum(1 for stage in results for task in stage if task[2] not in counted)
    return Outcome(
        config, rep, end - t0, charged, used, waits, jobs, resolution=resolution, outside=outside,
        widest_job=widest_job(ours),
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_options(parser, CONFIGS, "workflow")
    args = parser.parse_args(argv)
    configs, stages = check_options(parser, args, CONFIGS)
    if args.load < 0 or args.warmup < 0:
        parser.error("--load and --warmup must be >= 0")
    # HTEX starts interchange.py and process_worker_pool.py from PATH; workers inherit this environment
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    console = Console(width=160)
    outcomes: list[Outcome] = []
    with (
        (
            tempfile.TemporaryDirectory(prefix="compare-parsl-")
            if args.workdir is None
            else contextlib.nullcontext(str(args.workdir))
        ) as tmp,
        LocalSlurmCluster(Path(tmp) / "slurm") as cluster,
    ):
        os.environ["SLURM_CONF"] = cluster.env["SLURM_CONF"]
        os.environ["PATH"] = cluster.env["PATH"]
        priority = [
            line for line in cluster.run(["scontrol", "show", "config"]).stdout.splitlines()
            if line.startswith(("PriorityType", "SchedulerType"))
        ]  # fmt: skip
        console.print(
            f"cluster: {cluster.nodes} x {cluster.cores_per_node} cores; "
            + "; ".join(" ".join(p.split()) for p in priority)
        )
        for rep in range(args.reps):
            order = (
                configs[rep % len(configs) :] + configs[: rep % len(configs)]
            )  # rotate: no config always first
            for config in order:
                started = time.time()
                outcome = one_run(config, rep, cluster, stages, args, Path(tmp))
                outcomes.append(outcome)
                waits = [round(w) for w in outcome.waits]
                console.print(
                    f"rep {rep} {config}: makespan {outcome.makespan:.0f} s, "
                    f"charged {outcome.charged:.3f} core-h, idle {outcome.idle:.3f}, waits {waits} "
                    f"({time.time() - started:.0f} s)"
                )
    summarise(outcomes, stages, CONFIGS, "staged Parsl workflow on the busy local Slurm cluster", console)
    if args.csv is not None:
        with args.csv.open("w", newline="") as fh:
            writer = csv.writer(fh)
            head = ["config", "rep", "makespan_s", "core_h_charged", "core_h_used", "core_h_idle", "jobs"]
            head += ["core_h_resolution", "tasks_outside", "widest_job_cores"]
            writer.writerow([*head, *[f"wait_{n}_s" for n, *_ in stages]])
            for o in outcomes:
                writer.writerow([o.config, o.rep, f"{o.makespan:.1f}", f"{o.charged:.4f}", f"{o.used:.4f}",
                                 f"{o.idle:.4f}", o.jobs, f"{o.resolution:.4f}", o.outside, o.widest_job,
                                 *[f"{w:.1f}" for w in o.waits]])  # fmt: skip


if __name__ == "__main__":
    main()
