"""Shared pytest configuration.

Fixtures that start real services (Slurm daemons, PostgreSQL, a Prefect server) live in
``tests/fixtures/`` and are loaded as plugins here, so every test directory can use them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.fixtures.postgres", "tests.fixtures.prefect_server", "tests.fixtures.slurm_cluster"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full-matrix",
        action="store_true",
        help="run every demo x strategy x front-end x backend case (tests/workflows/test_matrix.py), "
        "not only the pairwise subset",
    )


@pytest.fixture(scope="session", autouse=True)
def _no_site_file() -> Iterator[None]:
    """Read no site file (``~/.config/elastic/site.toml``): a developer's own would change every job."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ELASTIC_SITE", "")
        yield


#: Real workload traces shipped beside the project (never committed into it).
SHARED_TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """Directory of the real SWF traces; tests that need it are skipped when it is absent."""
    path = Path(os.environ.get("ELASTIC_TRACES", SHARED_TRACES))
    if not path.is_dir():
        pytest.skip(f"real traces not available at {path} (set ELASTIC_TRACES)")
    return path


@pytest.fixture(scope="session")
def hpc2n_trace(traces_dir: Path) -> Path:
    """The HPC2N 2002 trace (202,871 jobs, 240 processors)."""
    path = traces_dir / "HPC2N-2002-2.2-cln.swf.gz"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return path


_BEFORE = pytest.StashKey[set[str] | None]()


def _untracked() -> set[str] | None:
    """Files of the checkout git neither tracks nor ignores (None: not a git checkout, or no git)."""
    from tests.source_tree import git_files

    files = git_files("--others", "--exclude-standard")
    return None if files is None else set(files)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note what the checkout holds untracked before the tests (the controller only, under xdist)."""
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_BEFORE] = _untracked()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when the tests left files in the checkout (Parsl's ./runinfo, a job's .out).

    Two such leftovers were committed once: a Slurm job's ``slurm-<id>.out`` and Parsl's ``runinfo/``.
    """
    if hasattr(session.config, "workerinput"):
        return
    before = session.config.stash.get(_BEFORE, None)
    after = _untracked()
    if before is None or after is None:
        return
    left = sorted(after - before)
    if left:
        shown = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
        print(f"\nthe tests left files in the checkout (write them under tmp_path): {shown}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
