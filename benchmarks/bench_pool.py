"""Pool throughput: trivial tasks through real agents, against starting the same Python processes bare.

Every task runs in a fresh child process of its agent (``python -m elastic.pool.tasks``), so the floor is the
cost of starting a Python interpreter that imports cloudpickle. The baseline, measured in the same run,
starts that many ``python -c "import cloudpickle"`` processes with the same parallelism (one per core).

    .venv/bin/python benchmarks/bench_pool.py [--tasks 200] [--agents 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from elastic.allocations import Allocation
from elastic.pool.pool import Pool
from elastic.pool.tasks import Task


def _noop(i: int) -> int:
    return i


def pool_run(tasks: int, agents: int) -> tuple[float, float]:
    """Return (seconds to the first result, seconds for all ``tasks``) through ``agents`` 1-core agents."""
    procs: list[subprocess.Popen[bytes]] = []
    with Pool() as pool:
        for k in range(agents):
            alloc = Allocation(f"a{k}", cores=1, walltime=3600.0)
            pool.add_allocation(alloc)
            procs.append(subprocess.Popen(["bash", "-c", pool.agent_script(alloc)], start_new_session=True))
        try:
            began = time.perf_counter()
            first = pool.submit(Task.call(_noop, (0,)))
            first.result(timeout=60)
            latency = time.perf_counter() - began
            began = time.perf_counter()
            futures = [pool.submit(Task.call(_noop, (i,))) for i in range(tasks)]
            results = [f.result(timeout=600) for f in futures]
            elapsed = time.perf_counter() - began
            assert results == list(range(tasks)), "results out of order or lost"
        finally:
            for proc in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return latency, elapsed


def baseline(tasks: int, parallel: int) -> float:
    """Seconds to start ``tasks`` bare interpreters importing cloudpickle, ``parallel`` at a time."""
    cmd = [sys.executable, "-c", "import cloudpickle"]
    began = time.perf_counter()
    with ThreadPoolExecutor(parallel) as ex:
        list(ex.map(lambda _: subprocess.run(cmd, check=True), range(tasks)))
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--agents", type=int, default=2)
    args = parser.parse_args()
    latency, elapsed = pool_run(args.tasks, args.agents)
    base = baseline(args.tasks, args.agents)
    print(
        f"pool      {args.tasks} tasks on {args.agents} one-core agents: {elapsed:.2f} s "
        f"({args.tasks / elapsed:.1f} tasks/s); first result (agents starting) {latency:.2f} s"
    )
    print(
        f"baseline  {args.tasks} bare 'python -c import cloudpickle', {args.agents} at a time: {base:.2f} s "
        f"({args.tasks / base:.1f} /s)"
    )
    print(
        f"ratio     pool / baseline = {elapsed / base:.2f}x (the pool's own cost per task: "
        f"{(elapsed - base) / args.tasks * 1000:.1f} ms)"
    )


if __name__ == "__main__":
    main()
