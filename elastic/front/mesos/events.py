r"""Scheduler events of the Mesos v1 HTTP API as JSON, and their RecordIO framing on the event stream.

The SUBSCRIBE response is a stream of records, each ``<length in bytes>\\n<JSON event>``, in HTTP chunks
(Mesos' RecordIO). Events are ``{"type": T, "<t>": {...}}`` as in ``scheduler.proto``; this module builds the
ones the front door sends: SUBSCRIBED, OFFERS, RESCIND, UPDATE, FAILURE, ERROR and HEARTBEAT.

An offer carries ``cpus`` and ``mem`` scalar resources (role ``*``) and attributes naming where the cores
are: ``allocation`` (the allocation's id, text), ``stage`` (the stage it was requested for, text),
``walltime_remaining`` (real seconds until the batch system ends it, scalar) and ``backend_job`` (its
batch job id, text, when known).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any

from elastic.front.mesos.offers import Offer
from elastic.front.mesos.states import TaskStatus

__all__ = [
    "error",
    "failure",
    "heartbeat",
    "offers",
    "read_records",
    "record",
    "rescind",
    "subscribed",
    "update",
]

API_VERSION = "1.11.0"
"""The Mesos release whose v1 scheduler API the front door follows (reported by ``GET /version``)."""


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def record(event: Mapping[str, Any]) -> bytes:
    """Return ``event`` as one RecordIO record: its JSON's length in bytes, a newline, the JSON."""
    data = _ENCODE(event).encode()
    return b"%d\n%s" % (len(data), data)


def read_records(data: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """Split complete records off ``data``; return ``(events, the incomplete rest)`` (for clients and tests).

    Raises
    ------
    ValueError
        A record length that is not a decimal number.
    """
    events: list[dict[str, Any]] = []
    while True:
        head, newline, rest = data.partition(b"\n")
        if not newline:
            return events, data
        if not head.isdigit():
            raise ValueError(f"not a RecordIO length: {head[:20]!r}")
        size = int(head)
        if len(rest) < size:
            return events, data
        events.append(json.loads(rest[:size]))
        data = rest[size:]


def subscribed(
    framework_id: str, heartbeat_interval: float, host: str, port: int, master_id: str
) -> dict[str, Any]:
    """Return SUBSCRIBED: the framework's id, the heartbeat interval, and who answers (``master_info``)."""
    return {
        "type": "SUBSCRIBED",
        "subscribed": {
            "framework_id": {"value": framework_id},
            "heartbeat_interval_seconds": heartbeat_interval,
            "master_info": {
                "id": master_id,
                "ip": 0,
                "port": port,
                "hostname": host,
                "version": API_VERSION,
                "address": {"hostname": host, "port": port},
            },
        },
    }


def offers(
    made: Iterable[Offer], mem_per_core: float, job_ids: Mapping[str, str], disk_per_core: float = 0.0
) -> dict[str, dict[str, Any]]:
    """Return one OFFERS event per framework, by framework id (resources and attributes: module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for offer in made:
        event = out.setdefault(offer.framework_id, {"type": "OFFERS", "offers": {"offers": []}})
        event["offers"]["offers"].append(_offer(offer, mem_per_core, job_ids, disk_per_core))
    return out


def _offer(
    offer: Offer, mem_per_core: float, job_ids: Mapping[str, str], disk_per_core: float
) -> dict[str, Any]:
    agent = offer.agent
    attributes = [
        _text("allocation", agent.alloc_id),
        _text("stage", offer.stage),
        {"name": "walltime_remaining", "type": "SCALAR", "scalar": {"value": round(agent.remaining, 3)}},
    ]
    if agent.alloc_id in job_ids:
        attributes.append(_text("backend_job", job_ids[agent.alloc_id]))
    return {
        "id": {"value": offer.offer_id},
        "framework_id": {"value": offer.framework_id},
        "agent_id": {"value": agent.name},
        "hostname": agent.hostname,
        "resources": [
            _scalar("cpus", offer.cores),
            _scalar("mem", offer.cores * mem_per_core),
            *([_scalar("disk", offer.cores * disk_per_core)] if disk_per_core > 0 else []),
        ],
        "attributes": attributes,
        "executor_ids": [],
        "allocation_info": {"role": "*"},
    }


def _scalar(name: str, value: float) -> dict[str, Any]:
    return {
        "name": name,
        "type": "SCALAR",
        "scalar": {"value": float(value)},
        "role": "*",
        "allocation_info": {"role": "*"},
    }


def _text(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "type": "TEXT", "text": {"value": value}}


def rescind(offer_id: str) -> dict[str, Any]:
    """Return RESCIND: the offer is no longer valid."""
    return {"type": "RESCIND", "rescind": {"offer_id": {"value": offer_id}}}


def update(status: TaskStatus) -> dict[str, Any]:
    """Return UPDATE: a task's status."""
    return {"type": "UPDATE", "update": {"status": status.to_json()}}


def framework_message(agent_id: str, executor_id: str, data: bytes) -> dict[str, Any]:
    """Return MESSAGE: bytes from the framework's executor ``executor_id`` on ``agent_id``."""
    return {
        "type": "MESSAGE",
        "message": {
            "agent_id": {"value": agent_id},
            "executor_id": {"value": executor_id},
            "data": base64.b64encode(data).decode(),
        },
    }


def failure(agent_id: str) -> dict[str, Any]:
    """Return FAILURE: an agent was removed (lost, or its allocation ended)."""
    return {"type": "FAILURE", "failure": {"agent_id": {"value": agent_id}}}


def error(message: str) -> dict[str, Any]:
    """Return ERROR: an unrecoverable error; the framework should stop."""
    return {"type": "ERROR", "error": {"message": message}}


def heartbeat() -> dict[str, Any]:
    """Return HEARTBEAT: the stream is alive."""
    return {"type": "HEARTBEAT"}
