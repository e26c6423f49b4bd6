"""Issue 9's grid: Big-Job, Per-Stage and ``asa`` (the planner) per workflow x peak x queue x priority.

Each cell is ``elastic compare`` of the same runs (same seed, same start points for every strategy). The
baselines run in every allocation shape of ``--shapes`` (default ``plain,split,fine``: one batch job
per allocation; jobs of at most half the peak, rounded up: ``bigjob-split``, ``perstage-split``; and
jobs of each request's widest task, ``bigjob-fine``, ``perstage-fine``:
:data:`elastic.experiments.SHAPES`), and ``asa`` is read against the best shape of each baseline (the
lowest mean makespan of its kind, :func:`elastic.report.tables.versus_baselines`). A row gives mean and
median makespan and core-hours charged of every row label, the best Big-Job and Per-Stage, the share of
their makespan gap ``asa`` closes (on means; ``n/a`` where the gap is within 5 % of the better makespan,
:func:`elastic.metrics.gap_closed`), ``asa``'s core-hours over the best Per-Stage's, and the goal's
verdict:

- where the best Per-Stage's mean makespan is >= 1.3x the best Big-Job's ("hard"): ``asa`` closes >= 75 %
  of the gap (the ASA paper's Montage figure is 74-79 %) at <= 1.10x the best Per-Stage's core-hours;
- elsewhere ("easy"): ``asa``'s mean makespan is within 5 % of the better of the two, at <= 1.10x the
  best Per-Stage's core-hours;
- in every cell ("never worst"): ``asa`` is not worse than both baselines by more than 5 % on mean
  makespan (the ``worst`` column says where it is);
- and ``asa`` completes within the horizon at least as many runs as the best baseline of each kind (a
  run it gave up has no makespan, so the means alone would never show it: ``<label>_gave_up``, the runs
  fewer).

Means and medians are over the runs every row label completed within the horizon (``paired``; each
label's count is ``<label>_completed``): a run that gave up has no makespan, and charged only what it
ran. How sure a verdict is: ``met_share``, the share of :data:`RESAMPLES` resamples of the paired runs
(drawn with replacement, the same runs for every row label) in which the goal is met, the best shapes
chosen anew in each (:func:`met_share`). On heavy-tailed queues a few runs decide a mean: a verdict
whose share is near 0.5 could have gone either way on other start points of the same queue.
Baselines are measured in the same run as ``asa``. ``--strategies asa,asa-fine`` reads ``asa`` in jobs of
one task too, as a row of its own against the same baselines (columns prefixed ``asa-fine_``). Where
a planner misses, ``why`` (``<label>_why``) says which goal and by how much, and whether one or two runs
decide it (leaving them out of every label's mean meets the goal: :func:`why`); the cause is read from
those runs. Queues: ``synthetic`` (busy synthetic load, 90 %
offered, on ``max(64, 2 x peak)`` cores), ``replay`` (the HPC2N trace replayed with EASY), ``capacity``
(HPC2N, ``--mode capacity``: the centre's recorded waits), ``capacity-ctc`` and ``capacity-sdsc`` (the
same on the CTC SP2 and SDSC Blue Horizon traces); held out, run only when named (:data:`HELD_OUT`),
``lublin`` (the Lublin-Feitelson model's 256-core trace, ``lublin_256.swf.gz``, replayed with EASY as
the HPC2N replay is, at the grid's seed: a trace no rule was chosen on). ``--workflows`` takes
built-in names and the groups ``paper``, ``published`` and ``suite``
(:data:`elastic.workflow.WORKFLOW_GROUPS`). Each finished cell
is appended to ``--csv`` at once, so a long grid can be stopped and its finished cells kept.

Usage: .venv/bin/python benchmarks/bench_planner_grid.py [--workflows suite]
[--peaks 28,56,112] [--queues synthetic,replay,capacity,capacity-ctc,capacity-sdsc|lublin]
[--priorities age,basic,accrue-always] [--runs 30] [--seed 1] [--shapes plain,split,fine] [--job-cores N]
[--learned-waits] [--no-estimates] [--weight W] [--pace S] [--no-calibrate] [--strategies asa[,asa-fine]]
[--csv OUT]
``--shapes plain`` compares against the paper's baselines only (one job per allocation). ``--job-cores N``
submits every strategy's allocations, ``asa``'s too, as batch jobs of at most N cores (``job_cores``;
with ``--shapes plain`` only: the other shapes set their own). ``--learned-waits`` prices ``asa``'s
follow-ups by the learned wait distribution, not by the run's latest wait (``Planner(run_waits=False)``).
``--no-estimates``: ``asa`` does not ask the scheduler's estimate (``Planner(estimates=False)``).
``--weight W``: ``asa``'s price of a second of makespan, in seconds of the peak allocation
(``Planner(weight=W)``; default the planner's own, :data:`elastic.strategies.planner.WEIGHT`).
``--pace S``: backend seconds ``asa`` keeps a decision that did nothing while its inputs stay the same
(``Planner(pace=S)``; default the planner's own, :data:`elastic.strategies.planner.PACE`).
``--no-calibrate``: ``asa`` takes the scheduler's estimate as it is, not scaled by its bias learned from
the run's own requests (``Planner(calibrate=False)``; ``--calibrate``, the default, scales it).
The traces are read from ../shared/data/traces (or $ELASTIC_TRACES).
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import os
import time
from pathlib import Path

import numpy as np

from elastic.experiments import (
    BASELINES,
    DEFAULT_SHAPES,
    baseline_kind,
    default_background,
    parse_strategy,
    shaped_strategies,
    simulate_runs,
)
from elastic.figures import IDLE_PARTS
from elastic.metrics import format_gap
from elastic.report.scaling import scale_workflow
from elastic.report.tables import versus_baselines
from elastic.simulator.trace import read_swf
from elastic.simulator.workload import Workload
from elastic.workflow import builtin_workflow, expand_workflow_names

TRACES = Path(
    os.environ.get("ELASTIC_TRACES", Path(__file__).resolve().parents[2] / "shared" / "data" / "traces")
)
TRACE_FILES = {
    "hpc2n": "HPC2N-2002-2.2-cln.swf.gz",
    "ctc": "CTC-SP2-1996-3.1-cln.swf.gz",
    "sdsc": "SDSC-BLUE-2000-4.2-cln.swf.gz",
    "lublin": "lublin_256.swf.gz",
}
RESAMPLES = 1000
"""Paired resamples of a cell's runs behind its ``met_share`` (:func:`met_share`)."""
HARD = 1.3
GAP_GOAL = 0.75
CORE_H_GOAL = 1.10
TOLERANCE = 1.05
MIN_LEFT = 5
"""Fewest paired runs :func:`why` leaves one or two out of (with fewer, every run decides the mean)."""
QUEUES = ("synthetic", "replay", "capacity", "capacity-ctc", "capacity-sdsc")
HELD_OUT = ("lublin",)
"""Queues no rule was chosen on, run only when named (``--queues lublin``): a rule found on the grid's
queues is checked there before it becomes a default."""


