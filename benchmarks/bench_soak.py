"""Issue 10's soak: 20,000 tasks on two one-core agents while a third connection attacks the pool.

The attacker (``tests/pool/soak.py``) sends, until the tasks are done: garbage from a stranger without
the secret (reconnecting now and then), and from a peer holding the secret garbage with bad MACs,
messages of 5,000 empty frames, messages over the size limit, and signed messages sent twice (a heartbeat;
a forged result for a real task id). Beside it, in the same run, the same tasks without the attacker (the
baseline). Reported: wall time, this process' resident memory (the pool's) at the start and at its peak
(sampled every 0.2 s; each run in a fresh process, whose RSS includes the 20,000 futures and
results the driver keeps), refusals, wrong results, results not seen exactly once, re-runs and agents lost.

    .venv/bin/python benchmarks/bench_soak.py [--tasks 20000]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the soak lives with the tests

from tests.pool.soak import SoakReport, soak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the attack's refusals are logged, rate-limited; not here
    runs: dict[str, SoakReport] = {}
    for name, attacked in (("baseline (no attacker)", False), ("under attack", True)):
        # Each in a fresh process, so that neither starts with the other's memory.
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
            runs[name] = ex.submit(soak, args.tasks, attacked=attacked).result()
    table = Table(title=f"{args.tasks:,} tasks on 2 one-core agents (loopback)")
    for col in (
        "run",
        "seconds",
        "tasks/s",
        "RSS start MiB",
        "RSS peak MiB",
        "refused",
        "wrong",
        "not exactly once",
        "re-runs",
        "agents lost",
    ):
        table.add_column(col, justify="right")
    for name, r in runs.items():
        not_once = args.tasks - sum(1 for n in r.done_events.values() if n == 1)
        table.add_row(
            name,
            f"{r.seconds:.1f}",
            f"{r.tasks / r.seconds:.0f}",
            f"{r.rss_start / 2**20:.1f}",
            f"{r.rss_peak / 2**20:.1f}",
            f"{r.refused:,}",
            str(len(r.wrong)),
            str(not_once),
            str(r.reruns),
            str(r.lost_agents),
        )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
