"""No-op Parsl apps through ``ElasticExecutor`` beside Parsl's ``HighThroughputExecutor``, in one run.

Both on this machine with 2 workers, behind the same DataFlowKernel code (``initialize_logging=False``,
``strategy="none"``):

- **ElasticExecutor**: ``ElasticExecutor(backend=LocalBackend(cores=2), strategy="bigjob")``: one local
  allocation of 2 cores, warm workers;
- **HTEX**: ``HighThroughputExecutor(max_workers_per_node=2, provider=LocalProvider(init_blocks=1,
  max_blocks=1))``.

For each: time from ``parsl.load`` to the first result, then the throughput of ``--tasks`` no-op
``python_app`` calls made at once (from the first call to the last result). Goals (issue 12): throughput
>= 2x HTEX's, first result <= 2 s.

    .venv/bin/python benchmarks/bench_parsl.py [--tasks 10000] [--order elastic,htex]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import parsl
from parsl.config import Config
from rich.console import Console
from rich.table import Table


def noop(i: int) -> int:
    return i


def measure(make_executor: Callable[[], Any], tasks: int) -> dict[str, float]:
    """Seconds to the first result from ``parsl.load``, and no-op apps per second."""
    app = parsl.python_app(noop)
    with tempfile.TemporaryDirectory() as run_dir:
        started = time.perf_counter()
        dfk = parsl.load(
            Config(executors=[make_executor()], run_dir=run_dir, initialize_logging=False, strategy="none")
        )
        try:
            assert app(-1).result(timeout=120) == -1
            first = time.perf_counter() - started
            t = time.perf_counter()
            futures = [app(i) for i in range(tasks)]
            submitted = time.perf_counter() - t
            ok = all(f.result(timeout=600) == i for i, f in enumerate(futures))
            elapsed = time.perf_counter() - t
            assert ok, "a result came back wrong"
        finally:
            dfk.cleanup()
            parsl.clear()
    return {"first": first, "rate": tasks / elapsed, "elapsed": elapsed, "submit": submitted}


def elastic_executor() -> Any:
    from elastic.backends.local import LocalBackend
    from executors.parsl_executor import ElasticExecutor

    return ElasticExecutor(backend=LocalBackend(cores=2), strategy="bigjob", store=False, workflow="bench")


def htex() -> Any:
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    return HighThroughputExecutor(
        label="htex", max_workers_per_node=2, provider=LocalProvider(init_blocks=1, max_blocks=1)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=10_000, help="no-op apps for the throughput (10000)")
    parser.add_argument("--order", default="elastic,htex", help="which runs first (default elastic,htex)")
    args = parser.parse_args()
    if args.tasks < 1:
        parser.error(f"--tasks must be >= 1, got {args.tasks}")
    order = args.order.split(",")
    if sorted(order) != ["elastic", "htex"]:
        parser.error(f"--order must name elastic and htex once each, got {args.order!r}")
    # HTEX starts interchange.py and process_worker_pool.py from PATH
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    makers = {"elastic": elastic_executor, "htex": htex}
    results = {name: measure(makers[name], args.tasks) for name in order}
    e, h = results["elastic"], results["htex"]
    table = Table(title=f"{args.tasks:,} no-op python_apps, 2 workers, this machine (one run)")
    for col in ("executor", "first result (s)", "submit calls (s)", "all results (s)", "apps/s"):
        table.add_column(col, justify="left" if col == "executor" else "right")
    for name, label in (
        ("elastic", "ElasticExecutor (1 local allocation, 2 cores)"),
        ("htex", "HTEX (LocalProvider)"),
    ):
        r = results[name]
        table.add_row(
            label, f"{r['first']:.2f}", f"{r['submit']:.2f}", f"{r['elapsed']:.2f}", f"{r['rate']:,.0f}"
        )
    console = Console(width=120)
    console.print(table)
    ratio = e["rate"] / h["rate"]
    console.print(
        f"throughput ElasticExecutor / HTEX = {ratio:.2f}x "
        f"(goal >= 2x: {'met' if ratio >= 2 else 'NOT met'}); "
        f"first result {e['first']:.2f} s (goal <= 2 s: {'met' if e['first'] <= 2 else 'NOT met'}); "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
