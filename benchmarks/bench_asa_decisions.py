"""``asa``'s decisions on chosen liveness scenarios: each scenario's CPU, and a hash of every decision.

A speed-up of the planner must change no decision (issue 31): run this before and after on the same
scenarios (``benchmarks/bench_liveness.py``'s, by seed and index: ``tests/control/scenarios.py``), and the
hashes must be the same. Each scenario's CPU is timed as ``bench_liveness.py`` times it (the hashing
included, a small part).

    .venv/bin/python benchmarks/bench_asa_decisions.py [--seed 1] [--indices 3,25,26,28,40]
        [--max-stages 50]

The default indices are seed 1's ``asa`` scenarios that cost the most among its first 50.
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--indices", default="3,25,26,28,40")
    parser.add_argument("--max-stages", type=int, default=50)
    args = parser.parse_args()
    indices = [int(x) for x in args.indices.split(",") if x.strip()]
    logging.disable(logging.CRITICAL)
    digest = hashlib.sha256()
    decisions = 0
    original = Planner.decide

    def decide(self: Planner, view: Any) -> Any:
        nonlocal decisions
        decision = original(self, view)
        digest.update(repr(decision).encode())
        decisions += 1
        return decision

    Planner.decide = decide  # type: ignore[method-assign]
    total = 0.0
    try:
        for index in indices:
            scenario = random_scenario(np.random.default_rng([args.seed, index]), max_stages=args.max_stages)
            start = time.process_time()
            out = run_scenario(scenario)
            cpu = time.process_time() - start
            total += cpu
            print(
                f"scenario {index}: {scenario.strategy}, {len(scenario.stages)} stages, {out.status}, "
                f"{cpu:.1f} s CPU, {decisions} asa decisions so far, hash {digest.hexdigest()[:16]}",
                flush=True,
            )
    finally:
        Planner.decide = original  # type: ignore[method-assign]
    print(
        f"{len(indices)} scenarios: {total:.1f} s CPU; {decisions} asa decisions, hash {digest.hexdigest()}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
