"""A staged Prefect flow on a busy local Slurm cluster: DaskTaskRunner + dask-jobqueue beside Elastic.

On demand, not in CI. The script starts its own Slurm cluster on this machine
(``tests/fixtures/slurm_cluster.py``: 4 nodes x 4 cores, partition ``debug``) and its own Prefect server on
127.0.0.1 (``tests/fixtures/prefect_server.py``), keeps the queue busy with background sleep jobs it
submits (``--load`` offered load, Poisson arrivals, 1-8 cores, log-normal runtimes of tens of seconds; the
same sequence for every configuration of one repetition), and runs the same staged flow (``--stages``:
name:tasks:seconds; each stage's tasks ``wait_for`` every task of the previous one, all submitted at once,
``benchmarks/prefect_stages.py``) under

- ``dask-adapt``: ``DaskTaskRunner(cluster_class=dask_jobqueue.SLURMCluster, adapt_kwargs={"minimum": 0,
  "maximum": widest stage})``, one single-core worker per batch job (Dask's ``Adaptive`` defaults);
- ``dask-fixed``: the same cluster with ``n_workers`` = the widest stage (``scale(widest)``) from the start;
- ``elastic-bigjob``, ``elastic-perstage``, ``elastic-asa``: ``ElasticTaskRunner`` with that strategy on
  ``SlurmBackend``; the runs of one invocation share a store, so later repetitions start from the waits and
  runtimes earlier ones saw;
- ``elastic-bigjob-split``, ``elastic-perstage-split``: the same baselines in ``elastic compare``'s split
  shape (``job_cores`` = half the widest stage, rounded up: :func:`benchmarks.slurm_queue.elastic_strategy`),
  as ``asa`` asks its allocations in pieces; the fair comparison reads ``asa`` against the better shape of
  each baseline;
- ``elastic-bigjob-fine``, ``elastic-perstage-fine``, ``elastic-asa-fine``: every allocation in jobs of one
  task (``job_cores=1``, ``elastic compare``'s ``fine`` shape). ``--job-cores`` sets the plain Elastic
  configurations' ``job_cores``, not the split or fine ones.

Dask configurations need ``prefect-dask`` and ``dask-jobqueue``; without them they are left out, with the
reason. For each run: makespan (from the flow call, before any cluster or allocation exists, to the last task
end), core-hours charged (from Slurm's job records: cores x (end - start) of every batch job of the run, in
whole seconds, so up to cores x 1 s per job short: the CSV's ``core_h_resolution``; each task reports its job,
and ``tasks_outside`` counts tasks whose job was not charged), the widest batch job that ran
(``widest_job_cores``: the shape the run used), idle core-hours (charged - the tasks' own core-seconds),
per-stage waits (from the last task end of the previous stage, or the flow call, to the last task start of the
stage: when the cores for all its tasks were there), batch jobs, *released mid-flow* (batch jobs of the run
that ended before the last stage's first task started) and *requeued* (batch jobs of the run submitted after
one of its jobs had been released mid-flow: release-and-requeue).

    .venv/bin/python benchmarks/compare_prefect_slurm.py [--reps 3] [--configs dask-adapt,...] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

# first: on import it gives Prefect a private PREFECT_HOME and turns telemetry off, before Prefect is imported
from benchmarks._support import private_prefect_home  # noqa: E402

private_prefect_home()

from rich.console import Console  # noqa: E402

from benchmarks._support import LocalSlurmCluster, start_prefect_server, stop_prefect_server  # noqa: E402
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
    "dask-adapt",
    "dask-fixed",
    "elastic-bigjob",
    "elastic-bigjob-split",
    "elastic-perstage",
    "elastic-perstage-split",
    "elastic-asa",
    "elastic-bigjob-fine",
    "elastic-perstage-fine",
    "elastic-asa-fine",
)


def dask_missing() -> str | None:
    """Why the Dask configurations cannot run here, or None."""
    try:
        import dask_jobqueue  # noqa: F401
        import prefect_dask  # noqa: F401
    except ImportError as exc:
        return f"{exc}; pip install prefect-dask dask-jobqueue to include them"
    return None


def make_runner(
    config: str,
    cluster: LocalSlurmCluster,
    stages: Sequence[tuple[str, int, float]],
    run_dir: Path,
    store: Any,
    job_cores: int | None = None,
) -> Any:
    """Return the task runner of ``config``; ``job_cores`` for the plain Elastic ones (not split or fine)."""
    if config.startswith("elastic-"):
        from elastic.executors.prefect_runner import ElasticTaskRunner

        backend = SlurmBackend(partition="debug", env=cluster.env, workdir=run_dir / "jobs")
        strategy, split = elastic_strategy(config, stages)
        job_cores = job_cores if split is None else split
        return ElasticTaskRunner(
            backend,
            strategy,
            store=store,
            workflow="compare-prefect-montage",
            poll_interval=2.0,
            job_cores=job_cores,
        )
    from prefect_dask import DaskTaskRunner

    widest = max(t for _, t, _ in stages)
    run_dir.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {
        "queue": "debug",
        "cores": 1,
        "processes": 1,
        "memory": "1GB",  # required by dask-jobqueue; the test nodes declare no memory, so not requested
        "job_directives_skip": ["--mem"],
        "walltime": "00:30:00",
        "log_directory": str(run_dir / "dask-logs"),
        "scheduler_options": {"dashboard_address": None},
    }
    if config == "dask-fixed":
        return DaskTaskRunner(
            cluster_class="dask_jobqueue.SLURMCluster", cluster_kwargs={**kwargs, "n_workers": widest}
        )
    return DaskTaskRunner(
        cluster_class="dask_jobqueue.SLURMCluster",
        cluster_kwargs=kwargs,
        adapt_kwargs={"minimum": 0, "maximum": widest},
    )


Stages = list[tuple[str, int, float]]


def one_run(
    config: str,
    rep: int,
    cluster: LocalSlurmCluster,
    stages: Stages,
    args: argparse.Namespace,
    store: Any,
    breakdown: list[str] | None = None,
) -> Outcome:
    from prefect import flow
    from prefect_stages import staged_flow

    cluster.cancel_all(wait=30)
    run_dir = args.out_dir / f"{config}-{rep}"
    first_id = marker(cluster)
    background = Background(cluster, args.load, seed=rep)
    background.start()
    time.sleep(args.warmup)  # the queue is busy before the flow comes
    runner = make_runner(config, cluster, stages, run_dir, store, args.job_cores)
    body = flow(name=f"compare-{config}", task_runner=runner, timeout_seconds=args.timeout)(staged_flow)
    t0 = time.time()  # before the runner starts: the Dask cluster and Elastic's pool start in the flow call
    try:
        state = body(stages, return_state=True)
    finally:
        background.stop()
    if not state.is_completed():
        raise RuntimeError(f"{config} rep {rep}: the flow run ended {state.type.value}: {state.message}")
    results = state.result()
    end, waits, used = stage_times(results, t0)
    last_stage_start = min(task[0] for task in results[-1])
    last_id = marker(cluster)
    cluster.cancel_all(wait=30)
    ours = run_jobs(cluster, first_id, last_id, background)
    charged, jobs, resolution, counted = charge(ours)
    ends, submits = [], []
    for job, info in ours:
        submits.append(info.submit_time)
        if info.start_time is not None and info.end_time is not None:
            if info.end_time < last_stage_start:
                ends.append(info.end_time)
            if breakdown is not None:
                mine = [task for stage in results for task in stage if task[2] == job]
                busy = sum(task[1] - task[0] for task in mine)
                held = info.cores * (info.end_time - info.start_time)
                first = f"{min(t[0] for t in mine) - info.start_time:5.1f}" if mine else "    -"
                tail = f"{info.end_time - max(t[1] for t in mine):5.1f}" if mine else "    -"
                breakdown.append(
                    f"  job {job}: {info.cores} cores, submitted {info.submit_time - t0:6.1f} s, "
                    f"ran {info.start_time - t0:6.1f}-{info.end_time - t0:6.1f} s, {len(mine)} tasks, "
                    f"busy {busy:5.0f} of {held:5.0f} core-s, first task after {first} s, "
                    f"ended {tail} s after its last task"
                )
    requeued = sum(1 for s in submits if ends and s is not None and s > min(ends))
    outside = sum(1 for stage in results for task in stage if task[2] not in counted)
    return Outcome(
        config, rep, end - t0, charged, used, waits, jobs, len(ends), requeued, resolution, outside,
        widest_job(ours),
    )  # fmt: skip


def write_csv(path: Path, outcomes: list[Outcome], stages: Stages) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        head = ["config", "rep", "makespan_s", "core_h_charged", "core_h_used", "core_h_idle", "jobs"]
        head += ["released", "requeued", "core_h_resolution", "tasks_outside", "widest_job_cores"]
        writer.writerow([*head, *[f"wait_{n}_s" for n, *_ in stages]])
        for o in outcomes:
            writer.writerow([o.config, o.rep, f"{o.makespan:.1f}", f"{o.charged:.4f}", f"{o.used:.4f}",
                             f"{o.idle:.4f}", o.jobs, o.released, o.requeued, f"{o.resolution:.4f}",
                             o.outside, o.widest_job, *[f"{w:.1f}" for w in o.waits]])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_options(parser, CONFIGS, "flow")
    parser.add_argument(
        "--first-rep",
        type=int,
        default=0,
        help="number of the first repetition (0); it seeds the background, so later ones add new queues",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a flow run may take")
    parser.add_argument(
        "--job-cores",
        type=int,
        help="Elastic's plain configurations (not -split or -fine): most cores in one batch job "
        "(default: one job per allocation)",
    )
    parser.add_argument(
        "--jobs", action="store_true", help="after each run, one line per batch job: when it ran, how busy"
    )
    parser.add_argument(
        "--prefect-api-url",
        metavar="URL",
        help="use this running Prefect server (http://HOST:PORT/api) instead of starting a private one",
    )
    args = parser.parse_args(argv)
    configs, stages = check_options(parser, args, CONFIGS)
    if args.first_rep < 0:
        parser.error(f"--first-rep must be >= 0, got {args.first_rep}")
    if args.job_cores is not None and args.job_cores < 1:
        parser.error(f"--job-cores must be >= 1, got {args.job_cores}")
    if args.load < 0 or args.warmup < 0 or args.timeout <= 0:
        parser.error("--load and --warmup must be >= 0, --timeout > 0")
    console = Console(width=170)
    if (why := dask_missing()) is not None and any(c.startswith("dask-") for c in configs):
        console.print(f"dask-adapt, dask-fixed: left out: {why}")
        configs = [c for c in configs if not c.startswith("dask-")]
    # batch jobs (Elastic's agents, Dask's workers) inherit this environment: sbatch exports it
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    outcomes: list[Outcome] = []
    if args.prefect_api_url is None:
        server, proc = start_prefect_server()
        api_url: str = server.api_url
    else:
        proc, api_url = None, args.prefect_api_url
    os.environ["PREFECT_API_URL"] = api_url
    from prefect.context import refresh_global_settings_context

    from elastic.store import Store

    refresh_global_settings_context()
    try:
        with (
            (
                tempfile.TemporaryDirectory(prefix="compare-prefect-")
                if args.workdir is None
                else contextlib.nullcontext(str(args.workdir))
            ) as tmp,
            LocalSlurmCluster(Path(tmp) / "slurm") as cluster,
        ):
            os.environ["SLURM_CONF"] = cluster.env["SLURM_CONF"]
            os.environ["PATH"] = cluster.env["PATH"]
            args.out_dir = Path(tmp)
            store = Store(f"sqlite:///{Path(tmp) / 'store.db'}")
            console.print(
                f"cluster: {cluster.nodes} x {cluster.cores_per_node} cores; Prefect server {api_url}"
            )
            for rep in range(args.first_rep, args.first_rep + args.reps):
                k = rep % len(configs)
                for config in configs[k:] + configs[:k]:  # rotate: no configuration always first
                    started = time.time()
                    lines: list[str] | None = [] if args.jobs else None
                    o = one_run(config, rep, cluster, stages, args, store, lines)
                    outcomes.append(o)
                    console.print(
                        f"rep {rep} {config}: makespan {o.makespan:.0f} s, charged {o.charged:.3f} core-h, "
                        f"idle {o.idle:.3f}, jobs {o.jobs}, released {o.released}, requeued {o.requeued}, "
                        f"waits {[round(w) for w in o.waits]} ({time.time() - started:.0f} s)"
                    )
                    for line in lines or []:
                        console.print(line, highlight=False)
    finally:
        if proc is not None:
            stop_prefect_server(proc)
    summarise(
        outcomes,
        stages,
        CONFIGS,
        "staged Prefect flow on the busy local Slurm cluster",
        console,
        releases=True,
    )
    if args.csv is not None:
        write_csv(args.csv, outcomes, stages)


if __name__ == "__main__":
    main()
