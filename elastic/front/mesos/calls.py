"""Scheduler calls of the Mesos v1 HTTP API: JSON bodies checked field by field into frozen records.

A call is one JSON object (``Content-Type: application/json``) with a ``type`` and, for most types, an
object of the same name in lower case (``{"type": "DECLINE", "decline": {...}}``), as in Mesos'
``scheduler.proto``. :func:`parse_call` turns a body into a :class:`Call` or raises:

- :class:`BadCallError` (HTTP 400): not JSON, RecordIO instead of one object, a field of the wrong type or
  missing; the message names the field path (``accept.offer_ids[1].value``), the bad value and what is
  allowed;
- :class:`UnsupportedCallError` (HTTP 501): a Mesos call or operation this front door does not serve
  (``SHUTDOWN``, ``ACCEPT`` with ``RESERVE``...), named.

Task descriptions inside ``LAUNCH`` and ``LAUNCH_GROUP`` are checked here only as JSON (their required
fields and types); whether they can run on the offer is decided later and answered with ``TASK_ERROR``
status updates, as Mesos does (:mod:`elastic.front.mesos.launch`).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic.front.mesos.fields import (
    DEFAULT_REFUSE_SECONDS,
    BadCallError,
    UnsupportedCallError,
    id_value,
    items,
    json_object,
    labels,
    number,
    obj,
    offer_ids,
    optional_string,
    refuse_seconds,
    seconds,
    shown,
    string,
)

__all__ = [
    "CALL_TYPES",
    "UNSUPPORTED_CALLS",
    "Accept",
    "Acknowledge",
    "Call",
    "Decline",
    "FrameworkInfo",
    "Kill",
    "Launch",
    "Message",
    "Reconcile",
    "Request",
    "Revive",
    "Subscribe",
    "Suppress",
    "Teardown",
    "parse_call",
]

DEFAULT_FAILOVER_TIMEOUT = 0.0
"""``framework_info.failover_timeout`` when none is given (Mesos: the framework is removed at once)."""


@dataclass(frozen=True, slots=True)
class FrameworkInfo:
    """What a framework says of itself when it subscribes (the fields this front door reads)."""

    user: str
    name: str
    framework_id: str | None = None
    role: str = "*"
    labels: Mapping[str, str] = field(default_factory=dict)
    failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT
    capabilities: frozenset[str] = frozenset()
    principal: str | None = None
    hostname: str | None = None


@dataclass(frozen=True, slots=True)
class Subscribe:
    """SUBSCRIBE: open the event stream (a new framework, or one failing over with its id)."""

    framework: FrameworkInfo


@dataclass(frozen=True, slots=True)
class Launch:
    """One LAUNCH (``group=False``) or LAUNCH_GROUP (``group=True``) operation: raw TaskInfo objects."""

    tasks: tuple[Mapping[str, Any], ...]
    group: bool = False
    path: str = "accept.operations[0]"


@dataclass(frozen=True, slots=True)
class Accept:
    """ACCEPT: use offers for these operations; unused cores are refused for ``refuse_seconds``."""

    offer_ids: tuple[str, ...]
    operations: tuple[Launch, ...]
    refuse_seconds: float = DEFAULT_REFUSE_SECONDS


@dataclass(frozen=True, slots=True)
class Decline:
    """DECLINE: give offers back; do not offer those cores again to this framework for ``refuse_seconds``."""

    offer_ids: tuple[str, ...]
    refuse_seconds: float = DEFAULT_REFUSE_SECONDS


@dataclass(frozen=True, slots=True)
class Kill:
    """KILL: kill one task."""

    task_id: str
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class Acknowledge:
    """ACKNOWLEDGE: the framework got the status update with this ``uuid``; stop resending it."""

    agent_id: str
    task_id: str
    uuid: bytes


@dataclass(frozen=True, slots=True)
class Reconcile:
    """RECONCILE: send the latest state of these tasks (all non-terminal ones when empty)."""

    tasks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Revive:
    """REVIVE: remove every filter and send offers again."""


@dataclass(frozen=True, slots=True)
class Suppress:
    """SUPPRESS: send no more offers until REVIVE (the framework needs no more cores)."""


@dataclass(frozen=True, slots=True)
class Message:
    """MESSAGE: bytes for the framework's executor ``executor_id`` on ``agent_id``."""

    agent_id: str
    executor_id: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Request:
    """REQUEST: the framework asks for resources; ``cores``: whole cores over every request (ceil each)."""

    cores: int


@dataclass(frozen=True, slots=True)
class Teardown:
    """TEARDOWN: kill every task of the framework and remove it."""


Call = (
    Subscribe
    | Accept
    | Decline
    | Kill
    | Acknowledge
    | Reconcile
    | Revive
    | Suppress
    | Teardown
    | Message
    | Request
)

