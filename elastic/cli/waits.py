"""``elastic waits``: evaluate queue-wait predictors on a real trace, and the ASA convergence experiment.

- ``elastic waits --trace PATH [--cores 28,56,112] [--predictors asa-default,...] [--window START END]
  [--csv OUT.csv]`` replays the jobs of each geometry class online (predict at submit, learn the wait at
  start) and prints rank correlation with the true waits, hit / over / under rates, mean absolute error
  and cost per predictor and class.
- ``elastic waits --convergence OUT.png`` (alias ``--plot-convergence``) runs the paper's Figure 5
  experiment, saves the plot and prints the iterations each policy needed to converge after each change.

Both can be given in one call.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from elastic.cli.arguments import read_trace
from elastic.cli.commands import add_command
from elastic.cli.outputs import check_output, write_output
from elastic.cli.values import int_in_range, name_list, parse_seed, processors
from elastic.errors import ConfigError
from elastic.learners.evaluation import (
    DEFAULT_CLASSES,
    DEFAULT_PREDICTORS,
    PREDICTORS,
    ConvergenceResult,
    OnlineEvaluation,
    convergence_experiment,
    make_predictor,
    plot_convergence,
)

__all__ = ["MAX_ITERATIONS", "register"]

MAX_ITERATIONS = 100_000
"""Most iterations ``--iterations`` accepts: 10,000 take about 2 s, and the truth, every prediction
and the plot grow with it, to no use (the paper's experiment has 1,000)."""


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        msg = f"expected comma-separated core counts like 28,56,112; got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"core counts must be integers >= 1; got {text!r}")
    return values


_names = name_list("predictor(s)", PREDICTORS)


def register(subparsers: Any) -> None:
    """Add the ``waits`` subcommand."""
    parser = add_command(
        subparsers,
        "waits",
        _run,
        description=(
            "Replay the jobs of some geometry classes of an SWF trace through queue-wait predictors "
            "(predict at submit, learn the real wait at start), and/or run the ASA convergence "
            "experiment of the paper's Figure 5."
        ),
    )
    parser.add_argument("--trace", metavar="PATH", help="SWF trace with recorded waits (.swf or .swf.gz)")
    parser.add_argument(
        "--cores",
        type=_int_list,
        default=list(DEFAULT_CLASSES),
        help="target sizes; each class is [ceil(c/sqrt2), floor(c*sqrt2)] cores (default: 28,56,112)",
    )
    parser.add_argument(
        "--predictors",
        type=_names,
        default=list(DEFAULT_PREDICTORS),
        help=f"comma-separated, from {','.join(PREDICTORS)} (default: {','.join(DEFAULT_PREDICTORS)})",
    )
    parser.add_argument(
        "--window",
        nargs=2,
        type=float,
        metavar=("START", "END"),
        help="only jobs submitted in [START, END) seconds since the trace start",
    )
    parser.add_argument(
        "--processors",
        type=processors,
        default=None,
        metavar="N",
        help="the traced machine's cores where the header gives no size (as the reader's warning asks); with "
        "a header, jobs are scaled to this size (and so move between --cores classes)",
    )
    parser.add_argument("--seed", type=parse_seed, default=0, help="seed of the ASA sampling (default: 0)")
    parser.add_argument("--csv", metavar="OUT", help="also write the evaluation table as CSV")
    parser.add_argument(
        "--convergence",
        "--plot-convergence",
        dest="convergence",
        metavar="PNG",
        help="run the Figure 5 convergence experiment and save its plot here",
    )
    parser.add_argument(
        "--iterations",
        type=int_in_range(5, MAX_ITERATIONS, "five segments; every prediction is kept and plotted"),
        default=1000,
        help="iterations of the convergence experiment (default: 1000)",
    )


def _run(args: argparse.Namespace) -> int:
    if args.trace is None and args.convergence is None:
        raise ConfigError("give --trace PATH (trace evaluation) and/or --convergence OUT.png (Figure 5)")
    if args.trace is None and (
        args.csv is not None or args.window is not None or args.processors is not None
    ):
        raise ConfigError(
            "--csv, --window and --processors apply to the trace evaluation: give --trace PATH with them"
        )
    csv = check_output(args.csv, "--csv")
    figure = check_output(args.convergence, "--convergence", _figure_suffixes())
    console = Console()
    if not console.is_terminal and console.width < 150:  # pipes and files get the whole table
        console = Console(width=150)
    if args.trace is not None:
        window = tuple(args.window) if args.window else None
        workload = read_trace(
            args.trace,
            "waits",
            needs_waits="elastic waits scores each prediction against the recorded wait",
            window=window,
            processors=args.processors,
        ).workload
        began = time.perf_counter()
        evaluation = OnlineEvaluation(workload, classes=args.cores)
        if not any(len(jobs) for jobs in evaluation.jobs):
            sizes = ", ".join(f"{c.low}-{c.high}" for c in evaluation.classes)
            raise ConfigError(
                f"no job of {args.trace} with a recorded wait asks for {sizes} cores (the --cores classes); "
                f"its jobs ask for {int(workload.cores.min())}-{int(workload.cores.max())}: choose --cores "
                "inside that range"
            )
        table = evaluation.run({name: make_predictor(name, args.seed) for name in args.predictors})
        elapsed = time.perf_counter() - began
        console.print(_table(table, f"Online wait prediction on {args.trace}"))
        console.print(
            f"{len(workload):,} jobs read; {sum(len(j) for j in evaluation.jobs):,} evaluated "
            f"in {elapsed:.1f} s",
            highlight=False,
        )
        if csv is not None:
            write_output(csv, "--csv", lambda path: table.to_csv(path, index=False))
            console.print(f"table written to {csv}", highlight=False)
    if figure is not None:
        points = [i * args.iterations // 5 for i in range(5)]  # 0, 200, 400, 600, 800 for 1000
        result = convergence_experiment(iterations=args.iterations, change_points=points, seed=args.seed)
        path = write_output(figure, "--convergence", lambda out: plot_convergence(result, out))
        console.print(_convergence_table(result))
        console.print(f"figure written to {path}", highlight=False)
    return 0


def _figure_suffixes() -> tuple[str, ...]:
    """File suffixes matplotlib can save a figure as (``.png``, ``.pdf``, ``.svg``, ...)."""
    from elastic.extras import require

    require("demos", "a figure (elastic waits --convergence)", ("matplotlib",))
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted(f".{ext}" for ext in FigureCanvasBase.get_supported_filetypes()))


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}"


