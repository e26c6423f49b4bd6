"""The store: runs, stage runtimes, observed queue waits and learner state in a database.

SQLite by default (a file under the user's data directory), any SQLAlchemy URL (PostgreSQL) by
configuration, safe for several processes at once. See :class:`Store`.

Modules
-------
_store
    :class:`Store`, the public API.
_engine
    URL handling and engine set-up (SQLite WAL mode, busy timeout, ``BEGIN IMMEDIATE``).
_schema
    The tables and the schema version check.
_errors
    :class:`StoreError` and its subclasses.
resilient
    :class:`~elastic.store.resilient.ResilientStore`: what runs use, so a store that stops answering
    never blocks them (writes behind, bounded reads, a journal for what the store never took).
journal
    That journal: writing it, and replaying it into a store (``elastic store replay``).
"""

from __future__ import annotations

from elastic.store._engine import ENV_URL, SQLITE_BUSY_TIMEOUT, default_url
from elastic.store._errors import StoreError, StoreURLError, UnknownRunError
from elastic.store._schema import SCHEMA_VERSION
from elastic.store._store import RUN_STATUSES, Store

__all__ = [
    "ENV_URL",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "SQLITE_BUSY_TIMEOUT",
    "Store",
    "StoreError",
    "StoreURLError",
    "UnknownRunError",
    "default_url",
]
