"""What ``asa``'s planning costs: per decision on a 100-stage DAG, per run of a 40-stage chain, vs Per-Stage.

Three goals (issue 28, item 5), each measured on the mock backend's virtual clock with a busy queue (the
synthetic 90 % load on 64 cores, as ``elastic compare --processors 64``):

- **decision**: every :meth:`~elastic.strategies.planner.Planner.decide` of a whole simulated run of a
  random 100-stage DAG (:func:`random_dag`: widths 1-28, stages of 1-30 min, parallel branches and
  joins): median <= 100 ms, 99th percentile <= 1 s;
- **chain**: a whole simulated run of a 40-stage chain (widths 1-28, 1-30 min stages) under ``asa``:
  <= 1 s of CPU;
- **replay**: on a long-queue trace replay (``--trace``, default SDSC Blue), ``asa``'s simulation CPU per
  run <= 3x Per-Stage's.

Prints each figure beside its goal and exits 1 on a miss. ``--reuse`` measures ``asa`` with
``reuse=True`` (:class:`~elastic.strategies.planner.Planner`: the search's result kept between decisions
while nothing but the clock changed; not the same decisions). Imports are done before any timing (the
wait learner's first import of scipy took seconds and was charged to ``asa``'s first run).

    .venv/bin/python benchmarks/bench_planner_cost.py [--runs 3] [--seed 1] [--trace PATH] [--reuse]
        [--pace S] [--job-cores N] [--profile] [--pace-check [--workflows suite] [--queues Q] [--peaks 28,56]]

``--job-cores N`` measures the three goals with every strategy's allocations asked as batch jobs of at most
``N`` cores (``job_cores``; 1: jobs of one task, ``elastic compare``'s ``fine`` shape), ``asa`` and
Per-Stage alike: the planner then plans requests of many pieces.

``--pace-check`` prints instead what pacing (:class:`~elastic.strategies.base.Paced`) changes: per cell of
the published suite and the paper's workflows (``--workflows``, default ``suite``) x ``--queues`` (default
synthetic, replay, capacity: ``bench_planner_grid.py``'s) x ``--peaks`` (default 28,56), ``asa``'s mean
makespan and core-hours over its completed runs and its CPU, asked at every poll and paced.

``--pace S`` measures ``asa`` with ``Planner(pace=S)`` (0: asked at every 30-s poll, as before paced
decisions; default: the planner's own, :data:`~elastic.strategies.planner.PACE`).

``--profile`` prints the top of a cProfile of the 40-stage chain's run instead.

``--scale 1000,2000,5000`` measures instead what a whole simulated run of a large declared workflow costs
(issue 31: 5,000 stages in under a minute is the goal): a chain of 1-minute one-core stages and a random
DAG (:func:`random_dag`), under every strategy (``bigjob``, ``perstage``, ``asa`` and their ``-split``
shapes), on a quiet queue (10 % load) and a busy one (90 %), 64 cores, each run in its own process
stopped after ``--limit`` seconds (printed as ``>limit``). Stage limits are lifted for the measurement.

``--hold-check`` prints the same for the hold horizon
(:data:`~elastic.strategies.planner_rules.HOLD_HORIZON`): 64 stages, as before it, and the default.

``--horizon-check`` prints instead what ``asa``'s planning horizon
(:data:`~elastic.strategies.planner_rules.HORIZON`) changes on workflows longer than it: makespan,
core-hours charged, status and CPU per run of the 100-stage DAG, a 200-stage DAG and a 200-stage chain
(the random shapes above), on the busy queue, with the horizon and without (``horizon=None``: every
stage left planned at each decision, as before the horizon). Workflows within it decide the same.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elastic.experiments import default_background, simulate_runs
from elastic.workflow import Stage, Workflow, resolve_workflow

DECISION_MEDIAN = 0.100
DECISION_P99 = 1.0
CHAIN_CPU = 1.0
REPLAY_RATIO = 3.0


def random_dag(n: int, *, seed: int = 0, widest: int = 28, chain: bool = False) -> Workflow:
    """Return a random workflow of ``n`` stages: widths 1-``widest``, 1-30 min tasks.

    With ``chain`` every stage follows the one before it; else each follows one to three earlier stages
    (mostly the one before it: chains with parallel branches and joins), or none.
    """
    rng = np.random.default_rng(seed)
    stages = []
    for i in range(n):
        if chain or i == 0:
            deps: tuple[str, ...] | None = None
        else:
            picks = {int(j) for j in rng.integers(max(0, i - 6), i, size=int(rng.integers(1, 4)))}
            deps = tuple(f"s{j}" for j in sorted(picks)) if rng.random() < 0.9 else ()
        cores = int(rng.choice([1, 2, 4]))
        width = int(rng.integers(1, widest + 1))
        tasks = max(1, width // cores)
        stages.append(Stage(f"s{i}", tasks, cores, runtime=float(rng.uniform(60, 1800)), depends_on=deps))
    stages[0] = Stage("s0", widest, 1, runtime=stages[0].runtime)  # the peak is reached
    return Workflow(f"{'chain' if chain else 'dag'}{n}", tuple(stages))


def _timed_decisions(run: Callable[[], Any]) -> list[float]:
    """Run ``run()`` with every Planner.decide timed (CPU seconds); return the times."""
    from elastic.strategies.planner import Planner

    times: list[float] = []
    original = Planner.decide

    def decide(self: Planner, view: Any) -> Any:
        start = time.process_time()
        try:
            return original(self, view)
        finally:
            times.append(time.process_time() - start)

    Planner.decide = decide  # type: ignore[method-assign]
    try:
        run()
    finally:
        Planner.decide = original  # type: ignore[method-assign]
    return times


def _cpu(run: Callable[[], Any]) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


STRATEGIES = ("bigjob", "perstage", "asa", "bigjob-split", "perstage-split", "asa-split")


def _one(kind: str, n: str, strategy: str, queue: str, *, seed: int) -> int:
    """Simulate one large run (``--scale``); print its CPU seconds and status."""
    import elastic.limits
    import elastic.workflow_model
    from elastic.simulator.synthetic import synthetic_workload

    elastic.limits.MAX_STAGES = elastic.workflow_model.MAX_STAGES = 10**6  # type: ignore[attr-defined]
    stages = int(n)
    if kind == "chain":
        workflow = Workflow(f"chain{n}", tuple(Stage(f"s{i}", 1, 1, runtime=60.0) for i in range(stages)))
    else:
        workflow = random_dag(stages, seed=seed)
    if queue == "busy":
        background = default_background(64, seed=seed)
    else:
        background = synthetic_workload(jobs=2000, processors=64, utilisation=0.1, max_cores=32, seed=seed)
    import elastic.learners.ewma

    start = time.process_time()
    (result,) = simulate_runs(workflow, strategy, runs=1, seed=seed, background=background)
    print(f"{time.process_time() - start:.1f} {result.status}")
    return 0


def _horizon_check(runs: int, seed: int, hold: bool = False) -> int:
    """Print makespan, core-hours, status, CPU of ``asa`` with and without its horizon (--horizon-check).

    ``hold`` (--hold-check): with the hold horizon of 64 stages (as before it) and the default instead.
    """
    from elastic.strategies.planner_rules import HOLD_HORIZON, HORIZON

    background = default_background(64, seed=seed)
    shapes = [random_dag(100, seed=seed), random_dag(200, seed=seed), random_dag(200, seed=seed, chain=True)]
    variants: list[tuple[str, dict[str, Any]]] = (
        [(f"{HORIZON}, hold {HORIZON}", {"hold_horizon": HORIZON}), (f"{HORIZON}, hold {HOLD_HORIZON}", {})]
        if hold
        else [("none", {"horizon": None}), (str(HORIZON), {"horizon": HORIZON})]
    )
    print("| workflow | horizon | makespan (h) | core-hours | completed | CPU per run (s) |")
    print("|---|---|---|---|---|---|")
    for workflow in shapes:
        for horizon, options in variants:
            start = time.process_time()
            results = simulate_runs(
                workflow,
                "asa",
                runs=runs,
                seed=seed,
                background=background,
                strategy_options=options,
            )
            cpu = (time.process_time() - start) / runs
            makespan = np.mean([r.metrics.makespan for r in results]) / 3600
            charged = np.mean([r.metrics.core_seconds_charged for r in results]) / 3600
            done = sum(r.status == "completed" for r in results)
            print(
                f"| {workflow.name} | {horizon} | {makespan:.2f} | {charged:.1f} | "
                f"{done}/{runs} | {cpu:.1f} |",
                flush=True,
            )
    return 0


def _pace_check(workflows: str, queues: str, peaks: str, runs: int, seed: int) -> int:
    """Print asa's mean makespan, core-hours and CPU per cell, asked at every poll and paced."""
    from benchmarks.bench_planner_grid import queue_setting
    from elastic.report.scaling import scale_workflow
    from elastic.workflow import builtin_workflow, expand_workflow_names

    print(
        "| workflow | peak | queue | every poll: h / core-h / done / CPU | paced: h / core-h / done / CPU |"
    )
    print("|---|---:|---|---|---|")
    for queue in queues.split(","):
        for name in expand_workflow_names(workflows):
            for peak in (int(p) for p in peaks.split(",")):
                wf = scale_workflow(builtin_workflow(name), peak, scaling="weak")
                background, mode, policy = queue_setting(queue, peak, seed)
                cells = []
                for pace in (0.0, None):  # 0: asked at every poll; None: the planner's default pace
                    start = time.process_time()
                    results = simulate_runs(
                        wf,
                        "asa",
                        runs=runs,
                        seed=seed,
                        background=background,
                        policy=policy,
                        mode=mode,
                        strategy_options={} if pace is None else {"pace": pace},
                    )
                    cpu = time.process_time() - start
                    done = [r for r in results if r.status == "completed"]
                    span = np.mean([r.metrics.makespan for r in done]) / 3600 if done else float("nan")
                    core_h = np.mean([r.metrics.core_hours_charged for r in done]) if done else float("nan")
                    cells.append(f"{span:.3f} / {core_h:.2f} / {len(done)} / {cpu:.2f}")
                print(f"| {name} | {peak} | {queue} | " + " | ".join(cells) + " |", flush=True)
    return 0


