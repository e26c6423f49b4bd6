"""``elastic simulate``: replay a workload on the simulated partition and summarise the schedule.

``elastic simulate [--trace PATH] [--policy easy|conservative|fcfs|sejf|lejf] [--speculative]
[--window START:END] [--load FACTOR] [--processors N] [--estimate-ratio R] [--jobs N] [--seed S]
[--out FILE.csv|FILE.parquet]``

Without ``--trace`` the background load is synthetic (Poisson arrivals, see
:func:`elastic.simulator.synthetic.synthetic_workload`). Prints a summary table and a table by job size;
writes the per-job records when ``--out`` is given.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from elastic.cli.arguments import parse_window, positive_float, positive_int
from elastic.errors import ConfigError
from elastic.simulator.base import POLICIES

__all__ = ["register"]


#: Show a progress bar for workloads at least this long.
_PROGRESS_MIN_JOBS = 20_000


def register(subparsers: Any) -> None:
    """Add the ``simulate`` subcommand."""
    parser = subparsers.add_parser(
        "simulate",
        help="replay a workload (SWF trace or synthetic) on the simulated partition",
        description=(
            "Replay background jobs on one simulated Slurm-like partition under a queue policy, print "
            "utilisation, waits and slowdowns (overall and by job size), and optionally write the "
            "per-job table."
        ),
    )
    parser.add_argument(
        "--trace", metavar="PATH", help="SWF trace (.swf or .swf.gz); default: synthetic load"
    )
    parser.add_argument(
        "--policy",
        choices=sorted(POLICIES),
        help="queue policy (default: easy; recorded modes: conservative (default) or fcfs)",
    )
    parser.add_argument(
        "--speculative", action="store_true", help="speculative backfilling (with --policy easy)"
    )
    parser.add_argument(
        "--window",
        type=parse_window,
        metavar="START:END",
        help="trace only: keep jobs submitted in this window, e.g. 0h:720h or 30d:60d",
    )
    parser.add_argument(
        "--load",
        type=positive_float,
        default=1.0,
        metavar="FACTOR",
        help="arrival-rate factor: 2 = jobs arrive twice as often (synthetic: scales utilisation 0.7)",
    )
    parser.add_argument(
        "--processors", type=positive_int, metavar="N", help="partition cores (trace: scales job sizes)"
    )
    parser.add_argument(
        "--estimate-ratio",
        type=positive_float,
        metavar="R",
        help="walltime = runtime x R for jobs without a request (trace default 1, synthetic default 2)",
    )
    parser.add_argument("--jobs", type=positive_int, default=10_000, metavar="N", help="synthetic jobs")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="synthetic seed (default: 0)")
    parser.add_argument("--out", metavar="FILE", help="write the per-job table (.csv or .parquet)")
    from elastic.cli.arguments import add_mode_arguments

    add_mode_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``elastic simulate``; return the exit code."""
    from rich.console import Console

    from elastic.simulator.base import make_policy
    from elastic.simulator.engine import Engine

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix not in (".csv", ".parquet"):
        raise ConfigError(f"--out must end in .csv or .parquet, got {args.out!r}")
    if args.mode == "replay":
        policy = make_policy(args.policy or "easy", speculative=args.speculative)
    elif not args.trace:
        raise ConfigError(f"--mode {args.mode} pins a trace's recorded schedule: it needs --trace")
    console = Console()
    t0 = time.perf_counter()
    if args.trace:
        from elastic.cli.arguments import read_trace

        needs = None if args.mode == "replay" else f"--mode {args.mode} pins the recorded schedule"
        workload = read_trace(
            args.trace,
            "simulate",
            needs_waits=needs,
            window=args.window,
            load=args.load,
            processors=args.processors,
            estimate_ratio=args.estimate_ratio or 1.0,
        ).workload
    else:
        if args.window is not None:
            raise ConfigError("--window needs --trace (synthetic load has no clock to cut)")
        from elastic.simulator.synthetic import DEFAULT_UTILISATION, synthetic_workload

        workload = synthetic_workload(
            jobs=args.jobs,
            processors=args.processors or 256,
            utilisation=DEFAULT_UTILISATION * args.load,
            estimate_ratio=args.estimate_ratio or 2.0,
            seed=args.seed,
        )
    t_read = time.perf_counter()
    if args.mode == "replay":
        engine = Engine(nodes=workload.processors, policy=policy, workload=workload)
    else:
        from elastic.cli.arguments import mode_engine_from_args

        engine = mode_engine_from_args(args, workload, console)
        t_read = time.perf_counter()
    _run_with_progress(engine, len(workload), console)
    t_sim = time.perf_counter()
    records = engine.records()
    _print_summary(console, args, workload, engine, records, t_read - t0, t_sim - t_read)
    if out is not None:
        if out.suffix == ".csv":
            records.to_csv(out, index=False)
        else:
            frame = records.astype({"job_id": str, "name": str, "user": str, "exit_code": "Int64"})
            frame.to_parquet(out, index=False)
        console.print(f"wrote {len(records):,} job records to {out}")
    return 0


def _run_with_progress(engine: Any, jobs: int, console: Any) -> None:
    if jobs < _PROGRESS_MIN_JOBS or not console.is_terminal:
        engine.run()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("jobs", total=jobs)
        engine.run(progress=lambda arrived: bar.update(task, completed=arrived))


def _print_summary(
    console: Any,
    args: argparse.Namespace,
    workload: Any,
    engine: Any,
    records: Any,
    t_read: float,
    t_sim: float,
) -> None:
    from rich.table import Table

    from elastic.simulator.metrics import by_size, summarize

    processors = workload.processors
    summary = summarize(records, processors=processors)
    policy = engine.policy.name
    table = Table(title=f"elastic simulate: {workload.source}", show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("policy", policy),
        ("partition", f"{processors} cores"),
        ("jobs", f"{len(records):,} ({summary.jobs:,} started)"),
        ("final states", ", ".join(f"{k} {v:,}" for k, v in records["state"].value_counts().items())),
        ("utilisation", f"{summary.utilisation:.1%}"),
        ("mean wait", _hms(summary.mean_wait)),
        ("median wait", _hms(summary.median_wait)),
        ("p90 wait", _hms(summary.p90_wait)),
        ("started at once", f"{summary.started_at_once:.1%}"),
        ("mean response", _hms(summary.mean_response)),
        ("mean bounded slowdown (10 s)", f"{summary.mean_bounded_slowdown:.2f}"),
        ("mean stretch", f"{summary.mean_stretch:.2f}"),
    ]
    speculations = getattr(engine.policy, "speculations", None)
    if speculations is not None:
        rows.append(("speculative runs", f"{speculations:,} ({int(records['requeues'].sum()):,} killed)"))
    rows.append(
        ("read / simulate", f"{t_read:.2f} s / {t_sim:.2f} s ({len(records) / max(t_sim, 1e-9):,.0f} jobs/s)")
    )
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    sizes = by_size(records, processors=processors)
    size_table = Table(title="by job size (cores)")
    for col in ("cores", "jobs", "mean wait", "median wait", "bounded slowdown", "started at once"):
        size_table.add_column(col, justify="right")
    for label, row in sizes.iterrows():
        size_table.add_row(
            str(label),
            f"{int(row['jobs']):,}",
            _hms(row["mean_wait"]),
            _hms(row["median_wait"]),
            f"{row['mean_bounded_slowdown']:.2f}",
            f"{row['started_at_once']:.1%}",
        )
    console.print(size_table)


def _hms(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
