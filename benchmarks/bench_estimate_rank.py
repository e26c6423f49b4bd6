"""Does the scheduler's estimate tell the waits that follow? (issue 9, "Which wait prices a new allocation")

Runs Per-Stage (it never holds, so every request is a plain one) over one cell of issue 9's grid and,
at each request, asks the mock backend's ``expected_start`` for the same geometry (the estimate both
backends give: every queued and running job held to its walltime). Prints, per width, the
Spearman rank correlation between the estimate and the wait that followed, the median of wait /
estimate where the estimate was over 10 minutes, and how the long waits (over 3 h) and the short ones
(under 10 minutes) were estimated. Beside it, the same for the run's latest wait (the wait of the
run's allocation that started last before the request): the fallback ``asa`` uses without an estimate.

A second table asks ahead, as the planner does when it decides whether to hold an allocation: at the last
decision while each wide allocation of the run runs, it asks the estimate for the run's next request of
that width (made once this allocation is released), plainly and with this allocation released when its
stage is expected to end (``releasing``: honoured by no built-in backend since the estimate is the
same on the mock and on Slurm, so both columns now agree), and compares both with the wait that
request then had. Plainly,
the run's own allocation is held to its walltime in the estimate, so the next request looks long whenever
the rest of the machine is busy, though the cores it gives back are free the moment it is released.

Usage: .venv/bin/python benchmarks/bench_estimate_rank.py [--workflow montage] [--peak 28]
[--queue synthetic|replay] [--runs 30] [--seed 1]
The HPC2N trace is read from ../shared/data/traces (or $ELASTIC_TRACES).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.stats import spearmanr

from elastic.backends.mock import MockBackend
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.experiments import default_background, start_points, window
from elastic.learners.choice import make_wait_learner
from elastic.metrics import EventKind
from elastic.report.scaling import scale_workflow
from elastic.strategies import Decision, Knowledge, MemoryHistory, RunView, Submit, make_strategy
from elastic.workflow import builtin_workflow

WARMUP, HORIZON = 86400.0, 4 * 86400.0


class Asking:
    """Per-Stage, asking the view's scheduler estimate and latest wait for every request it makes."""

    name = "perstage"

    def __init__(self) -> None:
        self.inner = make_strategy("perstage")
        self.asked: list[tuple[float, int, float | None, float | None]] = []
        self._last: dict[str, tuple[float, int, float | None, float | None]] = {}

    @property
    def ahead(self) -> list[tuple[float, int, float | None, float | None]]:
        """Per wide allocation, the last ask made while it ran (the planner's hold-or-release moment)."""
        return list(self._last.values())

    def decide(self, view: RunView) -> Decision:
        for a in view.allocations:
            if a.running and a.cores > 1 and view.estimate is not None:
                walltime = view.knowledge.walltime(a.labels[0])
                plain = view.estimate(a.cores, walltime)
                # released when its stage is expected to end, as the planner asks
                stage = view.stage(a.labels[0])
                left = 0.0
                if stage.start_time is not None and not stage.complete:
                    elapsed = view.now - stage.start_time
                    left = max(0.0, view.knowledge.expected_duration(a.labels[0], elapsed) - elapsed)
                released = ((a.alloc_id, view.now + left),)
                with_release = view.estimate(a.cores, walltime, released)
                self._last[a.alloc_id] = (view.now, a.cores, plain, with_release)
        decision = self.inner.decide(view)
        for a in decision.actions:
            if isinstance(a, Submit) and view.estimate is not None:
                self.asked.append((view.now, a.cores, view.estimate(a.cores, a.walltime), view.latest_wait()))
        return decision


