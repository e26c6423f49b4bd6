"""The endpoint's connections: pymesos' persistent call connection survives long pauses, idle sockets
cannot starve new frameworks, and slow request heads and bodies are cut off."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.errors import ConfigError
from elastic.front.mesos import MesosServer
from elastic.front.mesos.connections import ConnectionLimits
from tests.front.mesos.framework import ShellFramework, running
from tests.front.mesos.raw import RawScheduler, launch, task_info

pytestmark = pytest.mark.slow


@pytest.fixture
def el() -> Iterator[Elastic]:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
    ):
        yield el


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closed ``sock`` (EOF or reset) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.timeout(120)
def test_thirty_second_tasks_and_ten_second_pauses_give_each_update_once_without_resubscribing(
    el: Elastic,
) -> None:
    # 30-s tasks: between the acknowledgement of TASK_RUNNING and that of TASK_FINISHED pymesos' persistent
    # call connection is silent for 30 s, six times uvicorn's default keep-alive (5 s). Meanwhile a second
    # persistent connection (as pymesos sends its calls) makes calls 10.5 s apart: the waits overlap.
    with MesosServer(el, heartbeat_interval=2.0) as server:
        framework = ShellFramework(2, command="sleep 30")
        with running(framework, server.address, labels={"elastic.tasks": "2"}):  # both at once
            deadline = time.monotonic() + 30
            while not all("TASK_RUNNING" in framework.states(f"task-{i}") for i in range(2)):
                assert time.monotonic() < deadline, framework.updates
                time.sleep(0.1)
            raw = RawScheduler(server.address, None)  # no core free: it is offered none
            host, port = server.address.split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            headers = {"Content-Type": "application/json", "Mesos-Stream-Id": raw.stream_id}
            body = json.dumps({"type": "SUPPRESS", "framework_id": {"value": raw.framework_id}})
            for pause in (0.0, 10.5, 10.5):  # the long pauses between calls
                time.sleep(pause)
                conn.request("POST", "/api/v1/scheduler", body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                assert response.status == 202
            conn.close()
            raw.close()
            assert framework.all_done.wait(60), framework.errors
            time.sleep(0.5)  # any duplicate update would come now
        assert not framework.errors
        assert (framework.registered_count, framework.reregistered_count) == (1, 0)
        for task_id in ("task-0", "task-1"):
            states = framework.states(task_id)
            assert states.count("TASK_RUNNING") == 1 and states.count("TASK_FINISHED") == 1, states
            assert len(states) == len(set(states)), f"an update came twice: {states}"


@pytest.mark.timeout(120)
def test_hundreds_of_idle_connections_do_not_starve_a_new_framework(el: Elastic) -> None:
    with MesosServer(
        el, heartbeat_interval=2.0, max_connections=64, max_per_client=48, header_timeout=3.0
    ) as server:
        host, port = server.address.split(":")
        # the 1,100 idle connections
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(1_100)]
        try:
            raw = RawScheduler(server.address, None)  # subscribes within 10 s or fails
            offer = raw.offer()
            accepted = raw.call(
                "ACCEPT", accept=launch(offer["id"]["value"], task_info("t", offer["agent_id"]["value"]))
            )
            assert accepted.status_code == 202
            assert raw.status("t", "TASK_FINISHED")["message"] == "Command exited with status 0"
            assert server.guard.open <= 64
            assert server.guard.evicted >= 1_100 - 64
            # the ones left open are closed by the header timeout
            assert all(closed_by_server(s, 10.0) for s in idle)
            assert server.guard.timed_out >= 1
            assert raw.call("REVIVE").status_code == 202, "the framework's own connections were kept"
            raw.close()
        finally:
            for s in idle:
                s.close()


@pytest.mark.timeout(60)
def test_slow_request_heads_and_bodies_are_cut_off(el: Elastic) -> None:
    with MesosServer(el, header_timeout=1.0, body_timeout=1.0) as server:
        host, port = server.address.split(":")
        slow_head = socket.create_connection((host, int(port)), timeout=5)
        slow_head.sendall(b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\n")
        assert closed_by_server(slow_head, 10.0)
        slow_body = socket.create_connection((host, int(port)), timeout=5)
        slow_body.sendall(
            b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"type"'
        )
        slow_body.settimeout(10.0)
        answer = b""
        while chunk := slow_body.recv(4096):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 1 s" in answer
        slow_head.close()
        slow_body.close()


@pytest.mark.timeout(60)
def test_a_subscription_head_arrives_with_its_subscribed_event(el: Elastic) -> None:
    # pymesos takes itself as subscribed once it has the head's Mesos-Stream-Id and asserts that it knows its
    # framework id before any call: a head read without SUBSCRIBED made pymesos.subprocess fail its first
    # REVIVE (about half the subscriptions of a client reading at once, before the two were sent together)
    body = json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": "h"}}})
    with MesosServer(el) as server:
        host, port = server.address.split(":")
        for _ in range(20):
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(
                    b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body.encode())
                )
                first = sock.recv(65536)  # what a client reading at once gets first
                assert first.startswith(b"HTTP/1.1 200") and b"mesos-stream-id" in first.lower()
                assert b'"SUBSCRIBED"' in first, first


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"keep_alive": 0}, "keep_alive"),
        ({"header_timeout": float("inf")}, "header_timeout"),
        ({"max_connections": -1}, "max_connections"),
        ({"max_per_client": 0}, "max_per_client"),
    ],
)
def test_bad_connection_limits_are_refused(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ConnectionLimits(**fields)  # type: ignore[arg-type]
    assert ConnectionLimits().max_connections >= 16


@pytest.mark.timeout(60)
def test_a_client_gone_before_its_body_arrived_is_one_warning_not_a_traceback(
    el: Elastic, caplog: pytest.LogCaptureFixture
) -> None:
    with MesosServer(el, body_timeout=10.0) as server:
        host, port = server.address.split(":")
        for path in (b"/api/v1/scheduler", b"/api/v1/executor"):
            gone = socket.create_connection((host, int(port)), timeout=5)
            gone.sendall(
                b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"type"'
            )
            gone.close()
        deadline = time.monotonic() + 5
        while caplog.text.count("closed its connection before its request body") < 2:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
        assert "Exception in ASGI application" not in caplog.text
        assert "Traceback" not in caplog.text
        raw = RawScheduler(server.address, None)  # and the server still serves: subscribes within 10 s
        assert raw.framework_id
        raw.close()


@pytest.mark.timeout(60)
def test_garbage_requests_are_logged_a_few_times_a_window_not_once_each(el: Elastic) -> None:
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    keep = Keep(level=logging.WARNING)
    uvicorn_log = logging.getLogger("uvicorn.error")
    server = MesosServer(el)  # the handler after the server started (uvicorn sets up its loggers then)
    uvicorn_log.addHandler(keep)
    try:
        with server:
            host, port = server.address.split(":")
            for _ in range(60):
                s = socket.create_connection((host, int(port)), timeout=5)
                s.sendall(b"\x16\x03\x01 not HTTP at all\r\n\r\n")
                closed_by_server(s, 5.0)
                s.close()
            raw = RawScheduler(server.address, None)  # the server still serves
            assert raw.framework_id
            raw.close()
    finally:
        uvicorn_log.removeHandler(keep)
    invalid = [r.getMessage() for r in seen if "Invalid HTTP request" in r.getMessage()]
    shown = len([m for m in invalid if "more like it" not in m])
    assert 1 <= shown <= 5, invalid
    # the rest is counted when the server stops (all in one window here)
    assert invalid[shown:] == [f"Invalid HTTP request received. ({60 - shown} more like it not shown)"], (
        invalid
    )
