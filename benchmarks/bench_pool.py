"""Fine-grained tasks through the front door, beside Parsl's HighThroughputExecutor and ProcessPoolExecutor.

One run, side by side, on this machine (each with 2 workers):

- **Elastic**: ``Elastic(LocalBackend(cores=2), "bigjob")``, one local allocation of 2 cores, warm workers;
- **HTEX**: Parsl's ``HighThroughputExecutor`` (``LocalProvider``, 2 workers, ``initialize_logging=False``);
- **ProcessPoolExecutor(2)**: the floor (no scheduler, no network, no allocation).

For each: time from start to the first result, median latency of one task at a time, and throughput of
``--tasks`` no-op tasks submitted at once. Then, for the pool alone: its resident memory after each of
``--memory-tasks`` tasks (flat is the goal), the time of one placement decision with 100,000 tasks queued,
and 64 one-core agents (local processes) joined at once (none wrongly declared lost, tasks on all).

    .venv/bin/python benchmarks/bench_pool.py [--tasks 10000] [--memory-tasks 100000] [--skip-htex]
        [--throughput-only]

The throughput table also gives the CPU time per task during the throughput run, of the benchmark's
own process (front door, pool, their threads) and of its descendants (agents, workers): on a shared,
loaded machine it moves far less than the wall rate, so compare commits by it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from elastic import Elastic
from elastic.allocations import Allocation
from elastic.backends.local import LocalBackend
from elastic.pool.events import AgentEvent, AgentEventKind
from elastic.pool.messages import Register
from elastic.pool.pool import Pool
from elastic.pool.state import PoolState
from elastic.pool.tasks import Task
from elastic.pool.worker import resident_bytes


def noop(i: int) -> int:
    return i


Submit = Callable[[int], "concurrent.futures.Future[Any]"]


def tree_cpu_seconds() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of all its descendants, from /proc.

    Each process counts its own time and that of the children it reaped (``cutime``, ``cstime``; for this
    process ``RUSAGE_CHILDREN``), so a difference of two readings holds the time of processes that ended
    in between, once. The descendants' part is only the reaped ones where /proc is missing (not Linux).
    """
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    me = os.getpid()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    below, todo = 0.0, list(children.get(me, ()))
    while todo:
        pid = todo.pop()
        below += stats[pid][1]
        todo.extend(children.get(pid, ()))
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)  # children this process waited for
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, below + reaped.ru_utime + reaped.ru_stime


def measure(submit: Submit, started: float, tasks: int) -> dict[str, float]:
    """First result, sequential latency, throughput of ``tasks`` submitted at once.

    ``cpu_self`` and ``cpu_children`` are the CPU seconds per task, during the throughput run, of this
    process (the front door, its pool and their threads) and of its descendants (agents, workers): far
    less sensitive than the wall rate to other load on a shared machine.
    """
    submit(0).result(timeout=120)
    first = time.perf_counter() - started
    lat = []
    for i in range(300):
        t = time.perf_counter()
        submit(i).result(timeout=60)
        lat.append(time.perf_counter() - t)
    self0, below0 = tree_cpu_seconds()
    t = time.perf_counter()
    futures = [submit(i) for i in range(tasks)]
    ok = all(f.result(timeout=600) == i for i, f in enumerate(futures))
    elapsed = time.perf_counter() - t
    self1, below1 = tree_cpu_seconds()
    assert ok, "a result came back wrong"
    return {
        "first": first,
        "latency": statistics.median(lat),
        "rate": tasks / elapsed,
        "cpu_self": (self1 - self0) / tasks,
        "cpu_children": (below1 - below0) / tasks,
    }


def run_elastic(tasks: int) -> dict[str, float]:
    started = time.perf_counter()
    with Elastic(LocalBackend(cores=2), "bigjob", store=False, workflow="bench") as el:
        return measure(lambda i: el.submit(noop, i), started, tasks)


def run_htex(tasks: int) -> dict[str, float]:
    import parsl
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # interchange.py
    app = parsl.python_app(noop)
    started = time.perf_counter()
    htex = HighThroughputExecutor(
        label="htex", max_workers_per_node=2, provider=LocalProvider(init_blocks=1, max_blocks=1)
    )
    with tempfile.TemporaryDirectory() as run_dir:
        dfk = parsl.load(Config(executors=[htex], run_dir=run_dir, initialize_logging=False, strategy="none"))
        try:
            return measure(app, started, tasks)
        finally:
            dfk.cleanup()
            parsl.clear()


def run_ppe(tasks: int) -> dict[str, float]:
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(2) as ex:
        return measure(lambda i: ex.submit(noop, i), started, tasks)


