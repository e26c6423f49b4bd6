"""Hostile call bodies: bounded while streaming (413), and every malformed one a 400 with a message.

A body over the limit is refused once the limit is passed, chunked or with a ``Content-Length``, without
reading the rest; deep nesting, integers of thousands of digits or beyond a float's range, odd unicode in
labels and wrong types are 400 naming the problem, never 500.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
from elastic.front.mesos.calls import Accept, Subscribe, parse_call
from elastic.front.mesos.fields import MAX_BODY, CallError
from elastic.front.mesos.frameworks import check_labels
from elastic.front.mesos.launch import task_spec
from tests.front.mesos.raw import RawScheduler, launch, task_info

HUGE = 10**400


@pytest.fixture
def server() -> Iterator[MesosServer]:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=0.5) as server,
    ):
        yield server


def subscribe(**info: Any) -> dict[str, Any]:
    return {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": "x", **info}}}


def labelled(key: str, value: str) -> dict[str, Any]:
    return subscribe(labels={"labels": [{"key": key, "value": value}]})


def nested(depth: int) -> bytes:
    return b'{"type": "SUBSCRIBE", "x": ' + b"[" * depth + b"]" * depth + b"}"


def serve(body: bytes) -> None:
    """What the server does with a body before any state changes: parse, read tasks and labels."""
    _, call = parse_call(body)
    if isinstance(call, Subscribe):
        check_labels(call.framework)
    if isinstance(call, Accept):
        for op in call.operations:
            for i, task in enumerate(op.tasks):
                task_spec(task, f"{op.path}[{i}]", group=op.group)


HOSTILE: list[tuple[bytes, str]] = [
    (nested(100_000), "deeper than 32 levels"),
    (nested(500), "deeper than 32 levels"),
    (b'{"type": "SUBSCRIBE", "n": ' + b"9" * 5000 + b"}", "too many digits"),
    (json.dumps(subscribe(failover_timeout=HUGE)).encode(), "failover_timeout: expected finite seconds"),
    (json.dumps(labelled("elastic.tasks", "\u00b2")).encode(), "expected an integer from 0 to 1000000"),
    (json.dumps(labelled("elastic.cores", "\u0661")).encode(), "expected an integer from 1 to 4096"),
    (json.dumps(labelled("elastic.tasks", "9" * 5000)).encode(), "expected an integer from 0"),
    (json.dumps(subscribe(name=["x"] * 3)).encode(), "name: expected a non-empty string"),
    (json.dumps(subscribe(name=HUGE)).encode(), "name: expected a non-empty string"),
    (
        json.dumps(subscribe(labels={"labels": [{"key": "k", "value": 5}]})).encode(),
        "labels[0].value: expected a non-empty string",
    ),
]


@pytest.mark.parametrize(("body", "message"), HOSTILE, ids=[m for _, m in HOSTILE])
def test_hostile_bodies_are_call_errors_naming_the_problem(body: bytes, message: str) -> None:
    with pytest.raises(CallError, match=re.escape(message)) as caught:
        serve(body)
    assert caught.value.status == 400


def test_hostile_numbers_in_a_launch_are_call_errors() -> None:
    for cpus in (HUGE, -HUGE, float("nan")):
        task = task_info("t", "a", cpus=1)
        task["resources"][0]["scalar"]["value"] = cpus
        body = {"type": "ACCEPT", "framework_id": {"value": "f"}, "accept": launch("o", task)}
        with pytest.raises(CallError, match=r"scalar\.value: expected a finite number >= 0"):
            serve(json.dumps(body).encode())


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([HUGE, -HUGE, 2**64, 10**300])
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["\u00b2", "\u0661", "\ud800", "1\u00b2", "\x00", "ⅷ"])
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
keys = st.sampled_from(
    ["user", "name", "id", "role", "roles", "labels", "failover_timeout", "capabilities", "principal"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(keys, json_values), st.sampled_from(["elastic.tasks", "elastic.cores", "x"]), json_values
)
def test_any_framework_info_is_served_or_a_400(info: dict[str, Any], key: str, value: Any) -> None:
    info = {"user": "u", "name": "n", **info}
    if isinstance(value, str):
        info["labels"] = {"labels": [{"key": key, "value": value}]}
    try:
        body = json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}).encode()
    except ValueError:
        return
    try:
        serve(body)
    except CallError as exc:
        assert exc.status in (400, 501) and str(exc)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "task_id", "agent_id", "resources", "command"]), json_values))
def test_any_task_info_is_served_or_a_400(fields: dict[str, Any]) -> None:
    task = {**task_info("t", "a"), **fields}
    body = {"type": "ACCEPT", "framework_id": {"value": "f"}, "accept": launch("o", task)}
    try:
        serve(json.dumps(body).encode())
    except CallError as exc:
        assert exc.status == 400 and str(exc)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_hostile_bodies_over_http_are_400_and_the_server_goes_on(server: MesosServer) -> None:
    url = f"http://{server.address}/api/v1/scheduler"
    raw = RawScheduler(server.address, None)
    for body, message in HOSTILE:
        response = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=30)
        assert response.status_code == 400 and message in response.text, (message, response.text[:200])
        assert "Traceback" not in response.text
    offer = raw.offer()
    ok = raw.call("ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"])))
    assert ok.status_code == 202
    assert raw.status("t", "TASK_FINISHED")["state"] == "TASK_FINISHED"
    raw.close()


def _status_kb(field: str) -> int:
    """Return a ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``)."""
    found = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    assert found is not None, field
    return int(found[1])


def reset_peak_rss() -> int | None:
    """Reset this process's peak RSS to its RSS (Linux ``clear_refs``); return that RSS in kB, or None.

    None where it cannot be reset (not Linux, or ``/proc/self/clear_refs`` not writable).
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _status_kb("VmHWM")


def send_chunked(address: str, total: int) -> tuple[bytes, int]:
    """Send a chunked body of ``total`` bytes while reading the answer; return (answer, bytes sent)."""
    host, port = address.split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(
        b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    answer = bytearray()

    def read() -> None:
        try:
            while chunk := sock.recv(65536):
                answer.extend(chunk)
        except OSError:
            pass

    reader = threading.Thread(target=read)
    reader.start()
    piece = b"%x\r\n%s\r\n" % (2**20, b" " * 2**20)
    sent = 0
    try:
        while sent < total and not answer:
            sock.sendall(piece)
            sent += 2**20
        if sent >= total:
            sock.sendall(b"0\r\n\r\n")
    except OSError:  # the server closed the connection after answering
        pass
    reader.join(30)
    sock.close()
    return bytes(answer), sent


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_100_mb_body_is_refused_past_the_limit_chunked_or_not(server: MesosServer) -> None:
    base = reset_peak_rss()  # the server runs in this process: its peak is this process's
    answer, sent = send_chunked(server.address, 100 * 2**20)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
    assert b"larger than" in answer
    assert sent < 40 * 2**20, f"{sent} bytes were taken before the 413"
    if base is not None:  # about 10 MB; the code that read bodies whole grew by about 200 MB here
        grew = _status_kb("VmHWM") - base
        assert grew < 48 * 1024, f"peak RSS grew by {grew} kB while the body streamed in"
    url = f"http://{server.address}/api/v1/scheduler"
    declared = httpx.post(
        url,
        content=b"x" * (MAX_BODY + 1),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert declared.status_code == 413 and "larger than" in declared.text
    raw = RawScheduler(server.address, None)  # the server goes on
    raw.close()
