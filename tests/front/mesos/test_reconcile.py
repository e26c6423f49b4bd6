"""RECONCILE never reports a known task as lost: accepted and not started is TASK_STAGING, a task whose
terminal update was acknowledged keeps its terminal state. A huge one (10,000 ids) is answered id by id, a
body past the limit is refused (its speed: ``benchmarks/bench_mesos_reconcile.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from elastic.front.mesos.calls import FrameworkInfo, Reconcile, parse_call
from elastic.front.mesos.events import read_records
from elastic.front.mesos.fields import MAX_BODY, BadCallError
from elastic.front.mesos.frameworks import MAX_COMPLETED, Framework, MesosTask
from elastic.front.mesos.states import TaskStatus
from elastic.front.mesos.updates import UpdateQueue
from elastic.pool.tasks import Task
from tests.front.mesos.raw import RawScheduler, launch, task_info


class Collect:
    def __init__(self) -> None:
        self.data = b""

    def send(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass

    def states(self) -> dict[str, str]:
        events, _ = read_records(self.data)
        return {e["update"]["status"]["task_id"]["value"]: e["update"]["status"]["state"] for e in events}


def framework(stream: Collect, *, partition_aware: bool = False) -> Framework:
    caps = frozenset({"PARTITION_AWARE"}) if partition_aware else frozenset()
    return Framework("f", FrameworkInfo("u", "n", capabilities=caps), "n", stream=stream, stream_id="s")


def accepted(fw: Framework, task_id: str) -> MesosTask:
    task = MesosTask(task_id, "f", "a1/h/1", Task.shell("true", task_id=f"p-{task_id}"), UpdateQueue(1.0))
    fw.tasks[task_id] = task
    return task


@pytest.mark.parametrize("partition_aware", [False, True])
def test_a_task_accepted_and_not_started_reconciles_as_staging(partition_aware: bool) -> None:
    stream = Collect()
    fw = framework(stream, partition_aware=partition_aware)
    accepted(fw, "t")
    fw.reconcile(["t", "ghost"], 1.0)
    assert stream.states() == {
        "t": "TASK_STAGING",
        "ghost": "TASK_UNKNOWN" if partition_aware else "TASK_LOST",
    }


def test_a_task_whose_terminal_update_was_acknowledged_keeps_its_state() -> None:
    stream = Collect()
    fw = framework(stream)
    for i in range(MAX_COMPLETED + 1):
        task = accepted(fw, f"t{i}")
        done = TaskStatus(f"t{i}", "TASK_FINISHED", "SOURCE_EXECUTOR", "Command exited with status 0")
        fw.update(task, done, 1.0)
        task.terminal = True
        assert task.updates.ack(task.latest.uuid)  # type: ignore[union-attr]
        fw.flush(task, 1.0)
    assert not fw.tasks
    stream.data = b""
    fw.reconcile([f"t{MAX_COMPLETED}", "t1", "t0"], 2.0)
    assert stream.states() == {f"t{MAX_COMPLETED}": "TASK_FINISHED", "t1": "TASK_FINISHED", "t0": "TASK_LOST"}


@pytest.fixture
def server() -> Iterator[MesosServer]:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=0.5) as server,
    ):
        yield server


def reconciled(raw: RawScheduler, task_id: str, after: int) -> dict[str, Any]:
    event = raw.wait_for(
        lambda e: (
            e["type"] == "UPDATE"
            and e["update"]["status"]["task_id"]["value"] == task_id
            and e["update"]["status"].get("reason") == "REASON_RECONCILIATION"
        ),
        after=after,
    )
    status: dict[str, Any] = event["update"]["status"]
    return status


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_reconcile_right_after_accept_and_after_the_end_over_http(server: MesosServer) -> None:
    raw = RawScheduler(server.address, None)
    offer = raw.offer()
    body = {"tasks": [{"task_id": {"value": "t"}}]}
    master = server.master
    held: list[Any] = []  # the pool's news of the task waits till after RECONCILE
    master._take = lambda item, now: held.append(item)  # type: ignore[method-assign]
    try:
        mark = len(raw.events)
        ok = raw.call(
            "ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"]))
        )
        assert ok.status_code == 202
        assert raw.call("RECONCILE", reconcile=body).status_code == 202
        assert reconciled(raw, "t", mark)["state"] == "TASK_STAGING"
    finally:
        del master._take
        with master._lock:
            for item in held:
                master._take(item, time.time())
        master._wake.set()
    raw.status("t", "TASK_FINISHED")
    mark = len(raw.events)
    assert raw.call("RECONCILE", reconcile=body).status_code == 202
    assert reconciled(raw, "t", mark)["state"] == "TASK_FINISHED"
    assert json.dumps(raw.events).count('"TASK_LOST"') == 0
    raw.close()


def test_a_huge_reconcile_is_read_whole_and_a_bad_entry_deep_in_it_is_named() -> None:
    tasks = [{"task_id": {"value": f"t{i}"}} for i in range(10_000)]
    body = {"type": "RECONCILE", "framework_id": {"value": "f"}, "reconcile": {"tasks": tasks}}
    _, call = parse_call(json.dumps(body).encode())
    assert call == Reconcile(tuple(f"t{i}" for i in range(10_000)))
    tasks[9_999] = {"task_id": {"value": ""}}
    with pytest.raises(BadCallError, match=r"reconcile\.tasks\[9999\]\.task_id\.value"):
        parse_call(json.dumps(body).encode())
    tasks[9_999] = {"task_id": ["t"]}
    with pytest.raises(BadCallError, match=r"reconcile\.tasks\[9999\]\.task_id: expected an object"):
        parse_call(json.dumps(body).encode())


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_reconcile_of_ten_thousand_ids_answers_each_once_and_an_oversized_one_is_refused(
    server: MesosServer,
) -> None:
    raw = RawScheduler(server.address, None)
    offer = raw.offer()
    ok = raw.call("ACCEPT", accept=launch(offer["id"]["value"], task_info("t5", offer["agent_id"]["value"])))
    assert ok.status_code == 202
    raw.status("t5", "TASK_FINISHED")
    mark = len(raw.events)
    ids = [f"t{i}" for i in range(10_000)]
    body = {"tasks": [{"task_id": {"value": t}} for t in ids]}
    assert raw.call("RECONCILE", reconcile=body).status_code == 202
    raw.wait_for(
        lambda e: e["type"] == "UPDATE" and e["update"]["status"]["task_id"]["value"] == "t9999", after=mark
    )
    answers = [e["update"]["status"] for e in raw.events[mark:] if e["type"] == "UPDATE"]
    assert [a["task_id"]["value"] for a in answers] == ids  # each once, in the order asked
    states = {a["task_id"]["value"]: a["state"] for a in answers}
    assert states.pop("t5") == "TASK_FINISHED" and set(states.values()) == {"TASK_LOST"}
    assert all(a["reason"] == "REASON_RECONCILIATION" and "uuid" not in a for a in answers)
    # past the body limit (here ~9 MB of ids, chunked so no Content-Length warns): 413, nothing answered
    many = b",".join(b'{"task_id":{"value":"%d"}}' % i for i in range(MAX_BODY // 28 + 1))
    head = (
        b'{"type":"RECONCILE","framework_id":{"value":"%s"},"reconcile":{"tasks":['
        % raw.framework_id.encode()
    )
    mark = len(raw.events)
    refused = raw.post(None, raw=iter([head, many, b"]}}"]))  # type: ignore[arg-type]
    assert refused.status_code == 413
    time.sleep(0.5)
    assert not [e for e in raw.events[mark:] if e["type"] == "UPDATE"]
    raw.close()
