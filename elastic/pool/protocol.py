"""The wire protocol between the pool and its agents: encoding, authentication, secrets.

Every message is one of the frozen dataclasses of :mod:`elastic.pool.messages`, and this is the only
module that turns them into bytes. A message travels as **one** ZeroMQ frame::

    VERSION (9 bytes) | MAC (32) | sequence number (8) | type name (1 + n) | JSON header (4 + n) |
    blob count (2) | blobs (4 + n each)

``bytes`` fields (pickled callables and results) travel as blobs after the JSON header, not inside it.
``MAC`` is an HMAC-SHA256, keyed with the pool run's secret, over everything after it. The receiver checks
the MAC before it decodes anything: a message without the right secret is refused
(:class:`AuthenticationError`), logged by the caller and never acted upon. The sequence number grows with
every message a sender sends; a receiver refuses one that does not exceed the last it accepted from that
sender (:class:`ReplayError`), so a captured message cannot be replayed (see
:mod:`elastic.pool.sockets`).

Decoding checks every field against the dataclass's annotations with decoders built once per class; an
authentic but malformed message is a :class:`ProtocolError`.

The secret is 32 random bytes per pool run, written hex-encoded to a file only its owner can read
(:func:`write_secret_file`); agents read it with :func:`read_secret_file`, which refuses a file that
group or others can read.

Examples
--------
>>> from elastic.pool.messages import Heartbeat
>>> frame = encode(Heartbeat(running=("t1",)), b"k" * 32, seq=7)
>>> decode(frame, b"k" * 32)
(7, Heartbeat(running=('t1',)))
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import json
import os
import secrets
import struct
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union

from elastic.errors import ConfigError, PoolError
from elastic.pool import spool
from elastic.pool.messages import MESSAGE_TYPES, Message

__all__ = [
    "BATCH_BYTES",
    "MAX_MESSAGE",
    "VERSION",
    "AuthenticationError",
    "MessageTooLargeError",
    "ProtocolError",
    "ReplayError",
    "batches",
    "decode",
    "encode",
    "new_secret",
    "read_secret_file",
    "write_secret_file",
]

VERSION = b"elastic/2"
"""First bytes of every message; bumped when the encoding changes."""

MAX_MESSAGE = 16 * 2**20
"""Largest message (bytes) a socket sends or accepts.