def memory(tasks: int) -> list[float]:
    """The pool process's resident MB after each fifth of ``tasks`` tasks (futures dropped as they end)."""
    out = []
    with Elastic(LocalBackend(cores=2), "bigjob", store=False, workflow="bench-memory") as el:
        el.submit(noop, 0).result(timeout=120)
        out.append(resident_bytes() / 2**20)
        for _ in range(5):
            window: list[concurrent.futures.Future[int]] = []
            for i in range(tasks // 5):
                window.append(el.submit(noop, i))
                if len(window) >= 5000:
                    for f in window:
                        f.result(timeout=600)
                    window = []
            for f in window:
                f.result(timeout=600)
            out.append(resident_bytes() / 2**20)
    return out


def placement(queued: int = 100_000, decisions: int = 2000) -> float:
    """Seconds per placement decision with ``queued`` tasks queued and one core freeing at a time."""
    state = PoolState(
        heartbeat_interval=1.0, heartbeat_timeout=10.0, pool_timeout=60.0, max_retries=2, drain_margin=1.0,
        clock=time.time, prefetch_seconds=0.0,
    )  # fmt: skip
    state.add_allocation(Allocation("a1", cores=1, walltime=1e6))
    state.handle(b"a1/h/1", Register("a1", 1, "h", 1))
    for i in range(queued + decisions):
        state.submit(Task.shell("true", task_id=f"t{i}", estimate=float(i % 7)))
    from elastic.pool.messages import Report
    from elastic.pool.tasks import TaskResult

    state.tick(time.time())
    total = 0.0
    for i in range(decisions):
        state.handle(b"a1/h/1", Report(done=(TaskResult(f"t{i}", ok=True),)))
        t = time.perf_counter()
        state.tick(time.time())
        total += time.perf_counter() - t
        state.outbox.clear()
        state.resolve.clear()
    return total / decisions


def many_agents(n: int = 64, tasks: int = 2000) -> tuple[int, int, int]:
    """``(agents joined, agents that ran tasks, agents declared lost)`` with ``n`` one-core agents."""
    procs = []
    with Pool(heartbeat_interval=1.0, heartbeat_timeout=20.0, pool_timeout=60.0) as pool:
        try:
            for k in range(n):
                alloc = Allocation(f"a{k}", cores=1, walltime=3600.0)
                pool.add_allocation(alloc)
                procs.append(
                    subprocess.Popen(["bash", "-c", pool.agent_script(alloc)], start_new_session=True)
                )
            deadline = time.monotonic() + 180
            while len(pool.free_cores()) < n and time.monotonic() < deadline:
                time.sleep(0.2)
            futures = [pool.submit(Task.call(time.sleep, (0.05,))) for _ in range(tasks)]
            for f in futures:
                f.result(timeout=600)
            time.sleep(3 * pool.heartbeat_interval)  # idle agents keep heartbeating: none may be lost
            events = pool.events
            joined = {
                e.alloc_id for e in events if isinstance(e, AgentEvent) and e.kind is AgentEventKind.JOINED
            }
            lost = {e.alloc_id for e in events if isinstance(e, AgentEvent) and e.kind is AgentEventKind.LOST}
            used = {a for a, _ in pool.running().items()} | set(_allocations_that_ran(pool))
            return len(joined), len(used), len(lost)
        finally:
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, 9)
                p.wait()


def _allocations_that_ran(pool: Pool) -> set[str]:
    from elastic.pool.tasks import TaskEvent, TaskState

    return {
        e.alloc_id
        for e in pool.events
        if isinstance(e, TaskEvent) and e.state is TaskState.DONE and e.alloc_id
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--memory-tasks", type=int, default=100_000)
    parser.add_argument("--skip-htex", action="store_true")
    parser.add_argument(
        "--throughput-only", action="store_true", help="stop after the throughput table (for repeated runs)"
    )
    args = parser.parse_args()
    console = Console(width=160)
    rows = {"Elastic (front door, 1 local 2-core allocation)": run_elastic(args.tasks)}
    if not args.skip_htex:
        rows["Parsl HTEX (LocalProvider, 2 workers)"] = run_htex(args.tasks)
    rows["ProcessPoolExecutor(2)"] = run_ppe(args.tasks)
    table = Table(title=f"{args.tasks:,} no-op Python tasks, 2 workers, one run on this machine")
    cols = (
        "",
        "first result (s)",
        "median latency (ms)",
        "throughput (tasks/s)",
        "CPU ms/task (own + below)",
    )
    for col in cols:
        table.add_column(col, justify="left" if not col else "right")
    for name, r in rows.items():
        cpu = f"{r['cpu_self'] * 1e3:.3f} + {r['cpu_children'] * 1e3:.3f}"
        table.add_row(name, f"{r['first']:.2f}", f"{r['latency'] * 1000:.2f}", f"{r['rate']:,.0f}", cpu)
    console.print(table)
    ours, ppe = rows["Elastic (front door, 1 local 2-core allocation)"], rows["ProcessPoolExecutor(2)"]
    goals = [f"throughput / ProcessPoolExecutor = {ours['rate'] / ppe['rate']:.2f} (goal >= 0.33)"]
    if not args.skip_htex:
        htex = rows["Parsl HTEX (LocalProvider, 2 workers)"]
        goals.insert(0, f"throughput / HTEX = {ours['rate'] / htex['rate']:.2f} (goal >= 2)")
        goals.append(
            f"latency: {ours['latency'] * 1e3:.2f} ms vs HTEX {htex['latency'] * 1e3:.2f} ms (goal <=)"
        )
    goals.append(f"first result {ours['first']:.2f} s (goal <= 2 s)")
    for line in goals:
        console.print(line, highlight=False)
    if args.throughput_only:
        return
    rss = memory(args.memory_tasks)
    steps = ", ".join(f"{x:.0f}" for x in rss)
    console.print(f"pool process RSS (MB) after 0 and each fifth of {args.memory_tasks:,} tasks: {steps}")
    console.print(f"one placement decision with 100,000 tasks queued: {placement() * 1e6:.0f} us")
    joined, used, lost = many_agents()
    console.print(f"64 one-core agents: {joined} joined, {used} ran tasks, {lost} declared lost")
    console.print(
        f"(peak RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)"
    )


if __name__ == "__main__":
    main()
