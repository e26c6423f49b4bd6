"""The pool's and the agents' ZeroMQ sockets: one small class per role (``ROUTER`` and ``DEALER``).

Agents connect a ``DEALER`` socket (:class:`AgentSocket`) to the pool's ``ROUTER`` (:class:`PoolSocket`).
Each sends one-frame messages (:func:`elastic.pool.protocol.encode`) numbered by a counter of its own, and
keeps the last number it accepted from each peer: a message whose number is not higher is refused as a
replay (:class:`~elastic.pool.protocol.ReplayError`), after its MAC was checked and before anything of it
is acted upon. ZeroMQ keeps the order of one connection's messages, so genuine messages always pass.

A message of more than one frame is refused before any MAC is computed, and its frames are discarded one
by one without being kept.
"""

from __future__ import annotations

import itertools
import logging

import zmq

from elastic.errors import ConfigError
from elastic.pool.messages import Message
from elastic.pool.protocol import MAX_MESSAGE, AuthenticationError, ReplayError, decode, encode

__all__ = ["AgentSocket", "PoolSocket"]

logger = logging.getLogger(__name__)


def _discard_rest(sock: zmq.Socket[bytes]) -> int:
    """Read and drop the remaining frames of a multipart message; return how many there were."""
    n = 0
    while sock.getsockopt(zmq.RCVMORE):
        sock.recv(copy=False)
        n += 1
    return n


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
        self._seq = itertools.count(1)
        self._last: dict[bytes, int] = {}
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
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

    @property
    def socket(self) -> zmq.Socket[bytes]:
        """The ZeroMQ socket, for polling beside other sockets and file descriptors."""
        return self._sock

    def recv(self, timeout: float) -> tuple[bytes, Message] | None:
        """Wait up to ``timeout`` seconds (0: do not wait) for one message; return ``(identity, message)``.

        Raises
        ------
        AuthenticationError, ProtocolError
            The message was refused; nothing of it was acted upon.
        """
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
        extra = _discard_rest(self._sock)
        if extra:
            raise AuthenticationError(peer, f"message of {extra + 1} frames (one is allowed)")
        seq, message = decode(frame, self._secret, peer=peer)
        last = self._last.get(ident, 0)
        if seq <= last:
            raise ReplayError(peer, f"message number {seq} is not newer than {last} (replayed?)")
        self._last[ident] = seq
        return ident, message

    def send(self, identity: bytes, message: Message) -> bool:
        """Send to one agent; return False when it could not be queued in time."""
        try:
            self._sock.send_multipart([identity, encode(message, self._secret, next(self._seq))])
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
        Seconds :meth:`close` waits for unsent messages (the last results, ``Bye``).
    """

    def __init__(self, secret: bytes, address: str, identity: bytes, linger: float = 1.0) -> None:
        self._secret = secret
        self._linger = int(linger * 1000)
        self._seq = itertools.count(1)
        self._last = 0
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.IDENTITY, identity)
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        self._sock.setsockopt(zmq.SNDTIMEO, 5000)
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
        """Send to the pool; return False when it could not be queued in time."""
        try:
            self._sock.send(encode(message, self._secret, next(self._seq)))
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
        extra = _discard_rest(self._sock)
        if extra:
            raise AuthenticationError("pool", f"message of {extra + 1} frames (one is allowed)")
        seq, message = decode(frame, self._secret, peer="pool")
        if seq <= self._last:
            raise ReplayError("pool", f"message number {seq} is not newer than {self._last} (replayed?)")
        self._last = seq
        return message

    def close(self) -> None:
        """Close the socket (waiting up to ``linger`` for unsent messages) and its context."""
        self._sock.close(linger=self._linger)
        self._ctx.term()
