"""Calls read field by field, TaskInfo checks, launch decisions, update retries and the state table."""

from __future__ import annotations

import concurrent.futures
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.front.mesos.calls import Accept, Acknowledge, Decline, Launch, Subscribe, parse_call
from elastic.front.mesos.fields import BadCallError, CallError, UnsupportedCallError
from elastic.front.mesos.frameworks import Framework, demand, stage_of
from elastic.front.mesos.launch import plan_launches, task_spec
from elastic.front.mesos.offers import Offer
from elastic.front.mesos.states import TaskStatus, outcome_status
from elastic.front.mesos.updates import UpdateQueue
from elastic.pool.pool import PoolClosedError
from elastic.pool.state import AgentView
from elastic.pool.tasks import ShellTaskError, TaskKilledError, TaskLostError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
call_types = st.sampled_from(
    ["SUBSCRIBE", "ACCEPT", "DECLINE", "KILL", "ACKNOWLEDGE", "RECONCILE", "SHUTDOWN"]
)


@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_body_is_a_call_or_a_call_error(body: bytes) -> None:
    try:
        parse_call(body)
    except CallError as exc:
        assert exc.status in (400, 501) and str(exc)


@given(
    call_types,
    st.dictionaries(st.sampled_from(["subscribe", "accept", "decline", "kill", "acknowledge"]), json_values),
)
def test_calls_with_fields_of_any_shape_are_parsed_or_refused_naming_a_field(
    kind: str, fields: dict[str, Any]
) -> None:
    body = json.dumps({"type": kind, "framework_id": {"value": "f"}, **fields}).encode()
    try:
        parse_call(body)
    except BadCallError as exc:
        assert exc.field, "a 400 names the field"
    except UnsupportedCallError as exc:
        assert exc.call == f"call {kind}"


def test_calls_as_pymesos_sends_them() -> None:
    sub = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": "u", "name": "n", "failover_timeout": 100, "capabilities": [{"type": "GPU_RESOURCES"}],
        "labels": {"labels": [{"key": "elastic.stage", "value": "blast"}]},
    }}}  # fmt: skip
    fid, call = parse_call(json.dumps(sub).encode())
    assert fid is None and isinstance(call, Subscribe)
    assert call.framework.failover_timeout == 100.0 and stage_of(call.framework) == "blast"
    dec = {"type": "DECLINE", "framework_id": {"value": "f"}, "decline": {"offer_ids": [{"value": "o"}]}}
    assert parse_call(json.dumps(dec).encode()) == ("f", Decline(("o",), 5.0))
    ids = {"agent_id": {"value": "a"}, "task_id": {"value": "t"}}
    ack = {"type": "ACKNOWLEDGE", "framework_id": {"value": "f"}, "acknowledge": {**ids, "uuid": "AAEC"}}
    assert parse_call(json.dumps(ack).encode())[1] == Acknowledge("a", "t", b"\x00\x01\x02")
    acc = {"type": "ACCEPT", "framework_id": {"value": "f"}, "accept": {
        "offer_ids": [{"value": "o"}], "operations": [], "filters": {"refuse_seconds": 1}}}  # fmt: skip
    assert parse_call(json.dumps(acc).encode())[1] == Accept(("o",), (), 1.0)
    bad = dict(acc, accept={"offer_ids": [{"value": "o"}], "filters": {"refuse_seconds": -1}})
    with pytest.raises(
        BadCallError, match=r"accept.filters.refuse_seconds: expected finite seconds >= 0, got -1"
    ):
        parse_call(json.dumps(bad).encode())


def info(**extra: Any) -> dict[str, Any]:
    return {"name": "t", "task_id": {"value": "t"}, "agent_id": {"value": "a1/h/1"},
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1.5}},
                          {"name": "mem", "type": "SCALAR", "scalar": {"value": 100}}], **extra}  # fmt: skip


