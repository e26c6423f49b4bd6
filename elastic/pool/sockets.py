"""The pool's and the agents' ZeroMQ sockets: one small class per role (``ROUTER`` and ``DEALER``).

Agents connect a ``DEALER`` socket (:class:`AgentSocket`) to the pool's ``ROUTER`` (:class:`PoolSocket`).

Two layers keep strangers out:

- **The connection.** Both ends speak ZeroMQ's CURVE handshake, with the pool's key pair derived from the
  run's secret (:func:`curve_keys`): only a peer that holds the secret can complete it, and ZeroMQ queues
  nothing from a connection before its handshake succeeded. So a stranger's bytes (garbage, a message of a
  million empty frames, a message that never ends, bytes captured on the network and sent again) cost the
  pool a closed connection and never reach its memory or its I/O thread. The traffic is encrypted too. A
  failed handshake is reported by :meth:`PoolSocket.refusals` (a ZeroMQ socket monitor).
- **The message.** Each side sends one-frame messages (:func:`elastic.pool.protocol.encode`, an HMAC with
  the secret) numbered by a counter of its own, and keeps the last number it accepted from each peer: a
  message whose number is not higher is refused as a replay (:class:`~elastic.pool.protocol.ReplayError`),
  after its MAC was checked and before anything of it is acted upon. ZeroMQ keeps the order of one
  connection's messages, so genuine messages always pass.

A message of more than one frame is refused before any MAC is computed; its other frames are dropped a
slice at a time (:data:`DISCARD_SLICE` per call), so that even a peer holding the secret cannot hold the
pool's I/O thread for long (:attr:`PoolSocket.discarding` says one is being dropped).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import itertools
import logging

import zmq
from zmq.utils import z85
from zmq.utils.monitor import parse_monitor_message

from elastic.errors import ConfigError
from elastic.pool.messages import Message
from elastic.pool.protocol import MAX_MESSAGE, AuthenticationError, ReplayError, decode, encode

__all__ = ["DISCARD_SLICE", "HANDSHAKE_TIMEOUT", "AgentSocket", "PoolSocket", "curve_keys"]

logger = logging.getLogger(__name__)

DISCARD_SLICE = 10_000
"""Frames of a refused multipart message dropped per :meth:`PoolSocket.recv` call (~20 ms)."""

HANDSHAKE_TIMEOUT = 10.0
"""Seconds a connection may take to complete its handshake before the pool closes it."""

_WIRE_SLACK = 1024
"""Bytes a CURVE-encrypted frame carries beyond its message (command name, nonce, MAC)."""

_REFUSED_EVENTS = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)

_REFUSALS_PER_CALL = 1000

_HANDSHAKE_ERRORS: dict[int, str] = {
    int(zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH): "the peer does not use CURVE (it has no secret)",
    int(zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC): "the peer's key is wrong (another pool's secret?)",
}


def curve_keys(secret: bytes) -> tuple[bytes, bytes]:
    """Return the pool's CURVE key pair ``(public, secret)`` (Z85 text), derived from the run's secret.

    The public key is never sent on the network: only a holder of the secret can compute it, and a client
    must know it to complete the handshake.

    Raises
    ------
    ConfigError
        This ZeroMQ library was built without CURVE.
    """
    if not zmq.has("curve"):
        raise ConfigError(
            f"this ZeroMQ library ({zmq.zmq_version()}) has no CURVE security; install pyzmq from its "
            "wheels (pip install pyzmq), which include it"
        )
    private = z85.encode(hmac.new(secret, b"elastic curve server key", hashlib.sha256).digest())
    return zmq.curve_public(private), private


def _drop_frames(sock: zmq.Socket[bytes], limit: int) -> bool:
    """Drop up to ``limit`` frames of the multipart message being read; return whether more are left."""
    sink = bytearray(1)  # recv_into copies at most this much: a large frame costs no copy
    for _ in range(limit):
        if not sock.getsockopt(zmq.RCVMORE):
            return False
        sock.recv_into(sink)
    return bool(sock.getsockopt(zmq.RCVMORE))


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
        _, private = curve_keys(secret)
        self._secret = secret
        self._seq = itertools.count(1)
        self._last: dict[bytes, int] = {}  # authenticated senders only: one entry per agent ever
        self._discarding = False
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE + _WIRE_SLACK)
        self._sock.setsockopt(zmq.SNDTIMEO, int(send_timeout * 1000))
        self._sock.setsockopt(zmq.HANDSHAKE_IVL, int(HANDSHAKE_TIMEOUT * 1000))
        self._sock.setsockopt(zmq.CURVE_SERVER, 1)
        self._sock.setsockopt(zmq.CURVE_SECRETKEY, private)
        self._monitor = self._sock.get_monitor_socket(_REFUSED_EVENTS)
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

    @property
    def socket(self) -> zmq.Socket[bytes]:
        """The ZeroMQ socket, for polling beside other sockets and file descriptors."""
        return self._sock

    @property
    def monitor(self) -> zmq.Socket[bytes]:
        """Readable when connections were refused at the handshake (see :meth:`refusals`)."""
        return self._monitor

    @property
    def discarding(self) -> bool:
        """Whether a refused multipart message is still being dropped (the next :meth:`recv` goes on)."""
        return self._discarding

    def refusals(self) -> list[str]:
        """Say, for each connection refused at the handshake since the last call, why (without waiting)."""
        out = []
        for _ in range(_REFUSALS_PER_CALL):
            try:
                frames = self._monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            event = parse_monitor_message(frames)
            value = int(event["value"])
            if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:  # the value is an errno
                why = f"the connection broke off during it ({errno.errorcode.get(value, value)})"
            else:
                why = _HANDSHAKE_ERRORS.get(value, f"ZeroMQ protocol error {value:#x}")
            out.append(f"refused a connection at the handshake: {why}")
        return out

    def recv(self, timeout: float) -> tuple[bytes, Message] | None:
        """Wait up to ``timeout`` seconds (0: do not wait) for one message; return ``(identity, message)``.

        Returns None when nothing is waiting, or after dropping a slice of a refused multipart message
        (then :attr:`discarding` may still be true).

        Raises
        ------
        AuthenticationError, ProtocolError
            The message was refused; nothing of it was acted upon.
        """
        if self._discarding:
            self._discarding = _drop_frames(self._sock, DISCARD_SLICE)
            return None
        if timeout > 0 and not self._sock.poll(round(timeout * 1000), zmq.POLLIN):
            return None
        try:
            ident = self._sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return None
        peer = ident.decode(errors="replace")
        if not self._sock.getsockopt(zmq.RCVMORE):
            raise AuthenticationError(peer, "empty message")
        frame = self._sock.recv()
        if self._sock.getsockopt(zmq.RCVMORE):
            self._discarding = _drop_frames(self._sock, DISCARD_SLICE)
            raise AuthenticationError(peer, "message of several frames (one is allowed)")
        seq, message = decode(frame, self._secret, peer=peer)
        last = self._last.get(ident, 0)
        if seq <= last:
            raise ReplayError(peer, f"message number {seq} is not newer than {last} (replayed?)")
        self._last[ident] = seq
        return ident, message

    def send(self, identity: bytes, message: Message) -> bool:
        """Send to one agent; return False when it could not be queued in time.

        Raises
        ------
        MessageTooLargeError
            The message is larger than :data:`~elastic.pool.protocol.MAX_MESSAGE` (nothing was sent).
        """
        frame = encode(message, self._secret, next(self._seq))
        try:
            self._sock.send_multipart([identity, frame])
        except zmq.Again:
            logger.warning("pool: could not send %s to agent %r in time", type(message).__name__, identity)
            return False
        return True

    def close(self, linger: float = 0.5) -> None:
        """Close the socket and its context, waiting up to ``linger`` seconds for unsent messages."""
        self._sock.disable_monitor()
        self._monitor.close(linger=0)
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
        Seconds :meth:`close` waits for unsent messages (the last results, ``Bye``).
    """

    def __init__(self, secret: bytes, address: str, identity: bytes, linger: float = 1.0) -> None:
        server_public, _ = curve_keys(secret)
        public, private = zmq.curve_keypair()  # any key: knowing the pool's public key is what counts
        self._secret = secret
        self._linger = int(linger * 1000)
        self._seq = itertools.count(1)
        self._last = 0
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.IDENTITY, identity)
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE + _WIRE_SLACK)
        self._sock.setsockopt(zmq.SNDTIMEO, 5000)
        self._sock.setsockopt(zmq.CURVE_SERVERKEY, server_public)
        self._sock.setsockopt(zmq.CURVE_PUBLICKEY, public)
        self._sock.setsockopt(zmq.CURVE_SECRETKEY, private)
        try:
            self._sock.connect(address)
        except zmq.ZMQError as exc:
            self.close()
            raise ConfigError(
                f"--pool {address!r}: not a usable address ({exc}); expected tcp://HOST:PORT"
            ) from exc

    @property
    def socket(self) -> zmq.Socket[bytes]:
        """The ZeroMQ socket, for polling beside other sockets and file descriptors."""
        return self._sock

    def send(self, message: Message) -> bool:
        """Send to the pool; return False when it could not be queued in time.

        Raises
        ------
        MessageTooLargeError
            The message is larger than :data:`~elastic.pool.protocol.MAX_MESSAGE` (nothing was sent).
        """
        frame = encode(message, self._secret, next(self._seq))
        try:
            self._sock.send(frame)
        except zmq.Again:
            return False
        return True

    def recv(self, timeout: float) -> Message | None:
        """Wait up to ``timeout`` seconds (0: do not wait) for a message from the pool; None when none came.

        Raises
        ------
        AuthenticationError, ProtocolError
            The message was refused.
        """
        if timeout > 0 and not self._sock.poll(round(timeout * 1000), zmq.POLLIN):
            return None
        try:
            frame = self._sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return None
        if self._sock.getsockopt(zmq.RCVMORE):
            while _drop_frames(self._sock, DISCARD_SLICE):  # only the pool can reach this socket
                pass
            raise AuthenticationError("pool", "message of several frames (one is allowed)")
        seq, message = decode(frame, self._secret, peer="pool")
        if seq <= self._last:
            raise ReplayError("pool", f"message number {seq} is not newer than {self._last} (replayed?)")
        self._last = seq
        return message

    def close(self) -> None:
        """Close the socket (waiting up to ``linger`` for unsent messages) and its context."""
        self._sock.close(linger=self._linger)
        self._ctx.term()