@functools.cache
def _trace(name: str = "hpc2n") -> Workload:
    return read_swf(TRACES / TRACE_FILES[name])


def queue_problem(queue: str) -> str | None:
    """Return why ``queue`` cannot be run here (an unknown name, its trace missing), or None.

    Checked for every ``--queues`` name before the first cell, so a typo or a missing trace in the last
    queue does not end a grid hours in.
    """
    if queue not in QUEUES + HELD_OUT:
        return f"unknown queue {queue!r}; choose from {', '.join(QUEUES + HELD_OUT)}"
    name = _trace_of(queue)
    if name is not None and not (TRACES / TRACE_FILES[name]).is_file():
        return (
            f"queue {queue!r} replays {TRACE_FILES[name]}, not found in {TRACES}: set ELASTIC_TRACES to the "
            "folder that holds it (`elastic traces download` fetches the Parallel Workloads Archive's)"
        )
    return None


def _trace_of(queue: str) -> str | None:
    """Return the :data:`TRACE_FILES` name of the trace a known ``queue`` replays (None: synthetic)."""
    if queue == "synthetic":
        return None
    if queue in ("replay", "capacity"):
        return "hpc2n"
    return queue.removeprefix("capacity-")


def queue_setting(queue: str, peak: int, seed: int) -> tuple[Workload, str, str]:
    """Return the background load, mock backend mode and policy of one of the grid's queues (docstring)."""
    if queue not in QUEUES + HELD_OUT:
        raise SystemExit(queue_problem(queue))
    name = _trace_of(queue)
    if name is None:
        return default_background(max(64, 2 * peak), seed=seed), "replay", "easy"
    if queue.startswith("capacity"):
        return _trace(name), "capacity", "conservative"
    return _trace(name), "replay", "easy"


