"""Executor calls and the scheduler's MESSAGE and REQUEST calls from hostile JSON; demand from REQUEST."""

from __future__ import annotations

import json
from typing import Any

import pytest

from elastic.front.mesos.calls import FrameworkInfo, Message, Request, parse_call
from elastic.front.mesos.executors import executor_command, parse_executor_call
from elastic.front.mesos.fields import BadCallError, UnsupportedCallError
from elastic.front.mesos.frameworks import Framework, demand


def body(**raw: Any) -> bytes:
    return json.dumps(raw).encode()


IDS = {"framework_id": {"value": "f"}, "executor_id": {"value": "e.1"}}


def test_executor_updates_and_messages_are_read_and_bad_ones_named() -> None:
    status = {"task_id": {"value": "t"}, "state": "TASK_RUNNING", "uuid": "AAEC", "data": "aGk="}
    call = parse_executor_call(body(type="UPDATE", update={"status": status}, **IDS))
    assert call.status is not None and (call.status.state, call.status.uuid, call.status.data) == (
        "TASK_RUNNING", b"\0\1\2", b"hi",
    )  # fmt: skip
    labelled = {
        **status,
        "message": "",
        "labels": {"labels": [{"key": "wallTime", "value": "1.5"}, {"key": "k"}]},
    }
    call = parse_executor_call(body(type="UPDATE", update={"status": labelled}, **IDS))
    assert call.status is not None and call.status.labels == (("wallTime", "1.5"), ("k", ""))
    assert call.status.to_json()["labels"]["labels"][0] == {"key": "wallTime", "value": "1.5"}
    assert parse_executor_call(body(type="MESSAGE", message={"data": "aGk="}, **IDS)).data == b"hi"
    assert parse_executor_call(body(type="SUBSCRIBE", subscribe={}, **IDS)).executor_id == "e.1"
    for bad, field in (
        (body(type="UPDATE", update={"status": {**status, "state": "TASK_STAGING"}}, **IDS), "state"),
        (body(type="UPDATE", update={"status": {**status, "uuid": "not base64!"}}, **IDS), "uuid"),
        (body(type="MESSAGE", message={"data": 7}, **IDS), "message.data"),
        (body(type="UPDATE", update={"status": status}), "framework_id"),
        (body(type="LAUNCH", **IDS), "type"),
        (
            body(type="UPDATE", update={"status": {**status, "labels": {"labels": [{"value": "v"}]}}}, **IDS),
            "key",
        ),
        (body(type="UPDATE", update={"status": {**status, "message": 5}}, **IDS), "message"),
    ):
        with pytest.raises(BadCallError, match=field):
            parse_executor_call(bad)
    with pytest.raises(UnsupportedCallError):
        parse_executor_call(body(type="HEARTBEAT", **IDS))


def test_an_executor_gets_the_environment_a_mesos_agent_gives() -> None:
    script = executor_command("e.1", "f'x", "host:5050", "python executor.py")
    assert "export MESOS_AGENT_ENDPOINT=host:5050" in script and "MESOS_FRAMEWORK_ID='f'\"'\"'x'" in script
    assert "export MESOS_EXECUTOR_ID=e.1" in script and "MESOS_SANDBOX" in script
    assert "\npython executor.py\n)\n" in script and script.endswith('rm -rf "$MESOS_SANDBOX"; exit $status')


def cpus(value: Any) -> dict[str, Any]:
    return {"resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": value}}]}


def test_request_and_message_calls() -> None:
    two = [cpus(1.5), {"agent_id": {"value": "a"}, **cpus(2)}]
    assert parse_call(body(type="REQUEST", request={"requests": two}, framework_id={"value": "f"}))[1] == (
        Request(4)
    )
    for value in (-1, 10**400, "2", 1e7):
        with pytest.raises(BadCallError, match=r"request\.requests"):
            parse_call(body(type="REQUEST", request={"requests": [cpus(value)]}, framework_id={"value": "f"}))
    msg = {"agent_id": {"value": "a"}, "executor_id": {"value": "e"}, "data": "aGk="}
    assert parse_call(body(type="MESSAGE", message=msg, framework_id={"value": "f"}))[1] == Message(
        "a", "e", b"hi"
    )


def test_a_request_sizes_the_demand_until_tasks_are_launched() -> None:
    fw = Framework("f", FrameworkInfo("u", "gang"), "gang")
    assert demand([fw]) == {"gang": (1, 1)}
    fw.requested, fw.launched_at_request = 3, fw.launched
    assert demand([fw]) == {"gang": (3, 1)}
    fw.launched += 2
    assert demand([fw]) == {"gang": (1, 1)}
    fw.suppressed = True
    assert demand([fw]) == {"gang": (0, 1)}


def test_lost_tasks_count_in_the_demand_until_launched_again_and_a_gang_step_adds_a_stage() -> None:
    fw = Framework("f", FrameworkInfo("u", "fw"), "fw")
    fw.lost = 2  # two lost: the framework's demand holds them until it launches again
    assert demand([fw]) == {"fw": (3, 1)}
    fw.lost, fw.launched = 1, fw.launched + 1  # one relaunched (queued in the pool): the width stays
    assert demand([fw]) == {"fw": (2, 1)}
    fw.growing = "fw+gang1"  # a gang step: one more core asked under a stage of its own
    assert demand([fw]) == {"fw": (2, 1), "fw+gang1": (1, 1)}
    fw.suppressed = True
    assert demand([fw]) == {"fw": (0, 1)}