def _scale(counts: list[int], limit: float, seed: int) -> int:
    """Time whole simulated runs of large declared workflows, each in its own process (``--scale``)."""
    import subprocess

    print("| workflow | queue | " + " | ".join(STRATEGIES) + " |")
    print("|---|---|" + "---|" * len(STRATEGIES))
    misses = 0
    for n in counts:
        for kind in ("chain", "dag"):
            for queue in ("quiet", "busy"):
                cells = []
                for strategy in STRATEGIES:
                    argv = [
                        sys.executable,
                        __file__,
                        "--seed",
                        str(seed),
                        "--one",
                        kind,
                        str(n),
                        strategy,
                        queue,
                    ]
                    try:
                        out = subprocess.run(argv, capture_output=True, text=True, timeout=limit, check=True)
                        cpu, status = out.stdout.split()[-2:]
                        cells.append(
                            f"{float(cpu):.0f} s" + ("" if status == "completed" else f" ({status})")
                        )
                        misses += n >= 5000 and float(cpu) > 60
                    except subprocess.TimeoutExpired:
                        cells.append(f">{limit:.0f} s")
                        misses += n >= 5000
                print(f"| {kind} of {n:,} | {queue} | " + " | ".join(cells) + " |", flush=True)
    return 1 if misses else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trace", type=Path, default=None, help="long-queue SWF trace for the replay goal")
    parser.add_argument("--profile", action="store_true", help="cProfile the 40-stage chain's run")
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="asa with reuse=True (kept searches)")
    parser.add_argument("--pace", type=float, default=None, help="asa with Planner(pace=S); 0: every poll")
    parser.add_argument(
        "--job-cores", type=int, default=None, help="every strategy in jobs of at most N cores (1: fine)"
    )
    parser.add_argument("--scale", help="stage counts of whole large runs to time, e.g. 1000,2000,5000")
    parser.add_argument("--limit", type=float, default=120.0, help="--scale: seconds before a run is stopped")
    parser.add_argument("--horizon-check", action="store_true", help="asa with and without its horizon")
    parser.add_argument("--hold-check", action="store_true", help="asa with hold horizons 64 and the default")
    parser.add_argument("--pace-check", action="store_true", help="asa asked at every poll and paced")
    parser.add_argument("--workflows", default="suite", help="--pace-check: workflows (names or groups)")
    parser.add_argument("--queues", default="synthetic,replay,capacity", help="--pace-check: queues")
    parser.add_argument("--peaks", default="28,56", help="--pace-check: peaks")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # kind n strategy queue: one --scale run
    args = parser.parse_args()
    if args.job_cores is not None:
        if not 1 <= args.job_cores <= 10_000:
            parser.error(f"--job-cores must be between 1 and 10000, got {args.job_cores}")
        others = [
            flag for flag in ("horizon_check", "hold_check", "pace_check", "scale") if getattr(args, flag)
        ]
        if others:
            flag = "--" + others[0].replace("_", "-")
            parser.error(f"--job-cores applies to the three goals only, not with {flag}")
    traces = Path(
        os.environ.get("ELASTIC_TRACES", Path(__file__).resolve().parents[1] / "../shared/data/traces")
    )
    replay = args.trace or traces / "SDSC-BLUE-2000-4.2-cln.swf.gz"
    goals = not (args.one or args.scale or args.horizon_check or args.hold_check or args.pace_check)
    if goals and not args.skip_replay and not replay.is_file():  # checked before minutes of the others
        parser.error(
            f"the replay goal's trace {replay} is not there: give --trace PATH, set ELASTIC_TRACES to the "
            "folder that holds it, or --skip-replay"
        )
    if args.one:
        return _one(*args.one, seed=args.seed)
    if args.horizon_check or args.hold_check:
        import elastic.learners.ewma  # scipy: imported once, before any timing

        return _horizon_check(args.runs, args.seed, hold=args.hold_check)
    if args.pace_check:
        import elastic.learners.ewma  # scipy: imported once, before any timing

        return _pace_check(args.workflows, args.queues, args.peaks, args.runs, args.seed)
    if args.scale:
        return _scale([int(n) for n in args.scale.split(",")], args.limit, args.seed)
    import elastic.learners.ewma  # noqa: F401  (scipy: imported once, before any timing)

    options: dict[str, Any] = {"reuse": True} if args.reuse else {}
    if args.pace is not None:
        options["pace"] = args.pace
    background = default_background(64, seed=args.seed)
    chain = random_dag(40, seed=args.seed, chain=True)
    dag = random_dag(100, seed=args.seed)

    def sim(workflow: Workflow, strategy: str, runs: int, **kw: Any) -> Callable[[], Any]:
        if strategy == "asa":
            kw["strategy_options"] = options
        kw["job_cores"] = args.job_cores
        return lambda: simulate_runs(workflow, strategy, runs=runs, seed=args.seed, **kw)

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        sim(chain, "asa", 1, background=background)()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        return 0
    misses = []
    times = np.array(_timed_decisions(sim(dag, "asa", args.runs, background=background)))
    median, p99 = float(np.median(times)), float(np.quantile(times, 0.99))
    print(
        f"decision, 100-stage DAG, {len(times)} decisions over {args.runs} runs: "
        f"median {median * 1000:.1f} ms (goal <= {DECISION_MEDIAN * 1000:.0f}), "
        f"p99 {p99 * 1000:.0f} ms (goal <= {DECISION_P99 * 1000:.0f}), max {times.max() * 1000:.0f} ms"
    )
    if median > DECISION_MEDIAN or p99 > DECISION_P99:
        misses.append("decision")
    per_run = _cpu(sim(chain, "asa", args.runs, background=background)) / args.runs
    print(f"run, 40-stage chain under asa: {per_run:.2f} s CPU per run (goal <= {CHAIN_CPU:.0f})")
    if per_run > CHAIN_CPU:
        misses.append("chain")
    if not args.skip_replay:
        from elastic.simulator.trace import read_swf

        workload = read_swf(replay)
        montage = resolve_workflow("montage")
        cpu = {
            s: _cpu(sim(montage, s, args.runs, background=workload)) / args.runs for s in ("perstage", "asa")
        }
        ratio = cpu["asa"] / max(cpu["perstage"], 1e-9)
        print(
            f"replay {replay.name}, montage: asa {cpu['asa']:.2f} s, perstage {cpu['perstage']:.2f} s CPU "
            f"per run: {ratio:.1f}x (goal <= {REPLAY_RATIO:.0f}x)"
        )
        if ratio > REPLAY_RATIO:
            misses.append("replay")
    print("missed: " + ", ".join(misses) if misses else "all goals met")
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