def cell(
    workflow: str,
    peak: int,
    queue: str,
    priority: str,
    runs: int,
    seed: int,
    job_cores: int | None = None,
    learned_waits: bool = False,
    estimates: bool = True,
    weight: float | None = None,
    pace: float | None = None,
    shapes: tuple[str, ...] = DEFAULT_SHAPES,
    calibrate: bool = True,
    planners: tuple[str, ...] = ("asa",),
) -> dict[str, object]:
    """Simulate one cell (every baseline in every one of ``shapes``, and ``planners``) and return its row.

    ``planners``: the row labels read against the baselines (``asa``, ``asa-fine``: ``asa`` in jobs of
    one task); each gets its verdict (:func:`verdict`), how sure it is (:func:`met_share`) and why it
    missed (:func:`why`).
    """
    if job_cores is not None and shapes != ("plain",):
        raise SystemExit("--job-cores splits every strategy: use it with --shapes plain")
    wf = scale_workflow(builtin_workflow(workflow), peak, scaling="weak")  # task runtimes kept (README)
    background, mode, policy = queue_setting(queue, peak, seed)
    row: dict[str, object] = {
        "workflow": workflow,
        "peak": peak,
        "queue": queue,
        "priority": priority,
        "job_cores": job_cores or "",
    }
    began = time.perf_counter()
    options: dict[str, object] = {"run_waits": not learned_waits, "estimates": estimates}
    if weight is not None:
        options["weight"] = weight
    if pace is not None:
        options["pace"] = pace
    options["calibrate"] = calibrate
    measured: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    idles: dict[str, np.ndarray] = {}  # per label, each run's idle core-hours by part (IDLE_PARTS)
    unused: dict[str, np.ndarray] = {}  # per label, each run's jobs that started and ran no task
    for name in (*shaped_strategies(BASELINES, shapes), *planners):
        results = simulate_runs(
            wf,
            name,
            runs=runs,
            seed=seed,
            background=background,
            policy=policy,
            mode=mode,
            priority=priority,
            job_cores=job_cores,
            strategy_options=options if parse_strategy(name)[0] == "asa" else None,
        )
        span = np.array([r.metrics.makespan for r in results]) / 3600.0
        core_h = np.array([r.metrics.core_hours_charged for r in results])
        done = np.array([r.status == "completed" for r in results])
        measured[name] = span, core_h, done
        parts = [[getattr(r.metrics.idle, part) / 3600.0 for part in IDLE_PARTS] for r in results]
        idles[name] = np.array(parts).reshape(-1, len(IDLE_PARTS))
        unused[name] = np.array([r.metrics.unused_jobs for r in results], dtype=float)
        row[f"{name}_completed"] = int(done.sum())
    # a run that gave up at the horizon has no makespan and charged only what it ran: compare the runs
    # every strategy completed (the same start points)
    paired = np.logical_and.reduce([done for _, _, done in measured.values()])
    row["paired"] = int(paired.sum())
    for name, (span, core_h, _) in measured.items():
        span, core_h = (span[paired], core_h[paired]) if paired.any() else (span, core_h)
        row[f"{name}_h"], row[f"{name}_h_med"] = float(span.mean()), float(np.median(span))
        row[f"{name}_ch"], row[f"{name}_ch_med"] = float(core_h.mean()), float(np.median(core_h))
        idle = idles[name][paired] if paired.any() else idles[name]
        for part, hours in zip(IDLE_PARTS, idle.mean(axis=0), strict=True):
            row[f"{name}_idle_{part}"] = float(hours)
        row[f"{name}_unused_jobs"] = float((unused[name][paired] if paired.any() else unused[name]).mean())
    row["seconds"] = time.perf_counter() - began
    kept = {name: (span[paired], core_h[paired]) for name, (span, core_h, _) in measured.items()}
    numbers = np.flatnonzero(paired) if paired.any() else np.arange(runs)
    for planner in planners:
        prefix = _prefix(planner)
        row = verdict(row, planner)
        row[f"{prefix}met_share"] = met_share(kept, seed=seed, strategy=planner)
        row[f"{prefix}why"] = why(row, kept, numbers, planner)
    return row


