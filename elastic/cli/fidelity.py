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

from elastic.errors import ConfigError

__all__ = ["add_mode_arguments", "mode_engine_from_args", "parse_cores", "register"]


def parse_cores(text: str) -> tuple[int, int]:
    """Parse ``"16:128"`` (or one number, ``"64"``) into an inclusive core range.

    Examples
    --------
    >>> parse_cores("16:128"), parse_cores("64")
    ((16, 128), (64, 64))
    """
    lo, sep, hi = text.partition(":")
    try:
        low = int(lo)
        high = int(hi) if sep else low
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a core range LO:HI like 16:128; got {text!r}") from None
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"core range needs 1 <= LO <= HI; got {text!r}")
    return low, high


def _modes(text: str) -> tuple[str, ...]:
    from elastic.simulator.fidelity import MODES

    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(
            f"modes must be a comma-separated subset of {','.join(MODES)}; got {text!r}"
        )
    return modes


def _reserve(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of cores >= 0; got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of cores >= 0; got {text!r}")
    return value


def _add_window(parser: argparse.ArgumentParser) -> None:
    from elastic.cli.simulate import parse_duration

    parser.add_argument(
        "--capacity-window",
        type=parse_duration,
        default=None,
        metavar="DURATION",
        help="capacity mode: look-back of the usable-size estimate, e.g. 12h (default: 12h)",
    )


def add_mode_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--mode``, ``--cores``, ``--reserve`` and ``--capacity-window`` (used by ``elastic simulate``)."""
    from elastic.simulator.fidelity import MODES

    parser.add_argument(
        "--mode",
        choices=MODES,
        default="replay",
        help=(
            "replay: queue every trace job (default); recorded: pin every job outside --cores at its "
            "recorded start and queue the --cores jobs into the capacity left; recorded-chain: and a "
            "user's jobs start in submit order; calibrated: and --reserve cores held back; capacity: "
            "recorded-chain on the cores the recorded schedule used in the last --capacity-window"
        ),
    )
    parser.add_argument(
        "--cores",
        type=parse_cores,
        default=(16, 128),
        metavar="LO:HI",
        help="recorded modes: size class of the queued jobs (default: 16:128)",
    )
    parser.add_argument(
        "--reserve",
        type=_reserve,
        metavar="CORES",
        help="calibrated mode: cores held back (default: fitted on the first half of the queued jobs)",
    )
    _add_window(parser)


def _window(args: argparse.Namespace) -> float:
    from elastic.simulator.fidelity import DEFAULT_WINDOW

    return DEFAULT_WINDOW if args.capacity_window is None else float(args.capacity_window)


def mode_engine_from_args(args: argparse.Namespace, workload: Any, console: Any) -> Any:
    """Build the engine of ``elastic simulate --mode`` (a recorded mode) from the parsed arguments."""
    from elastic.simulator.fidelity import calibrate_reserve, mode_engine
    from elastic.simulator.pinned import PINNED_ORDERS

    order = args.policy or "conservative"
    if order not in PINNED_ORDERS or args.speculative:
        raise ConfigError(
            f"--mode {args.mode} plans the queued jobs around the recorded schedule: --policy must be "
            f"conservative or fcfs without --speculative, got --policy {order}"
        )
    reserve = args.reserve or 0
    if args.mode == "calibrated" and args.reserve is None:
        with console.status("fitting --reserve on the first half of the queued jobs"):
            reserve = calibrate_reserve(workload, cores=args.cores, order=order)
        console.print(f"calibrated reserve: {reserve} cores")
    if args.capacity_window is not None and args.mode != "capacity":
        raise ConfigError(f"--capacity-window applies to --mode capacity only, not --mode {args.mode}")
    engine, evaluated = mode_engine(
        workload, args.mode, cores=args.cores, reserve=reserve, order=order, window=_window(args)
    )
    lo, hi = args.cores
    console.print(
        f"mode {args.mode}: {int(evaluated.sum()):,} jobs of {lo}-{hi} cores queued ({order}), "
        f"{len(engine.pinned):,} pinned at their recorded start"
        + (f", {reserve} cores reserved" if args.mode == "calibrated" else "")
        + (f", usable cores from the last {_window(args) / 3600:g} h" if args.mode == "capacity" else "")
    )
    return engine


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
        type=_modes,
        default=MODES,
        metavar="LIST",
        help=f"comma-separated modes (default: {','.join(MODES)})",
    )
    parser.add_argument(
        "--reserve",
        type=_reserve,
        metavar="CORES",
        help="reserve of the calibrated mode (default: fitted on the first half of the evaluated jobs)",
    )
    _add_window(parser)
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
    from elastic.simulator.trace import read_swf

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix != ".csv":
        raise ConfigError(f"--out must end in .csv, got {args.out!r}")
    console = Console()
    t0 = time.perf_counter()
    workload = read_swf(args.trace)
    with console.status("simulating the modes (the calibrated one runs several half-trace simulations)"):
        report = fidelity_report(
            workload,
            cores=args.cores,
            modes=args.modes,
            reserve=args.reserve,
            order=args.order,
            window=_window(args),
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
