"""Which of a run's earlier waits tells the wait of its last wide stage? (issue 9, holds under capacity)

Runs Per-Stage (one allocation per stage, requested when the stage is ready, released when it ends)
over one cell of issue 9's grid and takes, per run, the queue wait of each wide stage's allocation (a
stage wider than one core). For the last wide stage, it prints the Spearman rank correlation of its wait
with each earlier wide stage's wait over the runs, and how often it started within 6 minutes where the
earlier one had.

The planner decides whether to hold a wide allocation across a narrow stage by the wait it expects for
the cores to come back. Where it merged the first wide stages into one allocation, the only wait of the
run it has seen is the first one; the ranks here say how much a later request's wait would have told.

Usage: .venv/bin/python benchmarks/bench_stage_wait_ranks.py [--workflow montage] [--peak 56]
[--queue synthetic|replay|capacity] [--priority age] [--runs 30] [--seed 1]
The HPC2N trace is read from ../shared/data/traces (or $ELASTIC_TRACES).
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_planner_grid import queue_setting  # benchmarks/ is on sys.path as the script's directory
from scipy.stats import spearmanr

from elastic.experiments import simulate_runs
from elastic.metrics import EventKind
from elastic.report.scaling import scale_workflow
from elastic.workflow import builtin_workflow

QUICK = 360.0
"""Seconds under which a wait counts as "started at once"."""


def stage_waits(
    workflow: str, peak: int, queue: str, priority: str, runs: int, seed: int
) -> list[dict[str, float]]:
    """Return, per Per-Stage run, the wait in seconds of each wide stage's first allocation."""
    wf = scale_workflow(builtin_workflow(workflow), peak, scaling="weak")
    background, mode, policy = queue_setting(queue, peak, seed)
    results = simulate_runs(
        wf,
        "perstage",
        runs=runs,
        seed=seed,
        background=background,
        policy=policy,
        mode=mode,
        priority=priority,
    )
    out = []
    for r in results:
        submitted: dict[str, tuple[float, int, str]] = {}
        waits: dict[str, float] = {}
        for e in r.events:
            if e.kind is EventKind.ALLOC_SUBMIT and e.allocation is not None:
                submitted[e.allocation] = (e.time, e.cores, e.stage or "")
            elif e.kind is EventKind.ALLOC_START and e.allocation in submitted:
                at, cores, stage = submitted[e.allocation]
                if cores > 1 and stage not in waits:
                    waits[stage] = e.time - at
        out.append(waits)
    return out


def main() -> None:
    """Print the ranks for one cell."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="montage")
    parser.add_argument("--peak", type=int, default=56)
    parser.add_argument("--queue", default="capacity", choices=("synthetic", "replay", "capacity"))
    parser.add_argument("--priority", default="age")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    runs = stage_waits(args.workflow, args.peak, args.queue, args.priority, args.runs, args.seed)
    order = [s.name for s in builtin_workflow(args.workflow).stages]
    wide = [s for s in order if sum(s in w for w in runs) >= 3]
    if len(wide) < 2:
        raise SystemExit(f"{args.workflow}: fewer than two wide stages with waits; nothing to rank")
    last = wide[-1]
    print(f"{args.workflow} {args.peak} {args.queue} {args.priority}, Per-Stage, {len(runs)} runs")
    print(f"mean wait of {last}: {np.mean([w[last] for w in runs if last in w]) / 3600:.2f} h")
    for earlier in wide[:-1]:
        pairs = [(w[earlier], w[last]) for w in runs if earlier in w and last in w]
        x, y = (np.array(v) for v in zip(*pairs, strict=True))
        quick = x < QUICK
        both = int((y[quick] < QUICK).sum())
        print(
            f"{earlier} -> {last}: Spearman {spearmanr(x, y).statistic:.2f} over {len(pairs)} runs; "
            f"where {earlier} started at once ({int(quick.sum())} runs), {last} did in {both}"
        )


if __name__ == "__main__":
    main()
