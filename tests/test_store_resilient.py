"""A store that stops answering or goes away never blocks a run, and every write reaches it or a journal.

Real databases only: a SQLite file locked by another connection, a PostgreSQL server frozen with SIGSTOP,
and a PostgreSQL database that refuses connections.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from elastic.errors import ConfigError, ElasticError
from elastic.store import Store
from elastic.store.resilient import ResilientStore, replay_journal
from tests.fixtures.postgres import PostgresServer


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


def _server_pids(server: PostgresServer) -> list[int]:
    pids = [server.pid]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().split(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == server.pid:
            pids.append(int(stat.parent.name))
    return pids


@pytest.mark.postgres
def test_a_frozen_postgresql_server_does_not_block_the_run(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    Store(postgres_url).runs()
    store = ResilientStore(Store(postgres_url), timeout=0.5, flush_timeout=60)
    store.stage_runtimes("wf", "s1")  # a pooled connection, as mid-run
    pids = _server_pids(postgres_server)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        _, longest = _a_run(store)
        assert longest < 2.0
        assert time.monotonic() - began < 4.0
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    store.close()
    assert store.journal is None
    _check_written(postgres_url)


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
    postgres_server: PostgresServer, postgres_url: str, tmp_path: Path
) -> None:
    import subprocess
    import sys

    Store(postgres_url).runs()
    cmd = [sys.executable, "-m", "elastic", "run", "--workflow", "demo3", "--strategy", "asa"]
    proc = subprocess.Popen(
        [*cmd, "--speedup", "60", "--store", postgres_url],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the run has recorded itself
            with Store(postgres_url) as plain:
                if not plain.runs().empty:
                    break
            time.sleep(0.2)
        pids = _server_pids(postgres_server)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(3)
            proc.send_signal(signal.SIGTERM)
            began = time.monotonic()
            _, err = proc.communicate(timeout=60)
            ended_in = time.monotonic() - began
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert ended_in < 30, f"SIGTERM took {ended_in:.0f} s to end the run"
    journals = list((tmp_path / ".elastic-journal").glob("journal-*.jsonl"))
    assert len(journals) == 1, err[-2000:]
    assert f"elastic store replay {journals[0]}" in err
    with Store(postgres_url) as plain:
        replay_journal(journals[0], plain)
        assert list(plain.runs()["status"]) == ["interrupted"]
