"""The HTTP side: the scheduler endpoint as a Starlette app, served by uvicorn in a thread.

``POST /api/v1/scheduler`` takes one call per request (:mod:`elastic.front.mesos.calls`). SUBSCRIBE answers
``200`` with a chunked RecordIO event stream and a ``Mesos-Stream-Id`` header, which every later call of
that framework must send back; other calls answer ``202 Accepted``. ``GET /version`` answers the Mesos
version whose API is served (pymesos asks for it, without credentials). ``POST /api/v1/executor`` serves
the custom executors the front door starts (:mod:`elastic.front.mesos.executors`); their calls carry no
credentials: the random executor id handed to each process entitles its calls. ``GET /state`` answers an
agent's state reduced to the version and host (no framework, task or credential; Toil's executor asks).

Authentication (:mod:`elastic.front.mesos.auth`): off on a loopback address, else required: HTTP Basic
with a principal and its secret from the credentials (pymesos sends them when given ``principal=`` and
``secret=``).

Errors, each with a one-line plain-text body naming what is wrong: ``401`` without valid credentials when
authentication is on, ``400`` for a malformed call (naming the field) or a missing or stale
``Mesos-Stream-Id``, ``403`` for a framework that is not subscribed, one another principal subscribed, or an
id this master never issued, ``413`` for a body over 8 MB, ``415``
for a body that is not JSON (``application/x-protobuf`` is not served), ``406`` for a SUBSCRIBE that does
not accept JSON, ``501`` for a Mesos call or operation this front door does not serve (named). A bad call
changes nothing, and the server goes on serving every other framework.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Send

from elastic.errors import ConfigError
from elastic.front.mesos.auth import (
    DEFAULT_PRINCIPAL,
    check_credentials,
    is_loopback,
    principal_of,
    read_credentials,
    write_credentials,
)
from elastic.front.mesos.calls import Subscribe, parse_call
from elastic.front.mesos.connections import ConnectionGuard, ConnectionLimits, guarded_protocol
from elastic.front.mesos.events import API_VERSION
from elastic.front.mesos.executors import parse_executor_call
from elastic.front.mesos.fields import MAX_BODY, CallError
from elastic.front.mesos.master import MesosMaster

if TYPE_CHECKING:
    from elastic.front.door import Elastic

__all__ = ["MesosServer", "make_app"]

logger = logging.getLogger(__name__)

_OFFLOAD = 64 * 1024
"""Calls with a body larger than this (bytes) are parsed and served in a worker thread."""


class _QueueStream:
    """A subscription's event stream: records go to an asyncio queue read by the streaming response."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def send(self, data: bytes) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, data)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)


LOG_WINDOW = 10.0
"""Seconds over which at most :data:`LOGGED_PER_WINDOW` lines of one kind of the HTTP server are logged."""

LOGGED_PER_WINDOW = 5
"""Lines of one kind (uvicorn's ``Invalid HTTP request received.``...) logged per :data:`LOG_WINDOW`."""


class _Throttle(logging.Filter):
    """Let through at most :data:`LOGGED_PER_WINDOW` records of each message per :data:`LOG_WINDOW` seconds.

    uvicorn logs a warning (with a traceback) per malformed request; anyone who can reach the port can
    send thousands a second. The first after a window with some held back says how many were; what is
    still held when the server stops is said then (:meth:`held_back`).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[object, tuple[float, int, int]] = {}  # message -> window start, shown, held back

    def filter(self, record: logging.LogRecord) -> bool:
        now = self._clock()
        key = record.msg
        with self._lock:
            start, shown, held = self._seen.get(key, (now, 0, 0))
            if now - start >= LOG_WINDOW:
                self._seen[key] = (now, 1, 0)
                if held:
                    record.msg = f"{record.msg} ({held} more like it in {now - start:.0f} s not shown)"
                return True
            if shown < LOGGED_PER_WINDOW:
                self._seen[key] = (start, shown + 1, held)
                return True
            self._seen[key] = (start, shown, held + 1)
            return False

    def held_back(self) -> list[str]:
        """Return one line per message with records held back in its last window, and forget them."""
        with self._lock:
            lines = [
                f"{msg} ({held} more like it not shown)" for msg, (_, _, held) in self._seen.items() if held
            ]
            self._seen.clear()
        return lines


class _BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _read_body(request: Request, timeout: float) -> bytes:
    """Read the body as it streams in; stop past :data:`MAX_BODY` bytes (chunked or not) or ``timeout``."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise _BodyError(413, f"the body is larger than {MAX_BODY} bytes")
    chunks: list[bytes] = []

    async def collect() -> None:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise _BodyError(413, f"the body is larger than {MAX_BODY} bytes")
            chunks.append(chunk)

    try:  # asyncio.wait_for, not asyncio.timeout: Python 3.10 has only the former
        await asyncio.wait_for(collect(), timeout)
    except (TimeoutError, asyncio.TimeoutError):  # distinct classes before Python 3.11
        raise _BodyError(408, f"the body did not arrive within {timeout:g} s") from None
    except ClientDisconnect:  # gone before its body arrived: one line, not an application traceback
        logger.warning("mesos: a client closed its connection before its request body arrived")
        raise _BodyError(400, "the client closed the connection before its body arrived") from None
    return b"".join(chunks)


