"""``elastic traces``: list, download and describe SWF workload traces.

- ``elastic traces list`` shows the short names ``download`` knows.
- ``elastic traces download NAME [--dest DIR] [--base-url URL] [--force]`` fetches one from the
  Parallel Workloads Archive (or a mirror) with a progress bar, and prints the saved path.
- ``elastic traces info PATH [--window START END] [--load F] [--processors N]`` prints the size, span,
  load and header of a trace as :func:`~elastic.simulator.trace.read_swf` reads it.
"""

from __future__ import annotations

import argparse
import datetime
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from elastic.cli.commands import add_command
from elastic.cli.values import positive_float, processors
from elastic.errors import ConfigError
from elastic.simulator.download import DEFAULT_BASE_URL, KNOWN_TRACES, download_trace, resolve_trace
from elastic.simulator.trace import SwfReading, read_swf_report
from elastic.simulator.workload import Workload

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``traces`` subcommand and its ``list``, ``download`` and ``info`` actions."""
    parser = add_command(
        subparsers,
        "traces",
        None,
        description="List, download and describe Standard Workload Format (SWF) traces.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="show the trace names 'download' knows")
    listing.add_argument("--base-url", default=DEFAULT_BASE_URL, help="archive root (default: %(default)s)")
    listing.set_defaults(func=_list)

    download = actions.add_parser(
        "download", help="fetch a trace from the Parallel Workloads Archive (needs internet)"
    )
    download.add_argument("name", metavar="NAME", help="short name (see 'list'), its file name, or a URL")
    download.add_argument("--dest", default=".", help="folder to save into (default: current folder)")
    download.add_argument("--base-url", default=DEFAULT_BASE_URL, help="archive root (default: %(default)s)")
    download.add_argument("--force", action="store_true", help="overwrite an existing file")
    download.add_argument(
        "--timeout", type=positive_float, default=60.0, help="network timeout in seconds (default: 60)"
    )
    download.set_defaults(func=_download)

    info = actions.add_parser("info", help="print jobs, processors, span, load and header of a trace")
    info.add_argument("path", metavar="PATH", help="SWF file (.swf or .swf.gz)")
    info.add_argument(
        "--window",
        nargs=2,
        type=float,
        metavar=("START", "END"),
        help="only jobs submitted in [START, END) seconds since the trace start",
    )
    info.add_argument("--load", type=positive_float, default=1.0, help="arrival-rate factor (default: 1)")
    info.add_argument("--processors", type=processors, default=None, help="scale the machine to N cores")
    info.add_argument("--no-header", action="store_true", help="do not print the header lines")
    info.set_defaults(func=_info)


def _list(args: argparse.Namespace) -> int:
    table = Table(title="Known traces (Parallel Workloads Archive, cleaned logs)")
    table.add_column("name", no_wrap=True)
    table.add_column("system")
    table.add_column("URL", overflow="fold")
    for entry in KNOWN_TRACES.values():
        table.add_row(entry.name, entry.system, entry.url(args.base_url))
    Console().print(table)
    return 0


def _download(args: argparse.Namespace) -> int:
    url, _ = resolve_trace(args.name, args.base_url)
    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as progress:
        task: TaskID = progress.add_task(url.rsplit("/", 1)[-1], total=None)

        def update(done: int, total: int | None) -> None:
            progress.update(task, completed=done, total=total)

        path = download_trace(
            args.name,
            args.dest,
            base_url=args.base_url,
            force=args.force,
            timeout=args.timeout,
            progress=update,
        )
    print(path)
    return 0


def _hms(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))


def _summary(w: Workload) -> list[tuple[str, str]]:
    rows = [("jobs", f"{len(w):,}"), ("processors", f"{w.processors:,}")]
    if len(w) == 0:
        return rows
    first, last = float(w.submit[0]), float(w.submit[-1])
    work = float(np.sum(w.cores * w.runtime))
    rows += [
        ("first submit", f"{first:,.0f} s"),
        ("submit span", f"{last - first:,.0f} s ({_hms(last - first)})"),
        ("core-hours", f"{work / 3600:,.0f}"),
    ]
    if last > first:
        rows.append(("offered load", f"{work / (w.processors * (last - first)):.1%}"))
    known = ~np.isnan(w.recorded_wait)
    if known.any():
        start = w.submit[known] + w.recorded_wait[known]
        end = start + w.runtime[known]
        busy = float(np.sum(w.cores[known] * w.runtime[known]))
        span = float(end.max() - w.submit[known].min())
        if span > 0:
            rows.append(("recorded utilisation", f"{busy / (w.processors * span):.1%}"))
        rows.append(("median recorded wait", _hms(float(np.median(w.recorded_wait[known])))))
    rows += [
        ("median cores", f"{np.median(w.cores):g}"),
        ("median runtime", _hms(float(np.median(w.runtime)))),
        ("jobs past their walltime", f"{int(np.sum(w.runtime > w.walltime)):,}"),
    ]
    return rows


def _reading_rows(reading: SwfReading) -> list[tuple[str, str]]:
    """Return what the reader assumed, dropped and found, as table rows."""
    source = {
        "MaxProcs": "header MaxProcs",
        "MaxNodes": "header MaxNodes (no MaxProcs): ASSUMED processors = nodes",
        "processors": "given with --processors (the header has no size)",
        "widest job": "ASSUMED: the widest job (the header has no MaxProcs/MaxNodes; give --processors)",
    }[reading.machine_from]
    rows = [
        ("job lines in the file", f"{reading.job_lines:,}"),
        ("machine size", f"{reading.machine:,} cores, {source}"),
    ]
    if reading.dropped:
        rows.append(("dropped", ", ".join(f"{n:,} {why}" for why, n in reading.dropped.items())))
    if reading.out_of_order:
        rows.append(("not in submit order", f"{reading.out_of_order:,} job lines (sorted)"))
    waits = reading.recorded_waits
    rows.append(
        (
            "recorded waits",
            f"{waits:,} of {len(reading.workload):,} jobs"
            if waits
            else "none (field 3 is -1 everywhere): replay only, no fidelity or waits",
        )
    )
    return rows


def _info(args: argparse.Namespace) -> int:
    if args.processors is not None and args.processors < 1:
        raise ConfigError(f"--processors must be >= 1 cores, got {args.processors}")
    reading = read_swf_report(
        args.path,
        window=tuple(args.window) if args.window else None,
        load=args.load,
        processors=args.processors,
    )
    console = Console()
    if not console.is_terminal and console.width < 120:  # pipes and files get whole lines
        console = Console(width=120)
    table = Table(title=str(args.path), show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for what, value in _summary(reading.workload) + _reading_rows(reading):
        table.add_row(what, value)
    console.print(table)
    for message in reading.warnings:
        console.print(f"warning: {message}", markup=False, highlight=False, style="yellow")
    for message in reading.notes:
        console.print(f"note: {message}", markup=False, highlight=False)
    if not args.no_header:
        for line in reading.header.lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0
