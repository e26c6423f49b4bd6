"""``elastic fidelity``: how closely each mock-backend mode reproduces a trace's recorded waits.

``elastic fidelity --trace PATH [--processors N] [--cores LO:HI] [--modes replay,recorded,...]
[--reserve X] [--capacity-window 12h] [--no-queue-rules] [--order conservative|fcfs] [--out FILE.csv]``

``--processors`` gives the machine's size when the trace's header does not (the reader's warning asks
for it), or scales the trace's jobs to another size, as for ``elastic simulate``.

For the trace's own jobs of ``LO``-``HI`` cores, prints simulated vs recorded wait (mean, median, p90,
share started at once), the median per-job error and the per-job Spearman rank correlation, one row
per mode (see :mod:`elastic.simulator.fidelity` and :mod:`elastic.simulator.fidelity_report`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Hashable, Mapping
from typing import Any

from elastic.cli.arguments import add_capacity_window, add_queue_rules_argument, capacity_window, read_trace
from elastic.cli.commands import add_command
from elastic.cli.outputs import check_output, write_output
from elastic.cli.values import parse_cores, parse_modes, parse_reserve, processors
from elastic.errors import ConfigError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``fidelity`` subcommand."""
    from elastic.simulator.fidelity import MODES
    from elastic.simulator.pinned import PINNED_ORDERS

    parser = add_command(
        subparsers,
        "fidelity",
        run,
        description=(
            "Simulate a trace under each mock-backend mode (replay, recorded schedule, user chains, "
            "calibrated reserve, recorded capacity) and compare the simulated waits of the trace's own "
            "jobs of a size class with the waits they really had."
        ),
    )
    parser.add_argument("--trace", metavar="PATH", required=True, help="SWF trace with recorded waits")
    parser.add_argument(
        "--processors",
        type=processors,
        default=None,
        metavar="N",
        help="the machine's cores when the trace's header does not say (else: scale the jobs to N cores)",
    )
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
    add_queue_rules_argument(parser)
    parser.add_argument("--out", metavar="FILE", help="also write the report table (.csv)")


def run(args: argparse.Namespace) -> int:
    """Run ``elastic fidelity``; return the exit code."""
    from rich.console import Console
    from rich.table import Table

    from elastic.simulator.fidelity_report import fidelity_report

    out = check_output(args.out, "--out", (".csv",))
    if args.reserve is not None and "calibrated" not in args.modes:
        raise ConfigError("--reserve sets the calibrated mode's reserve: add calibrated to --modes")
    if args.capacity_window is not None and "capacity" not in args.modes:
        raise ConfigError("--capacity-window sets the capacity mode's look-back: add capacity to --modes")
    console = Console()
    if not console.is_terminal and console.width < 200:  # pipes and files get the whole table
        console = Console(width=200)
    t0 = time.perf_counter()
    workload = read_trace(
        args.trace,
        "fidelity",
        needs_waits="elastic fidelity compares simulated with recorded waits",
        processors=args.processors,
    ).workload
    with console.status("simulating the modes (the calibrated one runs several half-trace simulations)"):
        report = fidelity_report(
            workload,
            cores=args.cores,
            modes=args.modes,
            reserve=args.reserve,
            order=args.order,
            window=capacity_window(args),
            queues=not args.no_queue_rules,
        )
    lo, hi = args.cores
    table = Table(
        title=f"elastic fidelity: {workload.source}, jobs of {lo}-{hi} cores (simulated / recorded)"
    )
    for col in (
        "mode",
        "setting",
        "jobs",
        "mean wait",
        "median wait",
        "p90 wait",
        "started at once",
        "median |error|",
        "Spearman",
        "goal",
    ):
        table.add_column(col, justify="left" if col == "mode" else "right", no_wrap=col != "mode")
    for row in report.to_dict("records"):
        table.add_row(
            str(row["mode"]),
            _setting(row),
            f"{row['jobs']:,}",
            f"{_hms(row['mean_wait'])} / {_hms(row['recorded_mean_wait'])}",
            f"{_hms(row['median_wait'])} / {_hms(row['recorded_median_wait'])}",
            f"{_hms(row['p90_wait'])} / {_hms(row['recorded_p90_wait'])}",
            f"{row['started_at_once']:.1%} / {row['recorded_started_at_once']:.1%}",
            _hms(row["median_abs_error"]),
            f"{row['spearman']:.3f}",
            "yes" if row["meets_goal"] else ("median" if row["spearman"] >= 0.6 else "no"),
        )
    console.print(table)
    console.print(
        "goal: Spearman >= 0.6 and median within 2x of recorded (or within 10 min when the recorded "
        "median is under 5 min); 'median': Spearman met, median not. "
        f"{time.perf_counter() - t0:.0f} s in all",
        highlight=False,
    )
    if out is not None:
        write_output(out, "--out", lambda path: report.to_csv(path, index=False))
        console.print(f"wrote the report to {out}", highlight=False)
    return 0


def _setting(row: Mapping[Hashable, Any]) -> str:
    mode = str(row["mode"])
    if mode.startswith("calibrated"):
        return f"reserve {row['reserve']}"
    window = float(row["window"])
    if window != window:  # NaN: not the capacity mode
        return "-"
    parts = [f"window {window / 3600:g} h"]
    if row.get("fast_queues"):
        parts.append(f"queues {', '.join(str(row['fast_queues']).split())} apart")
    if row.get("short_queues"):
        parts.append(f"{', '.join(str(row['short_queues']).split())} first")
    return "; ".join(parts)


def _hms(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
