"""Shell tasks through pymesos and the Mesos front end, beside the same tasks through the Python API.

One run, on this machine, one local allocation of 2 cores (``Elastic(LocalBackend(cores=2), "bigjob")``):

- **pymesos**: an unmodified ``MesosSchedulerDriver`` framework subscribes to a
  :class:`~elastic.front.mesos.MesosServer`, launches ``--tasks`` copies of ``--command`` (one cpu each) on
  the offers it gets, as many as each offer's cpus allow, and acknowledges updates implicitly (pymesos'
  default). Reported: *offer to launch* (offer received to the ACCEPT answered), *offer to running* (offer
  received to TASK_RUNNING received), *end to re-offer* (TASK_FINISHED received to the next offer of the
  freed core received), and launched tasks/s (first launch to last TASK_FINISHED).
- **Python API**: the same commands as ``Elastic.submit_task(Task.shell(...))`` on a fresh front door:
  *submit to running* (pool events) for 20 tasks submitted one at a time (a core is free for each, as it is
  for a task launched on an offer), then tasks/s for ``--tasks`` submitted at once (first submit to last
  result).

    .venv/bin/python benchmarks/bench_mesos.py [--tasks 200] [--command true] [--repeat 1]
"""

from __future__ import annotations

import argparse
import getpass
import statistics
import threading
import time
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler
from rich.console import Console
from rich.table import Table

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from elastic.pool.events import PoolEvent
from elastic.pool.tasks import Task, TaskEvent, TaskState


class Timed(Scheduler):  # type: ignore[misc]
    """Launch ``n`` copies of ``command`` on the offers, timing each step (epoch seconds)."""

    def __init__(self, n: int, command: str) -> None:
        self.command = command
        self.waiting = [f"t{i}" for i in range(n)]
        self.offer_of: dict[str, float] = {}  # task -> when its offer arrived
        self.accepted: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.freed: list[float] = []  # TASK_FINISHED times not yet followed by an offer
        self.reoffer: list[float] = []
        self.n = n
        self.done = threading.Event()

    def resourceOffers(self, driver: MesosSchedulerDriver, offers: list[dict[str, Any]]) -> None:
        now = time.time()
        for offer in offers:
            cpus = sum(r["scalar"]["value"] for r in offer["resources"] if r["name"] == "cpus")
            for _ in range(int(cpus)):
                if self.freed:
                    self.reoffer.append(now - self.freed.pop(0))
            tasks = []
            while self.waiting and cpus >= 1:
                task_id = self.waiting.pop(0)
                self.offer_of[task_id] = now
                tasks.append(
                    {
                        "task_id": {"value": task_id},
                        "agent_id": offer["agent_id"],
                        "name": task_id,
                        "command": {"value": self.command},
                        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}],
                    }
                )
                cpus -= 1
            if tasks:
                driver.launchTasks(offer["id"], tasks)
                end = time.time()
                for t in tasks:
                    self.accepted[t["task_id"]["value"]] = end
            else:
                driver.declineOffer(offer["id"])

    def statusUpdate(self, driver: MesosSchedulerDriver, update: dict[str, Any]) -> None:
        task_id, state, now = update["task_id"]["value"], update["state"], time.time()
        if state == "TASK_RUNNING":
            self.running[task_id] = now
        elif state == "TASK_FINISHED":
            self.finished[task_id] = now
            if self.waiting:
                self.freed.append(now)
            if len(self.finished) == self.n:
                self.done.set()
        elif state not in ("TASK_STAGING", "TASK_STARTING"):
            raise RuntimeError(f"task {task_id} ended {state}: {update.get('message')}")


def ms(values: list[float]) -> str:
    if not values:
        return "-"
    q = statistics.quantiles(values, n=20) if len(values) > 1 else values * 19
    return f"{statistics.median(values) * 1e3:.1f} / {q[18] * 1e3:.1f}"