def met_share(
    measured: dict[str, tuple[np.ndarray, np.ndarray]],
    resamples: int = RESAMPLES,
    seed: int = 0,
    strategy: str = "asa",
) -> float:
    """Return the share of paired resamples of a cell's runs where ``strategy`` meets the goal (nan: none).

    ``measured``: per row label, the makespans and core-hours of the runs every label completed, in the
    same run order. Each resample draws as many runs with replacement, the same ones for every label,
    and reads :func:`verdict` on their means: the better baseline is chosen anew each time, as it is on
    the cell's own means. Written out rather than taken from ``scipy.stats.bootstrap``, whose statistic
    is one number per resample: the verdict reads every label's two means together.
    """
    names = list(measured)
    n = len(measured[names[0]][0]) if names else 0
    if n == 0:
        return math.nan
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    means = {s: (x[draws].mean(axis=1), y[draws].mean(axis=1)) for s, (x, y) in measured.items()}
    met = 0
    for b in range(resamples):
        row: dict[str, object] = {}
        for s in names:
            row[f"{s}_completed"] = n
            row[f"{s}_h"], row[f"{s}_ch"] = float(means[s][0][b]), float(means[s][1][b])
        met += _met(row, strategy)
    return met / resamples


def labels(row: dict[str, object]) -> list[str]:
    """The row labels (strategies in their shapes) a cell's row holds, in order."""
    return [key.removesuffix("_completed") for key in row if key.endswith("_completed")]


def _prefix(strategy: str) -> str:
    """The prefix of ``strategy``'s verdict columns: none for ``asa`` (the grid's own), else ``<label>_``."""
    return "" if strategy == "asa" else f"{strategy}_"