CALL_TYPES: tuple[str, ...] = (
    "SUBSCRIBE",
    "ACCEPT",
    "DECLINE",
    "KILL",
    "ACKNOWLEDGE",
    "RECONCILE",
    "REVIVE",
    "SUPPRESS",
    "TEARDOWN",
    "MESSAGE",
    "REQUEST",
)
"""Calls this front door serves."""

UNSUPPORTED_CALLS: tuple[str, ...] = (
    "ACCEPT_INVERSE_OFFERS",
    "DECLINE_INVERSE_OFFERS",
    "SHUTDOWN",
    "ACKNOWLEDGE_OPERATION_STATUS",
    "RECONCILE_OPERATIONS",
    "UPDATE_FRAMEWORK",
)
"""Mesos v1 scheduler calls answered with HTTP 501 (named)."""

OPERATIONS = ("LAUNCH", "LAUNCH_GROUP")
"""ACCEPT operations this front door serves."""

_MESOS_OPERATIONS = frozenset(
    {
        "RESERVE",
        "UNRESERVE",
        "CREATE",
        "DESTROY",
        "GROW_VOLUME",
        "SHRINK_VOLUME",
        "CREATE_DISK",
        "DESTROY_DISK",
    }
)


def parse_call(body: bytes) -> tuple[str | None, Call]:
    """Parse one call; return ``(framework id or None, call)``.

    Raises
    ------
    BadCallError
        The body is not one JSON object, or a field is missing or of the wrong type.
    UnsupportedCallError
        A Mesos call or ACCEPT operation this front door does not serve.
    """
    raw = json_object(body)
    kind = string(raw.get("type"), "type")
    if kind in UNSUPPORTED_CALLS:
        raise UnsupportedCallError(f"call {kind}", CALL_TYPES)
    if kind not in CALL_TYPES:
        raise BadCallError("type", f"unknown call {kind!r}; expected one of {', '.join(CALL_TYPES)}")
    framework_id = None if raw.get("framework_id") is None else id_value(raw["framework_id"], "framework_id")
    if kind == "SUBSCRIBE":
        sub = obj(raw.get("subscribe"), "subscribe")
        info = _framework(obj(sub.get("framework_info"), "subscribe.framework_info"))
        if framework_id is not None and info.framework_id not in (None, framework_id):
            raise BadCallError(
                "subscribe.framework_info.id",
                f"{info.framework_id!r} differs from the call's framework_id {framework_id!r}",
            )
        return framework_id or info.framework_id, Subscribe(info)
    if framework_id is None:
        raise BadCallError("framework_id", f"required for {kind} (the id SUBSCRIBED gave)")
    return framework_id, _PARSERS[kind](raw)


# -- the calls ---------------------------------------------------------------------------------------


def _framework(raw: Mapping[str, Any]) -> FrameworkInfo:
    p = "subscribe.framework_info"
    tags = labels(raw.get("labels"), f"{p}.labels")
    roles = raw.get("roles")
    role = raw.get("role")
    if roles is not None:
        names = [string(r, f"{p}.roles[{i}]") for i, r in enumerate(items(roles, f"{p}.roles"))]
        if len(names) > 1:
            raise BadCallError(
                f"{p}.roles", f"one role (it names the framework's stage) is served, got {names}"
            )
        role = names[0] if names else None
    caps = [
        string(obj(c, f"{p}.capabilities[{i}]").get("type"), f"{p}.capabilities[{i}].type")
        for i, c in enumerate(items(raw.get("capabilities", []), f"{p}.capabilities"))
    ]
    timeout = raw.get("failover_timeout", DEFAULT_FAILOVER_TIMEOUT)
    return FrameworkInfo(
        user=string(raw.get("user"), f"{p}.user"),
        name=string(raw.get("name"), f"{p}.name"),
        framework_id=None if raw.get("id") is None else id_value(raw["id"], f"{p}.id"),
        role="*" if role is None else string(role, f"{p}.role"),
        labels=tags,
        failover_timeout=seconds(timeout, f"{p}.failover_timeout"),
        capabilities=frozenset(caps),
        principal=optional_string(raw.get("principal"), f"{p}.principal"),
        hostname=optional_string(raw.get("hostname"), f"{p}.hostname"),
    )


