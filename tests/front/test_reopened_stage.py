"""A front door's stage that completed and was released runs again when it gets new tasks (regression).

Found with the Mesos front end (a framework that SUPPRESSes until its allocation is released, then REVIVEs):
Per-Stage and Big-Job did not request an allocation for a stage that had one before.
"""

from __future__ import annotations

import time

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.pool.tasks import Task


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
def test_a_stage_that_gets_tasks_after_its_allocation_was_released_runs_them(strategy: str) -> None:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, strategy, store=False, poll_interval=0.5, idle_timeout=0.5) as el,
    ):
        el.submit_task(Task.shell("true", stage="s")).result(timeout=30)
        deadline = time.monotonic() + 30
        while not all(a.ended for a in el.view().allocations):
            assert time.monotonic() < deadline, "the idle stage's allocation was not released"
            time.sleep(0.1)
        assert el.submit_task(Task.shell("true", stage="s")).result(timeout=30).returncode == 0
        # two requests (asa asks for each as its pieces: batch jobs with the first one's id as piece_of)
        requests = {a.request for a in el.view().allocations}
        assert len(requests) == 2
