"""The no-op task and flow body of ``bench_prefect.py`` (a module, so workers import it by name)."""

from __future__ import annotations

import time

from prefect import task
from prefect.futures import wait

__all__ = ["noop", "noop_flow"]


@task
def noop(i: int) -> int:
    """Return ``i``."""
    return i


def noop_flow(n: int) -> tuple[int, float, float]:
    """Submit ``n`` no-op tasks at once; return the sum of their results and two times in seconds.

    The times count from the start of the flow function: when the last task was submitted, and when the
    first one (``noop(0)``) was done (runners that start workers or allocations pay for it there).
    """
    start = time.perf_counter()
    futures = [noop.submit(i) for i in range(n)]
    submitted = time.perf_counter() - start
    futures[0].wait()
    first = time.perf_counter() - start
    wait(futures)
    return sum(f.result() for f in futures), submitted, first
