"""One small report, written once per test session by the real command line, for the report's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main

#: The comparison the report tests read: 3 workflows x 2 peak core counts x 3 strategies x 3 runs.
WORKFLOWS = ("montage", "blast", "statistics")
PEAKS = (8, 16)
STRATEGIES = ("bigjob", "perstage", "asa")
RUNS = 3
ARGV = [
    "compare",
    "--workflow",
    ",".join(WORKFLOWS),
    "--peak-cores",
    ",".join(map(str, PEAKS)),
    "--strategies",
    ",".join(STRATEGIES),
    "--runs",
    str(RUNS),
    "--processors",
    "32",
    "--seed",
    "3",
]


@pytest.fixture(scope="session")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory of a report written by ``elastic compare --out`` (not yet existing before the command)."""
    out = tmp_path_factory.mktemp("report") / "out"
    assert main([*ARGV, "--out", str(out)]) == 0
    return out
