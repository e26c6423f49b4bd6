"""Unmodified pymesos frameworks on the front door, with the mock batch queue on its scaled clock.

The framework (``framework.py``) knows nothing of Elastic: it subscribes with pymesos' driver, gets offers,
launches 20 shell tasks, relaunches those lost. The strategy decides the allocations from its demand; one
allocation is cancelled from outside mid-task (as ``scancel`` would): its tasks are TASK_LOST, the strategy
replaces the allocation with a wider one (the two tasks lost count in the framework's demand until it
launches them again, beside its next one: 3 cores), the framework relaunches them there, and every task
finishes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pytest

from elastic import Elastic
from elastic.allocations import Allocation
from elastic.backends.mock import MockBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.framework import ShellFramework, running

pytestmark = pytest.mark.slow


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def request_widths(allocations: Iterable[Allocation]) -> dict[str, int]:
    """Per allocation, the width of the request it is part of (``asa`` asks for each as two batch jobs)."""
    allocs = list(allocations)
    total: dict[str, int] = {}
    for a in allocs:
        total[a.request] = total.get(a.request, 0) + a.cores
    return {a.alloc_id: total[a.request] for a in allocs}


def lost_running(framework: ShellFramework) -> int:
    """How many tasks were lost while running on the cancelled allocation (its agent went away).

    The test waits until two run before it cancels; on a loaded machine one of them (0.4-s tasks) may end
    before the cancel takes effect. Only with two lost does the replacement's width (3) differ from the
    first's (2), so the width assertions hold only then.
    """
    reasons = {"REASON_AGENT_REMOVED", "REASON_AGENT_DISCONNECTED"}
    return len(
        {
            u["task_id"]["value"]
            for u in framework.updates
            if u["state"] == "TASK_LOST" and u["reason"] in reasons
        }
    )


def check_framework_run(
    el: Elastic, server: MesosServer, kill: Callable[[Allocation], None]
) -> ShellFramework:
    """Run the 20-task framework; cancel its first allocation once a few tasks finished and more run."""
    framework = ShellFramework(20, command='sleep 0.4; test -n "$MESOS_TASK_ID"')
    with running(framework, server.address, server.secret, labels={"elastic.tasks": "2"}):

        def running_now() -> set[str]:
            started = {u["task_id"]["value"] for u in framework.updates if u["state"] == "TASK_RUNNING"}
            return started - framework.finished

        # both cores busy when the allocation goes: two tasks lost (with the framework's next one, the
        # replacement's width, 3, whether the strategy decides before or after the relaunches reach it);
        # with one running, the replacement is as wide as the first (2) and the test would say nothing
        wait_until(
            lambda: len(framework.finished) >= 4 and len(running_now()) >= 2,
            60,
            "four tasks done and two running",
        )
        # the first allocation: every batch job of the first request (asa asks for it as two)
        first = el.view().allocations[0]
        for a in el.view().allocations:
            if a.request == first.request:
                kill(a)
        assert framework.all_done.wait(120), (
            f"finished {len(framework.finished)}/20; errors {framework.errors}"
        )
    assert not framework.errors
    lost = [u for u in framework.updates if u["state"] == "TASK_LOST"]
    assert lost, "the cancelled allocation's running tasks were reported lost"
    # running there: the agent is gone; launched on an offer of the cancelled allocation that was being
    # accepted while it went away: the offer is invalid (as Mesos reports it)
    reasons = {"REASON_AGENT_REMOVED", "REASON_AGENT_DISCONNECTED", "REASON_INVALID_OFFERS"}
    assert {u["reason"] for u in lost} <= reasons
    for u in lost:  # relaunched, with the same id, and finished
        assert framework.states(u["task_id"]["value"])[-1] == "TASK_FINISHED"
    invalid = {u["task_id"]["value"] for u in lost if u["reason"] == "REASON_INVALID_OFFERS"}
    for i in range(20):
        states = framework.states(f"task-{i}")
        assert states.count("TASK_FINISHED") == 1
        # a launch on an offer that went away is lost before it is staged (then relaunched)
        first = ("TASK_STAGING", "TASK_LOST") if f"task-{i}" in invalid else ("TASK_STAGING",)
        assert states[0] in first and "TASK_RUNNING" in states, states
    finished = [u for u in framework.updates if u["state"] == "TASK_FINISHED"]
    assert all(u["message"] == "Command exited with status 0" and "uuid" in u for u in finished)
    return framework


@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
def test_a_pymesos_framework_runs_on_allocations_the_strategy_chooses(strategy: str) -> None:
    with (
        # 5x: at 20x a first walltime (1.5 x the estimate + 60 s, scaled) is 3 s, less than an agent can take
        # to start on a loaded machine
        MockBackend(nodes=8, clock="scaled", speedup=5.0) as backend,
        Elastic(backend, strategy, store=False, poll_interval=5.0, max_cores=3, idle_timeout=20.0) as el,
        MesosServer(el) as server,
    ):

        def kill(alloc: Allocation) -> None:
            assert alloc.backend_job_id is not None
            backend.cancel(alloc.backend_job_id)

        framework = check_framework_run(el, server, kill)
        allocations = {a.alloc_id: a for a in el.view().allocations}
    offered = {o.allocation for o in framework.offers}
    assert len(offered) >= 2, f"offers came from {offered}"
    widths = request_widths(allocations.values())
    sizes = {widths[a] for a in offered}
    if lost_running(framework) >= 2:
        assert len(sizes) >= 2, f"the allocations offered were requested with widths {sizes}"
    first = min(offered, key=lambda a: int(a[1:]))
    assert widths[first] == 2, "the first allocation is as wide as the framework announced"
    assert max(o.cpus for o in framework.offers) <= 3
    for o in framework.offers:
        assert 0 < o.remaining <= allocations[o.allocation].walltime
    assert el.result is not None and el.result.status == "completed"
    assert all(a.ended for a in el.view().allocations), "an allocation outlived shutdown()"
