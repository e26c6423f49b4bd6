"""``elastic compare``: Big-Job, Per-Stage and ASA side by side, many runs each, in pure simulation.

``elastic compare --workflow demo3|FILE --runs N --backend mock [--trace PATH] [--load F] [--seed S]
[--strategies bigjob,perstage,asa] [--shapes plain,split] [--policy easy] [--priority age]
[--learner ewma] [--csv OUT]`` runs every strategy ``N`` times on the mock backend's virtual clock (no
processes: task durations are sampled from the stages' runtime distributions), each run at a different
point of the background load (the same points for every strategy), and prints the mean of each metric
with its 95 % confidence interval (Student t) over the runs every strategy completed, beside each
strategy's completion count. The title names the background, the queue policy and the priority model
(:mod:`elastic.simulator.priority`) the runs used.

Allocation shape is not a strategy: ``--shapes`` (:data:`~elastic.experiments.SHAPES`; default
:data:`~elastic.experiments.DEFAULT_SHAPES` in simulation, ``plain`` with ``--emulate``) runs the
baselines (Big-Job, Per-Stage) as one batch job per allocation (``plain``), split into jobs of at most
half the workflow's peak width (``split``, rows ``bigjob-split`` and ``perstage-split``), or in jobs as
narrow as each request's widest task (``fine``, rows ``bigjob-fine`` and ``perstage-fine``). Every
other strategy is read against the best shape of each baseline (lowest mean makespan; of shapes as fast,
the fewest core-hours): the share of their makespan gap it closes (:func:`~elastic.metrics.gap_closed`,
``n/a`` where the gap is within 5 % of the better makespan) and its core-hours over the best Per-Stage's.

With ``--out DIR``, several workflows (``--workflow montage,blast,statistics``) or ``--peak-cores
28,56,112`` it runs the ASA paper's experiment instead and prints its Table 1, writing the report to
``DIR`` (:mod:`elastic.cli.compare_report`).
Background: an SWF trace (``--trace``), else the synthetic load of
:func:`elastic.control.sim_execution.default_background`.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from scipy import stats

from elastic.cli.arguments import add_background_arguments, add_submission_rate_argument, load_background
from elastic.cli.commands import add_command
from elastic.cli.outputs import check_output, check_output_dir, write_output
from elastic.cli.values import int_in_range, name_list, parse_peaks, parse_seed
from elastic.cli.weight import add_weight_argument, check_weight, is_asa, strategy_options, weight_text
from elastic.control.execution import RunResult
from elastic.errors import ConfigError, UnknownNameError
from elastic.experiments import (
    BASELINES,
    MAX_RUNS,
    SHAPES,
    baseline_kind,
    interrupted,
    parse_strategy,
    shape_label,
    simulate_runs,
)
from elastic.figures import IDLE_PARTS
from elastic.learners.choice import WAIT_LEARNERS
from elastic.metrics import format_gap
from elastic.report.scaling import SCALINGS
from elastic.report.tables import common_runs, versus_baselines
from elastic.strategies import STRATEGY_NAMES
from elastic.workflow import WORKFLOW_GROUPS, expand_workflow_names, resolve_workflow

__all__ = [
    "COLUMNS",
    "IDLE_COLUMNS",
    "idle_table",
    "register",
    "summarise",
    "left_out_line",
    "versus_lines",
]

COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("makespan", "makespan (h)", 3600.0),
    ("queue_wait", "queue wait (h)", 3600.0),
    ("perceived_wait", "perceived wait (h)", 3600.0),
    ("core_hours_charged", "core-h charged", 1.0),
    ("core_hours_used", "core-h used", 1.0),
    ("overhead_core_hours", "overhead core-h", 1.0),
    ("resubmissions", "resubmissions", 1.0),
)
"""Metrics shown: (summary key, column title, divisor)."""


# a strategy that is no baseline may be run in a shape of its own too (``asa-fine``: asa in jobs of one task)
_named = name_list(
    "strategy",
    [
        *STRATEGY_NAMES,
        *(shape_label(s, k) for s in STRATEGY_NAMES if s not in BASELINES for k in SHAPES if k != "plain"),
    ],
)


def _names(text: str) -> list[str]:
    """Parse ``--strategies``; a baseline's shaped row (``bigjob-fine``) is pointed to ``--shapes``."""
    try:
        return _named(text)
    except argparse.ArgumentTypeError as exc:
        names = [n.strip() for n in text.split(",")]
        shaped = [n for n in names if baseline_kind(n) and n not in BASELINES]
        if shaped:
            base, shape = parse_strategy(shaped[0])
            raise argparse.ArgumentTypeError(
                f"{exc}; a baseline's shapes come from --shapes ({', '.join(shaped)}: --strategies {base} "
                f"--shapes {shape})"
            ) from None
        raise


