"""Bad input to the scheduler API gets a clear error, changes nothing, and other frameworks go on running.

HTTP errors (400 naming the field, 403, 415, 501 naming the call) come from a client speaking the API
directly; launches Mesos would refuse (a rescinded offer, a task too wide, a containerized executor)
are accepted with 202 and answered by status updates (TASK_LOST or TASK_DROPPED with
``REASON_INVALID_OFFERS``, TASK_ERROR with ``REASON_TASK_INVALID``), as a Mesos master does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.errors import ConfigError
from elastic.front.mesos import MesosServer
from tests.front.mesos.framework import ShellFramework, running
from tests.front.mesos.raw import RawScheduler, basic, launch, task_info

pytestmark = pytest.mark.slow


@pytest.fixture
def server() -> Iterator[MesosServer]:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=0.5, retry_min=0.5) as server,
    ):
        yield server


def post(server: MesosServer, content: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    url = f"http://{server.address}/api/v1/scheduler"
    base = {**basic(server.secret), "Content-Type": "application/json"}
    return httpx.post(url, content=content, headers={**base, **(headers or {})}, timeout=10)


def subscribe_body(name: object = "x") -> bytes:
    return b'{"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": %s}}}' % (
        b'"%s"' % str(name).encode() if isinstance(name, str) else str(name).encode()
    )


@pytest.mark.timeout(120)
def test_bad_requests_are_refused_with_the_reason_while_a_framework_runs(server: MesosServer) -> None:
    framework = ShellFramework(6, command="sleep 0.2")
    with running(framework, server.address, server.secret):
        url = f"http://{server.address}/api/v1/scheduler"
        cases = [
            (b"\x00\xff garbage", 400, "not UTF-8 JSON"),
            (b"garbage", 400, "not JSON: Expecting value at line 1 column 1"),
            (b'27\n{"type":"SUBSCRIBE"}', 400, "RecordIO-framed"),
            (b'["SUBSCRIBE"]', 400, 'one JSON object, got ["SUBSCRIBE"]'),
            (b'{"type": "SUBSCRIBE"}', 400, "subscribe: required (an object)"),
            (subscribe_body(3), 400, "subscribe.framework_info.name: expected a non-empty string, got 3"),
            (b'{"type": "FOO"}', 400, "type: unknown call 'FOO'"),
            (b'{"type": "SHUTDOWN", "framework_id": {"value": "f"}}', 501, "call SHUTDOWN is not supported"),
            (
                b'{"type": "DECLINE", "framework_id": {"value": "f"}, '
                b'"decline": {"offer_ids": [{"value": "o"}]}}',
                403,
                "framework f is not subscribed",
            ),
            (b'{"type": "REVIVE"}', 400, "framework_id: required for REVIVE"),
        ]
        for body, status, message in cases:
            response = post(server, body)
            assert (response.status_code, message in response.text) == (status, True), (body, response.text)
        proto = post(server, b"\x08\x01", {"Content-Type": "application/x-protobuf"})
        assert proto.status_code == 415 and "application/json" in proto.text
        assert httpx.get(url).status_code == 405
        version = httpx.get(f"http://{server.address}/version").json()
        assert version["version"].startswith("1.")
        assert framework.all_done.wait(60), f"{len(framework.finished)}/6 finished: {framework.errors}"
    assert not framework.errors


@pytest.mark.timeout(120)
def test_calls_need_the_stream_id_and_a_malformed_accept_uses_no_offer(server: MesosServer) -> None:
    raw = RawScheduler(server.address, server.secret)
    offer = raw.offer()
    assert (
        raw.post(
            {"type": "REVIVE", "framework_id": {"value": raw.framework_id}}, headers={"Mesos-Stream-Id": ""}
        ).status_code
        == 400
    )
    stale = raw.post(
        {"type": "REVIVE", "framework_id": {"value": raw.framework_id}}, headers={"Mesos-Stream-Id": "nope"}
    )
    assert stale.status_code == 400 and "Mesos-Stream-Id" in stale.text
    bad_id = launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"]))
    bad_id["offer_ids"] = [{"value": 5}]
    response = raw.call("ACCEPT", accept=bad_id)
    assert (
        response.status_code == 400
        and "accept.offer_ids[0].value: expected a non-empty string, got 5" in response.text
    )
    bad_task = launch(offer["id"]["value"], {"name": "t", "task_id": {"value": "t"}})
    response = raw.call("ACCEPT", accept=bad_task)
    assert response.status_code == 400
    assert "accept.operations[0].launch.task_infos[0].agent_id: required" in response.text
    reserve = {"offer_ids": [offer["id"]], "operations": [{"type": "RESERVE", "reserve": {}}]}
    response = raw.call("ACCEPT", accept=reserve)
    assert response.status_code == 501 and "ACCEPT operation RESERVE is not supported" in response.text
    # none of them used the offer: it still launches
    ok = raw.call("ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"])))
    assert ok.status_code == 202
    assert raw.status("t", "TASK_FINISHED")["message"] == "Command exited with status 0"
    raw.close()


def accept(raw: RawScheduler, body: dict[str, Any]) -> None:
    response = raw.call("ACCEPT", accept=body)
    assert response.status_code == 202, response.text


@pytest.mark.timeout(120)
def test_launches_mesos_refuses_get_task_error_or_invalid_offers(server: MesosServer) -> None:
    raw = RawScheduler(server.address, server.secret, info={"capabilities": [{"type": "PARTITION_AWARE"}]})
    offer = raw.offer()
    agent, cpus = offer["agent_id"]["value"], offer["resources"][0]["scalar"]["value"]
    no_filter = {"filters": {"refuse_seconds": 0}}
    wide = task_info("wide", agent, cpus=cpus + 1)
    docker = {"type": "DOCKER", "docker": {"image": "busybox"}}
    executor = {"executor_id": {"value": "e"}, "command": {"value": "x"}, "container": docker}
    custom = task_info("custom", agent, executor=executor)
    elsewhere = task_info("elsewhere", "a9/h/1")
    gpu = task_info("gpu", agent)
    gpu["resources"].append({"name": "gpus", "type": "SCALAR", "scalar": {"value": 1}})
    mark = len(raw.events)
    accept(raw, {**launch(offer["id"]["value"], wide, custom, elsewhere, gpu), **no_filter})
    error = raw.status("wide", "TASK_ERROR")
    assert error["reason"] == "REASON_TASK_INVALID" and "Task uses more resources" in error["message"]
    assert f"cpus {int(cpus) + 1}" in error["message"] and "uuid" not in error
    assert "executor containers (ContainerInfo" in raw.status("custom", "TASK_ERROR")["message"]
    assert "is on agent" in raw.status("elsewhere", "TASK_ERROR")["message"]
    assert "resource 'gpus' is not offered" in raw.status("gpu", "TASK_ERROR")["message"]
    # the offer was used up (as in Mesos); a task group wider than the next offer is refused as a whole
    second = raw.offer(after=mark)
    assert second["id"] != offer["id"]
    tasks = [task_info(f"g{i}", agent) for i in range(int(cpus) + 1)]
    group = {"type": "LAUNCH_GROUP", "launch_group": {"task_group": {"tasks": tasks}}}
    mark = len(raw.events)
    accept(raw, {"offer_ids": [second["id"]], "operations": [group], **no_filter})
    assert raw.status("g0", "TASK_ERROR")["reason"] == "REASON_TASK_GROUP_INVALID"
    # an offer rescinded because its allocation drains: the launch is TASK_DROPPED (partition-aware framework)
    third = raw.offer(after=mark)
    alloc = next(a["text"]["value"] for a in third["attributes"] if a["name"] == "allocation")
    mark = len(raw.events)
    server.master.elastic.pool.drain(alloc, "test: the allocation drains")
    raw.wait_for(lambda e: e["type"] == "RESCIND" and e["rescind"]["offer_id"] == third["id"], after=mark)
    accept(raw, launch(third["id"]["value"], task_info("late", agent)))
    dropped = raw.status("late", "TASK_DROPPED")
    assert dropped["reason"] == "REASON_INVALID_OFFERS"
    assert f"Offer {third['id']['value']} is no longer valid" in dropped["message"]
    raw.close()


@pytest.mark.timeout(120)
def test_an_offer_declined_or_used_up_by_another_framework_is_task_lost_for_others(
    server: MesosServer,
) -> None:
    raw = RawScheduler(server.address, server.secret)
    offer = raw.offer()
    assert (
        raw.call(
            "DECLINE", decline={"offer_ids": [offer["id"]], "filters": {"refuse_seconds": 0}}
        ).status_code
        == 202
    )
    assert (
        raw.call(
            "ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"]))
        ).status_code
        == 202
    )
    lost = raw.status("t", "TASK_LOST")
    assert lost["reason"] == "REASON_INVALID_OFFERS" and "no longer valid" in lost["message"]
    raw.close()


def test_updates_are_resent_until_acknowledged_then_the_next_one_comes(server: MesosServer) -> None:
    raw = RawScheduler(server.address, server.secret, auto_ack=False)
    offer = raw.offer()
    raw.call(
        "ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"], "sleep 30"))
    )
    staging = raw.status("t", "TASK_STAGING")
    time.sleep(1.8)  # retries after 0.5 s, then 1 s
    sent = raw.updates("t")
    assert [u["state"] for u in sent] == ["TASK_STAGING"] * len(sent) and len(sent) >= 2
    assert {u["uuid"] for u in sent} == {staging["uuid"]}, "a resent update keeps its uuid"
    assert raw.ack(staging).status_code == 202
    running = raw.status("t", "TASK_RUNNING")
    raw.ack(running)
    # reconciliation: the latest state, not to be acknowledged; unknown tasks are TASK_LOST
    mark = len(raw.events)
    raw.call("RECONCILE", reconcile={"tasks": [{"task_id": {"value": "t"}}, {"task_id": {"value": "nope"}}]})
    answer = raw.wait_for(
        lambda e: e["type"] == "UPDATE" and e["update"]["status"]["task_id"]["value"] == "nope", after=mark
    )
    assert answer["update"]["status"]["state"] == "TASK_LOST" and "uuid" not in answer["update"]["status"]
    again = [s for s in raw.updates("t") if s.get("reason") == "REASON_RECONCILIATION"]
    assert [s["state"] for s in again] == ["TASK_RUNNING"] and "uuid" not in again[0]
    # KILL: the running task's processes are killed
    started = time.monotonic()
    raw.call("KILL", kill={"task_id": {"value": "t"}})
    killed = raw.status("t", "TASK_KILLED", timeout=10)
    assert time.monotonic() - started < 5 and killed["message"].startswith("killed: KILL from framework")
    raw.ack(killed)
    mark = len(raw.events)
    raw.call("KILL", kill={"task_id": {"value": "ghost"}})
    unknown = raw.wait_for(lambda e: e["type"] == "UPDATE", after=mark)["update"]["status"]
    assert (unknown["state"], unknown["message"]) == ("TASK_LOST", "Attempted to kill an unknown task")
    assert any(e["type"] == "HEARTBEAT" for e in raw.events)
    raw.close()


def test_decline_filters_revive_and_suppress(server: MesosServer) -> None:
    raw = RawScheduler(server.address, server.secret)
    offer = raw.offer()
    mark = len(raw.events)
    declined = time.monotonic()
    raw.call("DECLINE", decline={"offer_ids": [offer["id"]], "filters": {"refuse_seconds": 1.5}})
    again = raw.offer(after=mark)  # (the last event may be a heartbeat that came after the offer)
    assert time.monotonic() - declined >= 1.4, "a declined offer came back before refuse_seconds"
    mark = len(raw.events)
    raw.call("DECLINE", decline={"offer_ids": [again["id"]], "filters": {"refuse_seconds": 600}})
    revived = time.monotonic()
    raw.call("REVIVE")
    offer = raw.offer(after=mark)
    assert time.monotonic() - revived < 1.0, "REVIVE removes the filters"
    # SUPPRESS: no more offers, and no demand: the framework's allocation is released
    raw.call("SUPPRESS")
    raw.call("DECLINE", decline={"offer_ids": [offer["id"]], "filters": {"refuse_seconds": 0}})
    el = server.master.elastic
    deadline = time.monotonic() + 20
    while not all(a.ended for a in el.view().allocations):
        assert time.monotonic() < deadline, "the suppressed framework's allocation was not released"
        time.sleep(0.1)
    mark = len(raw.events)
    raw.call("REVIVE")  # wants cores again: a new allocation, and offers from it
    new = raw.offer(after=mark)
    assert new["attributes"][0]["text"]["value"] != offer["attributes"][0]["text"]["value"]
    raw.close()


def test_teardown_kills_the_tasks_and_forgets_the_framework(server: MesosServer) -> None:
    raw = RawScheduler(server.address, server.secret)
    offer = raw.offer()
    raw.call(
        "ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"], "sleep 60"))
    )
    raw.ack(raw.status("t", "TASK_STAGING"))
    raw.status("t", "TASK_RUNNING")
    assert raw.call("TEARDOWN").status_code == 202
    pool = server.master.elastic.pool
    deadline = time.monotonic() + 10
    while pool.running():
        assert time.monotonic() < deadline, "the torn-down framework's task still runs"
        time.sleep(0.1)
    assert raw.call("REVIVE").status_code == 403
    body = {
        "type": "SUBSCRIBE",
        "framework_id": {"value": raw.framework_id},
        "subscribe": {"framework_info": {"user": "u", "name": "x"}},
    }
    again = post(server, json.dumps(body).encode())
    assert again.status_code == 403 and "was removed" in again.text
    raw.close()


def test_a_framework_that_subscribes_again_with_its_id_gets_its_unacknowledged_updates(
    server: MesosServer,
) -> None:
    first = RawScheduler(server.address, server.secret, auto_ack=False)
    offer = first.offer()
    first.call(
        "ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"], "sleep 60"))
    )
    staging = first.status("t", "TASK_STAGING")
    second = RawScheduler(server.address, server.secret, info={"id": {"value": first.framework_id}})
    assert second.framework_id == first.framework_id
    first.wait_for(lambda e: e["type"] == "ERROR" and "failed over" in e["error"]["message"])
    resent = second.status("t", "TASK_STAGING")
    assert resent["uuid"] == staging["uuid"], "the same update, sent again on the new stream"
    assert second.status("t", "TASK_RUNNING")["state"] == "TASK_RUNNING"  # acknowledged: the next one comes
    assert first.call("REVIVE").status_code == 400, "the old stream id is no longer the framework's"
    first.close()
    second.close()


def test_bad_server_settings_are_refused() -> None:
    with LocalBackend(cores=1) as backend, Elastic(backend, "perstage", store=False) as el:
        with pytest.raises(ConfigError, match="no credentials"):
            MesosServer(el, credentials={})
        with pytest.raises(ConfigError, match="credentials given with authenticate=False"):
            MesosServer(el, authenticate=False, credentials={"a": "b"})
        with pytest.raises(ConfigError, match=r"heartbeat_interval=...\) must be finite and > 0, got 0"):
            MesosServer(el, heartbeat_interval=0)
        with MesosServer(el) as taken, pytest.raises(ConfigError, match="cannot listen on"):
            MesosServer(el, port=taken.port)