Nothing legitimate comes near it: pickled calls and values larger than
:data:`elastic.pool.spool.INLINE_LIMIT` travel through files (:mod:`elastic.pool.spool`), a shell task's
output is cut to :data:`elastic.pool.spool.OUTPUT_LIMIT` in the message, and senders split their batches
at :data:`BATCH_BYTES`.
"""

BATCH_BYTES = 4 * 2**20
"""Bytes of tasks or results (roughly) one message carries before the rest goes in another."""

_T = TypeVar("_T")
_HEAD = struct.Struct("!9s32sQ")  # version, MAC, sequence number
_U8 = struct.Struct("!B")
_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")


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


class ReplayError(AuthenticationError):
    """An authentic message came again, or out of order (its sequence number is not new)."""


class MessageTooLargeError(ProtocolError):
    """A message to send is larger than :data:`MAX_MESSAGE`; it was not sent.

    Parameters
    ----------
    kind : str
        The message type.
    size : int
        Its encoded size in bytes.
    """

    def __init__(self, kind: str, size: int) -> None:
        self.kind = kind
        self.size = size
        super().__init__(
            f"cannot send a {kind} of {size:,} bytes: a message carries at most MAX_MESSAGE = "
            f"{MAX_MESSAGE:,} bytes (large payloads go through the spool directory)"
        )


def batches(items: Sequence[_T], size: Callable[[_T], int], limit: int = BATCH_BYTES) -> list[list[_T]]:
    """Split ``items`` in order into batches of at most ``limit`` bytes by ``size`` (at least one item each).

    Examples
    --------
    >>> batches([3, 3, 3, 9, 1], size=lambda n: n, limit=6)
    [[3, 3], [3], [9], [1]]
    """
    out: list[list[_T]] = []
    total = limit + 1
    for item in items:
        n = size(item)
        if total + n > limit:
            out.append([])
            total = 0
        out[-1].append(item)
        total += n
    return out


# --------------------------------------------------------------------------------------------------------
# Encoding


def encode(message: Message, secret: bytes, seq: int) -> bytes:
    """Turn a message into one authenticated frame carrying sequence number ``seq``.

    Raises
    ------
    MessageTooLargeError
        The frame would be larger than :data:`MAX_MESSAGE`.
    """
    name = type(message).__name__
    if MESSAGE_TYPES.get(name) is not type(message):
        raise ProtocolError(f"cannot send {name}: not a message type; allowed: {sorted(MESSAGE_TYPES)}")
    blobs: list[bytes] = []
    header = json.dumps(_encoder(type(message))(message, blobs), separators=(",", ":")).encode()
    name_b = name.encode()
    parts = [
        struct.pack("!QB", seq, len(name_b)),
        name_b,
        _U32.pack(len(header)),
        header,
        _U16.pack(len(blobs)),
    ]
    size = len(VERSION) + 32 + sum(map(len, parts)) + sum(4 + len(blob) for blob in blobs)
    if size > MAX_MESSAGE:
        raise MessageTooLargeError(name, size)
    for blob in blobs:
        parts.append(_U32.pack(len(blob)))
        parts.append(blob)
    body = b"".join(parts)
    mac = hmac.new(secret, body, hashlib.sha256).digest()
    return VERSION + mac + body


def decode(frame: bytes, secret: bytes, peer: str = "peer") -> tuple[int, Message]:
    """Check the MAC of ``frame``, then rebuild the message; return ``(sequence number, message)``.

    Raises
    ------
    AuthenticationError
        Too short, no MAC, or not made with ``secret``: nothing of the message was decoded.
    ProtocolError
        Authentic but malformed (another protocol version, unknown type, bad fields).
    """
    if len(frame) < _HEAD.size + 1:
        raise AuthenticationError(peer, f"malformed message ({len(frame)} bytes)")
    version, mac = frame[:9], frame[9:41]
    body = memoryview(frame)[41:]
    if not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()):
        raise AuthenticationError(peer, "bad or missing HMAC (wrong secret)")
    if version != VERSION:
        raise ProtocolError(f"message from {peer} speaks {version!r}, this pool speaks {VERSION!r}")
    try:
        (seq,) = struct.unpack_from("!Q", frame, 41)
        pos = 49
        (n,) = _U8.unpack_from(frame, pos)
        name = frame[pos + 1 : pos + 1 + n].decode(errors="replace")
        pos += 1 + n
        cls = MESSAGE_TYPES.get(name)
        if cls is None:
            raise ProtocolError(f"unknown message type {name!r} from {peer}; known: {sorted(MESSAGE_TYPES)}")
        (n,) = _U32.unpack_from(frame, pos)
        header = json.loads(frame[pos + 4 : pos + 4 + n])
        pos += 4 + n
        (count,) = _U16.unpack_from(frame, pos)
        pos += 2
        blobs = []
        for _ in range(count):
            (n,) = _U32.unpack_from(frame, pos)
            blobs.append(frame[pos + 4 : pos + 4 + n])
            pos += 4 + n
        if pos != len(frame):
            raise ValueError(f"{len(frame) - pos} bytes after the last blob")
        message: Message = _decoder(cls)(header, blobs)
    except ProtocolError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, struct.error) as exc:
        raise ProtocolError(
            f"malformed {name if 'name' in locals() else 'message'} from {peer}: {exc}"
        ) from exc
    return seq, message


# Encoders and decoders are built once per type from its annotations (a field-by-field walk with
# typing.get_type_hints per message was the pool's largest cost with many small tasks).

_Encoder = Callable[[Any, list[bytes]], Any]
_Decoder = Callable[[Any, Sequence[bytes]], Any]
_ENCODERS: dict[Any, _Encoder] = {}
_DECODERS: dict[Any, _Decoder] = {}


def _encoder(tp: Any) -> _Encoder:
    if tp not in _ENCODERS:
        _ENCODERS[tp] = _build_encoder(tp)
    return _ENCODERS[tp]


def _build_encoder(tp: Any) -> _Encoder:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        (inner,) = (o for o in typing.get_args(tp) if o is not type(None))
        enc = _encoder(inner)
        return lambda v, blobs: None if v is None else enc(v, blobs)
    if origin is tuple:
        item = _encoder(typing.get_args(tp)[0])
        return lambda v, blobs: [item(x, blobs) for x in v]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = [(f.name, _encoder(hints[f.name])) for f in dataclasses.fields(tp)]
        return lambda v, blobs: {name: enc(getattr(v, name), blobs) for name, enc in fields}
    if tp is bytes:

        def blob(v: bytes, blobs: list[bytes]) -> int:
            blobs.append(v)
            return len(blobs) - 1

        return blob
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda v, blobs: v.value
    if tp in (str, int, float, bool):
        return lambda v, blobs: v
    raise ProtocolError(f"cannot encode a {tp!r} field; messages carry only plain fields")


def _decoder(tp: Any) -> _Decoder:
    if tp not in _DECODERS:
        _DECODERS[tp] = _build_decoder(tp)
    return _DECODERS[tp]


def _expect(kind: type, raw: Any, what: str) -> None:
    if type(raw) is not kind:
        raise TypeError(f"expected {what}, got {type(raw).__name__}")


def _build_decoder(tp: Any) -> _Decoder:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        (inner,) = (o for o in options if o is not type(None))
        dec = _decoder(inner)
        if type(None) in options:
            return lambda raw, blobs: None if raw is None else dec(raw, blobs)
        return dec
    if origin is tuple:
        item = _decoder(typing.get_args(tp)[0])

        def sequence(raw: Any, blobs: Sequence[bytes]) -> tuple[Any, ...]:
            _expect(list, raw, "a list")
            return tuple(item(x, blobs) for x in raw)

        return sequence
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = {f.name: _decoder(hints[f.name]) for f in dataclasses.fields(tp)}
        cls: Any = tp

        def record(raw: Any, blobs: Sequence[bytes]) -> Any:
            _expect(dict, raw, f"an object for {cls.__name__}")
            unknown = raw.keys() - fields.keys()
            if unknown:
                raise TypeError(f"unknown fields {sorted(unknown)} of {cls.__name__}")
            return cls(**{name: fields[name](v, blobs) for name, v in raw.items()})

        return record
    if tp is bytes:

        def blob(raw: Any, blobs: Sequence[bytes]) -> bytes:
            _expect(int, raw, "a blob index")
            return bytes(blobs[raw])

        return blob
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda raw, blobs: tp(raw)
    if tp is float:

        def number(raw: Any, blobs: Sequence[bytes]) -> float:
            if type(raw) is not float and type(raw) is not int:
                raise TypeError(f"expected float, got {type(raw).__name__}")
            return float(raw)

        return number
    if tp in (str, int, bool):

        def plain(raw: Any, blobs: Sequence[bytes]) -> Any:
            _expect(tp, raw, tp.__name__)
            return raw

        return plain
    raise ProtocolError(f"cannot decode a {tp!r} field")


# --------------------------------------------------------------------------------------------------------
# Secrets


def new_secret() -> bytes:
    """Return 32 random bytes, the secret of one pool run."""
    return secrets.token_bytes(32)


def write_secret_file(secret: bytes, directory: Path) -> Path:
    """Write ``secret`` hex-encoded to a new file in ``directory``, mode 0600; return its path.

    The run's spool directory is created next to it (:func:`elastic.pool.spool.create`).
    """
    path = directory.resolve() / f"elastic-pool-{secrets.token_hex(4)}.secret"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret.hex() + "\n")
    spool.create(path)
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