_shapes = name_list("allocation shape", SHAPES)


def register(subparsers: Any) -> None:
    """Add the ``compare`` subcommand."""
    parser = add_command(
        subparsers,
        "compare",
        _run,
        description=(
            "Run a workflow N times under each strategy in pure simulation (mock backend, virtual clock) "
            "and print each metric's mean with a 95% confidence interval. Report mode (--out DIR, several "
            "workflows or --peak-cores) runs the ASA paper's experiment instead: each workflow at each peak, "
            "Table 1, and an HTML report with its figures in DIR."
        ),
    )
    parser.add_argument(
        "--workflow",
        default="demo3",
        help="built-in name or .toml/.json file, or several comma-separated; the groups paper (blast, "
        "montage, statistics), published (1000genome, cybershake, epigenomics, seismology, soykb, "
        "srasearch, bwa) and suite (both) stand for their workflows (default: demo3)",
    )
    parser.add_argument(
        "--peak-cores",
        type=parse_peaks,
        metavar="N,N,...",
        help="scale each workflow's widest stage to these core counts, e.g. 28,56,112 (report mode)",
    )
    parser.add_argument(
        "--scaling",
        choices=SCALINGS,
        default="strong",
        help="with --peak-cores: keep a parallel stage's total work (strong, default) or its task runtimes",
    )
    parser.add_argument(
        "--runtimes",
        choices=("model", "store"),
        default="model",
        help="report mode: stage runtimes from the workflow model (default) or from what the store "
        "recorded of real runs of the workflow (stages with fewer than 2 records keep their model)",
    )
    parser.add_argument("--store", metavar="URL", help="with --runtimes store: the store's SQLAlchemy URL")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write the report there: Table 1, figures (PNG), every run (CSV), one offline HTML page",
    )
    parser.add_argument(
        "--runs",
        type=int_in_range(1, MAX_RUNS, "every run's result is kept until the table is printed"),
        default=20,
        help="runs per strategy (default: 20)",
    )
    parser.add_argument("--backend", default="mock", help="only 'mock' (pure simulation)")
    parser.add_argument(
        "--seed", type=parse_seed, default=0, help="seed of start points, durations, learner (>= 0)"
    )
    parser.add_argument(
        "--strategies",
        type=_names,
        default=["bigjob", "perstage", "asa"],
        help=f"comma-separated, from {','.join(STRATEGY_NAMES)} (default: bigjob,perstage,asa); a strategy "
        "other than the baselines also as NAME-split or NAME-fine, in that allocation shape (asa-fine: asa "
        "in jobs of one task)",
    )
    parser.add_argument(
        "--shapes",
        type=_shapes,
        default=None,
        metavar="plain,split,fine",
        help="allocation shapes of the baselines: plain (one batch job per allocation), split (jobs of at "
        "most half the peak width: rows bigjob-split, perstage-split), fine (jobs of each request's widest "
        "task: bigjob-fine, perstage-fine); default all three, plain with --emulate",
    )
    parser.add_argument(
        "--learner",
        choices=WAIT_LEARNERS,
        default=None,
        help="wait learner for every strategy (default: each its own: ewma; tuned for the paper's ASA)",
    )
    add_weight_argument(parser)
    parser.add_argument("--csv", metavar="OUT", help="also write one row per run as CSV")
    add_submission_rate_argument(parser)
    emulate = parser.add_argument_group(
        "emulation", "run the real demos (montage, blast, statistics) instead of simulating their models"
    )
    emulate.add_argument(
        "--emulate",
        action="store_true",
        help="each run is the demo through the front door on the scaled mock queue (report mode)",
    )
    emulate.add_argument("--size", type=int, help="with --emulate: every demo's size (default: each its own)")
    emulate.add_argument(
        "--speedup", type=float, default=60.0, help="with --emulate: the queue's clock vs real time (60)"
    )
    emulate.add_argument("--workdir", help="with --emulate: where the runs' folders go (default: temp)")
    add_background_arguments(parser)


