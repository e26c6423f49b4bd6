"""A small Mesos framework written only against pymesos' ``Scheduler`` interface, as a user would write one.

It has ``n`` shell tasks to run. On each offer it launches as many of its waiting tasks as the offer's
``cpus`` allow (one cpu and 64 MB each) and declines the offer when it has nothing to launch; a task that
ends TASK_LOST, TASK_FAILED, TASK_ERROR or TASK_DROPPED goes back to its waiting list (relaunched on a
later offer, with the same task id), and it REVIVEs offers then. It records every offer and update so the
tests can check what the front door did. Nothing in it knows about Elastic.
"""

from __future__ import annotations

import getpass
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler

RELAUNCHED = ("TASK_LOST", "TASK_FAILED", "TASK_ERROR", "TASK_DROPPED")


def attribute(offer: dict[str, Any], name: str) -> Any:
    for a in offer.get("attributes", []):
        if a["name"] == name:
            return a["text"]["value"] if a["type"] == "TEXT" else a["scalar"]["value"]
    return None


def scalar(offer: dict[str, Any], name: str) -> float:
    return sum(r["scalar"]["value"] for r in offer["resources"] if r["name"] == name)


@dataclass
class Offered:
    offer_id: str
    agent_id: str
    allocation: str
    cpus: float
    remaining: float
    at: float


@dataclass
class ShellFramework(Scheduler):  # type: ignore[misc]
    """Runs ``n`` copies of ``command`` (``{i}`` is replaced by the task number)."""

    n: int
    command: str = "sleep 0.3"
    waiting: list[str] = field(default_factory=list)
    offers: list[Offered] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    launched: dict[str, float] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    registered_count: int = 0
    reregistered_count: int = 0
    all_done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.waiting = [f"task-{i}" for i in range(self.n)]

    def registered(self, driver: MesosSchedulerDriver, framework_id: Any, master_info: Any) -> None:
        self.registered_count += 1

    def reregistered(self, driver: MesosSchedulerDriver, master_info: Any) -> None:
        self.reregistered_count += 1

    def resourceOffers(self, driver: MesosSchedulerDriver, offers: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        for offer in offers:
            cpus = scalar(offer, "cpus")
            with self.lock:
                self.offers.append(
                    Offered(
                        offer["id"]["value"],
                        offer["agent_id"]["value"],
                        attribute(offer, "allocation"),
                        cpus,
                        attribute(offer, "walltime_remaining"),
                        now,
                    )
                )
                tasks = []
                while self.waiting and cpus >= 1:
                    task_id = self.waiting.pop(0)
                    number = task_id.split("-")[1]
                    tasks.append(
                        {
                            "task_id": {"value": task_id},
                            "agent_id": offer["agent_id"],
                            "name": task_id,
                            "command": {"value": self.command.format(i=number)},
                            "resources": [
                                {"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}},
                                {"name": "mem", "type": "SCALAR", "scalar": {"value": 64}},
                            ],
                        }
                    )
                    self.launched[task_id] = now
                    cpus -= 1
            if tasks:
                driver.launchTasks(offer["id"], tasks)
            else:
                driver.declineOffer(offer["id"], filters={"refuse_seconds": 1.0})

    def statusUpdate(self, driver: MesosSchedulerDriver, update: dict[str, Any]) -> None:
        task_id, state = update["task_id"]["value"], update["state"]
        relaunch = False
        with self.lock:
            self.updates.append(update)
            if state == "TASK_FINISHED":
                self.finished.add(task_id)
                if len(self.finished) == self.n:
                    self.all_done.set()
            elif state in RELAUNCHED:
                self.waiting.append(task_id)
                relaunch = True
        if relaunch:
            driver.reviveOffers()

    def error(self, driver: MesosSchedulerDriver, message: str) -> None:
        self.errors.append(message)

    def states(self, task_id: str) -> list[str]:
        with self.lock:
            return [u["state"] for u in self.updates if u["task_id"]["value"] == task_id]


@contextmanager
def running(
    scheduler: Scheduler,
    address: str,
    secret: str | None = None,
    *,
    principal: str = "tests",
    name: str = "shell",
    labels: dict[str, str] | None = None,
) -> Iterator[MesosSchedulerDriver]:
    """Run ``scheduler`` with a pymesos driver against ``address``; stop it (TEARDOWN) at the end.

    Without ``secret`` the driver sends no credentials (as most frameworks).
    """
    framework: dict[str, Any] = {"user": getpass.getuser(), "name": name, "hostname": "localhost"}
    if labels:
        framework["labels"] = {"labels": [{"key": k, "value": v} for k, v in labels.items()]}
    driver = MesosSchedulerDriver(scheduler, framework, address, principal=principal, secret=secret)
    driver.start()
    try:
        yield driver
    finally:
        driver.stop()
        driver.join()
