"""``asa``'s decisions on chosen liveness scenarios: each scenario's CPU, and a hash of every decision.

A speed-up of the planner must change no decision (issue 31): run this before and after on the same
scenarios (``benchmarks/bench_liveness.py``'s, by seed and index: ``tests/control/scenarios.py``), and the
hashes must be the same. Each scenario's CPU is timed as ``bench_liveness.py`` times it (the hashing
included, a small part).

    .venv/bin/python benchmarks/bench_asa_decisions.py [--seed 1] [--indices 3,25,26,28,40]
        [--max-stages 50]
    ELASTIC_TRACES=../shared/data/traces .venv/bin/python benchmarks/bench_asa_decisions.py --cells default

The default indices are seed 1's ``asa`` scenarios that cost the most among its first 50. ``--cells``
hashes instead ``asa``'s decisions on cells of issue 28's grid (``workflow:peak:queue`` separated by
commas, 3 runs each, seed 1; ``default``: six cells over four queues, :data:`CELLS`) and on two runs of
``benchmarks/bench_planner_cost.py``'s random 100-stage DAG (busy synthetic 64-core queue).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elastic.strategies.planner import Planner
from tests.control.scenarios import random_scenario, run_scenario

CELLS = (
    "1000genome:56:synthetic,cybershake:28:capacity-sdsc,soykb:112:synthetic,montage:28:capacity,"
    "bwa:28:capacity-sdsc,epigenomics:56:replay"
)
"""Grid cells whose ``asa`` decisions ``--cells default`` hashes: DAGs and chains, every kind of queue."""


def _cells(cells: str, digest: Any, count: list[int]) -> None:
    """Run ``asa`` on each grid cell (3 runs) and on the 100-stage DAG (2 runs); print the hash so far."""
    from benchmarks.bench_planner_cost import random_dag
    from benchmarks.bench_planner_grid import queue_setting
    from elastic.experiments import default_background, simulate_runs
    from elastic.report.scaling import scale_workflow
    from elastic.workflow import builtin_workflow

    for spec in (CELLS if cells == "default" else cells).split(","):
        name, peak, queue = spec.split(":")
        workflow = scale_workflow(builtin_workflow(name), int(peak), scaling="weak")
        background, mode, policy = queue_setting(queue, int(peak), 1)
        results = simulate_runs(
            workflow, "asa", runs=3, seed=1, background=background, policy=policy, mode=mode, priority="age"
        )
        spans = [round(r.metrics.makespan) for r in results]
        print(f"{spec}: {count[0]} asa decisions so far, hash {digest.hexdigest()[:16]}, makespans {spans}")
    results = simulate_runs(
        random_dag(100, seed=1), "asa", runs=2, seed=1, background=default_background(64, seed=1)
    )
    spans = [round(r.metrics.makespan) for r in results]
    print(f"dag100: {count[0]} asa decisions, hash {digest.hexdigest()}, makespans {spans}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--indices", default="3,25,26,28,40")
    parser.add_argument("--max-stages", type=int, default=50)
    parser.add_argument("--cells", help="grid cells workflow:peak:queue,... or 'default' (see above)")
    args = parser.parse_args()
    indices = [int(x) for x in args.indices.split(",") if x.strip()]
    logging.disable(logging.CRITICAL)
    digest = hashlib.sha256()
    count = [0]  # asa decisions so far
    original = Planner.decide

    def decide(self: Planner, view: Any) -> Any:
        decision = original(self, view)
        digest.update(repr(decision).encode())
        count[0] += 1
        return decision

    Planner.decide = decide  # type: ignore[method-assign]
    total = 0.0
    try:
        if args.cells:
            _cells(args.cells, digest, count)
            return 0
        for index in indices:
            scenario = random_scenario(np.random.default_rng([args.seed, index]), max_stages=args.max_stages)
            start = time.process_time()
            out = run_scenario(scenario)
            cpu = time.process_time() - start
            total += cpu
            print(
                f"scenario {index}: {scenario.strategy}, {len(scenario.stages)} stages, {out.status}, "
                f"{cpu:.1f} s CPU, {count[0]} asa decisions so far, hash {digest.hexdigest()[:16]}",
                flush=True,
            )
    finally:
        Planner.decide = original  # type: ignore[method-assign]
    print(f"{len(indices)} scenarios: {total:.1f} s CPU; {count[0]} asa decisions, hash {digest.hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