def make_app(
    master: MesosMaster, credentials: Mapping[str, str] | None, *, body_timeout: float = 30.0
) -> Starlette:
    """Return the Starlette app serving ``master``.

    ``credentials``: principal to secret (None: no authentication); ``body_timeout``: seconds a request
    body may take to arrive.
    """

    async def scheduler(request: Request) -> Response:
        principal = None
        if credentials is not None:
            principal = principal_of(request.headers.get("authorization", ""), credentials)
            if principal is None:
                return PlainTextResponse(
                    "401 Unauthorized: present a principal and its secret from the credentials "
                    "(HTTP Basic authentication)",
                    401,
                    headers={"WWW-Authenticate": 'Basic realm="elastic"', "Connection": "close"},
                )
        kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if kind != "application/json":
            return PlainTextResponse(f"Content-Type {kind!r} is not served; send application/json", 415)
        try:
            body = await _read_body(request, body_timeout)
        except _BodyError as exc:  # the rest of the body is not read: the connection closes
            return PlainTextResponse(str(exc), exc.status, headers={"Connection": "close"})
        big = len(body) > _OFFLOAD  # read and served in a worker thread: the event loop serves the others
        try:
            framework_id, call = await run_in_threadpool(parse_call, body) if big else parse_call(body)
            if isinstance(call, Subscribe):
                accept = request.headers.get("accept", "application/json").lower()
                if not any(a in accept for a in ("application/json", "*/*", "application/*")):
                    return PlainTextResponse(f"Accept {accept!r}: only application/json events are sent", 406)
                stream = _QueueStream(asyncio.get_running_loop())
                framework_id, stream_id = master.subscribe(call.framework, framework_id, stream, principal)
                return _EventStream(
                    _events(stream, functools.partial(master.disconnected, framework_id, stream_id)),
                    media_type="application/json",
                    headers={"Mesos-Stream-Id": stream_id, "Cache-Control": "no-cache"},
                )
            assert framework_id is not None, "parse_call requires a framework_id for calls but SUBSCRIBE"
            args = (framework_id, request.headers.get("mesos-stream-id"), call, principal)
            if big:
                await run_in_threadpool(master.call, *args)
            else:
                master.call(*args)
        except CallError as exc:
            logger.info("mesos: %d for %s: %s", exc.status, request.client, exc)
            return PlainTextResponse(str(exc), exc.status)
        return Response(status_code=202)

    async def executor(request: Request) -> Response:
        # no HTTP credentials: the executor id (random, handed to the process only) entitles the calls
        kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if kind != "application/json":
            return PlainTextResponse(f"Content-Type {kind!r} is not served; send application/json", 415)
        try:
            body = await _read_body(request, body_timeout)
        except _BodyError as exc:
            return PlainTextResponse(str(exc), exc.status, headers={"Connection": "close"})
        try:
            call = parse_executor_call(body)
            if call.kind == "SUBSCRIBE":
                stream = _QueueStream(asyncio.get_running_loop())
                stream_id = master.executor_subscribe(call, stream)
                return _EventStream(
                    _events(
                        stream, functools.partial(master.executor_disconnected, call.executor_id, stream_id)
                    ),
                    media_type="application/json",
                    headers={"Mesos-Stream-Id": stream_id, "Cache-Control": "no-cache"},
                )
            master.executor_call(call)
        except CallError as exc:
            logger.info("mesos: executor call: %d for %s: %s", exc.status, request.client, exc)
            return PlainTextResponse(str(exc), exc.status)
        return Response(status_code=202)

    async def version(request: Request) -> Response:
        return JSONResponse({"version": API_VERSION, "build_user": "elastic", "git_tag": API_VERSION})

    async def state(request: Request) -> Response:
        # an agent's /state, reduced to what says nothing of the frameworks (Toil's executor reads it)
        return JSONResponse({"version": API_VERSION, "hostname": master.host, "flags": {}})

    return Starlette(
        routes=[
            Route("/api/v1/scheduler", scheduler, methods=["POST"]),
            Route("/api/v1/executor", executor, methods=["POST"]),
            Route("/version", version, methods=["GET"]),
            Route("/state", state, methods=["GET"]),
        ]
    )