def through_pymesos(tasks: int, command: str) -> dict[str, str]:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "bigjob", store=False, poll_interval=0.5) as el,
        MesosServer(el) as server,
    ):
        framework = {
            "user": getpass.getuser(),
            "name": "bench",
            "labels": {"labels": [{"key": "elastic.tasks", "value": "2"}]},
        }
        sched = Timed(tasks, command)
        driver = MesosSchedulerDriver(
            sched, framework, server.address, principal="bench", secret=server.secret
        )
        driver.start()
        try:
            if not sched.done.wait(600):
                raise RuntimeError(f"only {len(sched.finished)}/{tasks} tasks finished")
        finally:
            driver.stop()
            driver.join()
        cores = {a.cores for a in el.view().allocations}
    ids = list(sched.finished)
    span = max(sched.finished.values()) - min(sched.accepted.values())
    return {
        "allocations (cores)": ", ".join(map(str, sorted(cores))),
        "offer to launch ms (median / p95)": ms([sched.accepted[t] - sched.offer_of[t] for t in ids]),
        "offer to running ms (median / p95)": ms([sched.running[t] - sched.offer_of[t] for t in ids]),
        "end to re-offer ms (median / p95)": ms(sched.reoffer),
        "tasks/s": f"{tasks / span:.1f}",
    }


def through_python_api(tasks: int, command: str) -> dict[str, str]:
    queued: dict[str, float] = {}
    running: dict[str, float] = {}

    def on_event(e: PoolEvent) -> None:
        if isinstance(e, TaskEvent):
            if e.state is TaskState.QUEUED:
                queued.setdefault(e.task_id, e.time)
            elif e.state is TaskState.RUNNING:
                running.setdefault(e.task_id, e.time)

    with LocalBackend(cores=2) as backend, Elastic(backend, "bigjob", store=False, poll_interval=0.5) as el:
        el.expect("bench", 2, ready=True)  # one 2-core allocation, as the framework announces
        el.submit_task(Task.shell("true", stage="bench")).result(timeout=120)  # it is up
        el.pool.subscribe(on_event)
        for i in range(20):  # one at a time: a free core waits for each task, as with an offer
            el.submit_task(Task.shell(command, stage="bench", task_id=f"one{i}")).result(timeout=120)
        one = [running[t] - queued[t] for t in running if t.startswith("one")]
        started = time.time()
        futures = [el.submit_task(Task.shell(command, stage="bench", task_id=f"t{i}")) for i in range(tasks)]
        for f in futures:
            f.result(timeout=600)
        span = time.time() - started
        el.expect("bench", 0, ready=True)
        cores = {a.cores for a in el.view().allocations}
    return {
        "allocations (cores)": ", ".join(map(str, sorted(cores))),
        "submit to running ms (median / p95)": ms(one),
        "tasks/s": f"{tasks / span:.1f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks per run (default 200)")
    parser.add_argument("--command", default="true", help="the shell command of every task (default true)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (default 1)")
    args = parser.parse_args()
    console = Console(width=120)
    for run in range(args.repeat):
        mesos = through_pymesos(args.tasks, args.command)
        python = through_python_api(args.tasks, args.command)
        table = Table(title=f"{args.tasks} x {args.command!r} on one 2-core local allocation (run {run + 1})")
        table.add_column("measure")
        table.add_column("pymesos + MesosServer", justify="right")
        table.add_column("Python API (baseline)", justify="right")
        table.add_row("allocations (cores)", mesos["allocations (cores)"], python["allocations (cores)"])
        table.add_row("offer to launch ms (median / p95)", mesos["offer to launch ms (median / p95)"], "-")
        table.add_row(
            "offer (submit) to running ms (median / p95)",
            mesos["offer to running ms (median / p95)"],
            python["submit to running ms (median / p95)"],
        )
        table.add_row("end to re-offer ms (median / p95)", mesos["end to re-offer ms (median / p95)"], "-")
        table.add_row("tasks/s", mesos["tasks/s"], python["tasks/s"])
        console.print(table)


if __name__ == "__main__":
    main()