def test_task_info_commands() -> None:
    shell = task_spec(
        info(command={"value": "echo $X", "environment": {"variables": [{"name": "X", "value": "a b"}]}}), "t"
    )
    assert (shell.cores, shell.mem, shell.problem) == (2, 100.0, None)
    assert shell.command == "export MESOS_TASK_ID=t; export X='a b'\necho $X"
    argv = task_spec(
        info(command={"value": "/bin/echo", "shell": False, "arguments": ["echo", "a b", "$c"]}), "t"
    )
    assert argv.command.endswith("\nexec /bin/echo 'a b' '$c'")
    assert "neither a command" in (task_spec(info(), "t").problem or "")
    disk = {"name": "disk", "type": "SCALAR", "scalar": {"value": 64}}
    with_disk = task_spec(info(command={"value": "x"}, resources=[*info()["resources"], disk]), "t")
    assert (with_disk.disk, with_disk.problem) == (64.0, None)
    # a custom executor: its command runs, with its resources added to the task's
    ex = {"executor_id": {"value": "e"}, "command": {"value": "run-executor"},
          "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.6}}]}  # fmt: skip
    custom = task_spec(info(executor=ex, data="aGk="), "t")
    assert (custom.cores, custom.problem, custom.command.endswith("\nrun-executor")) == (3, None, True)
    assert custom.executor == ex and custom.raw["data"] == "aGk="
    assert "either a command or an executor" in (
        task_spec(info(executor=ex, command={"value": "x"}), "t").problem or ""
    )
    assert "only CUSTOM" in (task_spec(info(executor={**ex, "type": "DEFAULT"}), "t").problem or "")
    assert "containers" in (
        task_spec(info(command={"value": "x"}, container={"type": "DOCKER"}), "t").problem or ""
    )
    assert "URIs" in (
        task_spec(info(command={"value": "x", "uris": [{"value": "http://x"}]}), "t").problem or ""
    )
    with pytest.raises(BadCallError, match=r"t.command.shell: expected true or false"):
        task_spec(info(command={"value": "x", "shell": "yes"}), "t")
    with pytest.raises(
        BadCallError, match=r"t.command.environment.variables\[0\].name: not a shell variable"
    ):
        task_spec(
            info(command={"value": "x", "environment": {"variables": [{"name": "A;B", "value": ""}]}}), "t"
        )


def framework(**labels: str) -> Framework:
    from elastic.front.mesos.calls import FrameworkInfo

    return Framework("f", FrameworkInfo("u", "n", labels=labels), "n")


def test_launch_decisions() -> None:
    offer = Offer("o1", "f", AgentView("a1/h/1", "a1", "h", 4, 4, False, 60.0), 3, "s", 0.0)
    fw = framework()
    specs = [task_spec(info(command={"value": "x"}, task_id={"value": f"t{i}"}), "t") for i in range(3)]
    ids = iter(f"p{i}" for i in range(10))
    plan = plan_launches(
        fw,
        [(Launch(()), specs)],
        [offer],
        [],
        mem_per_core=100.0,
        now=1.0,
        new_id=lambda: next(ids),
        retry_min=10.0,
    )
    # 2 cores each (ceil 1.5): the first fits the 3 cores, the second does not
    assert [t.task_id for t in plan.tasks] == ["t0"] and plan.unused == 1
    assert [(s.task_id, s.state) for s in plan.refused] == [("t1", "TASK_ERROR"), ("t2", "TASK_ERROR")]
    assert plan.tasks[0].pool_task.agent == "a1/h/1" and plan.tasks[0].pool_task.cores == 2
    gone = plan_launches(
        fw,
        [(Launch(()), specs[:1])],
        [],
        ["Offer o9 is no longer valid"],
        mem_per_core=1,
        now=1.0,
        new_id=lambda: "x",
        retry_min=1.0,
    )
    assert [(s.state, s.reason) for s in gone.refused] == [("TASK_LOST", "REASON_INVALID_OFFERS")]


def test_demand_per_stage() -> None:
    a, b = framework(**{"elastic.tasks": "5", "elastic.cores": "2"}), framework()
    a.launched = 3
    assert demand([a, b]) == {"n": (2 + 1, 2)}
    b.suppressed = a.suppressed = True
    assert demand([a, b]) == {"n": (0, 2)}


def test_updates_wait_for_their_acknowledgement_and_back_off() -> None:
    q = UpdateQueue(retry_min=1.0, retry_max=3.0)
    first = q.add(TaskStatus("t", "TASK_RUNNING", "SOURCE_EXECUTOR", ""))
    second = q.add(TaskStatus("t", "TASK_FINISHED", "SOURCE_EXECUTOR", ""))
    assert first.uuid and first.uuid != second.uuid
    assert q.due(0.0) == first and q.due(0.5) is None and q.due(1.0) == first
    assert q.due(2.5) is None and q.due(3.0) == first and q.due(6.0) == first, "1, 2, then 3 s (the most)"
    assert not q.ack(second.uuid or b"") and q.ack(first.uuid or b"")
    assert q.due(6.1) == second and len(q) == 1


def done(value: Any = None, error: BaseException | None = None) -> concurrent.futures.Future[Any]:
    f: concurrent.futures.Future[Any] = concurrent.futures.Future()
    f.set_exception(error) if error is not None else f.set_result(value)
    return f


LOST = TaskLostError("p", "s", (("a1", "allocation a1 ended CANCELLED"),), 0)
SILENT = TaskLostError("p", "s", (("a1", "agent a1/h/1 sent no heartbeat for 11 s"),), 0)
FAILED = "REASON_COMMAND_EXECUTOR_FAILED"


@pytest.mark.parametrize(
    ("future", "started", "state", "reason", "message"),
    [
        (done(), True, "TASK_FINISHED", None, "Command exited with status 0"),
        (
            done(error=ShellTaskError("p", 3, "", "")),
            True,
            "TASK_FAILED",
            FAILED,
            "Command exited with code 3",
        ),
        (
            done(error=ShellTaskError("p", -9, "", "")),
            True,
            "TASK_FAILED",
            FAILED,
            "Command was killed by SIGKILL",
        ),
        (done(error=LOST), True, "TASK_LOST", "REASON_AGENT_REMOVED", "allocation a1 ended CANCELLED"),
        (done(error=SILENT), True, "TASK_LOST", "REASON_AGENT_DISCONNECTED", SILENT.losses[0][1]),
        (done(error=TaskKilledError("p", "asked")), True, "TASK_KILLED", None, "killed: asked"),
        (
            done(error=TaskKilledError("p", "asked")),
            False,
            "TASK_KILLED",
            "REASON_TASK_KILLED_DURING_LAUNCH",
            "killed: asked",
        ),
        (
            done(error=PoolClosedError("x")),
            False,
            "TASK_KILLED",
            "REASON_FRAMEWORK_REMOVED",
            "the front door shut down",
        ),
    ],
)
def test_outcomes_as_mesos_states(
    future: concurrent.futures.Future[Any], started: bool, state: str, reason: str | None, message: str
) -> None:
    status = outcome_status("t", "a1/h/1", future, 5.0, started=started)
    assert (status.state, status.reason, status.message, status.terminal) == (state, reason, message, True)
    assert status.to_json()["agent_id"] == {"value": "a1/h/1"}
