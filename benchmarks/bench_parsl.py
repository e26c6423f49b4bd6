"""No-op Parsl apps through ``ElasticExecutor`` beside Parsl's ``HighThroughputExecutor``, in one run.

Both on this machine with 2 workers, behind the same DataFlowKernel code (``initialize_logging=False``,
``strategy="none"``):

- **ElasticExecutor**: ``ElasticExecutor(backend=LocalBackend(cores=2), strategy="bigjob")``: one local
  allocation of 2 cores, warm workers;
- **HTEX**: ``HighThroughputExecutor(max_workers_per_node=2, provider=LocalProvider(init_blocks=1,
  max_blocks=1))``.

For each: time from ``parsl.load`` to the first result (the executor's imports are timed apart, once),
then the throughput of ``--tasks`` no-op ``python_app`` calls made at once (from the first call to the
last result). Goals (issue 12): throughput >= 2x HTEX's, first result <= 2 s. This machine is shared:
``--repeat N`` measures N pairs, the order alternating within each pair, and judges the goals on the
median ratio and the median first result.

    .venv/bin/python benchmarks/bench_parsl.py [--tasks 10000] [--order elastic,htex] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
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
    """Seconds to the first result from ``parsl.load``, and no-op apps per second.

    The executor object is built before the clock starts, as a user's configuration is: the imports it
    needs are timed apart, once (:func:`import_seconds`).
    """
    app = parsl.python_app(noop)
    with tempfile.TemporaryDirectory() as run_dir:
        executor = make_executor()
        started = time.perf_counter()
        dfk = parsl.load(
            Config(executors=[executor], run_dir=run_dir, initialize_logging=False, strategy="none")
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
    from elastic.executors.parsl_executor import ElasticExecutor

    return ElasticExecutor(backend=LocalBackend(cores=2), strategy="bigjob", store=False, workflow="bench")


def import_seconds() -> dict[str, float]:
    """Seconds to import each front-end's executor (and its provider or backend) the first time."""
    out = {}
    started = time.perf_counter()
    import elastic.executors.parsl_executor  # noqa: F401
    from elastic.backends.local import LocalBackend  # noqa: F401

    out["elastic"] = time.perf_counter() - started
    started = time.perf_counter()
    from parsl.executors import HighThroughputExecutor  # noqa: F401
    from parsl.providers import LocalProvider  # noqa: F401

    out["htex"] = time.perf_counter() - started
    return out


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
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs, order alternating (1)")
    args = parser.parse_args()
    if args.tasks < 1:
        parser.error(f"--tasks must be >= 1, got {args.tasks}")
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    order = args.order.split(",")
    if sorted(order) != ["elastic", "htex"]:
        parser.error(f"--order must name elastic and htex once each, got {args.order!r}")
    # HTEX starts interchange.py and process_worker_pool.py from PATH
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    makers = {"elastic": elastic_executor, "htex": htex}
    imports = import_seconds()
    labels = {"elastic": "ElasticExecutor (1 local allocation, 2 cores)", "htex": "HTEX (LocalProvider)"}
    table = Table(title=f"{args.tasks:,} no-op python_apps, 2 workers, this machine")
    for col in ("pair", "executor", "first result (s)", "submit calls (s)", "all results (s)", "apps/s"):
        table.add_column(col, justify="left" if col in ("pair", "executor") else "right")
    ratios, firsts, loads = [], [], []
    for pair in range(args.repeat):
        names = order if pair % 2 == 0 else order[::-1]
        results = {name: measure(makers[name], args.tasks) for name in names}
        loads.append(os.getloadavg()[0])
        for name in names:
            r = results[name]
            table.add_row(
                str(pair + 1),
                labels[name],
                f"{r['first']:.2f}",
                f"{r['submit']:.2f}",
                f"{r['elapsed']:.2f}",
                f"{r['rate']:,.0f}",
            )
        ratios.append(results["elastic"]["rate"] / results["htex"]["rate"])
        firsts.append(results["elastic"]["first"])
    console = Console(width=120)
    console.print(table)
    ratio, first = statistics.median(ratios), statistics.median(firsts)
    each = ", ".join(f"{x:.2f}" for x in ratios)
    console.print(
        f"throughput ElasticExecutor / HTEX = {ratio:.2f}x (median of {each}; "
        f"goal >= 2x: {'met' if ratio >= 2 else 'NOT met'}); "
        f"first result {first:.2f} s (median; goal <= 2 s: {'met' if first <= 2 else 'NOT met'}); "
        f"load average after each pair {', '.join(f'{x:.1f}' for x in loads)}"
    )
    console.print(
        f"imports before parsl.load (not in the figures): ElasticExecutor {imports['elastic']:.2f} s, "
        f"HTEX {imports['htex']:.2f} s"
    )


if __name__ == "__main__":
    main()
