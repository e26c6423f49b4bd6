"""1,100 idle sockets against a server at a 1,024-descriptor limit: a new framework is still served.

The test process's own descriptor limit is far above 1,100, so an in-process server never runs out of
descriptors; here the server runs alone in a child process whose ``RLIMIT_NOFILE`` is 1,024, as on a
default Linux login. Without the connection caps its accept loop stops at EMFILE and the framework's
SUBSCRIBE waits in the listen backlog.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from elastic.front.mesos.events import read_records

pytestmark = pytest.mark.slow

_SERVER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer
with (
    LocalBackend(cores=2) as backend,
    Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=5.0) as el,
    MesosServer(el) as server,
):
    print(server.address, flush=True)
    sys.stdin.read()  # until the test closes it
"""


@pytest.mark.timeout(60)
def test_idle_sockets_do_not_exhaust_a_low_descriptor_limit() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    idle: list[socket.socket] = []
    try:
        assert child.stdout is not None
        address = child.stdout.readline().strip()
        assert address, "the server did not start"
        host, port = address.split(":")
        # the 1,100 idle connections, more than the server's 1,024 descriptors; no byte sent
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(1_100)]
        url = f"http://{address}/api/v1/scheduler"
        framework = {"user": "tests", "name": "late", "failover_timeout": 60.0}
        body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework}}
        with (
            # served, or ReadTimeout: the old code never accepts it while the idle sockets hold every
            # descriptor. Not a speed check (the 1-s goal is benchmarks/bench_mesos_idle.py's): a loaded CI
            # machine must not fail it
            httpx.Client(timeout=10.0) as client,
            client.stream("POST", url, json=body, headers={"Accept": "application/json"}) as stream,
        ):
            assert stream.status_code == 200
            events: list[dict[str, object]] = []
            rest = b""
            chunks = stream.iter_raw()  # kept: closing the iterator would close the stream
            while not events:
                events, rest = read_records(rest + next(chunks))
            assert events and events[0]["type"] == "SUBSCRIBED", events
            subscribed = events[0]["subscribed"]
            assert isinstance(subscribed, dict)
            call = {"type": "REVIVE", "framework_id": subscribed["framework_id"]}
            headers = {
                "Mesos-Stream-Id": stream.headers["Mesos-Stream-Id"],
                "Content-Type": "application/json",
            }
            with httpx.Client(timeout=10.0) as caller:
                answer = caller.post(url, content=json.dumps(call), headers=headers)
                assert answer.status_code == 202, answer.text
        assert child.poll() is None, "the server died"
    finally:
        for s in idle:
            s.close()
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
