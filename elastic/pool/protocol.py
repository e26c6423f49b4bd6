"""The wire protocol between the pool and its agents: messages, encoding, authentication, sockets.

Agents connect a ZeroMQ ``DEALER`` socket (:class:`AgentSocket`) to the pool's ``ROUTER``
(:class:`PoolSocket`). Every message is one of the frozen dataclasses listed in :data:`MESSAGE_TYPES`,
and this is the only module that turns them into bytes.

A message travels as the multipart frames ``[VERSION, type name, JSON header, blob..., mac]``. ``bytes``
fields (pickled callables and results) travel as separate blob frames, not inside the JSON. ``mac`` is an
HMAC-SHA256, keyed with the pool run's secret, over every other frame (each prefixed by its length). The
receiver checks the MAC before it decodes anything: a message without the right secret is refused
(:class:`AuthenticationError`), logged by the caller and never acted upon.

The secret is 32 random bytes per pool run, written hex-encoded to a file only its owner can read
(:func:`write_secret_file`); agents read it with :func:`read_secret_file`, which refuses a file that
group or others can read.

Examples
--------
>>> frames = encode(Heartbeat(running=("t1",)), b"k" * 32)
>>> decode(frames, b"k" * 32)
Heartbeat(running=('t1',))
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import json
import logging
import os
import secrets
import struct
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import zmq

from elastic.errors import ConfigError, PoolError
from elastic.pool.tasks import Task, TaskResult

__all__ = [
    "MESSAGE_TYPES",
    "VERSION",
    "AgentSocket",
    "AuthenticationError",
    "Bye",
    "Drain",
    "Heartbeat",
    "Message",
    "PoolSocket",
    "ProtocolError",
    "Register",
    "RunTask",
    "Stop",
    "TaskDone",
    "TaskLost",
    "Welcome",
    "decode",
    "encode",
    "new_secret",
    "read_secret_file",
    "write_secret_file",
]

logger = logging.getLogger(__name__)

VERSION = b"elastic/1"
"""First frame of every message; bumped when the encoding changes."""

_MAX_MESSAGE = 256 * 2**20
"""Largest message (bytes) a socket accepts, so an unauthenticated peer cannot exhaust memory."""


class ProtocolError(PoolError):
    """A message could not be decoded (wrong version, unknown type, malformed fields)."""


class AuthenticationError(ProtocolError):
    """A message did not carry a valid MAC for this pool run's secret.

    Parameters
    ----------
    peer : str
        Who sent it (the ZeroMQ identity as text, or ``"pool"``).
    reason : str
        What was wrong.
    """

    def __init__(self, peer: str, reason: str) -> None:
        self.peer = peer
        self.reason = reason
        super().__init__(
            f"refused message from {peer}: {reason}; only agents with this pool's secret file may join"
        )


# --------------------------------------------------------------------------------------------------------
# Messages


@dataclass(frozen=True, slots=True)
class Register:
    """Agent -> pool, first message: "I run inside allocation ``alloc_id`` and offer ``cores`` cores"."""

    alloc_id: str
    cores: int
    hostname: str
    pid: int
    walltime_end: float | None = None
    """Epoch seconds when the allocation will be killed, when the agent knows it."""


@dataclass(frozen=True, slots=True)
class Welcome:
    """Pool -> agent, answer to :class:`Register`: the agent is in, with these timings."""

    heartbeat_interval: float
    pool_timeout: float
    """The agent exits when it hears nothing from the pool for this long (seconds)."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Either way, every ``heartbeat_interval``: "I am alive"; agents list the tasks they run."""

    running: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunTask:
    """Pool -> agent: run this task on your cores."""

    task: Task


@dataclass(frozen=True, slots=True)
class TaskDone:
    """Agent -> pool: a task ended (result or exception)."""

    result: TaskResult


@dataclass(frozen=True, slots=True)
class TaskLost:
    """Agent -> pool: a task was killed because this agent is being stopped; run it again elsewhere.

    Sent for a task whose process died by a signal while the agent was stopping (SIGTERM from the batch
    system at the walltime or on ``scancel``, or a :class:`Stop`), so that the pool re-queues it instead of
    failing it.
    """

    task_id: str
    cause: str
    """What killed it, in words (e.g. "killed by SIGTERM; the agent got SIGTERM")."""


@dataclass(frozen=True, slots=True)
class Drain:
    """Pool -> agent: take no new tasks; finish the running ones, then leave."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class Stop:
    """Pool -> agent: kill the running tasks and leave now."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class Bye:
    """Agent -> pool: I am leaving (drained, stopped, or out of walltime)."""

    reason: str = ""


