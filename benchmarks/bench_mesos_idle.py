"""New frameworks served while ``--idle`` sockets sit open on the Mesos endpoint without sending a byte.

One :class:`~elastic.front.mesos.MesosServer` (default limits) on ``Elastic(LocalBackend(cores=2),
"perstage")``; ``--idle`` TCP connections are opened to it and left silent, then ``--frameworks`` pymesos
frameworks subscribe one after the other and each runs one ``true`` task. Reported per framework: SUBSCRIBE
sent to SUBSCRIBED received, and to TASK_FINISHED; and how many idle sockets the server closed to make room
(evicted) or by the header timeout, and the connections open at the end. The idle sockets' client ends
live in a child process (pymesos uses ``select()``, which takes no descriptor above 1023).

    .venv/bin/python benchmarks/bench_mesos_idle.py [--idle 1100] [--frameworks 5]
"""

from __future__ import annotations

import argparse
import getpass
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler
from rich.console import Console
from rich.table import Table

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer

_HOLDER = """
import resource, socket, sys
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
address = (sys.argv[1], int(sys.argv[2]))
held = [socket.create_connection(address, timeout=10) for _ in range(int(sys.argv[3]))]
print("ready", flush=True)
sys.stdin.read()
"""
"""The child process holding the idle sockets until its stdin closes."""


class OneTask(Scheduler):  # type: ignore[misc]
    """Launch one ``true`` task (again if lost); record when it subscribed and when the task finished."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.subscribed: float | None = None
        self.finished = threading.Event()
        self.finished_at: float | None = None
        self.launched = False

    def registered(self, driver: MesosSchedulerDriver, framework_id: Any, master_info: Any) -> None:
        self.subscribed = time.monotonic()

    def resourceOffers(self, driver: MesosSchedulerDriver, offers: list[dict[str, Any]]) -> None:
        for offer in offers:
            if self.launched:
                driver.declineOffer(offer["id"], filters={"refuse_seconds": 60})
                continue
            self.launched = True
            task = {
                "task_id": {"value": "t"},
                "agent_id": offer["agent_id"],
                "name": "t",
                "command": {"value": "true"},
                "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}],
            }
            driver.launchTasks(offer["id"], [task])

    def statusUpdate(self, driver: MesosSchedulerDriver, update: dict[str, Any]) -> None:
        if update["state"] == "TASK_FINISHED":
            self.finished_at = time.monotonic()
            self.finished.set()
        elif update["state"] in ("TASK_LOST", "TASK_FAILED", "TASK_ERROR", "TASK_DROPPED"):
            self.launched = False  # (e.g. launched on the previous framework's allocation as it was released)
            driver.reviveOffers()


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=1100)
    parser.add_argument("--frameworks", type=int, default=5)
    args = parser.parse_args()
    console = Console()
    rows = []
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=5.0) as el,
        MesosServer(el) as server,
    ):
        host, port = server.address.split(":")
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, host, port, str(args.idle)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        for i in range(args.frameworks):
            sched = OneTask()
            framework = {"user": getpass.getuser(), "name": f"idle-bench-{i}", "hostname": "localhost"}
            driver = MesosSchedulerDriver(sched, framework, server.address)
            driver.start()
            ok = sched.finished.wait(120)
            driver.stop()
            driver.join()
            subscribed = None if sched.subscribed is None else sched.subscribed - sched.started
            finished = None if sched.finished_at is None else sched.finished_at - sched.started
            rows.append((subscribed, finished, ok))
        guard = server.guard
        summary = (guard.evicted, guard.timed_out, guard.refused, guard.open, server.limits.max_connections)
        holder.communicate("")  # it closes its sockets and exits
    table = Table(
        title=f"{args.frameworks} pymesos frameworks, one after the other, with {args.idle} idle sockets"
    )
    table.add_column("framework")
    table.add_column("SUBSCRIBE to SUBSCRIBED", justify="right")
    table.add_column("SUBSCRIBE to TASK_FINISHED", justify="right")
    for i, (subscribed, finished, ok) in enumerate(rows):
        table.add_row(
            str(i),
            "-" if subscribed is None else f"{subscribed * 1000:.0f} ms",
            f"{finished * 1000:.0f} ms" if ok and finished is not None else "not finished in 120 s",
        )
    console.print(table)
    served = [r[0] for r in rows if r[0] is not None]
    if served:
        console.print(f"median SUBSCRIBE to SUBSCRIBED: {statistics.median(served) * 1000:.0f} ms")
    evicted, timed_out, refused, still_open, cap = summary
    console.print(
        f"idle sockets closed by the server: {evicted} evicted to make room, {timed_out} by the header "
        f"timeout; new connections refused: {refused}; open at the end: {still_open} (cap {cap})"
    )


if __name__ == "__main__":
    main()
