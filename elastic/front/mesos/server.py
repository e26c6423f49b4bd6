"""The HTTP side: the scheduler endpoint as a Starlette app, served by uvicorn in a thread.

``POST /api/v1/scheduler`` takes one call per request (:mod:`elastic.front.mesos.calls`). SUBSCRIBE answers
``200`` with a chunked RecordIO event stream and a ``Mesos-Stream-Id`` header, which every later call of
that framework must send back; other calls answer ``202 Accepted``. ``GET /version`` answers the Mesos
version whose API is served (pymesos asks for it, without credentials).

Errors, each with a one-line plain-text body naming what is wrong: ``401`` without the run's secret
(HTTP Basic authentication, any principal, the secret as password; pymesos sends it when given
``principal=`` and ``secret=``), ``400`` for a malformed call (naming the field) or a missing or stale
``Mesos-Stream-Id``, ``403`` for a framework that is not subscribed, ``413`` for a body over 8 MB, ``415``
for a body that is not JSON (``application/x-protobuf`` is not served), ``406`` for a SUBSCRIBE that does
not accept JSON, ``501`` for a Mesos call or operation this front door does not serve (named). A bad call
changes nothing, and the server goes on serving every other framework.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import logging
import os
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from elastic.errors import ConfigError
from elastic.front.mesos.calls import Subscribe, parse_call
from elastic.front.mesos.events import API_VERSION
from elastic.front.mesos.fields import MAX_BODY, CallError
from elastic.front.mesos.master import MesosMaster

if TYPE_CHECKING:
    from elastic.front.door import Elastic

__all__ = ["MesosServer", "make_app"]

logger = logging.getLogger(__name__)


class _QueueStream:
    """A subscription's event stream: records go to an asyncio queue read by the streaming response."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def send(self, data: bytes) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, data)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)


def _authorized(request: Request, secret: str) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        _, _, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return hmac.compare_digest(password.encode(), secret.encode())


def make_app(master: MesosMaster, secret: str) -> Starlette:
    """Return the Starlette app serving ``master`` to clients that present ``secret``."""

    async def scheduler(request: Request) -> Response:
        if not _authorized(request, secret):
            return PlainTextResponse(
                "401 Unauthorized: present the run's secret (HTTP Basic authentication: any principal, the "
                "secret file's content as password)",
                401,
                headers={"WWW-Authenticate": 'Basic realm="elastic"'},
            )
        kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if kind != "application/json":
            return PlainTextResponse(f"Content-Type {kind!r} is not served; send application/json", 415)
        if int(request.headers.get("content-length") or 0) > MAX_BODY:
            return PlainTextResponse(f"the body is larger than {MAX_BODY} bytes", 413)
        body = await request.body()
        try:
            framework_id, call = parse_call(body)
            if isinstance(call, Subscribe):
                accept = request.headers.get("accept", "application/json").lower()
                if not any(a in accept for a in ("application/json", "*/*", "application/*")):
                    return PlainTextResponse(f"Accept {accept!r}: only application/json events are sent", 406)
                stream = _QueueStream(asyncio.get_running_loop())
                framework_id, stream_id = master.subscribe(call.framework, framework_id, stream)
                return StreamingResponse(
                    _events(master, stream, framework_id, stream_id),
                    media_type="application/json",
                    headers={"Mesos-Stream-Id": stream_id, "Cache-Control": "no-cache"},
                )
            assert framework_id is not None, "parse_call requires a framework_id for calls but SUBSCRIBE"
            master.call(framework_id, request.headers.get("mesos-stream-id"), call)
        except CallError as exc:
            logger.info("mesos: %d for %s: %s", exc.status, request.client, exc)
            return PlainTextResponse(str(exc), exc.status)
        return Response(status_code=202)

    async def version(request: Request) -> Response:
        return JSONResponse({"version": API_VERSION, "build_user": "elastic", "git_tag": API_VERSION})

    return Starlette(
        routes=[
            Route("/api/v1/scheduler", scheduler, methods=["POST"]),
            Route("/version", version, methods=["GET"]),
        ]
    )


async def _events(
    master: MesosMaster, stream: _QueueStream, framework_id: str, stream_id: str
) -> AsyncIterator[bytes]:
    try:
        while True:
            data = await stream.queue.get()
            if data is None:
                return
            yield data
    finally:
        master.disconnected(framework_id, stream_id)


class MesosServer:
    """A Mesos master for pymesos frameworks, in front of a front door (see :mod:`elastic.front.mesos`).

    Parameters
    ----------
    elastic : Elastic
        The front door whose pool and strategy serve the frameworks (not closed by :meth:`close`).
    host : str, default "127.0.0.1"
        Interface to listen on (``"0.0.0.0"``: all).
    port : int, default 0
        TCP port; 0: any free one (see :attr:`address`).
    secret : str or None, default None
        The password clients must present; None draws a random one. It is written to :attr:`secret_file`.
    secret_dir : str, Path or None, default None
        Where to write the secret file (mode 0600); default a fresh private temporary directory.
    **options
        Passed to :class:`~elastic.front.mesos.master.MesosMaster`: ``heartbeat_interval``,
        ``mem_per_core``, ``offer_timeout``, ``retry_min``.

    Examples
    --------
    ::

        with Elastic("mock", "asa") as el, MesosServer(el) as server:
            driver = MesosSchedulerDriver(MyScheduler(), framework_info, server.address,
                                          principal="me", secret=server.secret)
            driver.run()
    """

    def __init__(
        self,
        elastic: Elastic,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        secret: str | None = None,
        secret_dir: str | Path | None = None,
        **options: Any,
    ) -> None:
        if secret is not None and len(secret) < 16:
            raise ConfigError(f"MesosServer(secret=...) must have at least 16 characters, got {len(secret)}")
        self.secret = secret if secret is not None else secrets.token_hex(32)
        """The password clients present (HTTP Basic authentication, any principal)."""
        self._own_dir = secret_dir is None
        directory = (
            Path(tempfile.mkdtemp(prefix="elastic-mesos-")) if secret_dir is None else Path(secret_dir)
        )
        self.secret_file = directory / f"elastic-mesos-{secrets.token_hex(4)}.secret"
        fd = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.secret + "\n")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            self._remove_secret()
            raise ConfigError(f"MesosServer: cannot listen on {host}:{port}: {exc.strerror}") from exc
        self.host = socket.gethostname() if host in ("0.0.0.0", "::") else host
        self.port = int(sock.getsockname()[1])
        self.master = MesosMaster(elastic, **options)
        self.master.host, self.master.port = self.host, self.port
        config = uvicorn.Config(
            make_app(self.master, self.secret),
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
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
        logger.info("mesos: serving the scheduler API at http://%s/api/v1/scheduler", self.address)

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
        self._remove_secret()

    def _remove_secret(self) -> None:
        self.secret_file.unlink(missing_ok=True)
        if self._own_dir:
            self.secret_file.parent.rmdir()