def _table(frame: pd.DataFrame, title: str) -> Table:
    table = Table(title=title)
    for name, justify in [
        ("cores", "left"),
        ("jobs", "right"),
        ("predictor", "left"),
        ("cover %", "right"),
        ("rank corr", "right"),
        ("hit %", "right"),
        ("over %", "right"),
        ("under %", "right"),
        ("MAE (s)", "right"),
        ("idle core-h", "right"),
        ("delay h", "right"),
        ("cost (core-s + s)", "right"),
    ]:
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    records = frame.to_dict("records")
    for n, row in enumerate(records):
        first = n == 0 or (records[n - 1]["low"], records[n - 1]["high"]) != (row["low"], row["high"])
        last = n == len(records) - 1 or (records[n + 1]["low"], records[n + 1]["high"]) != (
            row["low"],
            row["high"],
        )
        table.add_row(
            f"{row['low']}-{row['high']}" if first else "",
            f"{row['jobs']:,}" if first else "",
            str(row["predictor"]),
            _pct(float(row["coverage"])),
            "-" if math.isnan(float(row["rank_corr"])) else f"{float(row['rank_corr']):.3f}",
            _pct(float(row["hit"])),
            _pct(float(row["over"])),
            _pct(float(row["under"])),
            f"{float(row['mae']):,.0f}",
            f"{float(row['idle_core_s']) / 3600:,.0f}",
            f"{float(row['delay_s']) / 3600:,.0f}",
            f"{float(row['cost']):.3g}",
            end_section=last,
        )
    return table


def _convergence_table(result: ConvergenceResult) -> Table:
    table = Table(title=f"Iterations to converge ({result.window} consecutive exact predictions)")
    table.add_column("change at", justify="right")
    table.add_column("true wait (s)", justify="right")
    for policy in result.estimates:
        table.add_column(policy, justify="right")
    for n, point in enumerate(result.change_points):
        cells = [
            "never"
            if result.iterations_to_converge[p][n] is None
            else str(result.iterations_to_converge[p][n])
            for p in result.estimates
        ]
        table.add_row(str(point), f"{result.truth[point]:,.0f}", *cells)
    return table
