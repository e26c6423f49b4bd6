"""The store stopped and resumed under a run: nothing lost, no call blocked (the faults issue's soak).

The store is a real PostgreSQL server of the benchmark's own (``initdb`` in a temporary directory, as the
tests do, ``tests/fixtures/postgres.py``; the Debian package ``postgresql``), stopped for ``--outage``
seconds in the middle in two ways: **frozen** (SIGSTOP to the server and its backends, then SIGCONT: a
server that stops answering, its connections open) and **killed** (SIGKILL to all, then the server is
started again on its port and recovers its data: a crash and a restart). Two parts, each under both:

1. **Traffic**: ``--calls`` rounds of what a run does with its store (a queue wait, a learner update, a
   stage runtime, a read), as fast as possible, through :class:`~elastic.store.resilient.ResilientStore`
   (1 s read timeout). Reported: the slowest call outside and during the outage, the most calls queued,
   how long the queue took to drain after the server was back, and the rows found against the rows
   written (waits, runtimes, the learner's update count).
2. **A run**: ``elastic run --workflow demo3 --strategy asa --speedup 120`` with the outage from its 2nd
   second: its exit code, its status in the store, its wall time against the same run without an
   outage, the stage runtimes and queue waits it left in the store (as many as without an outage: nothing
   lost), whether its store said it was not answering (the outage reached the run), and whether a
   journal was needed.

    .venv/bin/python benchmarks/bench_store_outage.py [--calls 2000] [--outage 5]
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elastic.store import Store  # noqa: E402
from elastic.store.resilient import ResilientStore  # noqa: E402
from tests.fixtures.postgres import (  # noqa: E402
    PostgresServer,
    kill_server,
    restart_server,
    running_server,
    signal_server,
)

OUTAGES = ("frozen", "killed")


class _Server:
    """The benchmark's server, whose pid changes when it is killed and started again."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server

    @contextmanager
    def database(self) -> Iterator[str]:
        name = f"bench_{secrets.token_hex(4)}"
        url = self.server.create_database(name)
        try:
            yield url
        finally:
            self.server.drop_database(name)

    def outage(self, kind: str, start: float, seconds: float) -> threading.Thread:
        """From wall time ``start``, stop the server (``kind``: frozen or killed) for ``seconds``."""

        def run() -> None:
            time.sleep(max(0.0, start - time.time()))
            if kind == "frozen":
                pids = signal_server(self.server, signal.SIGSTOP)
                time.sleep(seconds)
                for pid in pids:
                    os.kill(pid, signal.SIGCONT)
            else:
                kill_server(self.server)
                time.sleep(seconds)
                self.server = restart_server(self.server)

        thread = threading.Thread(target=run, name=f"outage-{kind}")
        thread.start()
        return thread


def _bump(state: dict[str, int] | None) -> dict[str, int]:
    return {"n": (state or {}).get("n", 0) + 1}


def traffic(server: _Server, kind: str, calls: int, outage: float) -> dict[str, float]:
    """Part 1 under an outage of ``kind``; returns the figures."""
    with server.database() as url:
        Store(url).runs()
        store = ResilientStore(Store(url), timeout=1.0, flush_timeout=120)
        store.stage_runtimes("wf", "s")  # a pooled connection, as mid-run
        t0 = time.time() + 1.0
        stopper = server.outage(kind, t0, outage)
        slow_out = slow_in = 0.0
        peak = 0
        for i in range(calls):
            began = time.time()
            store.add_wait("cores=1-1", float(i), cores=1)
            store.update_learner_state("bench", "k", _bump)
            store.add_stage_runtime("wf", "s", float(i))
            store.stage_runtimes("wf", "s")
            took = time.time() - began
            if began <= t0 + outage and began + took >= t0:  # the call overlaps the outage
                slow_in = max(slow_in, took)
            else:
                slow_out = max(slow_out, took)
            peak = max(peak, store.pending)
            time.sleep(0.002)  # a run's store traffic is spread over its life
        stopper.join()
        released = time.time() if time.time() > t0 + outage else t0 + outage
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
            "drain after the server was back (s)": drained,
            "waits found/written": waits / calls,
            "runtimes found/written": runtimes / calls,
            "learner updates found/made": updates / calls,
            "journal": 0.0 if store.journal is None else 1.0,
        }


def a_run(server: _Server, kind: str | None, outage: float) -> dict[str, float | str]:
    """Part 2; ``kind`` None: the same run without an outage."""
    with server.database() as url, tempfile.TemporaryDirectory() as tmp:
        Store(url).runs()
        began = time.time()
        stopper = None if kind is None else server.outage(kind, began + 2.0, outage)
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
        if stopper is not None:
            stopper.join()
        with Store(url) as plain:
            runs = plain.runs()
        journal = list(Path(tmp).glob(".elastic-journal/*.jsonl"))
        return {
            "exit code": proc.returncode,
            "status in the store": ",".join(runs["status"]) or "-",
            "wall (s)": wall,
            "runtimes / waits in the store": f"{_rows(url, 'elastic_stage_runtimes')} / "
            f"{_rows(url, 'elastic_waits')}",
            "noticed": "yes" if "is not answering" in proc.stderr else "no",
            "journal": "yes" if journal else "no",
        }


def _rows(url: str, table: str) -> int:
    """Rows of one of the store's tables (a constant name from its schema)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--outage", type=float, default=5.0)
    parser.add_argument("--only", choices=OUTAGES, default=None, help="one kind of outage only")
    args = parser.parse_args()
    console = Console()
    kinds = OUTAGES if args.only is None else (args.only,)
    with running_server() as pg:
        server = _Server(pg)
        for kind in kinds:
            figures = traffic(server, kind, args.calls, args.outage)
            table = Table(
                title=f"{args.calls} rounds of run traffic, PostgreSQL {kind} {args.outage:g} s mid-way"
            )
            table.add_column("figure")
            table.add_column("value", justify="right")
            for name, value in figures.items():
                table.add_row(name, f"{value:.3g}")
            console.print(table)
        runs = Table(
            title=f"elastic run demo3 (asa, speed-up 120), PostgreSQL stopped {args.outage:g} s "
            "from its 2nd second"
        )
        for col in ("run", "exit code", "store status", "wall (s)", "runtimes / waits", "noticed", "journal"):
            runs.add_column(col)
        for kind in (None, *kinds):
            r = a_run(server, kind, args.outage)
            runs.add_row(
                kind or "no outage",
                str(r["exit code"]),
                str(r["status in the store"]),
                f"{r['wall (s)']:.1f}",
                str(r["runtimes / waits in the store"]),
                str(r["noticed"]),
                str(r["journal"]),
            )
        console.print(runs)


if __name__ == "__main__":
    main()