class _EventStream(StreamingResponse):
    """A subscription's event stream whose head goes out only with its first record (SUBSCRIBED).

    A client may take the stream as subscribed once it has the head's ``Mesos-Stream-Id`` (pymesos does, and
    asserts that it knows its framework id before any call): the head and the first record are sent in one
    write (the connection joins the writes of one event-loop step), so no client sees one without the other.
    """

    async def stream_response(self, send: Send) -> None:
        """Send the head with the first record, then the rest as it comes."""
        records = aiter(self.body_iterator)
        first = await anext(records, None)
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if first is not None:
            await send({"type": "http.response.body", "body": first, "more_body": True})
            async for record in records:
                await send({"type": "http.response.body", "body": record, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _events(stream: _QueueStream, disconnected: Callable[[], None]) -> AsyncIterator[bytes]:
    """Yield a subscriber's queued records until the queue ends; ``disconnected()`` when the stream closes."""
    try:
        while True:
            data = await stream.queue.get()
            if data is None:
                return
            yield data
    finally:
        disconnected()


class MesosServer:
    """A Mesos master for pymesos frameworks, in front of a front door (see :mod:`elastic.front.mesos`).

    Parameters
    ----------
    elastic : Elastic
        The front door whose pool and strategy serve the frameworks (not closed by :meth:`close`).
    host : str, default "127.0.0.1"
        Interface to listen on (``"0.0.0.0"``: all). On a loopback address authentication is off unless
        asked; on any other, it is required.
    port : int, default 0
        TCP port; 0: any free one (see :attr:`address`).
    authenticate : bool or None, default None
        Require credentials; None: when ``host`` is not loopback or ``credentials`` are given. False with a
        non-loopback ``host`` is refused.
    credentials : str, Path, mapping or None, default None
        A Mesos ``--credentials`` JSON file, or principal to secret. None with authentication on: one
        credential is drawn (principal ``elastic``, a random secret) and written to :attr:`credentials_file`.
    secret_dir : str, Path or None, default None
        Where to write a drawn credentials file (mode 0600); default a fresh private temporary directory.
    keep_alive : float, default 86400
        Seconds an idle kept-alive connection stays open (pymesos keeps one for its calls).
    max_connections : int or None, default None
        Connections open at once; None: 512, or a quarter of the file-descriptor limit if lower.
    max_per_client : int, default 128
        Connections open at once from one client address.
    header_timeout, body_timeout : float, default 10 and 30
        Seconds a request's head, and its body, may take to arrive.
    **options
        Passed to :class:`~elastic.front.mesos.master.MesosMaster`: ``heartbeat_interval``,
        ``mem_per_core``, ``disk_per_core``, ``offer_timeout``, ``retry_min``, ``gang_wait``,
        ``allocation_interval`` (seconds between batch allocations, finite and >= 0; default 0: free cores
        are offered at once; Mesos' default is 1).

    Raises
    ------
    ConfigError
        Authentication turned off on a non-loopback address, unreadable or malformed credentials, or the
        address cannot be listened on.

    Examples
    --------
    ::

        with Elastic("mock", "asa") as el, MesosServer(el) as server:  # loopback: no credentials
            driver = MesosSchedulerDriver(MyScheduler(), framework_info, server.address)
            driver.run()
    """

    def __init__(
        self,
        elastic: Elastic,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        authenticate: bool | None = None,
        credentials: str | Path | Mapping[str, str] | None = None,
        secret_dir: str | Path | None = None,
        keep_alive: float = 86400.0,
        max_connections: int | None = None,
        max_per_client: int = 128,
        header_timeout: float = 10.0,
        body_timeout: float = 30.0,
        **options: Any,
    ) -> None:
        self.limits = ConnectionLimits(
            keep_alive=keep_alive,
            max_connections=max_connections or 0,
            max_per_client=max_per_client,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
        )
        """The connections' limits (:mod:`elastic.front.mesos.connections`)."""
        self.guard = ConnectionGuard(self.limits)
        """The open connections (event-loop thread)."""
        loopback = is_loopback(host)
        if authenticate is False and not loopback:
            raise ConfigError(
                f"MesosServer: authentication is required on the non-loopback address {host}; "
                "give credentials, or listen on 127.0.0.1"
            )
        if authenticate is False and credentials is not None:
            raise ConfigError("MesosServer: credentials given with authenticate=False; give one or the other")
        self.authenticate = (
            authenticate if authenticate is not None else not loopback or credentials is not None
        )
        """Whether calls must present a principal and its secret."""
        self.credentials_file: Path | None = None
        """The credentials file read, or drawn and written (None without authentication)."""
        self._own_dir = self._drawn = False
        self.credentials: dict[str, str] | None = None
        """Principal to secret (None: authentication is off)."""
        if isinstance(credentials, (str, Path)):
            self.credentials = read_credentials(credentials)
            self.credentials_file = Path(credentials)
        elif credentials is not None:
            self.credentials = check_credentials(credentials, "MesosServer(credentials=...)")
        elif self.authenticate:
            self.credentials = {DEFAULT_PRINCIPAL: secrets.token_hex(32)}
            self._own_dir = secret_dir is None
            directory = (
                Path(tempfile.mkdtemp(prefix="elastic-mesos-")) if secret_dir is None else Path(secret_dir)
            )
            self.credentials_file = write_credentials(directory, self.credentials)
            self._drawn = True
        first = next(iter(self.credentials.items())) if self.credentials else (None, None)
        self.principal: str | None = first[0]
        """The first credential's principal (the drawn one), None without authentication."""
        self.secret: str | None = first[1]
        """The first credential's secret (the drawn one), None without authentication."""
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            self._remove_credentials()
            raise ConfigError(f"MesosServer: cannot listen on {host}:{port}: {exc.strerror}") from exc
        self.host = socket.gethostname() if host in ("0.0.0.0", "::") else host
        self.port = int(sock.getsockname()[1])
        try:
            self.master = MesosMaster(elastic, **options)
        except Exception:  # a bad option: nothing is left open
            sock.close()
            self._remove_credentials()
            raise
        self.master.host, self.master.port = self.host, self.port
        config = uvicorn.Config(
            make_app(self.master, self.credentials, body_timeout=body_timeout),
            http=guarded_protocol(self.guard),
            timeout_keep_alive=math.ceil(keep_alive),
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._throttle = _Throttle()
        logging.getLogger("uvicorn.error").addFilter(self._throttle)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="elastic-mesos-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            self.close()
            raise ConfigError(f"MesosServer: the HTTP server did not start on {self.address}")
        logger.info(
            "mesos: serving the scheduler API at http://%s/api/v1/scheduler (authentication %s)",
            self.address,
            "on" if self.authenticate else "off",
        )

    @property
    def address(self) -> str:
        """``host:port``, the master address pymesos takes."""
        return f"{self.host}:{self.port}"

    def __enter__(self) -> MesosServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End every framework's stream (ERROR event), kill their tasks, stop the HTTP server."""
        self.master.close()
        self._server.should_exit = True
        self._thread.join(timeout=10.0)
        uvicorn_log = logging.getLogger("uvicorn.error")
        uvicorn_log.removeFilter(self._throttle)
        for line in self._throttle.held_back():  # a burst at the end is counted, not lost
            uvicorn_log.warning("%s", line)
        self._remove_credentials()

    def _remove_credentials(self) -> None:
        """Remove a drawn credentials file (and its private directory); a given file stays."""
        if self._drawn and self.credentials_file is not None:
            self.credentials_file.unlink(missing_ok=True)
            if self._own_dir:
                self.credentials_file.parent.rmdir()
