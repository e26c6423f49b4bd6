"""What the benchmarks take from the test fixtures, under public names.

A local Slurm cluster (:class:`LocalSlurmCluster`, ``tests/fixtures/slurm_cluster.py``) and a Prefect
server on 127.0.0.1 (:func:`start_prefect_server`, :func:`stop_prefect_server`). The benchmarks use these
only, never a fixture module's private helpers, so the fixtures can change inside.

:func:`private_prefect_home` gives Prefect a private ``PREFECT_HOME`` and turns its telemetry off (what
``tests/fixtures/prefect_server.py`` does on import): call it before Prefect is imported.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

try:
    from tests.fixtures.slurm_cluster import LocalSlurmCluster
except ImportError as exc:  # the fixtures need the test dependencies (pytest), which a plain install lacks
    raise SystemExit(
        f"the benchmarks that start a local Slurm cluster need the test dependencies ({exc}): run them with "
        "the development environment (.venv/bin/python after `bash scripts/bootstrap.sh test`), or "
        "`pip install '.[dev]'` first"
    ) from None

if TYPE_CHECKING:
    from tests.fixtures.prefect_server import PrefectServer

__all__ = ["LocalSlurmCluster", "private_prefect_home", "start_prefect_server", "stop_prefect_server"]


def private_prefect_home() -> Path:
    """Give this process (and its children) a private, fresh ``PREFECT_HOME``, telemetry off; return it."""
    from tests.fixtures import prefect_server

    return prefect_server.HOME


def start_prefect_server() -> tuple[PrefectServer, subprocess.Popen[bytes]]:
    """Start a Prefect server under the private home, in a process group of its own; wait until healthy."""
    from tests.fixtures import prefect_server

    return prefect_server.start_prefect_server(private_prefect_home() / "server")


def stop_prefect_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server's whole process group (whatever it started too); remove the private home.

    What this process' Prefect log and event workers still hold is sent first: sent after the server
    is gone, Prefect's exit handler retries it for a minute ("Error logging to API").
    """
    from tests.fixtures.prefect_server import drain_prefect_clients
    from tests.fixtures.processes import stop_group

    drain_prefect_clients()
    stop_group(proc.pid)
    proc.wait(timeout=30)
    shutil.rmtree(private_prefect_home(), ignore_errors=True)
