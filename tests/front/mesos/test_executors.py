"""Custom executors through the v1 executor API: launch, updates with data, framework messages both ways,
KILL relayed, an executor that dies before its task ends, and calls from executors never started (403).

The executor is a small pymesos ``MesosExecutorDriver`` program written as a user would (nothing of
Elastic in it); the scheduler speaks the HTTP API directly (``raw.py``).
"""

from __future__ import annotations

import base64
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from tests.front.mesos.raw import RawScheduler, launch

pytestmark = pytest.mark.slow

EXECUTOR = """
import os, sys, threading, time
from pymesos import Executor, MesosExecutorDriver, decode_data, encode_data

class Echo(Executor):
    def launchTask(self, driver, task):
        self.task_id = task["task_id"]
        what = decode_data(task["data"])
        driver.sendStatusUpdate({"task_id": self.task_id, "state": "TASK_RUNNING",
                                 "data": encode_data(os.environ["MESOS_SANDBOX"].encode())})
        if what == b"exit":
            os._exit(3)
        if what == b"message":
            driver.sendFrameworkMessage(encode_data(b"ping"))

    def frameworkMessage(self, driver, message):
        driver.sendStatusUpdate({"task_id": self.task_id, "state": "TASK_FINISHED",
                                 "data": encode_data(b"got " + decode_data(message))})

    def killTask(self, driver, task_id):
        driver.sendStatusUpdate({"task_id": task_id, "state": "TASK_KILLED", "message": "as asked"})

MesosExecutorDriver(Echo()).run()
"""


@pytest.fixture
def server() -> Iterator[MesosServer]:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=1.0) as server,
    ):
        yield server


def task(task_id: str, agent: str, script: Path, data: bytes) -> dict[str, Any]:
    return {
        "name": task_id,
        "task_id": {"value": task_id},
        "agent_id": {"value": agent},
        "data": base64.b64encode(data).decode(),
        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.5}}],
        "executor": {
            "executor_id": {"value": "echo"},
            "command": {"value": f"{sys.executable} {script}"},
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}],
        },
    }


USED: set[str] = set()


def run(raw: RawScheduler, script: Path, task_id: str, data: bytes) -> dict[str, Any]:
    """Launch one task on the first offer not used yet; return its TASK_RUNNING status."""
    event = raw.wait_for(
        lambda e: e["type"] == "OFFERS" and e["offers"]["offers"][0]["id"]["value"] not in USED
    )
    offer = event["offers"]["offers"][0]
    USED.add(offer["id"]["value"])
    accepted = raw.call(
        "ACCEPT", accept=launch(offer["id"]["value"], task(task_id, offer["agent_id"]["value"], script, data))
    )
    assert accepted.status_code == 202
    running = raw.status(task_id, "TASK_RUNNING")
    assert running["source"] == "SOURCE_EXECUTOR"
    sandbox = base64.b64decode(running["data"]).decode()
    assert os.path.basename(sandbox).startswith("mesos-sandbox-")
    return running


@pytest.mark.timeout(120)
def test_a_custom_executor_runs_its_tasks_through_the_executor_api(
    server: MesosServer, tmp_path: Path
) -> None:
    script = tmp_path / "echo_executor.py"
    script.write_text(EXECUTOR)
    raw = RawScheduler(server.address, None)
    # messages both ways, and the executor's data on its updates
    running = run(raw, script, "m", b"message")
    message = raw.wait_for(lambda e: e["type"] == "MESSAGE")["message"]
    assert base64.b64decode(message["data"]) == b"ping" and message["executor_id"]["value"] == "echo"
    assert message["agent_id"] == running["agent_id"]
    reply = {
        "agent_id": running["agent_id"],
        "executor_id": {"value": "echo"},
        "data": base64.b64encode(b"pong").decode(),
    }
    assert raw.call("MESSAGE", message=reply).status_code == 202
    finished = raw.status("m", "TASK_FINISHED")
    assert base64.b64decode(finished["data"]) == b"got pong"
    sandbox = base64.b64decode(running["data"]).decode()
    deadline = time.monotonic() + 20  # SHUTDOWN once the terminal update is acknowledged: the sandbox goes
    while os.path.exists(sandbox):
        assert time.monotonic() < deadline, f"{sandbox} outlived its executor"
        time.sleep(0.1)
    # KILL reaches the executor, which reports the kill
    run(raw, script, "k", b"wait")
    assert raw.call("KILL", kill={"task_id": {"value": "k"}}).status_code == 202
    killed = raw.status("k", "TASK_KILLED")
    assert killed["message"] == "as asked" and killed["source"] == "SOURCE_EXECUTOR"
    # an executor that exits before its task ended
    run(raw, script, "x", b"exit")
    failed = raw.status("x", "TASK_FAILED")
    assert failed["reason"] == "REASON_EXECUTOR_TERMINATED"
    for task_id in "mkx":  # one terminal update each
        assert (
            sum(
                u["state"].startswith("TASK_")
                and u["state"] in ("TASK_FINISHED", "TASK_KILLED", "TASK_FAILED")
                for u in raw.updates(task_id)
            )
            == 1
        )
    # calls from an executor nobody started, or malformed
    url = f"http://{server.address}/api/v1/executor"
    ids = {"framework_id": {"value": raw.framework_id}, "executor_id": {"value": "echo"}}
    assert httpx.post(url, json={"type": "SUBSCRIBE", "subscribe": {}, **ids}, timeout=10).status_code == 403
    bad = httpx.post(url, json={"type": "UPDATE", "update": {}, **ids}, timeout=10)
    assert bad.status_code == 400 and "update.status" in bad.text
    raw.close()
