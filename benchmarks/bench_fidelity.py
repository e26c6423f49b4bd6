"""Time the fidelity modes on a whole SWF trace (default: HPC2N) against a plain EASY replay.

Each recorded mode pins every job outside the evaluated size class and plans the evaluated jobs
(16-128 cores by default) with :class:`~elastic.simulator.pinned.PinnedBackfill`. The baseline, measured
in the same run on the same workload, is the plain EASY replay of the whole trace (mode ``replay``).
Prints CPU seconds per mode (the machine is shared, so CPU time is steadier than wall time), the ratio
to the baseline, and the Spearman rank correlation with the recorded waits.

Run::

    .venv/bin/python benchmarks/bench_fidelity.py [TRACE] [--reserve 38]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from elastic.simulator.fidelity import MODES, simulate_mode
from elastic.simulator.fidelity_report import fidelity_row
from elastic.simulator.trace import read_swf

TRACES = Path(os.environ.get("ELASTIC_TRACES", Path(__file__).resolve().parents[2] / "shared/data/traces"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default=str(TRACES / "HPC2N-2002-2.2-cln.swf.gz"))
    parser.add_argument("--reserve", type=int, default=38, help="reserve of the calibrated mode (default 38)")
    args = parser.parse_args()
    workload = read_swf(args.trace)
    print(f"trace     {args.trace}: {len(workload):,} jobs on {workload.processors} cores")
    base = None
    for mode in MODES:
        t0 = time.process_time()
        w0 = time.perf_counter()
        result = simulate_mode(workload, mode, reserve=args.reserve)
        cpu = time.process_time() - t0
        wall = time.perf_counter() - w0
        base = cpu if base is None else base
        row = fidelity_row(mode, result)
        print(
            f"{mode:15s} {cpu:7.2f} s cpu {wall:7.2f} s wall  {cpu / base:6.1f} x replay  "
            f"Spearman {row['spearman']:.3f}  median {row['median_wait']:.0f} s "
            f"(recorded {row['recorded_median_wait']:.0f} s)"
        )


if __name__ == "__main__":
    main()
