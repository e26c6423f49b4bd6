"""The :class:`Store`: runs, stage runtimes, observed queue waits and learner state.

Every call is one short transaction, so several processes can share a store; see
:mod:`elastic.store._engine` for how SQLite is made safe for that. Times are ``float`` epoch seconds,
durations ``float`` seconds. Learner state and run metrics are JSON objects: numpy scalars and arrays
are stored as numbers and lists and come back as lists.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd
from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from elastic.errors import ConfigError, UnknownNameError
from elastic.store._engine import WRITE, dumps, hint, open_engine
from elastic.store._errors import StoreError, UnknownRunError
from elastic.store._schema import LearnerStateRow, RunRow, StageRuntimeRow, WaitRow, ensure_schema

__all__ = ["RUN_STATUSES", "Store"]

logger = logging.getLogger(__name__)

RUN_STATUSES: Final = ("running", "completed", "failed", "cancelled", "interrupted")
"""States of a run; :meth:`Store.record_run` starts it ``running``, :meth:`Store.finish_run` ends it."""
_INSERT_RETRIES: Final = 5
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _check_json(param: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{param} must be a dict (a JSON object), got {type(value).__name__}")
    try:
        out: dict[str, Any] = json.loads(dumps(value))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{param} must hold only JSON values with finite numbers: {exc}") from exc
    return out


def _name(param: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{param} must be a non-empty string, got {value!r}")
    return value


def _seconds(param: str, value: object, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{param} must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(f"{param} must be finite and >= 0 seconds, got {value!r}")
    return seconds


def _cores(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise ConfigError(f"cores must be a positive integer or None, got {value!r}")
    return int(value)


class Store:
    """Runs, stage runtimes, observed queue waits and learner state, kept across processes and runs.

    Parameters
    ----------
    url : str or None, default None
        Any SQLAlchemy URL, e.g. ``sqlite:////path/elastic.db`` or
        ``postgresql+psycopg2://user:password@host/db``. None: :func:`default_url`.

    Raises
    ------
    StoreURLError
        The URL cannot be parsed or its driver is not installed.

    Notes
    -----
    Nothing is opened until first use; then tables are created if the database is empty. Errors of an
    unreachable server or a file that is not an Elastic store are raised then, as :class:`StoreError`.
    A store is safe to share between threads; a forked child reconnects on its own. The in-memory
    SQLite URL ``sqlite://`` gives each thread its own empty database: use it only for examples.

    Examples
    --------
    >>> with Store("sqlite://") as store:
    ...     run = store.record_run("demo3", "asa", "mock")
    ...     store.add_stage_runtime("demo3", "s1", 12.5, censored=True, run_id=run)
    ...     store.stage_runtimes("demo3", "s1")
    (array([12.5]), array([ True]))
    """

    def __init__(self, url: str | None = None) -> None:
        self._engine, self._url = open_engine(url)
        self._sqlite = self._engine.dialect.name == "sqlite"
        self._writer = self._engine.execution_options(**{WRITE: True})
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False

    @property
    def url(self) -> str:
        """The store URL with its password masked."""
        return self._url

    def __repr__(self) -> str:
        return f"Store({self._url!r})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection; the store cannot be used afterwards."""
        self._closed = True
        self._engine.dispose()

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        if self._closed:
            raise StoreError(self._url, f"cannot {action}: the store is closed")
        try:
            if not self._ready:
                self._create_schema()
            yield
        except DBAPIError as exc:
            msg = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
            raise StoreError(self._url, f"cannot {action}: {msg}; {hint(msg, self._sqlite)}") from exc

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[Connection]:
        with (self._writer if write else self._engine).begin() as conn:
            yield conn

    def _create_schema(self) -> None:
        with self._lock:
            if not self._ready:
                with self._transaction(write=True) as conn:
                    ensure_schema(conn, self._url)
                self._ready = True

    # -- runs -------------------------------------------------------------------------------

    def record_run(
        self,
        workflow: str,
        strategy: str,
        backend: str,
        *,
        started: float | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> int:
        """Record the start of a run; return its id.

        Parameters
        ----------
        workflow, strategy, backend : str
            What runs, how allocations are requested (e.g. ``"asa"``) and where (``"mock"``, ``"slurm"``).
        started : float or None, default None
            Start time in epoch seconds; None: now.
        params : dict or None, default None
            Settings of the run (JSON object), kept for later comparison.

        Returns
        -------
        int
            The run id, for :meth:`finish_run` and ``run_id=`` of :meth:`add_stage_runtime`.
        """
        row = {
            "workflow": _name("workflow", workflow),
            "strategy": _name("strategy", strategy),
            "backend": _name("backend", backend),
            "status": "running",
            "started": time.time() if started is None else _seconds("started", started),
            "params": _check_json("params", {} if params is None else params),
        }
        with self._errors("record a run"), self._transaction(write=True) as conn:
            key = conn.execute(insert(RunRow).values(**row)).inserted_primary_key
        assert key is not None, "an INSERT into elastic_runs returns its primary key"
        return int(key[0])

    def finish_run(
        self,
        run_id: int,
        status: str,
        metrics: Mapping[str, Any],
        *,
        ended: float | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the end of a run and its metrics.

        Parameters
        ----------
        run_id : int
            Id from :meth:`record_run`.
        status : {"completed", "failed", "cancelled", "interrupted"}
            How the run ended (``interrupted``: Ctrl-C, SIGTERM, or the program ended first).
        metrics : dict
            JSON object, e.g. ``{"makespan": 812.0, "core_hours_charged": 3.1, "stages": {...}}``.
        ended : float or None, default None
            End time in epoch seconds; None: now.
        params : dict or None, default None
            More settings learned during the run (e.g. the stages the front door saw), merged into the
            run's params.

        Raises
        ------
        UnknownRunError
            No run has this id.
        """
        if status not in RUN_STATUSES[1:]:
            raise UnknownNameError("run status", status, RUN_STATUSES[1:])
        values = {
            "status": status,
            "metrics": _check_json("metrics", metrics),
            "ended": time.time() if ended is None else _seconds("ended", ended),
        }
        extra = _check_json("params", params) if params is not None else None
        with self._errors("finish a run"), self._transaction(write=True) as conn:
            if extra:
                old = conn.execute(select(RunRow.params).where(RunRow.id == run_id)).scalar()
                values["params"] = {**(old or {}), **extra}
            done = conn.execute(update(RunRow).where(RunRow.id == run_id).values(**values)).rowcount
        if done != 1:
            raise UnknownRunError(self._url, run_id)

    def add_run_params(self, run_id: int, params: Mapping[str, Any]) -> None:
        """Merge ``params`` (a JSON object) into a run's params while it runs (e.g. its batch job ids).

        Raises
        ------
        UnknownRunError
            No run has this id.
        """
        extra = _check_json("params", params)
        with self._errors("update a run"), self._transaction(write=True) as conn:
            old = conn.execute(select(RunRow.params).where(RunRow.id == run_id)).first()
            if old is None:
                raise UnknownRunError(self._url, run_id)
            conn.execute(update(RunRow).where(RunRow.id == run_id).values(params={**(old[0] or {}), **extra}))

    def runs(
        self, *, workflow: str | None = None, strategy: str | None = None, backend: str | None = None
    ) -> pd.DataFrame:
        """Return recorded runs, oldest first, optionally filtered.

        Returns
        -------
        DataFrame
            Columns ``run_id, workflow, strategy, backend, status, started, ended, params``, then one
            column per metric; nested metrics are flattened with dots (``stages.s1.wait``), and a metric
            named like one of the first columns is prefixed with ``metrics.``. Runs without a metric have
            NaN there.
        """
        query = select(RunRow).order_by(RunRow.id)
        for column, value in (
            (RunRow.workflow, workflow),
            (RunRow.strategy, strategy),
            (RunRow.backend, backend),
        ):
            if value is not None:
                query = query.where(column == value)
        with self._errors("read runs"), self._transaction(write=False) as conn:
            rows = conn.execute(query).all()
        base = pd.DataFrame(
            [(r.id, r.workflow, r.strategy, r.backend, r.status, r.started, r.ended, r.params) for r in rows],
            columns=["run_id", "workflow", "strategy", "backend", "status", "started", "ended", "params"],
        )
        if not rows:
            return base
        metrics = pd.json_normalize([r.metrics or {} for r in rows], sep=".")
        metrics = metrics.rename(columns=lambda name: f"metrics.{name}" if name in base.columns else name)
        return pd.concat([base, metrics.set_index(base.index)], axis=1)

    # -- stage runtimes ---------------------------------------------------------------------

    def add_stage_runtime(
        self,
        workflow: str,
        stage: str,
        runtime: float,
        *,
        censored: bool = False,
        cores: int | None = None,
        run_id: int | None = None,
    ) -> None:
        """Record how long one stage ran.

        Parameters
        ----------
        workflow, stage : str
            Which stage.
        runtime : float
            Seconds.
        censored : bool, default False
            True when the stage was cut at a walltime: ``runtime`` is then a lower bound.
        cores : int or None, default None
            Cores it ran on.
        run_id : int or None, default None
            The run it belongs to.

        Raises
        ------
        UnknownRunError
            ``run_id`` is not a recorded run.
        """
        row = {
            "workflow": _name("workflow", workflow),
            "stage": _name("stage", stage),
            "runtime": _seconds("runtime", runtime),
            "censored": bool(censored),
            "cores": _cores(cores),
            "run_id": run_id,
            "recorded": time.time(),
        }
        try:
            with self._errors("add a stage runtime"), self._transaction(write=True) as conn:
                conn.execute(insert(StageRuntimeRow).values(**row))
        except StoreError as exc:
            if run_id is not None and isinstance(exc.__cause__, IntegrityError):
                raise UnknownRunError(self._url, run_id) from exc
            raise

    def stage_runtimes(self, workflow: str, stage: str) -> tuple[FloatArray, BoolArray]:
        """Return the runtimes of a stage, oldest first, and which of them are censored.

        Returns
        -------
        runtimes : ndarray of float64
            Seconds.
        censored : ndarray of bool
            True where the runtime is only a lower bound (the stage hit its walltime).
        """
        query = (
            select(StageRuntimeRow.runtime, StageRuntimeRow.censored)
            .where(StageRuntimeRow.workflow == workflow, StageRuntimeRow.stage == stage)
            .order_by(StageRuntimeRow.id)
        )
        with self._errors("read stage runtimes"), self._transaction(write=False) as conn:
            rows = conn.execute(query).all()
        return (
            np.array([r[0] for r in rows], dtype=np.float64),
            np.array([bool(r[1]) for r in rows], dtype=np.bool_),
        )

    # -- queue waits ------------------------------------------------------------------------

    def add_wait(
        self,
        key: str,
        wait: float,
        *,
        cores: int | None = None,
        user: str | None = None,
        backend: str | None = None,
        submit_time: float | None = None,
    ) -> None:
        """Record one observed queue wait.

        Parameters
        ----------
        key : str
            Geometry key of the allocation (e.g. cores bucket and partition).
        wait : float
            Seconds from submit to start.
        cores : int or None, default None
        user, backend : str or None, default None
        submit_time : float or None, default None
            Submit time on the backend's clock, seconds.
        """
        row = {
            "key": _name("key", key),
            "wait": _seconds("wait", wait),
            "cores": _cores(cores),
            "user": user,
            "backend": backend,
            "submit_time": _seconds("submit_time", submit_time, optional=True),
            "recorded": time.time(),
        }
        with self._errors("add a wait"), self._transaction(write=True) as conn:
            conn.execute(insert(WaitRow).values(**row))

    def waits(self, key: str, *, user: str | None = None, backend: str | None = None) -> FloatArray:
        """Return the observed waits of a geometry key in seconds, oldest first, optionally filtered."""
        query = select(WaitRow.wait).where(WaitRow.key == key).order_by(WaitRow.id)
        if user is not None:
            query = query.where(WaitRow.user == user)
        if backend is not None:
            query = query.where(WaitRow.backend == backend)
        with self._errors("read waits"), self._transaction(write=False) as conn:
            values = conn.scalars(query).all()
        return np.array(values, dtype=np.float64)

    # -- learner state ----------------------------------------------------------------------

    def load_learner_state(self, learner: str, key: str) -> dict[str, Any] | None:
        """Return the saved state of ``learner`` for ``key``, or None if none was saved."""
        query = select(LearnerStateRow.state).where(
            LearnerStateRow.learner == learner, LearnerStateRow.key == key
        )
        with self._errors("load learner state"), self._transaction(write=False) as conn:
            state: dict[str, Any] | None = conn.scalar(query)
        return state

    def learner_states(self, learner: str) -> dict[str, dict[str, Any]]:
        """Return every saved state of ``learner``, by key."""
        query = select(LearnerStateRow.key, LearnerStateRow.state).where(LearnerStateRow.learner == learner)
        with self._errors("load learner states"), self._transaction(write=False) as conn:
            return {row[0]: row[1] for row in conn.execute(query)}

    def save_learner_state(self, learner: str, key: str, state: Mapping[str, Any]) -> None:
        """Replace the saved state of ``learner`` for ``key``; last writer wins.

        For read-modify-write use :meth:`update_learner_state`, which never loses an update.
        """
        checked = _check_json("state", state)
        self.update_learner_state(learner, key, lambda _old: checked)

    def update_learner_state(
        self, learner: str, key: str, fn: Callable[[dict[str, Any] | None], Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Atomically replace the state of ``learner`` for ``key`` with ``fn(old_state)``.

        The row is locked while ``fn`` runs (``SELECT ... FOR UPDATE`` on PostgreSQL, ``BEGIN
        IMMEDIATE`` on SQLite), so concurrent updates from several processes never lose one another.

        Parameters
        ----------
        learner, key : str
            Whose state: the learner's name and e.g. a geometry key.
        fn : callable
            Takes the current state (None if none) and returns the new one (a JSON object). Keep it
            quick: other writers wait. It may be called again if two processes create the same key at
            the same instant (the loser retries), so it must not have side effects.

        Returns
        -------
        dict
            The state saved.
        """
        _name("learner", learner)
        _name("key", key)
        where = (LearnerStateRow.learner == learner, LearnerStateRow.key == key)
        for attempt in range(_INSERT_RETRIES):
            try:
                with self._errors("update learner state"), self._transaction(write=True) as conn:
                    old = conn.scalar(select(LearnerStateRow.state).where(*where).with_for_update())
                    new = _check_json("the state returned by fn", fn(old))
                    values = {"state": new, "updated": time.time()}
                    if old is None:
                        conn.execute(insert(LearnerStateRow).values(learner=learner, key=key, **values))
                    else:
                        conn.execute(update(LearnerStateRow).where(*where).values(**values))
                return new
            except StoreError as exc:
                # Two writers found no row and both inserted: the loser retries and now locks the row.
                if not isinstance(exc.__cause__, IntegrityError) or attempt == _INSERT_RETRIES - 1:
                    raise
                logger.debug("store %s: retrying %s/%s after a concurrent insert", self._url, learner, key)
        raise AssertionError("unreachable: the loop returns or raises")
