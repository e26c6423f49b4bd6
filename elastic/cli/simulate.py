"""``elastic simulate``: replay a workload on the simulated partition and summarise the schedule.

``elastic simulate [--trace PATH] [--policy easy|conservative|fcfs|sejf|lejf] [--speculative]
[--priority age|basic|accrue-always] [--window START:END] [--load FACTOR] [--processors N]
[--estimate-ratio R] [--jobs N] [--seed S] [--out FILE.csv|FILE.parquet]``

Without ``--trace`` the background load is synthetic (Poisson arrivals, see
:func:`elastic.simulator.synthetic.synthetic_workload`). Prints a summary table and a table by job size;
writes the per-job records when ``--out`` is given. No job of a trace or of the synthetic load waits on
a dependency or a begin time, so ``--priority`` (printed in the summary) does not change a replay; it
is there so that the engine is the one the mock backend builds.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from elastic.cli.commands import add_command
from elastic.cli.outputs import check_output, write_output
from elastic.cli.values import (
    int_in_range,
    parse_seed,
    parse_window,
    positive_float,
    processors,
)
from elastic.errors import ConfigError
from elastic.simulator.base import POLICIES
from elastic.simulator.synthetic import MAX_JOBS

__all__ = ["register"]


#: Show a progress bar for workloads at least this long.
_PROGRESS_MIN_JOBS = 20_000


def register(subparsers: Any) -> None:
    """Add the ``simulate`` subcommand."""
    parser = add_command(
        subparsers,
        "simulate",
        run,
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
        "--processors", type=processors, metavar="N", help="partition cores (trace: scales job sizes)"
    )
    parser.add_argument(
        "--estimate-ratio",
        type=positive_float,
        metavar="R",
        help="walltime = runtime x R for jobs without a request (trace default 1, synthetic default 2)",
    )
    parser.add_argument(
        "--jobs",
        type=int_in_range(1, MAX_JOBS, "every job is held in memory, about 1 kB each"),
        default=None,
        metavar="N",
        help="synthetic jobs (default: 10000)",
    )
    parser.add_argument("--seed", type=parse_seed, default=0, metavar="S", help="synthetic seed (default: 0)")
    parser.add_argument("--out", metavar="FILE", help="write the per-job table (.csv or .parquet)")
    from elastic.cli.arguments import add_mode_arguments, add_priority_argument

    add_mode_arguments(parser)
    add_priority_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Run ``elastic simulate``; return the exit code."""
    from rich.console import Console

    from elastic.simulator.base import make_policy
    from elastic.simulator.engine import Engine

    out = check_output(args.out, "--out", (".csv", ".parquet"))
    if args.trace and args.jobs is not None:
        raise ConfigError(
            f"--jobs {args.jobs} sets the size of the synthetic load; with --trace cut the trace with "
            "--window instead"
        )
    if args.reserve is not None and args.mode != "calibrated":
        raise ConfigError(f"--reserve applies to --mode calibrated only, not --mode {args.mode}")
    if args.capacity_window is not None and args.mode != "capacity":
        raise ConfigError(f"--capacity-window applies to --mode capacity only, not --mode {args.mode}")
    if args.no_queue_rules and args.mode != "capacity":
        raise ConfigError(f"--no-queue-rules applies to --mode capacity only, not --mode {args.mode}")
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
            jobs=10_000 if args.jobs is None else args.jobs,
            processors=args.processors or 256,
            utilisation=DEFAULT_UTILISATION * args.load,
            estimate_ratio=args.estimate_ratio or 2.0,
            seed=args.seed,
        )
    t_read = time.perf_counter()
    if args.mode == "replay":
        engine = Engine(
            nodes=workload.processors, policy=policy, workload=workload, priority=args.priority or "age"
        )
    else:
        from elastic.cli.arguments import mode_engine_from_args

        engine = mode_engine_from_args(args, workload, console)
        t_read = time.perf_counter()
    _run_with_progress(engine, len(workload), console)
    t_sim = time.perf_counter()
    records = engine.records()
    _print_summary(console, args, workload, engine, records, t_read - t0, t_sim - t_read)
    if out is not None:
        if out.suffix.lower() == ".csv":
            write_output(out, "--out", lambda path: records.to_csv(path, index=False))
        else:
            frame = records.astype({"job_id": str, "name": str, "user": str, "exit_code": "Int64"})
            write_output(out, "--out", lambda path: frame.to_parquet(path, index=False))
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
        ("priority model", engine.ranking.name),
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
