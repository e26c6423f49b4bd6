"""Replay a whole SWF trace (default: HPC2N, 202,871 jobs, 240 cores) with FCFS + EASY backfilling.

Prints jobs/s of the engine, the whole-process time (interpreter start + imports + reading the trace +
simulation), and, measured in the same run on the same workload, a minimal pure-Python FCFS + EASY loop
(heap of completions, sorted running list for the shadow time: the anchor of the issue) with the ratio.
CPU times are printed beside wall times because the benchmark machine is shared.

Run::

    .venv/bin/python benchmarks/bench_simulator.py [TRACE] [--policy easy] [--no-baseline]
"""

from __future__ import annotations

import time

_T0_WALL = time.perf_counter()
_T0_CPU = time.process_time()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from bisect import bisect_left, insort  # noqa: E402
from heapq import heappop, heappush  # noqa: E402
from pathlib import Path  # noqa: E402

TRACES = Path(os.environ.get("ELASTIC_TRACES", Path(__file__).resolve().parents[2] / "shared/data/traces"))


def baseline_easy(
    submit: list[float], cores: list[int], runtime: list[float], walltime: list[float], total: int
):
    """Minimal FCFS + EASY loop: the reference a careful hand-written simulator reaches."""
    n = len(submit)
    inf = float("inf")
    start = [0.0] * n
    heap: list[tuple[float, int]] = []
    running: list[tuple[float, int]] = []
    queue: list[int] = []
    free = total
    i = 0
    while i < n or heap:
        ta = submit[i] if i < n else inf
        te = heap[0][0] if heap else inf
        if te <= ta:
            t = te
            while heap and heap[0][0] == t:
                _, j = heappop(heap)
                free += cores[j]
                del running[bisect_left(running, (start[j] + walltime[j], j))]
        else:
            t = ta
            while i < n and submit[i] == t:
                queue.append(i)
                i += 1
        k = 0
        while k < len(queue) and cores[queue[k]] <= free:
            j = queue[k]
            free -= cores[j]
            start[j] = t
            heappush(heap, (t + min(runtime[j], walltime[j]), j))
            insort(running, (t + walltime[j], j))
            k += 1
        del queue[:k]
        if queue and free:
            need = cores[queue[0]]
            avail = free
            shadow = inf
            for end, j in running:
                avail += cores[j]
                if avail >= need:
                    shadow = end
                    break
            extra = avail - need
            m = 1
            while m < len(queue) and free:
                j = queue[m]
                c = cores[j]
                if c <= free and (t + walltime[j] <= shadow or c <= extra):
                    if t + walltime[j] > shadow:
                        extra -= c
                    free -= c
                    start[j] = t
                    heappush(heap, (t + min(runtime[j], walltime[j]), j))
                    insort(running, (t + walltime[j], j))
                    del queue[m]
                else:
                    m += 1
    return start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", nargs="?", default=str(TRACES / "HPC2N-2002-2.2-cln.swf.gz"))
    parser.add_argument("--policy", default="easy")
    parser.add_argument("--no-baseline", action="store_true", help="skip the reference loop")
    parser.add_argument(
        "--compare",
        metavar="P1,P2",
        help="afterwards replay under these policies too (e.g. fcfs,sejf,lejf,conservative,easy+speculative) "
        "and print CPU time and schedule metrics per policy",
    )
    args = parser.parse_args()
    if not Path(args.trace).exists():
        print(f"trace not found: {args.trace} (set ELASTIC_TRACES or pass a path)", file=sys.stderr)
        return 2

    from elastic.simulator.engine import Engine
    from elastic.simulator.trace import read_swf

    t_import = time.perf_counter()
    workload = read_swf(args.trace)
    t_read = time.perf_counter()
    c0 = time.process_time()
    engine = Engine(nodes=workload.processors, policy=args.policy, workload=workload)
    engine.run()
    t_sim = time.perf_counter()
    sim_cpu = time.process_time() - c0
    sim_wall = t_sim - t_read
    total_wall = t_sim - _T0_WALL
    total_cpu = time.process_time() - _T0_CPU
    # Interpreter start-up before this module ran (not visible to perf_counter).
    n = len(workload)
    print(f"trace            {args.trace}")
    print(f"jobs             {n:,} on {workload.processors} cores, policy {args.policy}")
    print(f"imports          {t_import - _T0_WALL:6.2f} s wall")
    print(f"read trace       {t_read - t_import:6.2f} s wall")
    print(f"simulation       {sim_wall:6.2f} s wall  {sim_cpu:6.2f} s cpu  {n / sim_cpu:,.0f} jobs/s (cpu)")
    print(f"whole process    {total_wall:6.2f} s wall  {total_cpu:6.2f} s cpu  (after interpreter start-up)")
    if not args.no_baseline and args.policy == "easy":
        sub = workload.submit.tolist()
        cores = workload.cores.tolist()
        run = workload.runtime.tolist()
        wall = workload.walltime.tolist()
        c1 = time.process_time()
        ref = baseline_easy(sub, cores, run, wall, workload.processors)
        base_cpu = time.process_time() - c1
        same = sum(1 for a, b in zip(ref, engine.jobs.start, strict=True) if a == b)
        print(f"reference loop   {base_cpu:6.2f} s cpu  {n / base_cpu:,.0f} jobs/s (cpu)")
        print(f"ratio            engine / reference = {sim_cpu / base_cpu:.2f}x cpu time")
        print(f"same start times {same / n:.1%} of jobs")
    if args.compare:
        compare(workload, [args.policy, *args.compare.split(",")])
    return 0


def compare(workload, policies: list[str]) -> None:
    from elastic.simulator.base import make_policy
    from elastic.simulator.engine import Engine
    from elastic.simulator.metrics import summarize

    print()
    print(
        f"{'policy':<18} {'cpu s':>6} {'mean wait':>10} {'median':>7} {'at once':>8} {'bsld':>7} {'util':>6}"
    )
    for name in policies:
        base, _, spec = name.partition("+")
        policy = make_policy(base, speculative=bool(spec))
        c0 = time.process_time()
        engine = Engine(nodes=workload.processors, policy=policy, workload=workload)
        engine.run()
        cpu = time.process_time() - c0
        s = summarize(engine.records(), processors=workload.processors)
        print(
            f"{name:<18} {cpu:6.2f} {s.mean_wait:9.0f}s {s.median_wait:6.0f}s {s.started_at_once:8.1%} "
            f"{s.mean_bounded_slowdown:7.2f} {s.utilisation:6.1%}"
        )


if __name__ == "__main__":
    sys.exit(main())
