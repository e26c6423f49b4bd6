"""Parsl monitoring with ElasticExecutor's default radio (issue 29).

With ``Config(monitoring=MonitoringHub(...))`` and no radio, Parsl failed every app with
``RadioRequiredError``; the executor now defaults to Parsl's ``FilesystemRadio`` (as WorkQueue and
TaskVine do), so tasks' "running" and resource messages reach the monitoring database.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from parsl.monitoring import MonitoringHub
from parsl.monitoring.radios.filesystem import FilesystemRadio
from parsl.monitoring.radios.udp import UDPRadio

from elastic.executors.parsl_executor import ElasticExecutor
from tests.executors import apps


def test_the_default_radio_is_the_filesystem_one() -> None:
    assert isinstance(ElasticExecutor().remote_monitoring_radio, FilesystemRadio)
    udp = UDPRadio(address="127.0.0.1")
    assert ElasticExecutor(remote_monitoring_radio=udp).remote_monitoring_radio is udp


@pytest.mark.timeout(180)
def test_monitoring_records_every_try_with_the_default_radio_regression_29(tmp_path: Path) -> None:
    db = tmp_path / "monitoring.db"
    hub = MonitoringHub(logging_endpoint=f"sqlite:///{db}", resource_monitoring_interval=1)
    ex = ElasticExecutor(store=False, poll_interval=1.0)
    with apps.loaded(ex, tmp_path / "run", monitoring=hub) as dfk:
        assert [apps.add_one(i).result(timeout=120) for i in range(3)] == [1, 2, 3]
        dfk.cleanup()  # flushes the radio's messages into the database
    with sqlite3.connect(db) as conn:
        tries = conn.execute(
            "SELECT task_id, task_executor, task_try_time_running IS NOT NULL, hostname "
            "FROM try ORDER BY task_id"
        ).fetchall()
        resources = conn.execute("SELECT DISTINCT task_id FROM resource ORDER BY task_id").fetchall()
    # "running" and resource messages come only from the tasks, through the radio
    assert [(t[0], t[1], t[2]) for t in tries] == [(0, "elastic", 1), (1, "elastic", 1), (2, "elastic", 1)]
    assert all(t[3] for t in tries), "each try names the host it ran on"
    assert resources == [(0,), (1,), (2,)]


@pytest.mark.timeout(180)
def test_allocations_are_blocks_in_the_monitoring_database(tmp_path: Path) -> None:
    """Each allocation is a block of the database's ``block`` table, with its job id and each state it had
    (what ``parsl-visualize`` reads for HTEX's blocks)."""
    db = tmp_path / "monitoring.db"
    hub = MonitoringHub(logging_endpoint=f"sqlite:///{db}", resource_monitoring_interval=1)
    ex = ElasticExecutor(store=False, poll_interval=1.0, strategy="perstage", progress=False)
    with apps.loaded(ex, tmp_path / "run", monitoring=hub) as dfk:
        assert [apps.add_one(i).result(timeout=120) for i in range(2)] == [1, 2]
        allocations = {a.alloc_id: a.backend_job_id for a in ex.view().allocations}
        dfk.cleanup()
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT block_id, job_id, status, executor_label, run_id FROM block ORDER BY timestamp"
        ).fetchall()
        (run_id,) = conn.execute("SELECT run_id FROM workflow").fetchone()
    assert allocations, "the run had an allocation"
    assert {r[0] for r in rows} == set(allocations)
    for block, job, _, label, run in rows:
        assert job == allocations[block] and label == "elastic" and run == run_id
    states = [r[2] for r in rows if r[0] == next(iter(allocations))]
    assert "RUNNING" in states and states[-1] in ("CANCELLED", "COMPLETED"), states
