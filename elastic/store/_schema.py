"""The store's tables and the schema version check.

Schema versioning: one ``elastic_schema`` row holds :data:`SCHEMA_VERSION`. Tables are created on
first use (``create_all``); a database written by another schema version is refused with a clear
error. No migrations exist yet; the first one will be added to :func:`ensure_schema`, keyed on that row.
All table names start with ``elastic_`` so the store can share a PostgreSQL database with others.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

from sqlalchemy import JSON, ForeignKey, Index, func, insert, inspect, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from elastic.store._errors import StoreError

__all__ = [
    "SCHEMA_VERSION",
    "LearnerStateRow",
    "RunRow",
    "StageRuntimeRow",
    "WaitRow",
    "ensure_schema",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 1
"""Version of the tables this Elastic reads and writes, kept in the ``elastic_schema`` table."""
_PG_LOCK: Final = 0x656C6173  # advisory lock id ("elas") serialising schema creation on PostgreSQL


class _Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON}  # noqa: RUF012 (SQLAlchemy's documented class attribute)


class _Schema(_Base):
    __tablename__ = "elastic_schema"
    id: Mapped[int] = mapped_column(primary_key=True)
    version: Mapped[int]
    created: Mapped[float]


class RunRow(_Base):
    """One run of a workflow; ``metrics`` is set when it ends."""

    __tablename__ = "elastic_runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    workflow: Mapped[str] = mapped_column(index=True)
    strategy: Mapped[str]
    backend: Mapped[str]
    status: Mapped[str]
    started: Mapped[float]
    ended: Mapped[float | None]
    params: Mapped[dict[str, Any]]
    metrics: Mapped[dict[str, Any] | None]


class StageRuntimeRow(_Base):
    """One observed stage runtime; ``censored`` means it is only a lower bound."""

    __tablename__ = "elastic_stage_runtimes"
    __table_args__ = (Index("ix_elastic_stage_runtimes_stage", "workflow", "stage"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    workflow: Mapped[str]
    stage: Mapped[str]
    runtime: Mapped[float]
    censored: Mapped[bool]
    cores: Mapped[int | None]
    run_id: Mapped[int | None] = mapped_column(ForeignKey("elastic_runs.id", ondelete="SET NULL"))
    recorded: Mapped[float]


class WaitRow(_Base):
    """One observed queue wait of an allocation geometry."""

    __tablename__ = "elastic_waits"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(index=True)
    wait: Mapped[float]
    cores: Mapped[int | None]
    user: Mapped[str | None]
    backend: Mapped[str | None]
    submit_time: Mapped[float | None]
    recorded: Mapped[float]


class LearnerStateRow(_Base):
    """The JSON state of one learner for one key."""

    __tablename__ = "elastic_learner_state"
    learner: Mapped[str] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(primary_key=True)
    state: Mapped[dict[str, Any]]
    updated: Mapped[float]


def ensure_schema(conn: Connection, url: str) -> None:
    """Create the tables in an empty database, or check that an existing one is ours and current.

    Parameters
    ----------
    conn : Connection
        In a write transaction (on SQLite begun with ``BEGIN IMMEDIATE``, so creators are serialised).
    url : str
        The masked store URL, for error messages.

    Raises
    ------
    StoreError
        The database holds another schema version, damaged Elastic tables, or (SQLite) foreign tables.
    """
    if conn.dialect.name == "postgresql":  # CREATE TABLE is not serialised by PostgreSQL itself
        conn.execute(select(func.pg_advisory_xact_lock(_PG_LOCK)))
    tables = set(inspect(conn).get_table_names())
    ours = set(_Base.metadata.tables)
    if _Schema.__tablename__ in tables:
        version = conn.scalar(select(_Schema.version).where(_Schema.id == 1))
        if version != SCHEMA_VERSION:
            raise StoreError(
                url,
                f"holds schema version {version}, this Elastic uses {SCHEMA_VERSION}; "
                "open it with the Elastic version that wrote it, or use another URL",
            )
        return
    if tables & ours:
        raise StoreError(
            url, f"has Elastic tables ({', '.join(sorted(tables & ours))}) but no elastic_schema: damaged"
        )
    if conn.dialect.name == "sqlite" and tables:
        raise StoreError(
            url, f"not an Elastic store (it holds tables {', '.join(sorted(tables))}); choose another file"
        )
    logger.info("store %s: creating tables, schema version %d", url, SCHEMA_VERSION)
    _Base.metadata.create_all(conn)
    conn.execute(insert(_Schema).values(id=1, version=SCHEMA_VERSION, created=time.time()))