def summarise(results: dict[str, list[RunResult]]) -> pd.DataFrame:
    """One row per run: strategy, run index, status and every metric of :meth:`RunMetrics.summary`."""
    rows = []
    for strategy, runs in results.items():
        for i, r in enumerate(runs):
            rows.append({"strategy": strategy, "run": i, "status": r.status, **r.metrics.summary()})
    return pd.DataFrame(rows)


def _mean_ci(values: Sequence[float]) -> tuple[float, float]:
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan
    if len(x) < 2:
        return float(x.mean()), math.nan
    half = float(stats.t.ppf(0.975, len(x) - 1) * stats.sem(x)) if x.std() > 0 else 0.0
    return float(x.mean()), half


def _common(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the runs (by index) every strategy of ``frame`` completed."""
    return common_runs(frame.assign(workflow="", cores=0)).drop(columns=["workflow", "cores"])


def table(frame: pd.DataFrame, title: str) -> Table:
    """Rich table: one row per strategy, ``mean ± 95% CI`` per metric over the runs all completed."""
    common = _common(frame)
    compared = common["run"].nunique()
    runs = f"{compared} run{'' if compared == 1 else 's'}"
    out = Table(
        title=f"{title}\nmeans over the {runs} every strategy completed",
        caption="queue wait: every request's wait until its cores were usable, summed (requests asked ahead "
        "wait side by side, so it may exceed the makespan); perceived wait: the time in which some ready "
        "stage waited for cores",
    )
    out.add_column("strategy")
    out.add_column("completed", justify="right")
    for _, name, _ in COLUMNS:
        out.add_column(name, justify="right")
    out.add_column("wait predictions hit/over/under", justify="right")
    for strategy, group in frame.groupby("strategy", sort=False):
        cells = [str(strategy), f"{(group['status'] == 'completed').sum()}/{len(group)}"]
        paired = common[common["strategy"] == strategy]
        for key, _, divisor in COLUMNS:
            mean, half = _mean_ci(list(paired[key] / divisor))
            cells.append(f"{mean:.2f}" + ("" if math.isnan(half) else f" ± {half:.2f}"))
        # counted over the same runs as the means (the title's), not over runs the others did not complete
        hits = [int(paired[k].sum()) for k in ("prediction_hits", "prediction_misses", "prediction_under")]
        cells.append("/".join(map(str, hits)))
        out.add_row(*cells)
    return out


IDLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("overhead_core_hours", "idle core-h"),
    *zip(
        (f"idle_{part}_core_hours" for part in IDLE_PARTS),
        ("before its first task", "between its tasks", "after its last task", "in jobs that ran no task"),
        strict=True,
    ),
)
"""The idle split shown (:class:`~elastic.figures.IdleParts`): (summary key, column title)."""


def idle_table(frame: pd.DataFrame) -> Table:
    """Rich table: where each strategy's idle core-hours went, means over the runs all completed.

    Each allocation's idle cores, read from its own tasks, before its first task started, between its
    tasks (cores they did not use), after its last task ended, or the whole of a job that ran none
    (:class:`~elastic.figures.IdleParts`).
    """
    common = _common(frame)
    out = Table(
        title="where the idle core-hours go (core-h per run, the same runs)",
        caption="each batch job's idle cores: before its first task (it came early), between its tasks "
        "(cores they did not use: a narrower stage, a stage's last tasks elsewhere), after its last task "
        "(kept for work that did not come), or a job that ran no task",
    )
    out.add_column("strategy")
    for _, name in IDLE_COLUMNS:
        out.add_column(name, justify="right")
    for strategy, paired in common.groupby("strategy", sort=False):
        out.add_row(str(strategy), *(f"{float(paired[key].mean()):.2f}" for key, _ in IDLE_COLUMNS))
    return out


_STATUS_WORDS = {"timeout": "reached the horizon", "failed": "failed", "interrupted": "interrupted"}


def left_out_line(frame: pd.DataFrame) -> str | None:
    """Say which runs the means leave out, and why, when some strategy did not complete every run.

    The table's means pair the strategies over the runs every one of them completed; this line names the
    strategies whose runs were left out, with how many ended in each way, so a mean over the survivors is
    not read as one over every run.

    Examples
    --------
    >>> frame = pd.DataFrame({"strategy": ["a", "a", "b", "b"], "run": [0, 1, 0, 1],
    ...                       "status": ["completed", "completed", "completed", "timeout"]})
    >>> left_out_line(frame)
    'read over 1 of 2 runs; left out: b: 1 reached the horizon'
    >>> left_out_line(frame.assign(status="completed")) is None
    True
    """
    runs = frame["run"].nunique()
    compared = _common(frame)["run"].nunique()
    if compared == runs:
        return None
    missed = []
    for strategy, group in frame.groupby("strategy", sort=False):
        counts = group.loc[group["status"] != "completed", "status"].value_counts()
        if len(counts):
            ways = ", ".join(f"{n} {_STATUS_WORDS.get(str(k), str(k))}" for k, n in counts.items())
            missed.append(f"{strategy}: {ways}")
    return f"read over {compared} of {runs} runs; left out: {'; '.join(missed)}"


def versus_lines(frame: pd.DataFrame) -> list[str]:
    """Every strategy that is no baseline against the best Big-Job and Per-Stage (means, common runs)."""
    common = _common(frame)
    by = common.groupby("strategy", sort=False)
    if not len(by):
        return []
    v = versus_baselines(
        {str(s): float(m) / 3600.0 for s, m in by["makespan"].mean().items()},
        {str(s): float(m) for s, m in by["core_hours_charged"].mean().items()},
    )
    if v is None:  # said, where a strategy is left unread for want of a baseline
        labels = [str(s) for s in by.groups]
        others = [s for s in labels if baseline_kind(s) is None]
        missing = [k for k in BASELINES if k not in {baseline_kind(s) for s in labels}]
        if not others or not missing:
            return []
        return [
            f"{', '.join(others)}: not read against the baselines, which needs a Big-Job and a Per-Stage; "
            f"--strategies has no {' and no '.join(missing)}"
        ]
    head = (
        f"best Big-Job: {v.bigjob} ({v.bigjob_makespan:.2f} h), best Per-Stage: {v.perstage} "
        f"({v.perstage_makespan:.2f} h)"
    )
    spans = common.pivot(index="run", columns="strategy", values="makespan")
    better = v.better
    lines = [head]
    for s in v.gap_closed:
        line = (
            f"{s}: gap closed {format_gap(v.gap_closed[s])}, {v.core_hours[s]:.2f}x the best Per-Stage's "
            "core-hours"
        )
        ratio, low, high = paired_ratio(spans[s].to_numpy(float), spans[better].to_numpy(float))
        if not math.isnan(low):
            line += (
                f"; makespan {ratio:.2f}x {better}'s (95 % interval {low:.2f}-{high:.2f}, resampling the "
                f"{len(spans)} runs in pairs)"
            )
        elif not math.isnan(ratio):
            line += f"; makespan {ratio:.2f}x {better}'s (one run: no interval)"
        lines.append(line)
    return lines


def paired_ratio(
    a: np.ndarray, b: np.ndarray, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Return ``mean(a) / mean(b)`` and its 95 % percentile interval from resampling the runs in pairs.

    ``a[i]`` and ``b[i]`` are the same run (seed and queue start) under two strategies, resampled
    together: how much the queue differs from run to run, which both strategies see, does not widen the
    interval; how they differ in the same runs does. Fewer than 2 runs, or no mean to divide by: the
    interval is nan. With numpy rather than ``scipy.stats.bootstrap``, whose generator argument was
    renamed within the SciPy versions this package supports; a fixed ``seed`` keeps a comparison's output
    the same from run to run.

    Examples
    --------
    >>> r, low, high = paired_ratio(np.array([2.0, 4.0, 6.0]), np.array([1.0, 2.0, 3.0]))
    >>> r, low, high
    (2.0, 2.0, 2.0)
    """
    n = len(a)
    ratio = float(a.mean() / b.mean()) if n and b.mean() > 0 else math.nan
    if n < 2 or math.isnan(ratio):
        return ratio, math.nan, math.nan
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    ratios = a[draws].mean(axis=1) / b[draws].mean(axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return ratio, float(low), float(high)


def _run(args: argparse.Namespace) -> int:
    if args.backend != "mock":
        raise UnknownNameError("backend for compare (pure simulation)", args.backend, ["mock"])
    if not args.emulate and (args.size is not None or args.workdir is not None):
        raise ConfigError("--size and --workdir are --emulate's: the real demos' size and run folders")
    check_weight(args, args.strategies)
    if args.emulate and args.weight is not None:
        raise ConfigError(
            "--weight is not passed to --emulate's runs (the demos run through the front door with each "
            "strategy's defaults): leave it out, or compare in simulation"
        )
    csv = check_output(args.csv, "--csv")
    out = check_output_dir(args.out, "--out")
    try:
        workflows = [resolve_workflow(name) for name in expand_workflow_names(args.workflow)]
    except UnknownNameError as exc:  # here a group names several: say which groups there are
        groups = ", ".join(f"{g} ({', '.join(names)})" for g, names in WORKFLOW_GROUPS.items())
        raise ConfigError(f"{exc}; or a group: {groups}") from None
    if not workflows:
        raise ConfigError(f"--workflow names no workflow: {args.workflow!r}")
    console = Console()
    if not console.is_terminal and console.width < 200:  # pipes and files get the whole table
        console = Console(width=200)
    if out is not None or len(workflows) > 1 or args.peak_cores or args.emulate:
        if csv is not None:
            raise ConfigError(
                "--csv is the single-workflow table's; with --out, --peak-cores, several workflows or "
                "--emulate, give --out DIR: runs.csv is in the report"
            )
        from elastic.cli.compare_report import run_report

        return run_report(args, workflows, console, out)
    (workflow,) = workflows
    setup = load_background(args)
    background = setup.workload
    results: dict[str, list[RunResult]] = {}
    began = time.perf_counter()
    from elastic.cli.compare_report import rows

    labels = rows(args)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("simulating", total=len(labels))
        for name in labels:
            progress.update(task, description=f"simulating {name}")
            results[name] = simulate_runs(
                workflow,
                name,
                runs=args.runs,
                seed=args.seed,
                background=background,
                policy=setup.policy,
                mode=setup.mode,
                reserve=setup.reserve,
                priority=setup.priority,
                learner=args.learner,
                queue_rules=setup.queue_rules,
                submission_rate=args.submission_rate,
                strategy_options=strategy_options(args, name),
            )
            if interrupted(results[name]):  # the run in progress ended; the strategies after it do not run
                raise KeyboardInterrupt
            progress.advance(task)
    elapsed = time.perf_counter() - began
    frame = summarise(results)
    weight = f", asa's weight {weight_text(args.weight)}" if any(is_asa(s) for s in args.strategies) else ""
    title = (
        f"{workflow.name}: {args.runs} run{'' if args.runs == 1 else 's'} per strategy on "
        f"{background.processors} cores, "
        f"{setup.describe()} (seed {args.seed}{weight})"
    )
    console.print(table(frame, title))
    if not _common(frame).empty:
        console.print(idle_table(frame))
    left_out = left_out_line(frame)
    if left_out is not None:
        console.print(left_out, highlight=False)
    for line in versus_lines(frame):
        console.print(line, highlight=False)
    total = args.runs * len(labels)
    console.print(
        f"{total} simulated run{'' if total == 1 else 's'} in {elapsed:.1f} s "
        f"({elapsed / total * 1000:.0f} ms per run); mean ± 95% confidence interval",
        highlight=False,
    )
    if csv is not None:
        write_output(csv, "--csv", lambda path: frame.to_csv(path, index=False))
        console.print(f"per-run metrics written to {csv}", highlight=False)
    if _common(frame).empty:  # nothing was compared: not a result a script should take as one
        console.print(
            "no run was completed by every strategy: nothing to compare (exit 1); see the left-out line",
            highlight=False,
        )
        return 1
    return 0