Message = Union[Register, Welcome, Heartbeat, RunTask, TaskDone, TaskLost, Drain, Stop, Bye]  # noqa: UP007
"""Any message of the protocol."""

MESSAGE_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls for cls in (Register, Welcome, Heartbeat, RunTask, TaskDone, TaskLost, Drain, Stop, Bye)
}
"""Message classes by the type name sent on the wire."""


# --------------------------------------------------------------------------------------------------------
# Encoding


def _mac(secret: bytes, frames: list[bytes]) -> bytes:
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    for frame in frames:
        mac.update(struct.pack("!Q", len(frame)))
        mac.update(frame)
    return mac.digest()


def encode(message: Message, secret: bytes) -> list[bytes]:
    """Turn a message into authenticated multipart frames."""
    name = type(message).__name__
    if name not in MESSAGE_TYPES:
        raise ProtocolError(f"cannot send {name}: not a message type; allowed: {sorted(MESSAGE_TYPES)}")
    blobs: list[bytes] = []
    header = json.dumps(_to_json(message, blobs), separators=(",", ":")).encode()
    frames = [VERSION, name.encode(), header, *blobs]
    return [*frames, _mac(secret, frames)]


def decode(frames: list[bytes], secret: bytes, peer: str = "peer") -> Message:
    """Check the MAC of ``frames``, then rebuild the message.

    Raises
    ------
    AuthenticationError
        No MAC, or not made with ``secret``: nothing of the message was decoded.
    ProtocolError
        Authentic but malformed (another protocol version, unknown type, bad fields).
    """
    if len(frames) < 4:
        raise AuthenticationError(peer, f"malformed message ({len(frames)} frames, expected at least 4)")
    body, mac = frames[:-1], frames[-1]
    if not hmac.compare_digest(mac, _mac(secret, body)):
        raise AuthenticationError(peer, "bad or missing HMAC (wrong secret)")
    if body[0] != VERSION:
        raise ProtocolError(f"message from {peer} speaks {body[0]!r}, this pool speaks {VERSION!r}")
    cls = MESSAGE_TYPES.get(body[1].decode(errors="replace"))
    if cls is None:
        raise ProtocolError(f"unknown message type {body[1]!r} from {peer}; known: {sorted(MESSAGE_TYPES)}")
    try:
        message: Message = _from_json(cls, json.loads(body[2]), body[3:])
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ProtocolError(f"malformed {cls.__name__} from {peer}: {exc}") from exc
    return message


