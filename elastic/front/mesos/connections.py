"""Connections of the scheduler endpoint: long keep-alive, caps, header timeouts, idle sockets evicted.

pymesos keeps one persistent connection for its calls and may stay silent for hours (long tasks, no
offers to answer), so kept-alive connections stay open for :attr:`ConnectionLimits.keep_alive` (default
a day), not uvicorn's 5 s. Hostile or broken clients cannot exhaust the server either:

- at most ``max_connections`` connections in total and ``max_per_client`` per client address;
- a connection that has not sent a complete request head within ``header_timeout`` seconds (from when it
  opened, or from the first byte of a later request on a kept-alive connection) is closed;
- when a cap is reached, a new connection takes the place of the oldest connection that has never sent a
  request (of the same client for the per-client cap); when there is none, the new one is closed. A
  connection streaming events or serving a request, or one that completed a request, is never evicted;
- a request body must arrive within ``body_timeout`` seconds (checked by the app, HTTP 408).

The writes one event-loop step makes on a connection go out as one ``send`` (:class:`JoinedWrites`): an
event stream's head and its first record (SUBSCRIBED) reach the client together.

The guard runs in the server's event-loop thread only; :class:`GuardedH11Protocol` is uvicorn's h11
protocol with these hooks.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from uvicorn.protocols.http.h11_impl import H11Protocol

from elastic.errors import ConfigError

__all__ = ["ConnectionGuard", "ConnectionLimits", "GuardedH11Protocol", "JoinedWrites", "guarded_protocol"]

logger = logging.getLogger(__name__)


def _default_max_connections() -> int:
    """512, or a quarter of the file-descriptor limit if lower (the pool and its agents need the rest)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, min(512, soft // 4)) if soft > 0 else 512


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Limits of the endpoint's connections (see the module docstring).

    Attributes
    ----------
    keep_alive : float
        Seconds an idle kept-alive connection stays open (default a day).
    max_connections : int
        Connections open at once (default 512, or a quarter of the file-descriptor limit if lower).
    max_per_client : int
        Connections open at once from one client address (default 128: 64 pymesos frameworks).
    header_timeout : float
        Seconds to send a complete request head.
    body_timeout : float
        Seconds to send a complete request body.
    """

    keep_alive: float = 86400.0
    max_connections: int = 0
    max_per_client: int = 128
    header_timeout: float = 10.0
    body_timeout: float = 30.0

    def __post_init__(self) -> None:
        if self.max_connections == 0:
            object.__setattr__(self, "max_connections", _default_max_connections())
        for name in ("keep_alive", "header_timeout", "body_timeout"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ConfigError(f"MesosServer({name}=...) must be finite and > 0, got {value!r}")
        for name in ("max_connections", "max_per_client"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"MesosServer({name}=...) must be an integer >= 1, got {value!r}")


class ConnectionGuard:
    """The open connections of one server and who may be evicted (event-loop thread only)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._open: dict[GuardedH11Protocol, str] = {}
        self._fresh: dict[GuardedH11Protocol, None] = {}  # never sent a request, oldest first
        self._by_client: dict[str, dict[GuardedH11Protocol, None]] = {}
        self.evicted = 0
        """Connections closed to make room (they had never sent a request)."""
        self.refused = 0
        """New connections closed because every connection was busy."""
        self.timed_out = 0
        """Connections closed by the header timeout."""

    @property
    def open(self) -> int:
        """Connections open now."""
        return len(self._open)

    def admit(self, conn: GuardedH11Protocol, client: str) -> bool:
        """Register a new connection, evicting an idle one if a cap is reached; False: close it."""
        mine = self._by_client.get(client, {})
        if len(mine) >= self.limits.max_per_client:
            victim = next((c for c in mine if c in self._fresh), None)
            if victim is None:
                self.refused += 1
                return False
            self._evict(victim)
        if len(self._open) >= self.limits.max_connections:
            victim = next(iter(self._fresh), None)
            if victim is None:
                self.refused += 1
                return False
            self._evict(victim)
        self._open[conn] = client
        self._fresh[conn] = None
        self._by_client.setdefault(client, {})[conn] = None
        return True

    def started(self, conn: GuardedH11Protocol) -> None:
        """Take note that the connection sent a complete request head: it is no longer evicted for others."""
        self._fresh.pop(conn, None)

    def forget(self, conn: GuardedH11Protocol) -> None:
        """Take note that the connection closed (idempotent)."""
        client = self._open.pop(conn, None)
        self._fresh.pop(conn, None)
        if client is not None:
            mine = self._by_client.get(client, {})
            mine.pop(conn, None)
            if not mine:
                self._by_client.pop(client, None)

    def _evict(self, conn: GuardedH11Protocol) -> None:
        self.evicted += 1
        self.forget(conn)
        conn.drop()


class JoinedWrites:
    """A transport whose writes of one event-loop step are sent as one write, at the end of the step.

    uvicorn writes a response's head and each body chunk separately; a client reading at once can get the
    head of an event stream without its first record. Joined, they arrive in one segment. ``close`` sends
    what is held first; ``abort`` drops it. Everything else is the wrapped transport's.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hold ``data`` until the end of this event-loop step."""
        if not self._held:
            self._loop.call_soon(self._send)
        self._held.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        """Hold each of ``lines`` (see :meth:`write`)."""
        for data in lines:
            self.write(data)

    def _send(self) -> None:
        data = b"".join(self._held)
        self._held.clear()
        if data and not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        """Send what is held, then close."""
        self._send()
        self._transport.close()

    def abort(self) -> None:
        """Drop what is held and close at once."""
        self._held.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, registered with a :class:`ConnectionGuard` and under a header timeout."""

    guard: ClassVar[ConnectionGuard]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Admit the connection (or close it at once) and start its header timeout."""
        super().connection_made(transport)
        self.transport = cast(asyncio.Transport, JoinedWrites(transport, self.loop))
        self._header_timer: asyncio.TimerHandle | None = None
        client = self.client[0] if self.client else "?"
        if not self.guard.admit(self, client):
            logger.debug("mesos: connection from %s refused: every connection is busy", client)
            transport.abort()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Start the header timeout on a new request's first bytes; stop it once its head is complete."""
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()
        before = self.cycle
        super().data_received(data)
        if self.cycle is not before:
            self._disarm()
            self.guard.started(self)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection."""
        self._disarm()
        self.guard.forget(self)
        super().connection_lost(exc)

    def drop(self) -> None:
        """Close the connection now (evicted or timed out)."""
        self._disarm()
        if not self.transport.is_closing():
            self.transport.abort()

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self.guard.limits.header_timeout, self._header_timeout)

    def _disarm(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        self.guard.timed_out += 1
        self.guard.forget(self)
        self.drop()


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """Return a :class:`GuardedH11Protocol` class bound to ``guard`` (uvicorn's ``Config(http=...)``)."""
    attributes: dict[str, Any] = {"guard": guard}
    return type("BoundGuardedH11Protocol", (GuardedH11Protocol,), attributes)
