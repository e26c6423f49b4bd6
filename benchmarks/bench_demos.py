"""Time each demo at its default size: ``elastic run DEMO`` beside its tasks run one by one in-process.

The baseline, measured in the same run on the same input, is the demo's dataflow with every task called
directly in this process, one after another (the real programs' own time: no allocation, no agent, no
queue). Then the command a user types, ``elastic run DEMO --strategy S --backend mock`` (the busy
synthetic mock queue on its scaled clock, 60 x real time), runs as a subprocess: its wall time includes
starting Python, the mock queue's warm-up, generating the input, the agents, the allocations' queue waits
(scaled) and the checks. Prints the stages with their widths, and both times.

Run::

    .venv/bin/python benchmarks/bench_demos.py [--strategy asa] [--demos montage,blast,statistics]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from elastic.front.tasks import resolve_arguments
from elastic.workflows.demos import DEMOS, prepare


class Inline:
    """Calls each task at once, in this process (futures among its arguments replaced by their results)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> concurrent.futures.Future[Any]:
        self.calls[fn.__name__] += 1
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        resolved, _ = resolve_arguments(args, {})
        future.set_result(fn(*resolved))
        return future


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", default="asa")
    parser.add_argument("--demos", default=",".join(DEMOS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for name in args.demos.split(","):
            demo = DEMOS[name]
            _, _, inputs, generated = prepare(name, seed=0, workdir=work)
            inline = Inline()
            began = time.perf_counter()
            ok = demo.verify(inputs, demo.driver(inline, inputs)).ok
            serial = time.perf_counter() - began
            widths = " -> ".join(f"{s} {inline.calls[s]}" for s in demo.stages)
            command = [sys.executable, "-m", "elastic", "run", name, "--strategy", args.strategy]
            command += ["--backend", "mock", "--no-store", "--workdir", work]
            began = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - began
            out = " ".join(done.stdout.split())
            ran = re.search(r"workflow ran in ([0-9.]+) s", out)
            makespan = re.search(r"makespan \(s\) │ ([0-9.]+)", out)
            print(f"{name} (size {demo.default_size}): {widths}")
            print(
                f"  in-process, one task after another: {serial:6.1f} s "
                f"(input generated in {generated:.1f} s, checks {'pass' if ok else 'FAIL'})"
            )
            print(
                f"  elastic run {name} --strategy {args.strategy} --backend mock: {wall:6.1f} s wall, "
                f"workflow {ran.group(1) if ran else '?'} s, "
                f"makespan {makespan.group(1) if makespan else '?'} simulated s, exit {done.returncode}"
            )
            if done.returncode != 0:
                print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")


if __name__ == "__main__":
    main()
