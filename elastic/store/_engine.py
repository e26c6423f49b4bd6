"""Store URLs and SQLAlchemy engine set-up.

On SQLite several processes share one file safely: the file is in WAL mode (readers never block the
writer), each connection waits up to :data:`SQLITE_BUSY_TIMEOUT` seconds for a lock, and write
transactions begin with ``BEGIN IMMEDIATE`` (taking the write lock up front, so two writers never
deadlock upgrading read locks). pysqlite's own implicit ``BEGIN`` is switched off for that, following
SQLAlchemy's documented recipe for the pysqlite driver.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
import weakref
from pathlib import Path
from typing import Any, Final

import numpy as np
import platformdirs
from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from elastic.store._errors import StoreError, StoreURLError

__all__ = ["ENV_URL", "SQLITE_BUSY_TIMEOUT", "WRITE", "default_url", "dumps", "hint", "mask", "open_engine"]

ENV_URL: Final = "ELASTIC_STORE_URL"
"""Environment variable naming the store URL when :class:`~elastic.store.Store` gets none."""
SQLITE_BUSY_TIMEOUT: Final = 60.0
"""Seconds an SQLite connection waits for another process's lock before failing."""
WRITE: Final = "elastic_write"
"""Execution option marking a write transaction (SQLite: ``BEGIN IMMEDIATE``)."""
_PG_CONNECT_TIMEOUT: Final = 10  # seconds, unless the URL sets connect_timeout

_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def _after_fork() -> None:
    # A forked child must not reuse the parent's connections (SQLAlchemy's pooling guidance).
    for engine in list(_ENGINES):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork)


def default_url() -> str:
    """Return the URL :class:`~elastic.store.Store` uses when given none.

    Returns
    -------
    str
        ``$ELASTIC_STORE_URL`` when set, else ``sqlite:///`` + ``<user data dir>/elastic.db``, where the
        user data directory comes from ``platformdirs.user_data_dir("elastic")``.
    """
    env = os.environ.get(ENV_URL, "").strip()
    if env:
        return env
    return f"sqlite:///{Path(platformdirs.user_data_dir('elastic')) / 'elastic.db'}"


def mask(url: str) -> str:
    """Hide the password of a URL, even one SQLAlchemy cannot parse."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def _json_default(obj: object) -> object:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def dumps(obj: object) -> str:
    """Encode JSON: numpy scalars and arrays as numbers and lists; NaN and infinity refused."""
    # PostgreSQL rejects NaN in JSON: refuse it on every backend, so SQLite and PostgreSQL agree.
    return json.dumps(obj, allow_nan=False, default=_json_default, separators=(",", ":"))


def _use_wal(cursor: Any) -> None:
    """Put the database in WAL mode (persistent in the file), waiting out other connections.

    Switching to WAL needs an exclusive lock, and SQLite may answer "database is locked" at once instead
    of calling the busy handler, so several processes opening a new store at the same moment could fail
    (seen: 2 of 30 rounds of 6 threads). The mode is read first (a database already in WAL is left
    alone) and the switch is retried with back-off up to ``SQLITE_BUSY_TIMEOUT``.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT
    delay = 0.005
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # pysqlite must not BEGIN by itself; _on_begin does
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT * 1000)}")
        _use_wal(cursor)
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")


def open_engine(url: str | None) -> tuple[Engine, str]:
    """Create the engine of a store URL (no connection is opened yet).

    Parameters
    ----------
    url : str or None
        SQLAlchemy URL; None: :func:`default_url`, whose directory is created.

    Returns
    -------
    engine : Engine
    shown : str
        The URL with its password masked.

    Raises
    ------
    StoreURLError
        The URL cannot be parsed, or its driver is missing or asynchronous.
    StoreError
        The default SQLite file's directory cannot be created.
    """
    raw = default_url() if url is None else url
    shown = mask(raw)
    try:
        parsed: URL = make_url(raw)
    except ArgumentError as exc:
        raise StoreURLError(
            shown, f"not a database URL ({exc}); e.g. sqlite:////tmp/elastic.db or postgresql://u:p@host/db"
        ) from exc
    shown = parsed.render_as_string(hide_password=True)
    sqlite = parsed.get_backend_name() == "sqlite"
    connect_args: dict[str, Any] = {}
    if sqlite:
        connect_args["timeout"] = SQLITE_BUSY_TIMEOUT
        if url is None and parsed.database:
            folder = Path(parsed.database).parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    shown,
                    f"cannot create the store's directory {str(folder)!r} ({exc.strerror or exc}); use "
                    f"a URL in a writable place (elastic run --store URL, or ${ENV_URL}), e.g. "
                    "sqlite:////tmp/elastic.db",
                ) from None
    try:
        if parsed.get_dialect().is_async:
            raise StoreURLError(shown, "asynchronous drivers are not supported; use e.g. postgresql+psycopg2")
        if parsed.get_driver_name() == "psycopg2" and "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = _PG_CONNECT_TIMEOUT
        engine = create_engine(parsed, json_serializer=dumps, connect_args=connect_args)
    except (NoSuchModuleError, ImportError) as exc:
        raise StoreURLError(shown, f"no usable database driver for this URL ({exc}); install it") from exc
    if sqlite:
        _configure_sqlite(engine)
    _ENGINES.add(engine)
    return engine, shown


def hint(message: str, sqlite: bool) -> str:
    """Return what to do about a database error message."""
    low = message.lower()
    if "file is not a database" in low or "malformed" in low:
        return (
            "not a usable SQLite file (corrupted, or not an Elastic store): move it away or use another URL"
        )
    if "database is locked" in low:
        return f"another process kept the database locked longer than {SQLITE_BUSY_TIMEOUT:g} s; retry later"
    if sqlite and "unable to open" in low:
        return "cannot open the file: check that its directory exists and is writable"
    if sqlite:
        return "check the file and the URL"
    return "check that the database server is running and reachable, and that the URL is right"
