"""Fixtures of the demo-workflow tests: small sizes, a serial submitter, Prefect's API, a store."""

from __future__ import annotations

import concurrent.futures
import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic.front.tasks import resolve_arguments
from elastic.store import Store

SMALL = {"montage": 2, "blast": 2, "statistics": 2}
"""Sizes the tests run: seconds each (montage 4 tiles, blast 14 queries, statistics 2 weeks)."""


class SerialSubmitter:
    """Runs each task at once in this process (futures among the arguments replaced by their results).

    Not a front-end of the product: the smallest thing a driver can run on, for tests of the demos'
    inputs and checks that need an output quickly.
    """

    def __init__(self) -> None:
        self.calls: list[str] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> concurrent.futures.Future[Any]:
        self.calls.append(fn.__name__)
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            resolved, _ = resolve_arguments(args, {})
            future.set_result(fn(*resolved))
        except Exception as exc:
            future.set_exception(exc)
        return future


@pytest.fixture
def serial() -> SerialSubmitter:
    return SerialSubmitter()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as s:
        yield s


if importlib.util.find_spec("tests.fixtures.prefect_server") is None:
    # No session Prefect server among the test plugins: the tests here start their own. Where
    # tests/fixtures/prefect_server.py exists, its ``prefect_api`` fixture (same use) serves them instead,
    # so one session never runs two Prefect servers.

    @pytest.fixture(scope="session")
    def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
        """A temporary Prefect API server for the session (Prefect runs no flow without one)."""
        home = tmp_path_factory.mktemp("prefect")
        saved = {k: os.environ.get(k) for k in _PREFECT_ENV}
        os.environ.update(
            {
                "PREFECT_HOME": str(home),
                "DO_NOT_TRACK": "1",
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_LOGGING_LEVEL": "WARNING",
                "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
            }
        )
        from prefect.testing.utilities import prefect_test_harness

        try:
            with prefect_test_harness(server_startup_timeout=180):
                yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    _PREFECT_ENV = (
        "PREFECT_HOME",
        "DO_NOT_TRACK",
        "PREFECT_SERVER_ANALYTICS_ENABLED",
        "PREFECT_LOGGING_LEVEL",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS",
    )
