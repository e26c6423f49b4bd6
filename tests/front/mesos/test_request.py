"""A REQUEST call feeds the framework's demand: a framework that asks for 3 cores (and says nothing else)
gets allocations of 3 cores at once and runs a gang of 3 tasks together (ASA here; Per-Stage passes it too,
left out for the CI budget)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.raw import RawScheduler, launch, task_info

pytestmark = pytest.mark.slow


def barrier(folder: Path, i: int) -> str:
    """A task that marks itself started, then waits up to 20 s for three marks: it exits 0 only if the
    three tasks were running at the same time (a barrier, not a timing rule that load can break)."""
    return (
        f"touch {folder}/started-{i}; for _ in $(seq 200); do "
        f'[ "$(ls {folder} | wc -l)" -ge 3 ] && exit 0; sleep 0.1; done; exit 1'
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
