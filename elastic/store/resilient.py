"""A store a run never waits on: writes go behind, reads wait a bounded time, nothing is lost.

A run talks to its :class:`~elastic.store.Store` while it runs: it records itself, adds the queue waits
and stage runtimes it observes, and shares learner state. A database that stops answering (a frozen
PostgreSQL server, a SQLite file locked by a stuck process, a network partition) must not stop the run,
and one that goes away must not make it give up its work. :class:`ResilientStore` wraps a store so that:

- **every call runs on one worker thread** that owns the store's connections, in the order made;
- **writes** (``add_wait``, ``add_stage_runtime``, ``add_run_params``, ``finish_run``,
  ``save_learner_state``, ``update_learner_state``) are queued and return at once; the worker retries
  a write the database could not take (backing off up to :data:`MAX_BACKOFF` s) until it is back;
- **reads** wait at most ``timeout`` seconds; past it, and until the store has caught up with every
  queued write, they answer at once from what this process already knows (the last answer to the same
  read, with the writes queued since applied where that is exact, or nothing: an empty history, no
  learner state) and log once per outage;
- ``update_learner_state`` applies its update to the state this process knows, returns that, and
  replays the same update on the database's state when it is back (the update functions are written to
  be replayed: they fold one observation into whatever state they are given);
- **closing** waits up to ``flush_timeout`` for the queue to drain; what is still queued is written to
  a journal file (:mod:`elastic.store.journal`) whose path the error log names, with the command
  that writes it to the store later: ``elastic store replay FILE``.

So a run ends on time whatever the database does, SIGTERM included, and every write either reached the
store or is in a journal the user is told about. :class:`ResilientStore` has the same methods as
:class:`~elastic.store.Store` that a run uses, so it satisfies the run's store protocols.

Written by hand rather than with a task-queue library: the store needs one ordered worker with
per-call deadlines and a replayable journal, a few dozen lines on :mod:`threading` and
:mod:`concurrent.futures`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from elastic.errors import ConfigError
from elastic.store._errors import StoreError, UnknownRunError
from elastic.store._store import Store
from elastic.store.journal import WRITES, json_default, replay_journal, with_run_ids, write_journal

__all__ = ["DEFAULT_TIMEOUT", "MAX_BACKOFF", "ResilientStore", "replay_journal"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a read waits for the store before answering from what the process knows."""
MAX_BACKOFF: Final = 30.0
"""Longest pause, in seconds, between two attempts of a write the store could not take."""


@dataclass(eq=False)
class _Call:
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    future: Future[Any] | None = None  # reads and record_run: someone may wait for the answer
    attempts: int = 0
    abandoned: bool = field(default=False)  # a read nobody waits for any more
    provisional: int | None = None  # record_run: the id handed out while the store did not answer


def _positive(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)


