"""Frameworks that disconnect for good have their allocations released at once, not after ``idle_timeout``.

Found by opening 200 subscriptions to ``elastic mesos`` (default ``--idle-timeout`` of 300 s) and closing
them: each framework was removed when its failover timeout passed, its stage announced none ready, but
the stage stayed open for the idle timeout, still counted one task wide, and Per-Stage kept asking
batch jobs for it (40 Slurm jobs, 32 of them queued, for frameworks that were gone). The master now
announces a stage no framework has any more as ``final``, and it completes at once.
"""

from __future__ import annotations

import time

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.control.live import LiveDemand
from elastic.control.rate import SubmissionLimit
from elastic.front.mesos import MesosServer
from tests.front.mesos.raw import RawScheduler

pytestmark = pytest.mark.slow


@pytest.mark.timeout(120)
def test_disconnected_frameworks_leave_no_allocation_and_no_request_behind() -> None:
    slow = SubmissionLimit(per_minute=30, burst=2)  # requests wait their turn, as with many frameworks
    with (
        LocalBackend(cores=2) as backend,
        Elastic(
            backend, "perstage", store=False, poll_interval=0.5, idle_timeout=300.0, submission_rate=slow
        ) as el,
        MesosServer(el, heartbeat_interval=0.5) as server,
    ):
        gone = [
            RawScheduler(server.address, None, name=f"gone{i}", info={"failover_timeout": 0.0})
            for i in range(6)
        ]
        deadline = time.monotonic() + 30
        while len(el.view().allocations) < 2:
            assert time.monotonic() < deadline, "no allocation was asked for the frameworks"
            time.sleep(0.1)
        for raw in gone:
            raw.close()
        deadline = time.monotonic() + 30
        while server.master.frameworks:
            assert time.monotonic() < deadline, "the frameworks were not removed"
            time.sleep(0.1)
        asked = len(el.view().allocations)
        deadline = time.monotonic() + 30
        while not all(a.ended for a in el.view().allocations):
            assert time.monotonic() < deadline, "allocations of departed frameworks were kept"
            time.sleep(0.1)
        time.sleep(5.0)  # two more allocations' worth of the submission rate: none is asked
        assert len(el.view().allocations) == asked
        assert all(s.complete for s in el.view().stages)


def test_a_stage_whose_front_end_is_gone_completes_at_once_and_opens_again() -> None:
    demand = LiveDemand("w", record=lambda event: None, clock=lambda: 0.0, idle_timeout=300.0)
    demand.expect("fw", 2, ready=True)
    demand.expect("fw+gang1", 1, ready=True)
    demand.update(0.0)
    assert not any(s.complete for s in demand.stages())
    # a gang step that ended (or a framework suppressed) may want cores again: the idle timeout holds
    demand.expect("fw+gang1", 0, ready=True)
    demand.update(1.0)
    assert not next(s for s in demand.stages() if s.name == "fw+gang1").complete
    # the framework removed: none will come any more
    demand.expect("fw", 0, ready=True, final=True)
    demand.update(2.0)
    assert next(s for s in demand.stages() if s.name == "fw").complete
    demand.expect("fw", 1, ready=True)  # a framework of that stage came back
    demand.update(3.0)
    assert not next(s for s in demand.stages() if s.name == "fw").complete