def verdict(row: dict[str, object], strategy: str = "asa") -> dict[str, object]:
    """Add the best baselines, the gap closed, the core-hour ratio and the goal's verdict to a cell's row.

    Read for ``strategy`` (a row label that is no baseline); its columns are prefixed by :func:`_prefix`,
    the best baselines and ``hard`` are the cell's. Every other label that is no baseline is left out
    of the choice of the best baselines, whatever it is.
    """
    names = [s for s in labels(row) if s == strategy or baseline_kind(s) is not None]
    if strategy not in names:
        raise SystemExit(f"the cell has no row for {strategy!r}")
    span = {s: float(row[f"{s}_h"]) for s in names}  # type: ignore[arg-type]
    core_h = {s: float(row[f"{s}_ch"]) for s in names}  # type: ignore[arg-type]
    v = versus_baselines(span, core_h)
    if v is None:
        raise SystemExit("the grid needs a Big-Job and a Per-Stage row in every cell")
    big, per, own = v.bigjob_makespan, v.perstage_makespan, span[strategy]
    hard = per >= HARD * big
    gap, ratio = v.gap_closed[strategy], v.core_hours[strategy]
    worst = own > TOLERANCE * max(big, per)  # worse than both baselines by more than 5 %
    if hard:
        met = gap >= GAP_GOAL and ratio <= CORE_H_GOAL
    else:
        met = own <= TOLERANCE * min(big, per) and ratio <= CORE_H_GOAL
    # runs given up that the best baselines completed: left out of every mean, they are read here (a
    # loop of requests that kept a task from running was found so, in 7 of a cell's 30 runs)
    done = {s: int(row.get(f"{s}_completed", 0)) for s in (strategy, v.bigjob, v.perstage)}  # type: ignore[call-overload]
    gave_up = max(0, max(done[v.bigjob], done[v.perstage]) - done[strategy])
    p = _prefix(strategy)
    row.update({
        "best_bigjob": v.bigjob,
        "best_perstage": v.perstage,
        "hard": hard,
        f"{p}gap_closed": gap,
        f"{p}core_h_ratio": ratio,
        f"{p}goal_met": met and not worst and not gave_up,
        f"{p}worst": worst,
        f"{p}gave_up": gave_up,
    })  # fmt: skip
    return row


def _met(row: dict[str, object], strategy: str) -> bool:
    return bool(verdict(row, strategy)[f"{_prefix(strategy)}goal_met"])


def _means_row(measured: dict[str, tuple[np.ndarray, np.ndarray]], keep: np.ndarray) -> dict[str, object]:
    """A row of the means over the runs ``keep`` selects, as :func:`verdict` reads it."""
    row: dict[str, object] = {}
    for s, (span, core_h) in measured.items():
        row[f"{s}_completed"] = int(keep.sum())
        row[f"{s}_h"], row[f"{s}_ch"] = float(span[keep].mean()), float(core_h[keep].mean())
    return row


_IDLE_WORDS = {
    "early": "before its jobs' first tasks",
    "between": "between their tasks",
    "after": "after their last tasks",
    "unused": "in jobs that ran no task",
}


def _idle_excess(row: dict[str, object], strategy: str) -> str:
    """Say where ``strategy``'s idle core-hours exceed the best Per-Stage's most (empty without the columns).

    Examples
    --------
    >>> row = {"best_perstage": "p", **{f"p_idle_{k}": 0.5 for k in IDLE_PARTS}}
    >>> row.update({f"asa_idle_{k}": h for k, h in zip(IDLE_PARTS, (1.5, 6.5, 0.5, 0.5))})
    >>> _idle_excess(row, "asa")
    '; idle 7.0 core-h more than it, 6.0 of them between their tasks'
    """
    per = row.get("best_perstage")
    keys = [(f"{strategy}_idle_{k}", f"{per}_idle_{k}") for k in IDLE_PARTS]
    if not all(a in row and b in row for a, b in keys):
        return ""
    extra = {k: float(row[a]) - float(row[b]) for k, (a, b) in zip(IDLE_PARTS, keys, strict=True)}  # type: ignore[arg-type]
    total = sum(extra.values())
    part = max(extra, key=lambda k: extra[k])
    if total <= 0.0 or extra[part] <= 0.0:
        return ""
    return f"; idle {total:.1f} core-h more than it, {extra[part]:.1f} of them {_IDLE_WORDS[part]}"


