"""A scheduler client speaking the HTTP API directly (httpx), for what pymesos would not send.

:class:`RawScheduler` subscribes, reads the RecordIO event stream in a thread, and sends calls with any
body and headers, returning the HTTP response: the bad-input tests use it for wrong secrets, garbage bodies,
stale offers and unacknowledged updates.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from elastic.front.mesos.events import read_records


def basic(secret: str | None, principal: str = "raw") -> dict[str, str]:
    """Return the HTTP Basic header for ``principal:secret`` (none when ``secret`` is None: no auth)."""
    if secret is None:
        return {}
    token = base64.b64encode(f"{principal}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


class RawScheduler:
    """One framework's subscription, its events, and its calls."""

    def __init__(
        self,
        address: str,
        secret: str | None,
        *,
        principal: str = "raw",
        name: str = "raw",
        info: dict[str, Any] | None = None,
        auto_ack: bool = True,
    ) -> None:
        self.auto_ack = auto_ack
        self.url = f"http://{address}/api/v1/scheduler"
        self.secret = secret
        self.principal = principal
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.client = httpx.Client(timeout=10.0)
        framework = {"user": "tests", "name": name, "failover_timeout": 60.0, **(info or {})}
        self.subscribe_body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework}}
        self.framework_id = ""
        self.stream_id = ""
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "no SUBSCRIBED event"

    def _read(self) -> None:
        headers = {**basic(self.secret, self.principal), "Accept": "application/json"}
        with (
            httpx.Client(timeout=None) as client,
            client.stream("POST", self.url, json=self.subscribe_body, headers=headers) as response,
        ):
            assert response.status_code == 200, response.read()
            self.stream_id = response.headers["Mesos-Stream-Id"]
            rest = b""
            for chunk in response.iter_raw():
                events, rest = read_records(rest + chunk)
                with self.lock:
                    for event in events:
                        if event["type"] == "SUBSCRIBED":
                            self.framework_id = event["subscribed"]["framework_id"]["value"]
                            self._ready.set()
                        self.events.append(event)
                for event in events:  # as pymesos does (implicit acknowledgements)
                    if self.auto_ack and event["type"] == "UPDATE" and "uuid" in event["update"]["status"]:
                        self.ack(event["update"]["status"], client=client)
                if self._stop.is_set():
                    return

    def close(self) -> None:
        """Stop reading (the stream closes: the framework is disconnected)."""
        self._stop.set()
        self.client.close()

    def post(
        self,
        body: Any,
        *,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
        client: httpx.Client | None = None,
    ) -> httpx.Response:
        """Send one call (``body`` as JSON, or ``raw`` bytes) with the secret and the stream id."""
        base = {
            **basic(self.secret, self.principal),
            "Mesos-Stream-Id": self.stream_id,
            "Content-Type": "application/json",
        }
        content = raw if raw is not None else json.dumps(body).encode()
        sender = client or self.client
        return sender.post(self.url, content=content, headers={**base, **(headers or {})}, timeout=10)

    def call(self, kind: str, client: httpx.Client | None = None, **fields: Any) -> httpx.Response:
        """Send a well-formed call of ``kind`` for this framework."""
        body = {"type": kind, "framework_id": {"value": self.framework_id}, **fields}
        return self.post(body, client=client)

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0, after: int = 0
    ) -> dict[str, Any]:
        """Return the first event (from index ``after``) matching ``predicate``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for event in self.events[after:]:
                    if predicate(event):
                        return event
            time.sleep(0.02)
        raise AssertionError(f"no matching event in {timeout} s; got {[e['type'] for e in self.events]}")

    def offer(self, timeout: float = 30.0, after: int = 0) -> dict[str, Any]:
        """Return the first offer received (from event index ``after``)."""
        event = self.wait_for(lambda e: e["type"] == "OFFERS", timeout, after)
        return event["offers"]["offers"][0]

    def updates(self, task_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [
                e["update"]["status"]
                for e in self.events
                if e["type"] == "UPDATE" and e["update"]["status"]["task_id"]["value"] == task_id
            ]

    def status(self, task_id: str, state: str, timeout: float = 30.0) -> dict[str, Any]:
        """Wait for the update of ``task_id`` to ``state``; return its status."""
        event = self.wait_for(
            lambda e: (
                e["type"] == "UPDATE"
                and e["update"]["status"]["task_id"]["value"] == task_id
                and e["update"]["status"]["state"] == state
            ),
            timeout,
        )
        status: dict[str, Any] = event["update"]["status"]
        return status

    def ack(self, status: dict[str, Any], client: httpx.Client | None = None) -> httpx.Response:
        ack = {"agent_id": status["agent_id"], "task_id": status["task_id"], "uuid": status["uuid"]}
        return self.call("ACKNOWLEDGE", client=client, acknowledge=ack)


def task_info(
    task_id: str, agent_id: str, command: str = "true", cpus: float = 1, **extra: Any
) -> dict[str, Any]:
    return {
        "name": task_id,
        "task_id": {"value": task_id},
        "agent_id": {"value": agent_id},
        "command": {"value": command},
        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}}],
        **extra,
    }


def launch(offer_id: str, *tasks: dict[str, Any]) -> dict[str, Any]:
    return {
        "offer_ids": [{"value": offer_id}],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": list(tasks)}}],
    }
