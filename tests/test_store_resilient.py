"""A store that stops answering or goes away never blocks a run, and every write reaches it or a journal.

Real databases only: a SQLite file locked by another connection, a PostgreSQL server frozen with SIGSTOP
(then SIGCONT), one killed with SIGKILL (started again, or left down), and a PostgreSQL database that
refuses connections. The servers frozen or killed are this module's own, not the session's.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from elastic.errors import ConfigError, ElasticError
from elastic.store import Store, StoreError
from elastic.store.resilient import ResilientStore, replay_journal
from tests.fixtures.postgres import PostgresServer, kill_server, restart_server, running_server, signal_server


def _count(fn_state):
    """A learner update as the learners write them: fold one observation into whatever state is given."""
    return {"n": (fn_state or {}).get("n", 0) + 1}


def _a_run(store: ResilientStore) -> tuple[int, float]:
    """What a run does with its store; returns the run id and the longest single call in seconds."""
    longest = 0.0

    def timed(fn, *args, **kwargs):
        nonlocal longest
        began = time.monotonic()
        out = fn(*args, **kwargs)
        longest = max(longest, time.monotonic() - began)
        return out

    run = timed(store.record_run, "wf", "asa", "mock", params={"seed": 1})
    for wait in (10.0, 20.0, 30.0):
        timed(store.add_wait, "cores=1-1", wait, cores=1)
    timed(store.add_stage_runtime, "wf", "s1", 12.5, censored=False, cores=1, run_id=run)
    timed(store.stage_runtimes, "wf", "s1")
    state = timed(store.update_learner_state, "asa", "k", _count)
    assert state == {"n": 1}
    timed(store.add_run_params, run, {"jobs": ["1", "2"]})
    timed(store.finish_run, run, "completed", {"makespan": 5.0})
    return run, longest


def _check_written(url: str) -> None:
    with Store(url) as plain:
        runs = plain.runs()
        assert list(runs["status"]) == ["completed"]
        assert runs["params"].iloc[0] == {"seed": 1, "jobs": ["1", "2"]}
        assert sorted(plain.waits("cores=1-1")) == [10.0, 20.0, 30.0]
        assert list(plain.stage_runtimes("wf", "s1")[0]) == [12.5]
        assert plain.load_learner_state("asa", "k") == {"n": 1}


def test_a_healthy_store_gets_every_call_in_order(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = ResilientStore(Store(url), timeout=5)
    run, _ = _a_run(store)
    assert run > 0
    # a read sees this process's own queued writes
    store.add_stage_runtime("wf", "s1", 7.0, censored=True)
    assert list(store.stage_runtimes("wf", "s1")[0]) == [12.5, 7.0]
    store.close()
    assert store.journal is None
    with Store(url) as plain:
        assert list(plain.stage_runtimes("wf", "s1")[1]) == [False, True]


@contextmanager
def _sqlite_locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on a SQLite database from another connection (a stuck process)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)
    conn.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def test_a_locked_sqlite_store_does_not_block_and_loses_nothing(tmp_path: Path, caplog) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    Store(url).runs()  # the schema exists, as for any store used before
    store = ResilientStore(Store(url), timeout=0.5, flush_timeout=60)
    with caplog.at_level(logging.WARNING, logger="elastic.store.resilient"), _sqlite_locked(path):
        began = time.monotonic()
        run, longest = _a_run(store)
        assert run < 0, "a provisional id while the store does not answer"
        assert longest < 2.0
        assert time.monotonic() - began < 4.0
        assert store.pending >= 7
    assert "is not answering" in caplog.text
    store.close()
    assert store.journal is None  # the lock is gone: everything is written on close
    _check_written(url)


def test_writes_the_store_never_takes_go_to_a_journal_that_replays(tmp_path: Path, caplog) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    Store(url).runs()
    store = ResilientStore(Store(url), timeout=0.3, flush_timeout=0.5, journal_dir=tmp_path / "j")
    with caplog.at_level(logging.ERROR, logger="elastic.store.resilient"), _sqlite_locked(path):
        _a_run(store)
        store.close()
        journal = store.journal
    assert journal is not None and journal.parent == tmp_path / "j"
    assert f"elastic store replay {journal}" in caplog.text
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert lines[0]["method"] == "record_run" and lines[0]["provisional"] < 0
    # the worker may still be inside its first call when the journal is written, so the store may have
    # the run already; replay into a fresh store shows the journal alone is complete
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    with Store(fresh) as target:
        assert replay_journal(journal, target) == len(lines)
    _check_written(fresh)


def test_a_journal_that_is_not_one_is_refused_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text(
        '{"v": 1, "method": "add_wait", "args": ["k", 1.0], "kwargs": {}}\n{"v": 1, "method": "drop"}\n'
    )
    with Store("sqlite://") as target, pytest.raises(ElasticError, match=r"x.jsonl:2: unknown call 'drop'"):
        replay_journal(bad, target)


@pytest.mark.parametrize(("arg", "value"), [("timeout", 0), ("timeout", "1"), ("flush_timeout", -1)])
def test_bad_settings_are_refused(arg: str, value: object) -> None:
    with pytest.raises(ConfigError, match=arg):
        ResilientStore(Store("sqlite://"), **{arg: value})


class _OwnServer:
    """A PostgreSQL server of this module's own, which its tests freeze, kill and start again."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server

    def url(self) -> Iterator[str]:
        name = f"elastic_test_{secrets.token_hex(4)}"
        yield self.server.create_database(name)
        self.server.drop_database(name)