def _to_json(value: Any, blobs: list[bytes]) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name), blobs) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        blobs.append(value)
        return len(blobs) - 1
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return [_to_json(v, blobs) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ProtocolError(f"cannot encode a {type(value).__name__} field; messages carry only plain fields")


def _from_json(tp: Any, raw: Any, blobs: list[bytes]) -> Any:
    """Rebuild a value of type ``tp`` from its JSON form, checking types on the way."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if raw is None and type(None) in options:
            return None
        (inner,) = (o for o in options if o is not type(None))
        return _from_json(inner, raw, blobs)
    if origin is tuple:
        item = typing.get_args(tp)[0]
        if not isinstance(raw, list):
            raise TypeError(f"expected a list, got {type(raw).__name__}")
        return tuple(_from_json(item, v, blobs) for v in raw)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(raw, dict):
            raise TypeError(f"expected an object for {tp.__name__}, got {type(raw).__name__}")
        hints = _hints(tp)
        return tp(**{name: _from_json(hints[name], v, blobs) for name, v in raw.items()})
    if tp is bytes:
        return blobs[raw]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(raw)
    if tp is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    if tp in (str, int, float, bool) and type(raw) is tp:
        return raw
    raise TypeError(f"expected {getattr(tp, '__name__', tp)}, got {type(raw).__name__}")


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


# --------------------------------------------------------------------------------------------------------
# Secrets


def new_secret() -> bytes:
    """Return 32 random bytes, the secret of one pool run."""
    return secrets.token_bytes(32)


def write_secret_file(secret: bytes, directory: Path) -> Path:
    """Write ``secret`` hex-encoded to a new file in ``directory``, mode 0600; return its path."""
    path = directory / f"elastic-pool-{secrets.token_hex(4)}.secret"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret.hex() + "\n")
    return path


def read_secret_file(path: Path) -> bytes:
    """Read a secret written by :func:`write_secret_file`.

    Raises
    ------
    ConfigError
        The file is missing, readable by group or others, or does not hold a hex secret.
    """
    try:
        mode = path.stat().st_mode
        text = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"--secret-file {path}: cannot read it ({exc.strerror})") from exc
    if mode & 0o077:
        raise ConfigError(
            f"--secret-file {path}: mode {mode & 0o777:o} lets others read the secret; run chmod 600 on it"
        )
    try:
        secret = bytes.fromhex(text)
    except ValueError as exc:
        raise ConfigError(
            f"--secret-file {path}: expected a hex secret, got {len(text)} other characters"
        ) from exc
    if len(secret) < 16:
        raise ConfigError(f"--secret-file {path}: secret has {len(secret)} bytes, at least 16 are needed")
    return secret


# --------------------------------------------------------------------------------------------------------
# Sockets


class PoolSocket:
    """The pool's ``ROUTER`` socket: receives from and sends to many agents.

    Parameters
    ----------
    secret : bytes
        The pool run's secret.
    bind : str, default "127.0.0.1"
        Interface to listen on (``"0.0.0.0"`` or ``"*"`` for all).
    port : int, default 0
        TCP port; 0 picks a free one.
    send_timeout : float, default 5.0
        Seconds a send may block before it is given up (an agent's queue is full).
    """

    def __init__(
        self, secret: bytes, bind: str = "127.0.0.1", port: int = 0, send_timeout: float = 5.0
    ) -> None:
        self._secret = secret
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.MAXMSGSIZE, _MAX_MESSAGE)
        self._sock.setsockopt(zmq.SNDTIMEO, int(send_timeout * 1000))
        host = "*" if bind in ("0.0.0.0", "*") else bind
        try:
            if port:
                self._sock.bind(f"tcp://{host}:{port}")
                self.port = port
            else:
                self.port = self._sock.bind_to_random_port(f"tcp://{host}")
        except zmq.ZMQError as exc:
            self.close()
            raise ConfigError(f"Pool(bind={bind!r}, port={port}): cannot listen there ({exc})") from exc

    def recv(self, timeout: float) -> tuple[bytes, Message] | None:
        """Wait up to ``timeout`` seconds for one message; return ``(agent identity, message)`` or None.

        Raises
        ------
        AuthenticationError, ProtocolError
            The message was refused; nothing of it was acted upon.
        """
        if not self._sock.poll(int(timeout * 1000), zmq.POLLIN):
            return None
        ident, *frames = self._sock.recv_multipart()
        return ident, decode(frames, self._secret, peer=ident.decode(errors="replace"))

    def send(self, identity: bytes, message: Message) -> bool:
        """Send to one agent; return False when it could not be queued in time."""
        try:
            self._sock.send_multipart([identity, *encode(message, self._secret)])
        except zmq.Again:
            logger.warning("pool: could not send %s to agent %r in time", type(message).__name__, identity)
            return False
        return True

    def close(self, linger: float = 0.5) -> None:
        """Close the socket and its context, waiting up to ``linger`` seconds for unsent messages."""
        self._sock.close(linger=int(linger * 1000))
        self._ctx.term()


class AgentSocket:
    """An agent's ``DEALER`` socket, connected to the pool.

    Parameters
    ----------
    secret : bytes
        The pool run's secret.
    address : str
        The pool, ``tcp://HOST:PORT``.
    identity : bytes
        How the pool will know this agent (unique per agent).
    linger : float, default 1.0
        Seconds :meth:`close` waits for unsent messages (the last results, :class:`Bye`).
    """

    def __init__(self, secret: bytes, address: str, identity: bytes, linger: float = 1.0) -> None:
        self._secret = secret
        self._linger = int(linger * 1000)
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.IDENTITY, identity)
        self._sock.setsockopt(zmq.MAXMSGSIZE, _MAX_MESSAGE)
        self._sock.setsockopt(zmq.SNDTIMEO, 5000)
        try:
            self._sock.connect(address)
        except zmq.ZMQError as exc:
            self.close()
            raise ConfigError(
                f"--pool {address!r}: not a usable address ({exc}); expected tcp://HOST:PORT"
            ) from exc

    def send(self, message: Message) -> bool:
        """Send to the pool; return False when it could not be queued in time."""
        try:
            self._sock.send_multipart(encode(message, self._secret))
        except zmq.Again:
            return False
        return True

    def recv(self, timeout: float) -> Message | None:
        """Wait up to ``timeout`` seconds for a message from the pool; None when none came.

        Raises
        ------
        AuthenticationError, ProtocolError
            The message was refused.
        """
        if not self._sock.poll(int(timeout * 1000), zmq.POLLIN):
            return None
        return decode(self._sock.recv_multipart(), self._secret, peer="pool")

    def close(self) -> None:
        """Close the socket (waiting up to ``linger`` for unsent messages) and its context."""
        self._sock.close(linger=self._linger)
        self._ctx.term()