class ResilientStore:
    """Wrap ``store`` so that no call blocks a run for longer than ``timeout`` and no write is lost.

    Parameters
    ----------
    store : Store
        The store to write to; this object owns it from now on (closes it).
    timeout : float, default DEFAULT_TIMEOUT
        Seconds a read (or ``record_run``) waits for the store.
    flush_timeout : float or None, default None
        Seconds :meth:`close` waits for queued writes; None: ``3 * timeout``.
    journal_dir : path or None, default None
        Where :meth:`close` writes what could not be written; None: the current directory's
        ``.elastic-journal/``.
    owns : bool, default True
        Whether :meth:`close` closes ``store`` too (False for a store the caller keeps using).

    Examples
    --------
    >>> s = ResilientStore(Store("sqlite://"))
    >>> run = s.record_run("demo3", "asa", "mock")
    >>> s.add_stage_runtime("demo3", "s1", 12.5, run_id=run)
    >>> s.stage_runtimes("demo3", "s1")[0]
    array([12.5])
    >>> s.close()
    """

    def __init__(
        self,
        store: Store,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        flush_timeout: float | None = None,
        journal_dir: str | os.PathLike[str] | None = None,
        owns: bool = True,
    ) -> None:
        if not isinstance(store, Store):
            raise ConfigError(f"store must be a Store, got {type(store).__name__}")
        self._store = store
        self._owns = bool(owns)
        self._timeout = _positive("timeout", timeout)
        self._flush = self._timeout if flush_timeout is None else _positive("flush_timeout", flush_timeout)
        self._journal_dir = Path(journal_dir) if journal_dir is not None else Path.cwd() / ".elastic-journal"
        self._queue: deque[_Call] = deque()
        self._cond = threading.Condition()
        self._busy = False  # the worker is inside a store call
        self._closing = False
        self._down_since: float | None = None  # first failure or timeout of the current outage
        self._known: dict[tuple[Any, ...], Any] = {}  # last answer of each read, kept current
        self._provisional = -1
        self._ids: dict[int, int] = {}  # provisional run id -> id the store gave
        self._close_deadline = math.inf
        self.journal: Path | None = None
        """The journal :meth:`close` wrote (the calls the store did not take), or None."""
        self._journaled = False  # close() wrote the queue to a journal: the worker must not touch it
        self._worker = threading.Thread(target=self._work, name="elastic-store", daemon=True)
        self._worker.start()

    @property
    def url(self) -> str:
        """The store URL with its password masked."""
        return self._store.url

    @property
    def pending(self) -> int:
        """Calls queued or in progress (writes not yet in the store)."""
        with self._cond:
            return len(self._queue) + self._busy

    def __repr__(self) -> str:
        return f"ResilientStore({self._store.url!r}, timeout={self._timeout:g})"

    def __enter__(self) -> ResilientStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the worker -------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                call = self._queue[0]
                if call.abandoned:
                    self._queue.popleft()
                    continue
                self._busy = True
            outcome, value = self._attempt(call)
            with self._cond:
                self._busy = False
                if self._journaled:  # close() gave up on this call and journaled it
                    return
                if outcome == "retry":
                    self._mark_down(f"{call.method}: {value}")
                    self._back_off(min(MAX_BACKOFF, 0.5 * 2 ** min(call.attempts, 10)))
                    if self._closing and time.monotonic() >= self._close_deadline:
                        return
                    continue
                self._queue.popleft()
                self._cond.notify_all()
                if self._down_since is not None and not self._queue:  # caught up: wait for reads again
                    down = time.monotonic() - self._down_since
                    self._down_since = None
                    logger.warning(
                        "store %s has caught up after %.0f s: everything queued is written", self.url, down
                    )
            if call.future is not None and not call.future.done():
                if outcome == "ok":
                    call.future.set_result(value)
                else:
                    call.future.set_exception(value)

    def _back_off(self, pause: float) -> None:
        """Wait ``pause`` seconds before the next attempt (the condition's lock held).

        Only :meth:`close` cuts the pause short (to try once more, then journal by its deadline): the calls
        queued meanwhile notify the condition too, and waking for them would retry a dead server as fast
        as a run makes calls, and lengthen the back-off to its longest within seconds, so that the writes
        would wait up to :data:`MAX_BACKOFF` after the server is back.
        """
        until = time.monotonic() + pause
        closing = self._closing
        while True:
            left = (min(until, self._close_deadline) if self._closing else until) - time.monotonic()
            if left <= 0 or self._closing != closing:
                return
            self._cond.wait(timeout=left)

    def _attempt(self, call: _Call) -> tuple[str, Any]:
        call.attempts += 1
        args, kwargs = with_run_ids(call.method, call.args, call.kwargs, self._ids)
        try:
            value = getattr(self._store, call.method)(*args, **kwargs)
        except (UnknownRunError, ConfigError) as exc:  # the call itself is wrong: retrying cannot help
            if call.future is None:
                logger.error("store %s refused %s: %s (dropped)", self.url, call.method, exc)
            return "error", exc
        except StoreError as exc:  # the database cannot be reached or is locked: try again later
            return "retry", exc
        except Exception as exc:  # a bug of ours: report it, do not retry for ever
            logger.exception("store call %s failed", call.method)
            return "error", exc
        return "ok", value

    def _mark_down(self, why: str) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            logger.warning(
                "store %s is not answering (%s); the run goes on and writes what it learns when the store is "
                "back",
                self.url,
                why,
            )

    # -- calling ----------------------------------------------------------------------------

    def _enqueue(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], *, wait: bool) -> _Call:
        call = _Call(method, args, kwargs, Future() if wait else None)
        with self._cond:
            if self._closing:
                raise StoreError(self.url, f"cannot {method}: the store is closed")
            self._queue.append(call)
            self._cond.notify_all()
        return call

    def _read(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], fallback: Any) -> Any:
        key = (method, args, tuple(sorted(kwargs.items())))
        if self._down_since is not None:  # do not wait a timeout per read through an outage
            return self._known.get(key, fallback)
        call = self._enqueue(method, args, kwargs, wait=True)
        assert call.future is not None
        try:
            value = call.future.result(timeout=self._timeout)
        except FutureTimeout:
            call.abandoned = True
            with self._cond:
                self._mark_down(f"{method} took longer than {self._timeout:g} s")
            return self._known.get(key, fallback)
        except StoreError:
            return self._known.get(key, fallback)
        self._known[key] = value
        return value

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
        """Record the start of a run (:meth:`Store.record_run`); return its id.

        Waits up to ``timeout`` for the store's id; past it returns a provisional negative id that the
        later calls of this object translate, and the run is recorded when the store is back.
        """
        started = time.time() if started is None else started
        call = self._enqueue(
            "record_run",
            (workflow, strategy, backend),
            {"started": started, "params": None if params is None else _plain(params)},
            wait=True,
        )
        assert call.future is not None
        if self._down_since is None:
            try:
                return int(call.future.result(timeout=self._timeout))
            except FutureTimeout:
                pass
            except StoreError:
                raise
        with self._cond:
            provisional = call.provisional = self._provisional
            self._provisional -= 1
            self._mark_down(f"record_run took longer than {self._timeout:g} s")
        call.future.add_done_callback(lambda f: self._learn_id(provisional, f))
        return provisional

    def _learn_id(self, provisional: int, future: Future[Any]) -> None:
        if future.exception() is None:
            self._ids[provisional] = int(future.result())

    def finish_run(self, run_id: int, status: str, metrics: Mapping[str, Any], **kwargs: Any) -> None:
        """Queue :meth:`Store.finish_run`."""
        self._enqueue("finish_run", (run_id, status, _plain(metrics)), _plain(kwargs), wait=False)

    def add_run_params(self, run_id: int, params: Mapping[str, Any]) -> None:
        """Queue :meth:`Store.add_run_params`."""
        self._enqueue("add_run_params", (run_id, _plain(params)), {}, wait=False)

    def runs(self, **kwargs: Any) -> Any:
        """:meth:`Store.runs`, or the last answer (an empty table the first time) if the store is away."""
        import pandas as pd

        return self._read("runs", (), kwargs, pd.DataFrame())

    # -- runtimes and waits -----------------------------------------------------------------

    def add_stage_runtime(self, workflow: str, stage: str, runtime: float, **kwargs: Any) -> None:
        """Queue :meth:`Store.add_stage_runtime`; later reads of this process see it at once."""
        self._enqueue("add_stage_runtime", (workflow, stage, runtime), dict(kwargs), wait=False)
        key = ("stage_runtimes", (workflow, stage), ())
        if key in self._known:
            values, censored = self._known[key]
            self._known[key] = (
                np.append(values, float(runtime)),
                np.append(censored, bool(kwargs.get("censored", False))),
            )

    def stage_runtimes(self, workflow: str, stage: str) -> tuple[Any, Any]:
        """:meth:`Store.stage_runtimes`, or what this process knows if the store is away."""
        empty = (np.empty(0, dtype=np.float64), np.empty(0, dtype=np.bool_))
        out: tuple[Any, Any] = self._read("stage_runtimes", (workflow, stage), {}, empty)
        return out

    def add_wait(self, key: str, wait: float, **kwargs: Any) -> None:
        """Queue :meth:`Store.add_wait`."""
        self._enqueue("add_wait", (key, wait), dict(kwargs), wait=False)

    def waits(self, key: str, **kwargs: Any) -> Any:
        """:meth:`Store.waits`, or what this process knows if the store is away."""
        return self._read("waits", (key,), kwargs, np.empty(0, dtype=np.float64))

    # -- learner state ----------------------------------------------------------------------

    def load_learner_state(self, learner: str, key: str) -> dict[str, Any] | None:
        """:meth:`Store.load_learner_state`, or the state this process knows if the store is away."""
        state: dict[str, Any] | None = self._read("load_learner_state", (learner, key), {}, None)
        return state

    def learner_states(self, learner: str) -> dict[str, dict[str, Any]]:
        """:meth:`Store.learner_states`, or the last answer if the store is away."""
        states: dict[str, dict[str, Any]] = self._read("learner_states", (learner,), {}, {})
        return states

    def save_learner_state(self, learner: str, key: str, state: Mapping[str, Any]) -> None:
        """Queue :meth:`Store.save_learner_state`; later reads of this process see it at once."""
        plain = _plain(state)
        self._enqueue("save_learner_state", (learner, key, plain), {}, wait=False)
        self._known[("load_learner_state", (learner, key), ())] = plain

    def update_learner_state(
        self, learner: str, key: str, fn: Callable[[dict[str, Any] | None], Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Atomically update a learner's state (:meth:`Store.update_learner_state`); return it.

        Waits up to ``timeout`` for the store; past it applies ``fn`` to the state this process knows,
        returns that, and replays ``fn`` on the store's state when the store is back.
        """
        known = ("load_learner_state", (learner, key), ())
        call = self._enqueue("update_learner_state", (learner, key, fn), {}, wait=True)
        assert call.future is not None
        try:
            if self._down_since is not None:
                raise FutureTimeout
            state: dict[str, Any] = call.future.result(timeout=self._timeout)
        except FutureTimeout:
            with self._cond:
                self._mark_down(f"update_learner_state took longer than {self._timeout:g} s")
            state = dict(fn(self._known.get(known)))
        except StoreError:
            state = dict(fn(self._known.get(known)))
        self._known[known] = state
        return state

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Write what is queued, waiting up to ``flush_timeout``; journal the rest; close the store.

        :attr:`journal` is then the journal written with the calls that did not reach the store (None
        when all did).
        """
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._close_deadline = time.monotonic() + self._flush
            self._cond.notify_all()
        self._worker.join(timeout=self._flush)
        with self._cond:
            left = [c for c in self._queue if not c.abandoned and c.method in WRITES | {"record_run"}]
            self._queue.clear()
            hung = self._worker.is_alive()
            self._journaled = bool(left)
        if not left:
            if not hung and self._owns:
                self._store.close()
            return
        self._journal_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.journal = self._journal_dir / f"journal-{os.getpid()}-{int(time.time())}.jsonl"
        write_journal(path, [(c.method, c.args, c.kwargs, c.provisional) for c in left], self._ids)
        logger.error(
            "store %s did not take %d write(s) within %g s; they are kept in %s: write them with "
            "`elastic store replay %s --store URL` once the store answers",
            self.url,
            len(left),
            self._flush,
            path,
            path,
        )
        if not hung and self._owns:  # a worker stuck in a call keeps its connection; exit ends both
            self._store.close()


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    """Return a JSON copy of ``value`` made now (the caller may change its dict after the call returns)."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected a dict (a JSON object), got {type(value).__name__}")
    try:
        out: dict[str, Any] = json.loads(json.dumps(value, default=json_default, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"must hold only JSON values with finite numbers: {exc}") from exc
    return out
