"""Speed of ``elastic waits`` over the whole HPC2N trace with every default predictor (goal: < 15 s).

The baseline, measured in the same run, is the bare event replay with a predictor that does nothing, so
the ratio shows what the predictors themselves cost. ``--breakdown`` also times each predictor alone.

Usage: .venv/bin/python benchmarks/bench_waits.py [PATH] [--breakdown]
PATH defaults to the HPC2N trace in ../shared/data/traces (or $ELASTIC_TRACES).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastic.learners.evaluation import DEFAULT_PREDICTORS, OnlineEvaluation, make_predictor
from elastic.simulator.trace import read_swf

DEFAULT = (
    Path(os.environ.get("ELASTIC_TRACES", Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"))
    / "HPC2N-2002-2.2-cln.swf.gz"
)
GOAL_S = 15.0


class NullPredictor:
    """Predicts 0 s and learns nothing: the cost of the replay itself."""

    def get_params(self) -> dict[str, Any]:
        return {}

    def predict(self, key: str) -> float:
        return 0.0

    def observe(self, key: str, wait: float) -> NullPredictor:
        return self

    partial_fit = observe

    def get_state(self, key: str) -> dict[str, Any]:
        return {}

    def set_state(self, key: str, state: Any) -> NullPredictor:
        return self


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    start, start_cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - start, time.process_time() - start_cpu, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT))
    parser.add_argument("--breakdown", action="store_true", help="also time each predictor alone")
    args = parser.parse_args()

    read_wall, cpu, workload = timed(lambda: read_swf(args.path))
    print(f"read_swf: {len(workload):,} jobs in {read_wall:.2f} s wall ({cpu:.2f} s CPU)")

    def full() -> object:
        # what `elastic waits --trace PATH` does after reading: build the events, replay, score
        evaluation = OnlineEvaluation(workload)
        return evaluation.run({name: make_predictor(name) for name in DEFAULT_PREDICTORS})

    base_wall, base_cpu, _ = timed(lambda: OnlineEvaluation(workload).run({"null": NullPredictor()}))
    wall, cpu, table = timed(full)
    total = read_wall + wall  # what `elastic waits --trace PATH` spends
    print(f"baseline (replay with a do-nothing predictor): {base_wall:.2f} s wall ({base_cpu:.2f} s CPU)")
    print(
        f"evaluation, {len(DEFAULT_PREDICTORS)} predictors x 3 classes: {wall:.2f} s wall ({cpu:.2f} s CPU), "
        f"{wall / base_wall:.1f}x the baseline"
    )
    jobs = int(table.groupby("cores")["jobs"].first().sum())
    print(f"jobs evaluated: {jobs:,} ({2 * jobs:,} events per predictor)")
    verdict = "PASS" if total < GOAL_S else "FAIL"
    print(
        f"goal: read + evaluate the whole trace, all predictors < {GOAL_S:.0f} s -> {verdict} ({total:.1f} s)"
    )
    if args.breakdown:
        for name in DEFAULT_PREDICTORS:
            w, c, _ = timed(lambda name=name: OnlineEvaluation(workload).run({name: make_predictor(name)}))
            print(f"  {name:12s} {w:6.2f} s wall ({c:.2f} s CPU)")


if __name__ == "__main__":
    main()
