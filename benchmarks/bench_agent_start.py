"""Where an allocation's first seconds go: an agent's start, and its workers' first task.

A pool on loopback, one allocation of ``--cores`` cores, and its agent started as a batch job would start
it (``bash -c`` of the pool's agent script), with ``--cores`` tasks queued before it starts. Measured from
the agent's spawn: when it joined (registered and offered its cores), when its first task was placed on
a free core, when its first and last results came back. Two kinds of task: a no-op (the agent and its
warm workers alone), and one that imports ``prefect`` (what a Prefect task's first run on a fresh worker
pays before it does anything). Beside them, in the same run, the baseline: a fresh interpreter importing
``prefect`` alone. Medians over ``--repeat`` starts.

    .venv/bin/python benchmarks/bench_agent_start.py [--cores 4] [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elastic.allocations import Allocation
from elastic.pool.events import AgentEvent, AgentEventKind, PoolEvent
from elastic.pool.pool import Pool
from elastic.pool.tasks import Task, TaskEvent, TaskState

MARKS = ("joined", "first task placed", "first result", "last result")


def noop(i: int) -> int:
    return i


def imports_prefect(i: int) -> int:
    import prefect  # noqa: F401  (the import is what is measured)

    return i


def start_once(fn: Callable[[int], int], cores: int) -> dict[str, float]:
    """Start one agent with ``cores`` tasks of ``fn`` queued; return seconds from its spawn to each mark."""
    seen: dict[str, float] = {}

    def watch(event: PoolEvent) -> None:
        now = time.monotonic()
        if isinstance(event, AgentEvent) and event.kind is AgentEventKind.JOINED:
            seen.setdefault("joined", now)
        elif isinstance(event, TaskEvent) and event.state is TaskState.RUNNING:
            seen.setdefault("first task placed", now)
        elif isinstance(event, TaskEvent) and event.state is TaskState.DONE:
            seen.setdefault("first result", now)
            seen["last result"] = now

    with Pool() as pool:
        pool.subscribe(watch)
        pool.add_allocation(Allocation("a1", cores=cores, walltime=3600.0))
        futures = [pool.submit(Task.call(fn, (i,), task_id=f"t{i}")) for i in range(cores)]
        spawned = time.monotonic()
        agent = subprocess.Popen(
            ["bash", "-c", pool.agent_script(pool.allocation("a1"))], start_new_session=True
        )
        try:
            for future in futures:
                future.result(timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()
    return {mark: seen[mark] - spawned for mark in MARKS}


def bare_import() -> float:
    """Seconds a fresh interpreter takes to import ``prefect`` and exit (the baseline)."""
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", "import prefect"], check=True)
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.cores < 1 or args.repeat < 1:
        parser.error("--cores and --repeat must be >= 1")
    logging.basicConfig(level=logging.ERROR)
    rows: dict[str, list[dict[str, float]]] = {"no-op": [], "imports prefect": []}
    baseline = []
    for _ in range(args.repeat):  # interleaved, so a busy moment weighs on every kind alike
        rows["no-op"].append(start_once(noop, args.cores))
        rows["imports prefect"].append(start_once(imports_prefect, args.cores))
        baseline.append(bare_import())
    table = Table(title=f"seconds from the agent's spawn, median of {args.repeat} ({args.cores} cores)")
    table.add_column("task")
    for mark in MARKS:
        table.add_column(mark, justify="right")
    for name, runs in rows.items():
        table.add_row(name, *(f"{statistics.median(r[m] for r in runs):.2f}" for m in MARKS))
    console = Console()
    console.print(table)
    console.print(
        f"baseline: a fresh interpreter importing prefect alone, {statistics.median(baseline):.2f} s "
        f"(median of {args.repeat}; load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