def why(
    row: dict[str, object],
    measured: dict[str, tuple[np.ndarray, np.ndarray]],
    numbers: np.ndarray,
    strategy: str = "asa",
) -> str:
    """Return why ``strategy`` missed a cell (empty where it met the goal): each goal it missed, by how
    much (for core-hours, where its idle core-hours exceed the best Per-Stage's most, where the row has
    each label's idle parts: :func:`_idle_excess`), and whether one or two runs decide it.

    ``row``: the cell's row with ``strategy``'s verdict (:func:`verdict`); ``measured``: per row label,
    the makespans and core-hours of the paired runs; ``numbers``: their run numbers (0-based start
    points, as ``elastic compare`` numbers them). A run decides the verdict where leaving it out of
    every label's mean meets the goal; no run is left out of a cell of fewer than :data:`MIN_LEFT` runs.
    The cause is read run by run from there (``docs/results/strategies.md``, "Where `asa` misses").

    Examples
    --------
    >>> spans = {"bigjob": [5.0] * 6, "perstage": [5.0] * 6, "asa": [5.0] * 5 + [20.0]}
    >>> measured = {s: (np.array(x), np.ones(6)) for s, x in spans.items()}
    >>> row = verdict(_means_row(measured, np.ones(6, bool)))
    >>> why(row, measured, np.arange(6))
    'slower than both baselines by 50 %; met without run 5'
    """
    p = _prefix(strategy)
    if row[f"{p}goal_met"]:
        return ""
    span = float(row[f"{strategy}_h"])  # type: ignore[arg-type]
    big = float(row[f"{row['best_bigjob']}_h"])  # type: ignore[arg-type]
    per = float(row[f"{row['best_perstage']}_h"])  # type: ignore[arg-type]
    ratio = float(row[f"{p}core_h_ratio"])  # type: ignore[arg-type]
    reasons: list[str] = []
    if row[f"{p}worst"]:
        reasons.append(f"slower than both baselines by {span / max(big, per) - 1:.0%}".replace("%", " %"))
    elif row["hard"] and float(row[f"{p}gap_closed"]) < GAP_GOAL:  # type: ignore[arg-type]
        reasons.append(f"closes {format_gap(float(row[f'{p}gap_closed']))} of the gap")  # type: ignore[arg-type]
    elif not row["hard"] and span > TOLERANCE * min(big, per):
        reasons.append(f"makespan {span / min(big, per):.2f}x the better baseline's")
    if ratio > CORE_H_GOAL:
        fastest = " (the fastest of the three)" if span < min(big, per) else ""
        reasons.append(f"core-hours {ratio:.2f}x the best Per-Stage's{fastest}{_idle_excess(row, strategy)}")
    gave_up = int(row.get(f"{p}gave_up", 0))  # type: ignore[call-overload]
    if gave_up:
        runs = f"gave up {gave_up} run{'s' if gave_up > 1 else ''} more than the best baselines"
        if not reasons:  # the means of the runs all completed meet the goal: no run decides it
            return runs
        reasons.append(runs)
    n = len(numbers)
    decided = "too few runs to leave one out"
    if n >= MIN_LEFT:
        everyone = np.ones(n, dtype=bool)

        def met_without(*left: int) -> bool:
            keep = everyone.copy()
            keep[list(left)] = False
            return _met(_means_row(measured, keep), strategy)

        ones = [i for i in range(n) if met_without(i)]
        if ones:
            decided = "met without run " + " or ".join(str(numbers[i]) for i in ones[:3])
        else:
            pair = next(((i, j) for i in range(n) for j in range(i + 1, n) if met_without(i, j)), None)
            decided = (
                f"met without runs {numbers[pair[0]]} and {numbers[pair[1]]}"
                if pair
                else "not decided by one or two runs"
            )
    return "; ".join([*reasons, decided])


