"""A huge explicit RECONCILE on the Mesos endpoint: how long it takes, and how long it holds up others.

One :class:`~elastic.front.mesos.MesosServer` on ``Elastic(LocalBackend(cores=2), "perstage")``; framework A
sends ``RECONCILE`` naming ``--tasks`` task ids it never launched (each answered ``TASK_LOST``, reason
``REASON_RECONCILIATION``), while framework B sends ``REVIVE`` calls back to back. Reported over
``--repeat`` rounds: the RECONCILE's round trip (POST to ``202``), until its last answer arrived on A's
stream, and B's slowest call while it was served (the goal: under 100 ms for 10,000 ids).

    .venv/bin/python benchmarks/bench_mesos_reconcile.py [--tasks 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from elastic.front.mesos.events import read_records

_ANSWER = b'"REASON_RECONCILIATION"'


class Client:
    """A framework speaking the scheduler API with httpx: its stream read in a thread."""

    def __init__(self, address: str, name: str) -> None:
        self.url = f"http://{address}/api/v1/scheduler"
        self.client = httpx.Client(timeout=30.0)
        self.answers = 0
        self.last_answer = 0.0
        self.ready = threading.Event()
        self.framework_id = self.stream_id = ""
        body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "bench", "name": name}}}
        threading.Thread(target=self._read, args=(body,), daemon=True).start()
        assert self.ready.wait(10), "no SUBSCRIBED"

    def _read(self, body: dict[str, Any]) -> None:
        with httpx.stream("POST", self.url, json=body, timeout=None) as response:
            self.stream_id = response.headers["mesos-stream-id"]
            rest = b""
            for chunk in response.iter_bytes():
                if not self.ready.is_set():
                    events, rest = read_records(rest + chunk)
                    for event in events:
                        if event["type"] == "SUBSCRIBED":
                            self.framework_id = event["subscribed"]["framework_id"]["value"]
                            self.ready.set()
                    continue
                # counted, not decoded: the client shares the process (and its GIL) with the server
                data = rest + chunk
                found = data.count(_ANSWER)
                if found:
                    self.answers += found
                    self.last_answer = time.perf_counter()
                rest = data[-len(_ANSWER) + 1 :]

    def call(self, kind: str, **fields: Any) -> float:
        """Send one call; return its round trip (seconds)."""
        body = json.dumps({"type": kind, "framework_id": {"value": self.framework_id}, **fields})
        headers = {"Mesos-Stream-Id": self.stream_id, "Content-Type": "application/json"}
        start = time.perf_counter()
        response = self.client.post(self.url, content=body, headers=headers)
        assert response.status_code == 202, response.text
        return time.perf_counter() - start


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    table = Table(title=f"RECONCILE of {args.tasks} task ids (ms)")
    for column in ("round", "POST to 202", "to last answer", "other framework's slowest call"):
        table.add_column(column, justify="right")
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el) as server,
    ):
        a, b = Client(server.address, "a"), Client(server.address, "b")
        tasks = [{"task_id": {"value": f"task-{i:06d}"}} for i in range(args.tasks)]
        rows = []
        for r in range(args.repeat):
            stop = threading.Event()
            others: list[float] = []

            def revive(stop: threading.Event = stop, others: list[float] = others) -> None:
                while not stop.is_set():
                    others.append(b.call("REVIVE"))

            thread = threading.Thread(target=revive)
            thread.start()
            time.sleep(0.2)
            before = a.answers
            start = time.perf_counter()
            post = a.call("RECONCILE", reconcile={"tasks": tasks})
            deadline = time.monotonic() + 60
            while a.answers < before + args.tasks and time.monotonic() < deadline:
                time.sleep(0.001)
            done = a.last_answer - start
            time.sleep(0.1)
            stop.set()
            thread.join()
            assert a.answers == before + args.tasks, f"{a.answers - before} answers of {args.tasks}"
            rows.append((post, done, max(others)))
            table.add_row(str(r + 1), f"{post * 1e3:.1f}", f"{done * 1e3:.1f}", f"{max(others) * 1e3:.1f}")
        med = [statistics.median(col) * 1e3 for col in zip(*rows, strict=True)]
        table.add_row("median", *(f"{m:.1f}" for m in med))
    Console().print(table)


if __name__ == "__main__":
    main()