def main() -> None:
    """Run the cell and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="montage")
    parser.add_argument("--peak", type=int, default=28)
    parser.add_argument("--queue", choices=("synthetic", "replay"), default="synthetic")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    import bench_planner_grid as grid  # the grid's trace path (same directory)

    wf = scale_workflow(builtin_workflow(args.workflow), args.peak, scaling="weak")
    background = (
        default_background(max(64, 2 * args.peak), seed=args.seed)
        if args.queue == "synthetic"
        else grid._trace()
    )
    waits = make_wait_learner("ewma", seed=args.seed)
    history = MemoryHistory()
    rows: list[tuple[int, float, float, float]] = []  # cores, estimate, latest wait (nan: none), wait
    ahead: list[tuple[int, float, float, float]] = []  # cores, plain, with it released, wait
    for i, start in enumerate(
        start_points(background, args.runs, seed=args.seed, warmup=WARMUP, horizon=HORIZON)
    ):
        backend = MockBackend(
            nodes=background.processors,
            workload=window(background, start - WARMUP, start + HORIZON),
            start=WARMUP,
        )
        strategy = Asking()
        knowledge = Knowledge(wf, waits=waits, history=history, backend="mock")
        runner = Runner(wf, strategy, backend, SimExecution(), knowledge, seed=args.seed * 100_003 + i)
        try:
            result = runner.run()
        finally:
            backend.close()
        submits = [e for e in result.events if e.kind is EventKind.ALLOC_SUBMIT]
        starts = {e.allocation: e for e in result.events if e.kind is EventKind.ALLOC_START}
        for at, cores, plain, without in strategy.ahead:
            following = [e for e in submits if e.time > at and e.cores == cores]
            began = starts.get(following[0].allocation) if following else None
            if plain is not None and without is not None and began is not None and began.eligible is not None:
                ahead.append((cores, plain, without, began.time - began.eligible))
        for (at, cores, estimate, latest), e in zip(strategy.asked, submits, strict=True):
            assert e.time == at and e.cores == cores
            began = starts.get(e.allocation)
            if estimate is not None and began is not None and began.eligible is not None:
                rows.append(
                    (cores, estimate, math.nan if latest is None else latest, began.time - began.eligible)
                )
    data = np.array(rows, dtype=float)
    print(
        f"{args.workflow} {args.peak}, {args.queue} queue, Per-Stage, {args.runs} runs, {len(data)} requests"
    )
    for cores in [*sorted(set(data[:, 0].astype(int))), None]:
        d = data if cores is None else data[data[:, 0] == cores]
        if len(d) < 4:
            continue
        est, last, wait = d[:, 1], d[:, 2], d[:, 3]
        rho = spearmanr(est, wait).statistic
        has = ~np.isnan(last)
        rho_latest = spearmanr(last[has], wait[has]).statistic if has.sum() > 3 else math.nan
        big = est > 600
        ratio = float(np.median(wait[big] / est[big])) if big.any() else math.nan
        long, short = wait > 3 * 3600, wait < 600
        print(
            f"  {'all' if cores is None else cores:>4} cores: {len(d):4d} requests, "
            f"rank corr estimate {rho:.2f}, "
            f"latest wait {rho_latest:.2f} ({has.sum()} with one); median wait/estimate (estimate > 10 min) "
            f"{ratio:.2f}; waits > 3 h: {long.sum()}, estimated {np.round(est[long] / 3600, 1).tolist()} h; "
            f"waits < 10 min: {short.sum()}, of them estimated > 1 h: {(est[short] > 3600).sum()}"
        )

    _ahead_table(np.array(ahead, dtype=float))


def _ahead_table(data: np.ndarray) -> None:
    """Print how the estimates asked ahead (plain, and with the run's allocation released) rank the waits."""
    print("  asked ahead, at the last decision before the allocation is released (plain / released):")
    if len(data) < 4:
        print("    too few requests")
        return
    plain, without, wait = data[:, 1], data[:, 2], data[:, 3]
    long, short = wait > 3 * 3600, wait < 600
    print(
        f"    {len(data)} requests: rank corr plain {spearmanr(plain, wait).statistic:.2f}, "
        f"released {spearmanr(without, wait).statistic:.2f}; waits < 10 min: {short.sum()}, of them "
        f"estimated > 1 h plain {(plain[short] > 3600).sum()}, released {(without[short] > 3600).sum()}; "
        f"waits > 3 h: {long.sum()}, estimated plain {np.round(plain[long] / 3600, 1).tolist()} h, "
        f"released {np.round(without[long] / 3600, 1).tolist()} h"
    )


if __name__ == "__main__":
    main()