def _summary(row: dict[str, object], planner: str) -> str:
    """One planner's verdict on a cell, as the grid prints it."""
    p = _prefix(planner)
    text = (
        f"{planner} {format_gap(float(row[f'{p}gap_closed']))} {row[f'{p}core_h_ratio']:.2f}x "  # type: ignore[arg-type]
        f"{'met' if row[f'{p}goal_met'] else 'MISSED'}{' WORST' if row[f'{p}worst'] else ''} "
        f"(met in {float(row[f'{p}met_share']) * 100:.0f} % of resamples)"  # type: ignore[arg-type]
    )
    return text + (f": {row[f'{p}why']}" if row[f"{p}why"] else "")


def main() -> None:
    """Run the grid, printing one line per cell as it finishes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", default="suite")
    parser.add_argument("--peaks", default="28,56,112")
    parser.add_argument(
        "--queues",
        default=",".join(QUEUES),
        help=f"comma-separated, from {', '.join(QUEUES)}; held out, only when named: {', '.join(HELD_OUT)}",
    )
    parser.add_argument("--priorities", default="age,basic,accrue-always")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shapes", default=",".join(DEFAULT_SHAPES))
    parser.add_argument("--job-cores", type=int, default=None)
    parser.add_argument("--learned-waits", action="store_true")
    parser.add_argument("--no-estimates", action="store_true")
    parser.add_argument("--weight", type=float, default=None)
    parser.add_argument("--pace", type=float, default=None)
    parser.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--strategies", default="asa")
    parser.add_argument("--csv", type=Path, default=None)
    args = parser.parse_args()
    shapes = tuple(args.shapes.split(","))
    if args.job_cores is not None and shapes != ("plain",):
        parser.error("--job-cores splits every strategy's allocations: use it with --shapes plain")
    planners = tuple(args.strategies.split(","))
    for planner in planners:
        try:
            kind, shape = parse_strategy(planner)
        except Exception as e:  # the registry's own message names the strategies there are
            parser.error(f"--strategies: {e}")
        if kind != "asa":
            parser.error(f"--strategies takes asa in a shape (asa, asa-split, asa-fine), not {planner!r}")
        if shape != "plain" and args.job_cores is not None:
            parser.error(f"--job-cores sets every job's width: {planner} sets its own")
    for queue in args.queues.split(","):
        problem = queue_problem(queue)
        if problem is not None:
            parser.error(f"--queues: {problem}")
    names = " ".join((*shaped_strategies(BASELINES, shapes), *planners))
    print(
        f"workflow peak queue priority | makespan h mean (median): {names} | core-h mean (median): "
        f"{names} | best Big-Job, best Per-Stage: per planner, gap closed, core-h / best Per-Stage's, goal"
    )
    for queue in args.queues.split(","):
        for priority in args.priorities.split(","):
            for workflow in expand_workflow_names(args.workflows):
                for peak in (int(p) for p in args.peaks.split(",")):
                    row = cell(
                        workflow, peak, queue, priority, args.runs, args.seed, args.job_cores,
                        learned_waits=args.learned_waits,
                        estimates=not args.no_estimates, weight=args.weight, pace=args.pace, shapes=shapes,
                        calibrate=args.calibrate, planners=planners,
                    )  # fmt: skip
                    spans = " ".join(f"{row[f'{s}_h']:.2f} ({row[f'{s}_h_med']:.2f})" for s in labels(row))
                    hours = " ".join(f"{row[f'{s}_ch']:.1f} ({row[f'{s}_ch_med']:.1f})" for s in labels(row))
                    print(
                        f"{workflow} {peak} {queue} {priority} | {spans} | {hours} | "
                        f"{row['best_bigjob']}, {row['best_perstage']}, {'hard' if row['hard'] else 'easy'}: "
                        + "; ".join(_summary(row, planner) for planner in planners)
                        + f" [{row['seconds']:.0f} s]",
                        flush=True,
                    )
                    if args.csv is not None:
                        new = not args.csv.exists()
                        with args.csv.open("a", newline="") as f:
                            writer = csv.DictWriter(f, fieldnames=list(row))
                            if new:
                                writer.writeheader()
                            writer.writerow(row)


if __name__ == "__main__":
    main()