@pytest.fixture(scope="module")
def own_server() -> Iterator[_OwnServer]:
    """A server no other test uses (a second or two to start): frozen or killed here, never the session's."""
    with running_server() as server:
        yield _OwnServer(server)  # stopped by its latest pid (read from its data directory)


@pytest.fixture
def own_url(own_server: _OwnServer) -> Iterator[str]:
    yield from own_server.url()


@contextmanager
def _frozen(server: PostgresServer) -> Iterator[None]:
    pids = signal_server(server, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@pytest.mark.postgres
def test_a_frozen_postgresql_server_does_not_block_the_run(own_server: _OwnServer, own_url: str) -> None:
    Store(own_url).runs()
    store = ResilientStore(Store(own_url), timeout=0.5, flush_timeout=60)
    store.stage_runtimes("wf", "s1")  # a pooled connection, as mid-run
    with _frozen(own_server.server):
        began = time.monotonic()
        _, longest = _a_run(store)
        assert longest < 2.0
        assert time.monotonic() - began < 4.0
    store.close()  # SIGCONT: what was queued is written now
    assert store.journal is None
    _check_written(own_url)


@pytest.mark.postgres
def test_a_killed_postgresql_server_started_again_gets_every_write(
    own_server: _OwnServer, own_url: str, caplog
) -> None:
    Store(own_url).runs()
    store = ResilientStore(Store(own_url), timeout=0.5, flush_timeout=60)
    store.stage_runtimes("wf", "s1")
    kill_server(own_server.server)
    try:
        with caplog.at_level(logging.WARNING, logger="elastic.store.resilient"):
            began = time.monotonic()
            run, longest = _a_run(store)
            assert run < 0, "a provisional id while the server is down"
            assert longest < 2.0
            assert time.monotonic() - began < 4.0
            assert store.pending >= 7, "the run's writes are kept, not dropped"
        assert "is not answering" in caplog.text
    finally:
        own_server.server = restart_server(own_server.server)
    store.close()  # the server is back: the queue drains into it
    assert store.journal is None
    _check_written(own_url)


@pytest.mark.postgres
def test_a_killed_postgresql_server_that_stays_down_leaves_a_journal(
    own_server: _OwnServer, own_url: str, tmp_path: Path, caplog
) -> None:
    Store(own_url).runs()
    store = ResilientStore(Store(own_url), timeout=0.5, flush_timeout=1, journal_dir=tmp_path)
    store.stage_runtimes("wf", "s1")
    kill_server(own_server.server)
    try:
        with caplog.at_level(logging.ERROR, logger="elastic.store.resilient"):
            _, longest = _a_run(store)
            began = time.monotonic()
            store.close()
            assert time.monotonic() - began < 5.0, "closing waits flush_timeout, not for the server"
        journal = store.journal
        assert journal is not None and journal.parent == tmp_path
        assert f"elastic store replay {journal}" in caplog.text
        assert longest < 2.0
    finally:
        own_server.server = restart_server(own_server.server)
    with Store(own_url) as target:
        replay_journal(journal, target)
    _check_written(own_url)


@pytest.mark.postgres
def test_a_postgresql_database_that_goes_away_keeps_the_writes(
    postgres_server: PostgresServer, postgres_url: str, tmp_path: Path
) -> None:
    name = postgres_url.rsplit("/", 1)[1]
    Store(postgres_url).runs()
    store = ResilientStore(Store(postgres_url), timeout=0.5, flush_timeout=1, journal_dir=tmp_path)
    store.stage_runtimes("wf", "s1")
    postgres_server._admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    postgres_server._admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
    try:
        _, longest = _a_run(store)
        assert longest < 2.0
        store.close()
        journal = store.journal
    finally:
        postgres_server._admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    assert journal is not None
    with Store(postgres_url) as target:
        replay_journal(journal, target)
    _check_written(postgres_url)


@pytest.mark.postgres
@pytest.mark.slow
def test_sigterm_ends_elastic_run_while_its_postgresql_store_is_frozen(
    own_server: _OwnServer, own_url: str, tmp_path: Path
) -> None:
    import subprocess
    import sys

    Store(own_url).runs()
    cmd = [sys.executable, "-m", "elastic", "run", "--workflow", "demo3", "--strategy", "asa"]
    proc = subprocess.Popen(
        [*cmd, "--speedup", "60", "--store", own_url],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the run has recorded itself
            with Store(own_url) as plain:
                if not plain.runs().empty:
                    break
            time.sleep(0.2)
        with _frozen(own_server.server):
            time.sleep(3)
            proc.send_signal(signal.SIGTERM)
            began = time.monotonic()
            _, err = proc.communicate(timeout=60)
            ended_in = time.monotonic() - began
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert ended_in < 30, f"SIGTERM took {ended_in:.0f} s to end the run"
    journals = list((tmp_path / ".elastic-journal").glob("journal-*.jsonl"))
    assert len(journals) == 1, err[-2000:]
    assert f"elastic store replay {journals[0]}" in err
    with Store(own_url) as plain:
        replay_journal(journals[0], plain)
        assert list(plain.runs()["status"]) == ["interrupted"]


class _DownStore(Store):
    """An in-memory store whose ``add_wait`` fails (the server is down) until ``up`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"sqlite:///{path}")
        self.up = False
        self.tries = 0

    def add_wait(self, key: str, wait: float, **kwargs: object) -> None:  # type: ignore[override]
        self.tries += 1
        if not self.up:
            raise StoreError(self.url, "connection refused")
        super().add_wait(key, wait, **kwargs)  # type: ignore[arg-type]


def test_calls_queued_during_an_outage_do_not_hurry_the_retries(tmp_path: Path) -> None:
    inner = _DownStore(tmp_path / "s.db")
    store = ResilientStore(inner, timeout=0.2, flush_timeout=10, owns=False)
    store.add_wait("k", 1.0)
    for i in range(300):  # a run goes on calling: each call wakes the worker's condition
        store.add_stage_runtime("wf", "s", float(i))
        time.sleep(0.002)
    # about a second: the first attempt and one or two retries (1 s, then 2 s apart), not one per call
    assert 1 <= inner.tries <= 4, inner.tries
    inner.up = True
    store.close()  # closing retries at once: the store is back, so everything is written
    assert store.journal is None
    assert list(inner.waits("k")) == [1.0]
    assert len(inner.stage_runtimes("wf", "s")[0]) == 300
    inner.close()
