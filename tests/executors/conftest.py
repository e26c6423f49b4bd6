"""Fixtures for the Prefect runner tests: the session's Prefect server, workers that import the tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.prefect_server import PrefectServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def api(prefect_api: PrefectServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[PrefectServer]:
    """The Prefect server, and workers (started by allocations) that import this test package."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    yield prefect_api
