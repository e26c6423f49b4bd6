"""``elastic fidelity``: how closely each mock-backend mode reproduces a trace's recorded waits.

``elastic fidelity --trace PATH [--cores LO:HI] [--modes replay,recorded,...] [--reserve X]
[--capacity-window 12h] [--order conservative|fcfs] [--out FILE.csv]``

For the trace's own jobs of ``LO``-``HI`` cores, prints simulated vs recorded wait (mean, median, p90,
share started at once) and the per-job Spearman rank correlation, one row per mode (see
:mod:`elastic.simulator.fidelity`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from elastic.cli.arguments import (
    add_capacity_window,
    capacity_window,
    parse_cores,
    parse_modes,
    parse_reserve,
    read_trace,
)
from elastic.errors import ConfigError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``fidelity`` subcommand."""
    from elastic.simulator.fidelity import MODES
    from elastic.simulator.pinned import PINNED_ORDERS

    parser = subparsers.add_parser(
        "fidelity",
        help="compare the mock backend's waits with a trace's recorded waits, per mode",
        description=(
            "Simulate a trace under each mock-backend mode (replay, recorded schedule, user chains, "
            "calibrated reserve, recorded capacity) and compare the simulated waits of the trace's own "
            "jobs of a size class with the waits they really had."
        ),
    )
    parser.add_argument("--trace", metavar="PATH", required=True, help="SWF trace with recorded waits")
    parser.add_argument(
        "--cores",
        type=parse_cores,
        default=(16, 128),
        metavar="LO:HI",
        help="evaluated jobs' size class in cores (default: 16:128)",
    )
    parser.add_argument(
        "--modes",
        type=parse_modes,
        default=MODES,
        metavar="LIST",
        help=f"comma-separated modes (default: {','.join(MODES)})",
    )
    parser.add_argument(
        "--reserve",
        type=parse_reserve,
        metavar="CORES",
        help="reserve of the calibrated mode (default: fitted on the first half of the evaluated jobs)",
    )
    add_capacity_window(parser)
    parser.add_argument(
        "--order",
        choices=PINNED_ORDERS,
        default="conservative",
        help="queue discipline of the evaluated jobs in the recorded modes (default: conservative)",
    )
    parser.add_argument("--out", metavar="FILE", help="also write the report table (.csv)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``elastic fidelity``; return the exit code."""
    from rich.console import Console
    from rich.table import Table

    from elastic.simulator.fidelity import fidelity_report

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix != ".csv":
        raise ConfigError(f"--out must end in .csv, got {args.out!r}")
    console = Console()
    t0 = time.perf_counter()
    workload = read_trace(
        args.trace, "fidelity", needs_waits="elastic fidelity compares simulated with recorded waits"
    ).workload
    with console.status("simulating the modes (the calibrated one runs several half-trace simulations)"):
        report = fidelity_report(
            workload,
            cores=args.cores,
            modes=args.modes,
            reserve=args.reserve,
            order=args.order,
            window=capacity_window(args),
        )
    lo, hi = args.cores
    table = Table(
        title=f"elastic fidelity: {workload.source}, jobs of {lo}-{hi} cores (simulated / recorded)"
    )
    for col in (
        "mode",
        "reserve",
        "jobs",
        "mean wait",
        "median wait",
        "p90 wait",
        "started at once",
        "Spearman",
        "goal",
    ):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for row in report.to_dict("records"):
        table.add_row(
            str(row["mode"]),
            str(row["reserve"]),
            f"{row['jobs']:,}",
            f"{_hms(row['mean_wait'])} / {_hms(row['recorded_mean_wait'])}",
            f"{_hms(row['median_wait'])} / {_hms(row['recorded_median_wait'])}",
            f"{_hms(row['p90_wait'])} / {_hms(row['recorded_p90_wait'])}",
            f"{row['started_at_once']:.1%} / {row['recorded_started_at_once']:.1%}",
            f"{row['spearman']:.3f}",
            "yes" if row["meets_goal"] else "no",
        )
    console.print(table)
    console.print(
        f"goal: median within 2x of recorded and Spearman >= 0.6; {time.perf_counter() - t0:.0f} s in all"
    )
    if out is not None:
        report.to_csv(out, index=False)
        console.print(f"wrote the report to {out}")
    return 0


def _hms(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
