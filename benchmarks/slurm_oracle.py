"""The mock queue checked against real Slurm: one workload replayed on both, compared job by job.

A window of a trace (or a synthetic workload) is scaled by K (K = 60: an hour becomes a minute;
walltimes rounded up to Slurm's whole minutes) and submitted to a local multi-node Slurm cluster with
fake CPUs (``tests/fixtures/slurm_oracle.py``), each job at its scaled submit time with ``sbatch -n
CORES -t MINUTES --wrap "sleep RUNTIME"``. Every job's submit, start and end are read back from the
``jobcomp/filetxt`` file. The same jobs then run on the mock queue (``elastic.simulator.engine``),
submitted when Slurm recorded them and running as long as they ran there, so that only the scheduling
differs; the waits are compared job by job (Spearman, median and 90th percentile of the absolute
difference, pairs started in the other order), overall and per size class. Slurm's scheduler settings
are printed with the results.

Examples
--------
``python benchmarks/slurm_oracle.py --workload synthetic --jobs 120``
``python benchmarks/slurm_oracle.py --workload sdsc-blue --day 300 --hours 8 --load 2``
``python benchmarks/slurm_oracle.py --workload hpc2n --day 100 --hours 8 --load 1.5``

The default partition is 64 nodes of one fake CPU: Slurm's backfill reserves whole nodes for a pending
job (``_add_reservation`` in ``src/plugins/sched/backfill/backfill.c`` works on node bitmaps), where the
mock plans cores; one-CPU nodes make the two the same thing, so what is left is the scheduling itself.
``--nodes 4 --cores-per-node 32`` shows the effect of the node granularity.

``--debug-flags Backfill,BackfillMap`` keeps ``slurmctld``'s log of every backfill pass (its directory is
recorded in the ``--json`` file) and adds a second reference to the +-1 s ceiling: the Spearman that a
model exact in every backfill rule reaches when, as here, it knows each submission only to the second
(20 replays at Slurm's logged pass times; ``benchmarks/slurm_pass_check.py`` checks the rules pass by
pass).

``--strategies bigjob,perstage,asa`` runs the second comparison instead (``_oracle_workflow.py``): a
built-in workflow (``--workflow``, demo3 by default) with its runtimes divided by K, under each strategy,
``--reps`` times, on Slurm (real run driver, Slurm backend and agents in batch jobs) and on the mock, each
time beside the same scaled synthetic background (``--load``) that started ``--warmup`` seconds before;
mean makespan, core-hours, per-stage waits and the strategies' ranking side by side.
``--no-slurm`` runs only the mock half (seconds); ``--from-json`` takes the Slurm half from an earlier
run's ``--json`` file. The mock runs once per ``--policies`` entry, with the time real Slurm and the
agents add around every allocation and task (``--startup``, ``--task-overhead``: ``STARTUP`` and
``TASK_OVERHEAD`` below, measured here). ``--measure-launch`` measures them: the workflow on an idle
cluster and an idle mock, where every makespan difference is that time, split by where it goes.

``python benchmarks/slurm_oracle.py --strategies bigjob,perstage,asa --reps 5 --load 1.2``
``python benchmarks/slurm_oracle.py --strategies bigjob,perstage,asa --measure-launch --reps 3 --nodes 16``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from any directory

from _oracle_workflow import (
    LAUNCH_GAPS,
    WorkflowRun,
    compare_strategies,
    measure_launch,
    scaled_workflow,
    stage_names,
)
from scipy.stats import spearmanr
from slurm_pass_check import read_log, timed_replay

from elastic.simulator.synthetic import synthetic_workload
from elastic.simulator.trace import read_swf
from elastic.simulator.workload import Workload
from tests.fixtures.slurm_oracle import (
    SIZE_CLASSES,
    Agreement,
    OracleCluster,
    Replay,
    ScaledJobs,
    compare,
    replay_on_mock,
    replay_on_slurm,
    sbatch_version,
    scale_workload,
)

# The mock's execution timing in the workflow comparison (SimExecution's startup and task_overhead), the
# medians measured by ``--strategies bigjob,perstage,asa --measure-launch --reps 3 --nodes 16`` on the
# local Slurm 22.05.8 cluster (this 2-core machine, shared with other work, load average 5-8): an
# allocation's StartTime to its first task, 1.42 s over 24 allocations (slurmd launching the batch step,
# the agent's interpreter starting and registering with the pool), and each task's recorded run beyond
# the mock's run of the same sampled duration, 1.66 s over 90 tasks (the pool handing it to the agent,
# the process starting, the result coming back). Not modelled: a ready stage's first task on an agent
# already running, 0.69 s (8 stages), and the last task's end to the run's end, 0.44 s (9 runs).
STARTUP = 1.4
TASK_OVERHEAD = 1.7

TRACES = {"hpc2n": "HPC2N-2002-2.2-cln.swf.gz", "sdsc-blue": "SDSC-BLUE-2000-4.2-cln.swf.gz"}


def _workload(args: argparse.Namespace, cores: int) -> Workload:
    if args.workload == "synthetic":
        return synthetic_workload(
            jobs=args.jobs,
            processors=cores,
            utilisation=args.load,
            runtime_median=args.runtime_median,
            runtime_sigma=args.runtime_sigma,
            max_cores=cores // 2,
            estimate_ratio=2.0,
            max_runtime=args.max_walltime / 2.0,
            seed=args.seed,
        )
    folder = Path(
        os.environ.get("ELASTIC_TRACES", Path(__file__).resolve().parents[1] / ".." / "shared/data/traces")
    )
    start = args.day * 86400.0
    w = read_swf(
        folder / TRACES[args.workload],
        window=(start, start + args.hours * 3600.0),
        processors=cores,
        load=args.load,
        max_jobs=args.jobs,
    )
    # Keep the replay short: walltimes (and runtimes) capped at --max-walltime, the same on both sides.
    wall = np.minimum(w.walltime, args.max_walltime)
    return Workload(
        job_id=w.job_id,
        submit=w.submit,
        cores=w.cores,
        runtime=np.minimum(w.runtime, wall),
        walltime=wall,
        user=w.user,
        recorded_wait=w.recorded_wait,
        processors=w.processors,
        source=w.source,
        queue=w.queue,
    )


def _fmt(x: float, spec: str = ".1f") -> str:
    return "-" if not math.isfinite(x) else format(x, spec)


def _table(title: str, rows: list[Agreement]) -> str:
    head = (
        f"{'class':>6} {'jobs':>5} {'spearman':>8} {'med|dw|':>8} {'p90|dw|':>8} "
        f"{'wait slurm':>10} {'wait mock':>10} {'inverted pairs':>16}"
    )
    out = [title, head]
    for a in rows:
        inv = f"{a.inverted}/{a.pairs}"
        out.append(
            f"{a.label:>6} {a.jobs:>5} {_fmt(a.spearman, '.3f'):>8} "
            f"{_fmt(a.median_abs):>8} {_fmt(a.p90_abs):>8} "
            f"{_fmt(a.mean_wait_a):>10} {_fmt(a.mean_wait_b):>10} {inv:>16}"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the replay on Slurm and on the mock; print the agreement tables (and write ``--json``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", choices=("synthetic", *TRACES), default="synthetic")
    p.add_argument("--k", type=float, default=60.0, help="time scale: trace seconds per real second (60)")
    p.add_argument("--nodes", type=int, default=64, help="slurmd nodes (64)")
    p.add_argument("--cores-per-node", type=int, default=1, help="fake CPUs per node (1: one core, one node)")
    p.add_argument("--jobs", type=int, default=150, help="synthetic: jobs; trace: at most this many (150)")
    p.add_argument(
        "--load", type=float, default=1.0, help="synthetic utilisation / trace arrival factor (1.0)"
    )
    p.add_argument("--runtime-median", type=float, default=1200.0, help="synthetic median runtime, s (1200)")
    p.add_argument("--runtime-sigma", type=float, default=1.0, help="synthetic log-runtime sd (1.0)")
    p.add_argument("--max-walltime", type=float, default=4 * 3600.0, help="cap on walltimes, trace s (14400)")
    p.add_argument("--day", type=float, default=100.0, help="trace: window start, days from the log start")
    p.add_argument("--hours", type=float, default=8.0, help="trace: window length, hours (8)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--priority", choices=("multifactor", "basic"), default="multifactor")
    p.add_argument(
        "--policies",
        default="slurm-nodes,slurm,conservative,easy",
        help="mock policies compared (first is primary)",
    )
    p.add_argument("--from-json", type=Path, default=None, help="re-compare the Slurm schedule in this file")
    p.add_argument("--t0", type=float, default=0.0, help="--from-json: Slurm's wall-clock time 0 (old files)")
    p.add_argument("--debug-flags", default="", help="Slurm DebugFlags, e.g. Backfill,BackfillMap (log kept)")
    p.add_argument("--json", type=Path, default=None, help="write every schedule and figure here")
    p.add_argument("--strategies", default="", help="run the workflow comparison with these strategies")
    p.add_argument("--workflow", default="demo3", help="--strategies: built-in workflow (demo3)")
    p.add_argument("--reps", type=int, default=5, help="--strategies: runs per strategy and backend (5)")
    p.add_argument(
        "--warmup", type=float, default=60.0, help="--strategies: background s before the run (60)"
    )
    p.add_argument("--no-slurm", action="store_true", help="--strategies: the mock half only")
    p.add_argument(
        "--startup",
        type=float,
        default=STARTUP,
        help=f"mock: s from an allocation's start to its first task ({STARTUP:g}, measured)",
    )
    p.add_argument(
        "--task-overhead",
        type=float,
        default=TASK_OVERHEAD,
        help=f"mock: s every task runs beyond its duration ({TASK_OVERHEAD:g}, measured)",
    )
    p.add_argument(
        "--measure-launch",
        action="store_true",
        help="--strategies: the workflow on an idle cluster and mock; where Slurm's extra seconds go",
    )
    args = p.parse_args(argv)
    if args.strategies and args.measure_launch:
        return _measure_launch(args)
    if args.strategies:
        return _strategies(args)

    if args.from_json is not None:
        return _from_json(args)
    cores = args.nodes * args.cores_per_node
    w = _workload(args, cores)
    jobs = scale_workload(w, args.k)
    print(
        f"workload {args.workload} ({w.source}): {len(jobs)} jobs, {cores} cores, K={args.k:g}, "
        f"arrivals over {jobs.submit.max():.0f} s, limits {jobs.minutes.min()}-{jobs.minutes.max()} min, "
        f"sleeps {jobs.sleep.min():.1f}-{jobs.sleep.max():.1f} s",
        flush=True,
    )
    root = Path(tempfile.mkdtemp(prefix="elastic-oracle-"))
    t = time.monotonic()
    extra = (f"DebugFlags={args.debug_flags}",) if args.debug_flags else ()
    cluster = OracleCluster(root, args.nodes, args.cores_per_node, priority=args.priority, extra_conf=extra)
    with cluster:
        settings = cluster.settings()
        version = sbatch_version(cluster)
        print(f"Slurm ({version}) settings:")
        for key, value in settings.items():
            print(f"  {key} = {value}")
        slurm = replay_on_slurm(cluster, jobs, progress=lambda s: print("  " + s, flush=True))
    states, counts = np.unique(slurm.state, return_counts=True)
    tally = ", ".join(f"{s} {c}" for s, c in zip(states.tolist(), counts.tolist(), strict=True))
    print(f"Slurm's logs: {root / 'log'}")
    print(f"Slurm replay took {time.monotonic() - t:.0f} s; final states: {tally}")
    results: dict[str, object] = {
        "args": vars(args) | {"json": str(args.json)},
        "slurm_version": version,
        "settings": settings,
        "slurm": {
            "submit": slurm.submit.tolist(),
            "start": slurm.start.tolist(),
            "end": slurm.end.tolist(),
            "state": list(slurm.state),
            "t0": slurm.t0,
        },
        "cores": jobs.cores.tolist(),
        "minutes": jobs.minutes.tolist(),
        "sleep": jobs.sleep.tolist(),
        "k": jobs.k,
        "log": str(root / "log"),  # Slurm's logs (benchmarks/slurm_pass_check.py reads them)
    }
    _mock_tables(args, jobs, slurm, cores, results)
    if "Backfill" in args.debug_flags.split(",") and args.cores_per_node == 1:
        results["timing_floor"] = _timing_floor(results, root / "log" / "slurmctld.log")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, default=float))
    return 0


def _timing_floor(results: dict[str, object], log_path: Path, draws: int = 20) -> dict[str, list[float]]:
    """What a model exact in every backfill rule reaches when it knows submissions to the second only.

    The logged run replayed on the mock at Slurm's own pass times, each submission at its logged whole
    second plus a random fraction (``benchmarks/slurm_pass_check.py --timed --draws``): per size class,
    the median, min and max Spearman of waits over ``draws`` replays. Unlike the +-1 s ceiling it
    includes the cascades a one-second shift sets off.
    """
    log = read_log(log_path)
    rng = np.random.default_rng(0)
    runs = [compare(*timed_replay(results, log, rng)) for _ in range(draws)]
    out: dict[str, list[float]] = {}
    print(f"\nSpearman floor, submissions known to the second only ({draws} replays at Slurm's passes):")
    for k, a in enumerate(runs[0]):
        rho = np.array([r[k].spearman for r in runs])
        out[a.label] = [float(np.median(rho)), float(rho.min()), float(rho.max())]
    print("  " + ", ".join(f"{lab} {m:.3f} ({lo:.3f}-{hi:.3f})" for lab, (m, lo, hi) in out.items()))
    return out


def _from_json(args: argparse.Namespace) -> int:
    """Compare the Slurm schedule recorded in a ``--json`` file with the mock's (no cluster needed).

    Files written before ``t0`` and ``state`` were recorded take ``--t0`` (Slurm's wall-clock time of
    the replay's start: the first job's ``SubmitTime`` in the jobcomp file) and count every job as
    completed.
    """
    d = json.loads(args.from_json.read_text())
    s = d["slurm"]
    n = len(s["start"])
    jobs = ScaledJobs(
        submit=np.array(s["submit"], dtype=float),
        cores=np.array(d["cores"], dtype=np.int64),
        minutes=np.array(d["minutes"], dtype=np.int64),
        sleep=np.array(d["sleep"], dtype=float),
        k=float(d.get("k", args.k)),
    )
    slurm = Replay(
        submit=jobs.submit.copy(),
        start=np.array(s["start"], dtype=float),
        end=np.array(s["end"], dtype=float),
        cores=jobs.cores.copy(),
        state=tuple(s.get("state", ["COMPLETED"] * n)),
        t0=float(s.get("t0", args.t0)),
    )
    cores = int(d["args"]["nodes"]) * int(d["args"]["cores_per_node"])
    print(f"Slurm schedule from {args.from_json}: {n} jobs, {cores} cores, t0 {slurm.t0:.0f}")
    _mock_tables(args, jobs, slurm, cores, {})
    return 0


def jitter_ceiling(
    slurm: Replay, *, jitter: float = 1.0, draws: int = 200, seed: int = 0
) -> list[tuple[str, int, float, float]]:
    """The Spearman a perfect model would reach if it differed from Slurm only by timing jitter.

    Slurm starts a job at its next scheduler or backfill pass (one second apart here) and records whole
    seconds; the mock starts it at the instant it fits. Per size class (and ``all``), the median over
    ``draws`` of Spearman between Slurm's waits and the same waits each moved by a uniform draw in
    ``[-jitter, jitter]`` seconds, and the share of waits within ``2 * jitter`` seconds. Where most
    waits are a few seconds the ranks are mostly this jitter, and no model can rank them much better.
    """
    done = np.isfinite(slurm.start)
    wait = slurm.wait
    rng = np.random.default_rng(seed)
    out = []
    for label, lo, hi in (("all", 0, 1 << 62), *SIZE_CLASSES):
        m = done & (slurm.cores >= lo) & (slurm.cores <= hi)
        w = wait[m]
        if len(w) < 3 or np.ptp(w) == 0:
            continue
        rho = [float(spearmanr(w, w + rng.uniform(-jitter, jitter, len(w))).statistic) for _ in range(draws)]
        out.append((label, len(w), float(np.median(rho)), float(np.mean(w <= 2 * jitter))))
    return out


def _mock_tables(
    args: argparse.Namespace, jobs: ScaledJobs, slurm: Replay, cores: int, results: dict[str, object]
) -> None:
    ceiling = jitter_ceiling(slurm)
    print()
    print("Spearman ceiling from Slurm's 1 s passes alone (its waits against themselves +- 1 s):")
    print(
        "  " + ", ".join(f"{lab} {rho:.3f} ({n} jobs, {low:.0%} wait <= 2 s)" for lab, n, rho, low in ceiling)
    )
    results["ceiling"] = ceiling
    prio = "age" if args.priority == "multifactor" else "basic"
    for policy in args.policies.split(","):
        mock = replay_on_mock(jobs, slurm, policy=policy, priority=prio, cores=cores)
        rows = compare(slurm, mock)
        print()
        print(_table(f"Slurm vs mock ({policy}, priority {prio}); waits in scaled seconds", rows))
        mocks = results.setdefault("mock", {})
        assert isinstance(mocks, dict)
        mocks[policy] = {"start": mock.start.tolist(), "agreement": [a.__dict__ for a in rows]}


def _mean_sd(values: list[float]) -> str:
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):.1f} ± {sd:.1f}"


def _measure_launch(args: argparse.Namespace) -> int:
    """The workflow on an idle cluster and an idle mock: makespans and the gaps around the tasks."""
    if args.reps < 1:
        raise SystemExit(f"--reps must be >= 1, got {args.reps}")
    strategies = args.strategies.split(",")
    cores = args.nodes * args.cores_per_node
    wf = scaled_workflow(args.workflow, args.k)
    root = Path(tempfile.mkdtemp(prefix="elastic-oracle-launch-"))
    print(f"workflow {wf.name} on an idle {cores}-core cluster and mock, {args.reps} reps", flush=True)
    cluster = OracleCluster(root / "slurm", args.nodes, args.cores_per_node, priority=args.priority)
    with cluster:
        runs, gaps = measure_launch(
            cluster, wf, strategies, reps=args.reps, cores=cores, k=args.k, workdir=root,
            progress=lambda s: print("  " + s, flush=True), startup=args.startup,
            task_overhead=args.task_overhead,
        )  # fmt: skip
    print()
    for g in LAUNCH_GAPS:
        v = gaps[g]
        print(f"{g:>22}: n {len(v)}, median {np.median(v):.2f} s, mean {_mean_sd(v)} s, max {max(v):.2f} s")
    for s in strategies:
        d = [
            a.makespan - b.makespan
            for a, b in zip(runs[1::2], runs[0::2], strict=True)
            if a.strategy == s and a.status == b.status == "completed"
        ]
        n = [a.allocations for a in runs[1::2] if a.strategy == s]
        print(
            f"{s:>9}: makespan Slurm - mock {_mean_sd(d)} s over {len(d)} runs, {np.mean(n):.1f} jobs a run"
        )
    if args.json is not None:
        args.json.write_text(
            json.dumps({"args": vars(args) | {"json": str(args.json)}, "gaps": gaps,
                        "runs": [r.__dict__ for r in runs]}, indent=1, default=float)
        )  # fmt: skip
    return 0


def _strategies(args: argparse.Namespace) -> int:
    """The workflow under each strategy on Slurm and on the mock; print means and rankings.

    With ``--from-json`` the Slurm runs come from an earlier ``--strategies ... --json`` file (same
    options) and only the mock runs are computed (seconds).
    """
    if args.reps < 1:
        raise SystemExit(f"--reps must be >= 1, got {args.reps}")
    strategies = args.strategies.split(",")
    policies = args.policies.split(",")
    cores = args.nodes * args.cores_per_node
    wf = scaled_workflow(args.workflow, args.k)
    names = stage_names(wf)
    root = Path(tempfile.mkdtemp(prefix="elastic-oracle-wf-"))
    print(
        f"workflow {wf.name}: {', '.join(f'{s.name} {s.tasks}x{s.runtime:.1f}s' for s in wf.stages)}; "
        f"background load {args.load:g}, warmup {args.warmup:g} s, {cores} cores, {args.reps} reps",
        flush=True,
    )

    def show(r: WorkflowRun) -> None:
        waits = " ".join(f"{w:.0f}" for w in r.stage_waits)
        print(
            f"  {r.backend:>18} {r.strategy:>8} rep {r.rep}: {r.status} makespan {r.makespan:.1f} s, "
            f"{r.charged:.0f} core-s, {r.allocations} jobs, stage waits {waits}",
            flush=True,
        )

    def run(cluster: OracleCluster | None) -> list[WorkflowRun]:
        return compare_strategies(
            cluster, wf, strategies, reps=args.reps, cores=cores, load=args.load,
            span=args.warmup + 600.0, warmup=args.warmup, k=args.k, workdir=root, policies=policies,
            progress=show, startup=args.startup, task_overhead=args.task_overhead,
        )  # fmt: skip

    t = time.monotonic()
    settings: dict[str, str] = {}
    if args.no_slurm or args.from_json is not None:
        runs = run(None)
        if args.from_json is not None:
            d = json.loads(args.from_json.read_text())
            settings = d.get("settings", {})
            for r in d["runs"]:
                if r["backend"] == "slurm" and r["strategy"] in strategies and r["rep"] < args.reps:
                    runs.append(WorkflowRun(**(r | {"stage_waits": tuple(r["stage_waits"])})))
    else:
        cluster = OracleCluster(root / "slurm", args.nodes, args.cores_per_node, priority=args.priority)
        with cluster:
            settings = cluster.settings()
            print(f"Slurm ({sbatch_version(cluster)}) settings:")
            for key, value in settings.items():
                print(f"  {key} = {value}")
            runs = run(cluster)
    print(f"took {time.monotonic() - t:.0f} s")
    backends = sorted({r.backend for r in runs}, key=lambda b: (b != "slurm", b))
    head = f"{'backend':>18} {'strategy':>9} {'runs':>4} {'makespan s':>14} {'core-s charged':>15} "
    head += " ".join(f"{'wait ' + n:>14}" for n in names)
    print()
    print(head)
    means: dict[str, dict[str, float]] = {}
    for b in backends:
        for s in strategies:
            rows = [r for r in runs if r.backend == b and r.strategy == s and r.status == "completed"]
            if not rows:
                continue
            means.setdefault(b, {})[s] = float(np.mean([r.makespan for r in rows]))
            cells = [_mean_sd([r.stage_waits[i] for r in rows]) for i in range(len(names))]
            print(
                f"{b:>18} {s:>9} {len(rows):>4} {_mean_sd([r.makespan for r in rows]):>14} "
                f"{_mean_sd([r.charged for r in rows]):>15} " + " ".join(f"{c:>14}" for c in cells)
            )
    print()
    for b, m in means.items():
        print(f"ranking on {b}: {' < '.join(sorted(m, key=m.__getitem__))}")
    for b in backends:
        if b == "slurm" or "slurm" not in means:
            continue
        diffs = [
            f"{s} {means[b][s] / means['slurm'][s] - 1.0:+.1%}"
            for s in strategies
            if s in means["slurm"] and s in means.get(b, {})
        ]
        print(f"mean makespan on {b} against Slurm: {', '.join(diffs)}")
    if args.json is not None:
        args.json.write_text(
            json.dumps({"args": vars(args) | {"json": str(args.json), "from_json": str(args.from_json)},
                        "settings": settings, "runs": [r.__dict__ for r in runs]}, indent=1, default=float)
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
