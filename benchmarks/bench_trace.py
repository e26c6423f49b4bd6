"""Speed of the SWF reader on a real trace, against a plain line-by-line parser measured in the same run.

Usage: .venv/bin/python benchmarks/bench_trace.py [PATH] [--repeat N]
PATH defaults to the HPC2N trace in ../shared/data/traces (or $ELASTIC_TRACES).
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from elastic.simulator.synthetic import synthetic_workload
from elastic.simulator.trace import read_swf

DEFAULT = Path(
    os.environ.get("ELASTIC_TRACES", Path(__file__).resolve().parents[2] / "shared" / "data" / "traces")
)


def baseline(path: Path) -> int:
    """What one writes first: split every line in Python, convert fields with float()."""
    rows = []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            if line.startswith(";") or not line.strip():
                continue
            fields = [float(x) for x in line.split()]
            rows.append(
                (fields[0], fields[1], fields[3], fields[7] if fields[7] > 0 else fields[4], fields[8])
            )
    return len(np.array(rows))


def best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds over ``repeat`` runs (CPU time is steadier on a busy host)."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", nargs="?", default=str(DEFAULT / "HPC2N-2002-2.2-cln.swf.gz"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    path = Path(args.path)
    jobs = len(read_swf(path))
    ours, ours_cpu = best(lambda: read_swf(path), args.repeat)
    base, base_cpu = best(lambda: baseline(path), 1)
    synth, _ = best(lambda: synthetic_workload(jobs=jobs), args.repeat)
    print(f"trace         {path.name}: {jobs:,} jobs")
    print(
        f"read_swf      {ours:.3f} s wall, {ours_cpu:.3f} s CPU "
        f"(best of {args.repeat}; {jobs / ours:,.0f} jobs/s)"
    )
    print(f"line-by-line  {base:.3f} s wall, {base_cpu:.3f} s CPU")
    print(f"speed-up      {base / ours:.1f}x wall, {base_cpu / ours_cpu:.1f}x CPU")
    print(f"synthetic_workload(jobs={jobs:,}): {synth:.3f} s wall")


if __name__ == "__main__":
    main()
