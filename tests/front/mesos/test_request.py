"""A REQUEST call feeds the framework's demand: a framework that asks for 3 cores (and says nothing else)
gets allocations of 3 cores at once and runs a gang of 3 tasks together (ASA here; Per-Stage passes it too,
left out for the CI budget)."""

from __future__ import annotations

import time

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.raw import RawScheduler, launch, task_info

pytestmark = pytest.mark.slow


def cpus(n: float) -> dict:
    return {"resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": n}}]}


@pytest.mark.timeout(120)
def test_a_framework_that_requests_three_cores_runs_a_gang_of_three() -> None:
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
        while launched < 3:  # launch on offers as they come (one allocation, or several)
            offer = raw.offer(after=mark)
            mark = len(raw.events)
            n = min(3 - launched, int(offer["resources"][0]["scalar"]["value"]))
            agent = offer["agent_id"]["value"]
            tasks = [task_info(f"t{launched + i}", agent, "sleep 1.5") for i in range(n)]
            assert raw.call("ACCEPT", accept=launch(offer["id"]["value"], *tasks)).status_code == 202
            launched += n
        stamps = {
            state: [raw.status(f"t{i}", state)["timestamp"] for i in range(3)]
            for state in ("TASK_RUNNING", "TASK_FINISHED")
        }
        assert max(stamps["TASK_RUNNING"]) < min(stamps["TASK_FINISHED"]), "the three tasks ran together"
        raw.close()
