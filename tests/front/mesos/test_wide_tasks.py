"""A framework whose tasks are wider than the cores offered, and that says nothing of its size, gets wider
allocations: it declines every offer while it runs nothing, so its tasks are taken as twice as wide as
the widest agent it declined, until an offer fits (its ``mem`` grows with its cores), and no wider than
the backend can give (logged once). ``pymesos.subprocess`` with its default size is the real case
(``test_thirdparty.py``); this framework needs three cores and 3,000 MB, so it takes two steps."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from pymesos import Scheduler

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.framework import running, scalar

pytestmark = pytest.mark.slow


@dataclass
class WideFramework(Scheduler):  # type: ignore[misc]
    """One task of ``cpus`` cpus and ``mem`` MB; declines (1 s) every offer it does not fit."""

    cpus: float = 3.0
    mem: float = 3000.0
    declined: list[tuple[float, float]] = field(default_factory=list)
    """(cpus, mem) of each offer it declined."""
    launched_on: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    failed: list[str] = field(default_factory=list)

    def resourceOffers(self, driver: Any, offers: list[dict[str, Any]]) -> None:
        for offer in offers:
            cpus, mem = scalar(offer, "cpus"), scalar(offer, "mem")
            if self.launched_on or cpus < self.cpus or mem < self.mem:
                self.declined.append((cpus, mem))
                driver.declineOffer(offer["id"], filters={"refuse_seconds": 1.0})
                continue
            self.launched_on = cpus
            task = {
                "task_id": {"value": "wide"},
                "agent_id": offer["agent_id"],
                "name": "wide",
                "command": {"value": "true"},
                "resources": [
                    {"name": "cpus", "type": "SCALAR", "scalar": {"value": self.cpus}},
                    {"name": "mem", "type": "SCALAR", "scalar": {"value": self.mem}},
                ],
            }
            driver.launchTasks(offer["id"], [task])

    def statusUpdate(self, driver: Any, update: dict[str, Any]) -> None:
        if update["state"] == "TASK_FINISHED":
            self.done.set()
        elif update["state"] not in ("TASK_STAGING", "TASK_STARTING", "TASK_RUNNING"):
            self.failed.append(f"{update['state']}: {update.get('message')}")
            self.done.set()


@pytest.mark.timeout(120)
def test_a_framework_declining_every_offer_gets_allocations_twice_as_wide_until_its_task_fits() -> None:
    fw = WideFramework()
    with (
        LocalBackend(cores=8) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=1.0, gang_wait=0.5) as server,
        running(fw, server.address, name="wide"),
    ):
        assert fw.done.wait(60), f"it never ran; it declined {fw.declined}"
        widths = [a.cores for a in el.view().allocations if a.stage == "wide"]
    assert not fw.failed, fw.failed
    assert fw.launched_on == 4, "2 x 2 cores: the first offer it fits"
    assert widths == [1, 2, 4], "its first allocation, then one step at a time"
    assert {mem / cpus for cpus, mem in fw.declined} == {1024.0}, "mem offered grows with the cores"


@pytest.mark.timeout(120)
def test_growth_stops_at_the_widest_allocation_the_backend_can_give(caplog: pytest.LogCaptureFixture) -> None:
    fw = WideFramework()
    told = "no wider allocation can be had here"
    with (
        caplog.at_level(logging.INFO, logger="elastic.front.mesos.master"),
        LocalBackend(cores=3) as backend,  # its first allocation (1 core) is kept beside the wider one
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0, max_cores=2) as el,
        MesosServer(el, heartbeat_interval=1.0, gang_wait=0.5) as server,
        running(fw, server.address, name="wide"),
    ):
        deadline = time.monotonic() + 60
        while told not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.2)
        assert told in caplog.text, f"never told; it declined {fw.declined}"
        time.sleep(2.0)  # several more declines and gang_wait periods: neither growth nor repetition
        widths = [a.cores for a in el.view().allocations if a.stage == "wide"]
    assert not fw.launched_on and not fw.failed
    assert max(widths) == 2 and widths[-1] == 2
    assert caplog.text.count(told) == 1
    assert max(cpus for cpus, _ in fw.declined) == 2
