"""One small report, written once per test session by the real command line, for the report's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main
from tests.report.report_case import ARGV


@pytest.fixture(scope="session")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory of a report written by ``elastic compare --out`` (not yet existing before the command)."""
    out = tmp_path_factory.mktemp("report") / "out"
    assert main([*ARGV, "--out", str(out)]) == 0
    return out
