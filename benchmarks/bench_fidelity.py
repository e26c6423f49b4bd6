"""Time ``elastic fidelity`` on a whole SWF trace (default: HPC2N; goal < 30 s), against a plain replay.

The baseline, measured in the same run on the same workload, is the plain EASY replay of the whole
trace (mode ``replay``). Prints, per mode, CPU seconds (the machine is shared, so CPU time is steadier
than wall time), the ratio to the baseline and the Spearman rank correlation with the recorded waits;
then the whole command as a user runs it (read the trace, fit the calibrated reserve, every mode,
print the table), in this process, wall and CPU.

``--scale K`` also times the capacity mode on the trace repeated K times one after the other (K x the
jobs, e.g. 3 gives HPC2N's 600,000 jobs): its time should grow K-fold, not faster.

Run::

    .venv/bin/python benchmarks/bench_fidelity.py [TRACE] [--reserve 38] [--scale 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from elastic.cli import main as elastic_main
from elastic.simulator.fidelity import MODES, simulate_mode
from elastic.simulator.fidelity_report import fidelity_row
from elastic.simulator.trace import read_swf
from elastic.simulator.workload import Workload

TRACES = Path(os.environ.get("ELASTIC_TRACES", Path(__file__).resolve().parents[2] / "shared/data/traces"))
GOAL_S = 30.0


def repeated(workload: Workload, times: int) -> Workload:
    """The trace ``times`` times in a row, each copy shifted by the span of the one before."""
    span = float(workload.submit[-1] - workload.submit[0]) + 86_400.0
    parts = [replace(workload, submit=workload.submit + k * span) for k in range(times)]

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    return Workload(
        job_id=np.arange(1, times * len(workload) + 1),
        submit=cat("submit"),
        cores=cat("cores"),
        runtime=cat("runtime"),
        walltime=cat("walltime"),
        user=cat("user"),
        recorded_wait=cat("recorded_wait"),
        processors=workload.processors,
        source=f"{workload.source} x{times}",
        queue=None if workload.queue is None else cat("queue"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default=str(TRACES / "HPC2N-2002-2.2-cln.swf.gz"))
    parser.add_argument("--reserve", type=int, default=38, help="reserve of the calibrated mode (default 38)")
    parser.add_argument(
        "--scale", type=int, default=0, help="also time capacity on the trace repeated K times"
    )
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
    t0, w0 = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = elastic_main(["fidelity", "--trace", args.trace])
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    verdict = "PASS" if code == 0 and wall < GOAL_S else "FAIL"
    print(
        f"elastic fidelity --trace {Path(args.trace).name} (every mode, reserve fitted): {wall:.1f} s wall, "
        f"{cpu:.1f} s cpu = {cpu / (base or 1):.1f} x the replay; goal < {GOAL_S:.0f} s wall -> {verdict}"
    )
    if args.scale > 1:
        big = repeated(workload, args.scale)
        t0 = time.process_time()
        simulate_mode(big, "capacity")
        cpu_big = time.process_time() - t0
        t0 = time.process_time()
        simulate_mode(workload, "capacity")
        cpu_one = time.process_time() - t0
        print(
            f"capacity on {len(big):,} jobs ({args.scale} x): {cpu_big:.1f} s cpu = "
            f"{cpu_big / cpu_one:.1f} x the {len(workload):,}-job trace ({cpu_one:.1f} s)"
        )


if __name__ == "__main__":
    main()
