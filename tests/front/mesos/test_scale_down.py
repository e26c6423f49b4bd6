"""Routine scale-down is quiet: an agent released with nothing running leaves without FAILURE, its
offers rescinded first; an agent lost under a running task is still a FAILURE."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.raw import RawScheduler, launch, task_info

pytestmark = pytest.mark.slow


@pytest.fixture
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(cores=2) as backend:
        yield backend


@pytest.fixture
def server(backend: LocalBackend) -> Iterator[MesosServer]:
    with (
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=0.5) as server,
    ):
        yield server


def allocation(offer: dict) -> str:
    return next(a["text"]["value"] for a in offer["attributes"] if a["name"] == "allocation")


@pytest.mark.timeout(120)
def test_an_idle_agent_released_leaves_without_failure_after_its_offer_is_rescinded(
    server: MesosServer,
) -> None:
    raw = RawScheduler(server.address, None)
    offer = raw.offer()
    mark = len(raw.events)
    ok = raw.call("ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"])))
    assert ok.status_code == 202
    raw.status("t", "TASK_FINISHED")
    held = raw.offer(after=mark)  # cores of that agent, offered and left unanswered
    suppressed = raw.call("SUPPRESS")  # no more demand: the allocation is released
    assert suppressed.status_code == 202, suppressed.text
    el = server.master.elastic
    deadline = time.monotonic() + 30
    while not all(a.ended for a in el.view().allocations):
        assert time.monotonic() < deadline, "the idle allocation was not released"
        time.sleep(0.1)
    time.sleep(1.0)  # a FAILURE, if any, would come now
    after = raw.events[mark:]
    kinds = [e["type"] for e in after]
    assert "FAILURE" not in kinds, kinds
    rescinds = [
        i for i, e in enumerate(after) if e["type"] == "RESCIND" and e["rescind"]["offer_id"] == held["id"]
    ]
    assert rescinds, kinds
    raw.close()


@pytest.mark.timeout(120)
def test_an_agent_lost_under_a_running_task_is_a_failure(server: MesosServer, backend: LocalBackend) -> None:
    raw = RawScheduler(server.address, None)
    offer = raw.offer()
    task = task_info("t", offer["agent_id"]["value"], "sleep 60")
    assert raw.call("ACCEPT", accept=launch(offer["id"]["value"], task)).status_code == 202
    raw.status("t", "TASK_RUNNING")
    alloc = next(a for a in server.master.elastic.view().allocations if a.alloc_id == allocation(offer))
    assert alloc.backend_job_id is not None
    backend.cancel(alloc.backend_job_id)  # as scancel would
    raw.status("t", "TASK_LOST", timeout=60)
    failure = raw.wait_for(lambda e: e["type"] == "FAILURE", timeout=30)
    assert failure["failure"]["agent_id"] == offer["agent_id"]
    raw.close()
