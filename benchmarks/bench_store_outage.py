"""The store stopped and resumed under a run: nothing lost, no call blocked (the faults issue's soak).

Two parts, each on a real SQLite file whose lock another process holds for ``--outage`` seconds in the
middle (the store "stops answering", as a frozen server does; the tests also freeze a real PostgreSQL
server with SIGSTOP):

1. **Traffic**: ``--calls`` rounds of what a run does with its store (a queue wait, a learner update, a
   stage runtime, a read), as fast as possible, through :class:`~elastic.store.resilient.ResilientStore`
   (1 s read timeout). Reported: the slowest call outside and during the outage, the most calls queued,
   how long the queue took to drain after the lock was released, and the rows found against the rows
   written (waits, runtimes, the learner's update count).
2. **A run**: ``elastic run --workflow demo3 --strategy asa --speedup 120`` with the lock held from its
   2nd second: its exit code, its status in the store, its wall time against the same run without an
   outage, and whether a journal was needed.

    .venv/bin/python benchmarks/bench_store_outage.py [--calls 2000] [--outage 5]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elastic.store import Store  # noqa: E402
from elastic.store.resilient import ResilientStore  # noqa: E402


def _hold_lock(path: str, start: float, seconds: float) -> None:
    """In another process: take the database's exclusive lock at ``start`` for ``seconds``."""
    time.sleep(max(0.0, start - time.time()))
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.execute("BEGIN EXCLUSIVE")
    time.sleep(seconds)
    conn.execute("ROLLBACK")
    conn.close()


def _bump(state: dict[str, int] | None) -> dict[str, int]:
    return {"n": (state or {}).get("n", 0) + 1}


def traffic(calls: int, outage: float) -> dict[str, float]:
    """Part 1; returns the figures."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "s.db")
        url = f"sqlite:///{path}"
        Store(url).runs()
        store = ResilientStore(Store(url), timeout=1.0, flush_timeout=120)
        t0 = time.time() + 1.0
        locker = get_context("spawn").Process(target=_hold_lock, args=(path, t0, outage))
        locker.start()
        slow_out = slow_in = 0.0
        peak = 0
        for i in range(calls):
            began = time.time()
            store.add_wait("cores=1-1", float(i), cores=1)
            store.update_learner_state("bench", "k", _bump)
            store.add_stage_runtime("wf", "s", float(i))
            store.stage_runtimes("wf", "s")
            took = time.time() - began
            if t0 <= began <= t0 + outage:
                slow_in = max(slow_in, took)
            else:
                slow_out = max(slow_out, took)
            peak = max(peak, store.pending)
            time.sleep(0.002)  # a run's store traffic is spread over its life
        locker.join()
        released = t0 + outage
        while store.pending and time.time() < released + 120:
            time.sleep(0.01)
        drained = max(0.0, time.time() - released)
        store.close()
        with Store(url) as plain:
            waits = len(plain.waits("cores=1-1"))
            runtimes = len(plain.stage_runtimes("wf", "s")[0])
            updates = (plain.load_learner_state("bench", "k") or {}).get("n", 0)
        return {
            "slowest call outside (ms)": slow_out * 1e3,
            "slowest call in outage (ms)": slow_in * 1e3,
            "most calls queued": peak,
            "drain after release (s)": drained,
            "waits found/written": waits / calls,
            "runtimes found/written": runtimes / calls,
            "learner updates found/made": updates / calls,
            "journal": 0.0 if store.journal is None else 1.0,
        }


def a_run(outage: float | None) -> dict[str, float | str]:
    """Part 2; ``outage`` None: the same run without one."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "s.db")
        url = f"sqlite:///{path}"
        Store(url).runs()
        began = time.time()
        locker = None
        if outage is not None:
            locker = get_context("spawn").Process(target=_hold_lock, args=(path, began + 2.0, outage))
            locker.start()
        cmd = [sys.executable, "-m", "elastic", "run", "--workflow", "demo3", "--strategy", "asa"]
        proc = subprocess.run(
            [*cmd, "--speedup", "120", "--store", url],
            cwd=tmp,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=600,
        )
        wall = time.time() - began
        if locker is not None:
            locker.join()
        with Store(url) as plain:
            runs = plain.runs()
        journal = list(Path(tmp).glob(".elastic-journal/*.jsonl"))
        return {
            "exit code": proc.returncode,
            "status in the store": ",".join(runs["status"]) or "-",
            "wall (s)": wall,
            "journal": "yes" if journal else "no",
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--outage", type=float, default=5.0)
    args = parser.parse_args()
    console = Console()
    figures = traffic(args.calls, args.outage)
    table = Table(title=f"{args.calls} rounds of run traffic, store locked {args.outage:g} s mid-way")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures.items():
        table.add_row(name, f"{value:.3g}")
    console.print(table)
    runs = Table(
        title=f"elastic run demo3 (asa, speed-up 120), store locked {args.outage:g} s from its 2nd s"
    )
    for col in ("run", "exit code", "status in the store", "wall (s)", "journal"):
        runs.add_column(col)
    for name, outage in (("no outage", None), ("outage", args.outage)):
        r = a_run(outage)
        runs.add_row(
            name,
            str(r["exit code"]),
            str(r["status in the store"]),
            f"{r['wall (s)']:.1f}",
            str(r["journal"]),
        )
    console.print(runs)


if __name__ == "__main__":
    main()