def _accept(raw: Mapping[str, Any]) -> Accept:
    acc = obj(raw.get("accept"), "accept")
    operations = []
    for i, op in enumerate(items(acc.get("operations", []), "accept.operations")):
        path = f"accept.operations[{i}]"
        op = obj(op, path)
        kind = string(op.get("type"), f"{path}.type")
        if kind == "LAUNCH":
            launch = obj(op.get("launch"), f"{path}.launch")
            infos = items(launch.get("task_infos", []), f"{path}.launch.task_infos")
            tasks = tuple(obj(t, f"{path}.launch.task_infos[{j}]") for j, t in enumerate(infos))
            operations.append(Launch(tasks, group=False, path=f"{path}.launch.task_infos"))
        elif kind == "LAUNCH_GROUP":
            group = obj(op.get("launch_group"), f"{path}.launch_group")
            task_group = obj(group.get("task_group"), f"{path}.launch_group.task_group")
            infos = items(task_group.get("tasks", []), f"{path}.launch_group.task_group.tasks")
            gpath = f"{path}.launch_group.task_group.tasks"
            tasks = tuple(obj(t, f"{gpath}[{j}]") for j, t in enumerate(infos))
            operations.append(Launch(tasks, group=True, path=gpath))
        elif kind in _MESOS_OPERATIONS:
            raise UnsupportedCallError(f"ACCEPT operation {kind}", OPERATIONS)
        else:
            raise BadCallError(
                f"{path}.type", f"unknown operation {kind!r}; expected one of {', '.join(OPERATIONS)}"
            )
    return Accept(offer_ids(acc, "accept"), tuple(operations), refuse_seconds(acc, "accept"))


def _decline(raw: Mapping[str, Any]) -> Decline:
    dec = obj(raw.get("decline"), "decline")
    return Decline(offer_ids(dec, "decline"), refuse_seconds(dec, "decline"))


def _kill(raw: Mapping[str, Any]) -> Kill:
    kill = obj(raw.get("kill"), "kill")
    agent = kill.get("agent_id")
    return Kill(
        id_value(kill.get("task_id"), "kill.task_id"),
        None if agent is None else id_value(agent, "kill.agent_id"),
    )


def _b64(value: Any, path: str) -> bytes:
    text = string(value, path)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadCallError(path, f"expected base64 bytes, got {shown(text)}") from None


def _acknowledge(raw: Mapping[str, Any]) -> Acknowledge:
    ack = obj(raw.get("acknowledge"), "acknowledge")
    uuid = _b64(ack.get("uuid"), "acknowledge.uuid")
    return Acknowledge(
        id_value(ack.get("agent_id"), "acknowledge.agent_id"),
        id_value(ack.get("task_id"), "acknowledge.task_id"),
        uuid,
    )


def _reconcile(raw: Mapping[str, Any]) -> Reconcile:
    rec = obj(raw.get("reconcile", {}), "reconcile")
    listed = items(rec.get("tasks", []), "reconcile.tasks")
    ids = []
    for i, t in enumerate(listed):  # the common case first: a RECONCILE may name many thousands
        found = t.get("task_id") if type(t) is dict else None
        value = found.get("value") if type(found) is dict else None
        if type(value) is not str or not value:
            value = id_value(obj(t, f"reconcile.tasks[{i}]").get("task_id"), f"reconcile.tasks[{i}].task_id")
        ids.append(value)
    return Reconcile(tuple(ids))


def _message(raw: Mapping[str, Any]) -> Message:
    msg = obj(raw.get("message"), "message")
    return Message(
        id_value(msg.get("agent_id"), "message.agent_id"),
        id_value(msg.get("executor_id"), "message.executor_id"),
        _b64(msg.get("data"), "message.data"),
    )


MAX_REQUESTED_CORES = 1_000_000
"""Most cores a REQUEST may ask for (over all its requests)."""


def _request(raw: Mapping[str, Any]) -> Request:
    req = obj(raw.get("request"), "request")
    total = 0
    for i, one in enumerate(items(req.get("requests", []), "request.requests")):
        path = f"request.requests[{i}]"
        cpus = 0.0
        for j, res in enumerate(items(obj(one, path).get("resources", []), f"{path}.resources")):
            res = obj(res, f"{path}.resources[{j}]")
            if string(res.get("name"), f"{path}.resources[{j}].name") != "cpus":
                continue  # only cores are requested from the pool; mem follows them
            value = obj(res.get("scalar"), f"{path}.resources[{j}].scalar").get("value")
            amount = number(value)
            if amount is None or not 0 <= amount <= MAX_REQUESTED_CORES:
                raise BadCallError(
                    f"{path}.resources[{j}].scalar.value",
                    f"expected a number from 0 to {MAX_REQUESTED_CORES}, got {shown(value)}",
                )
            cpus += amount
        total += math.ceil(cpus - 1e-9)
    if total > MAX_REQUESTED_CORES:
        raise BadCallError("request.requests", f"asks for {total} cores, more than {MAX_REQUESTED_CORES}")
    return Request(total)


_PARSERS: dict[str, Callable[[Mapping[str, Any]], Call]] = {
    "ACCEPT": _accept,
    "DECLINE": _decline,
    "KILL": _kill,
    "ACKNOWLEDGE": _acknowledge,
    "RECONCILE": _reconcile,
    "REVIVE": lambda raw: Revive(),
    "SUPPRESS": lambda raw: Suppress(),
    "TEARDOWN": lambda raw: Teardown(),
    "MESSAGE": _message,
    "REQUEST": _request,
}
