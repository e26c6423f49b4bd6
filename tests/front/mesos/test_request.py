"""A REQUEST call feeds the framework's demand: a framework that asks for 3 cores (and says nothing else)
gets allocations of 3 cores at once and runs a gang of 3 tasks together (ASA here; Per-Stage passes it too,
left out for the CI budget); under Big-Job a REQUEST sent once the run's one core is offered grows the run
by the difference."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.raw import RawScheduler, launch, task_info

pytestmark = pytest.mark.slow


def barrier(folder: Path, i: int, n: int = 3) -> str:
    """A task that marks itself started, then waits up to 20 s for ``n`` marks: it exits 0 only if the
    ``n`` tasks were running at the same time (a barrier, not a timing rule that load can break)."""
    return (
        f"touch {folder}/started-{i}; for _ in $(seq 200); do "
        f'[ "$(ls {folder} | wc -l)" -ge {n} ] && exit 0; sleep 0.1; done; exit 1'
    )


def ended(event: dict, task_id: str) -> bool:
    if event["type"] != "UPDATE":
        return False
    status = event["update"]["status"]
    return bool(status["task_id"]["value"] == task_id and status["state"] in {"TASK_FINISHED", "TASK_FAILED"})


def cpus(n: float) -> dict:
    return {"resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": n}}]}


@pytest.mark.timeout(120)
def test_a_framework_that_requests_three_cores_runs_a_gang_of_three(tmp_path: Path) -> None:
    with (
        LocalBackend(cores=4) as backend,
        Elastic(backend, "asa", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=1.0) as server,
    ):
        raw = RawScheduler(server.address, None, name="gang")
        response = raw.call(
            "REQUEST", request={"requests": [cpus(1), {**cpus(2), "agent_id": {"value": "x"}}]}
        )
        assert response.status_code == 202, response.text

        def cores() -> int:
            # its stage's, and those asked for what the REQUEST wants beyond an allocation the strategy
            # sized before the REQUEST arrived (from the framework's first announced task, under load)
            mine = [a for a in el.view().allocations if (a.stage or "").split("+gang")[0] == "gang"]
            return sum(a.cores for a in mine if a.running)

        deadline = time.monotonic() + 60
        while cores() < 3:
            assert time.monotonic() < deadline, f"the stage has {cores()} cores, 3 were requested"
            time.sleep(0.1)
        mark, launched = 0, 0
        while launched < 3:  # launch on every offer as it comes (one allocation, or several)
            event = raw.wait_for(lambda e: e["type"] == "OFFERS", 30.0, after=mark)
            mark = raw.events.index(event) + 1
            for offer in event["offers"]["offers"]:
                n = min(3 - launched, int(offer["resources"][0]["scalar"]["value"]))
                agent = offer["agent_id"]["value"]
                ids = range(launched, launched + n)
                tasks = [task_info(f"t{i}", agent, barrier(tmp_path, i)) for i in ids]
                assert raw.call("ACCEPT", accept=launch(offer["id"]["value"], *tasks)).status_code == 202
                launched += n
        # each task finishes only if it saw the other two running beside it (a gang), fails otherwise
        ends = [raw.wait_for(lambda e, i=i: ended(e, f"t{i}"), 40.0) for i in range(3)]
        states = [e["update"]["status"]["state"] for e in ends]
        assert states == ["TASK_FINISHED"] * 3, f"the three tasks did not run together: {states}"
        raw.close()


def _run_gang(raw: RawScheduler, tmp_path: Path, mark: int, first: int = 0, n: int = 3) -> None:
    """Launch tasks ``first`` .. ``n - 1`` (barriers of ``n``) on the offers as they come; assert that the
    ``n`` tasks ran together."""
    launched = first
    while launched < n:  # launch on every offer as it comes (one allocation, or several)
        event = raw.wait_for(lambda e: e["type"] == "OFFERS", 30.0, after=mark)
        mark = raw.events.index(event) + 1
        for offer in event["offers"]["offers"]:
            k = min(n - launched, int(offer["resources"][0]["scalar"]["value"]))
            agent = offer["agent_id"]["value"]
            tasks = [
                task_info(f"t{i}", agent, barrier(tmp_path, i, n)) for i in range(launched, launched + k)
            ]
            assert raw.call("ACCEPT", accept=launch(offer["id"]["value"], *tasks)).status_code == 202
            launched += k
    ends = [raw.wait_for(lambda e, i=i: ended(e, f"t{i}"), 40.0) for i in range(n)]
    states = [e["update"]["status"]["state"] for e in ends]
    assert states == ["TASK_FINISHED"] * n, f"the {n} tasks did not run together: {states}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("running", [False, True])
def test_under_big_job_a_request_after_the_first_allocation_grows_the_run(
    running: bool, tmp_path: Path
) -> None:
    # the run's one core was sized before the REQUEST; with ``running`` the framework first launches a
    # task there, then asks for three more cores (four together), else it asks for three
    n = 4 if running else 3
    with (
        LocalBackend(cores=4) as backend,
        Elastic(backend, "bigjob", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=1.0) as server,
    ):
        raw = RawScheduler(server.address, None, name="late")
        first = raw.wait_for(lambda e: e["type"] == "OFFERS", 30.0)
        assert [a.cores for a in el.view().allocations] == [1]
        mark = raw.events.index(first)
        if running:
            offer = first["offers"]["offers"][0]
            t0 = task_info("t0", offer["agent_id"]["value"], barrier(tmp_path, 0, n))
            assert raw.call("ACCEPT", accept=launch(offer["id"]["value"], t0)).status_code == 202
            raw.wait_for(lambda e: e["type"] == "UPDATE" and e["update"]["status"]["state"] == "TASK_RUNNING")
            mark = len(raw.events)
        assert raw.call("REQUEST", request={"requests": [cpus(3)]}).status_code == 202

        def cores() -> int:
            return sum(a.cores for a in el.view().allocations if a.running)

        deadline = time.monotonic() + 60
        while cores() < n:
            assert time.monotonic() < deadline, f"the run has {cores()} cores, {n} were needed"
            time.sleep(0.1)
        assert cores() == n, "grown by what the run lacks, not by the whole REQUEST"
        _run_gang(raw, tmp_path, mark, first=1 if running else 0, n=n)
        raw.close()
