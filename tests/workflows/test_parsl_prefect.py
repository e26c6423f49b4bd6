"""The same demo drivers as Parsl apps and as a Prefect flow (standard executors and task runners).

Elastic's ElasticExecutor and ElasticTaskRunner plug in as a configuration choice
(elastic.workflows.frontends.elastic_parsl_config / elastic_prefect_runner); here Parsl's ThreadPoolExecutor
and
HighThroughputExecutor (workers in other processes, importing the stage functions by module) and
Prefect's ThreadPoolTaskRunner run them. A failed program reaches the driver as its own error in all three.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.workflows.dataflow import ProgramError
from elastic.workflows.demos import DEMOS, run_demo
from elastic.workflows.frontends import run_elastic, run_parsl, run_prefect
from tests.workflows.conftest import SMALL


def _threads(run_dir: Path) -> object:
    from parsl.config import Config
    from parsl.executors.threads import ThreadPoolExecutor

    # run_dir: Parsl's default, ./runinfo, would be made in the checkout
    return Config(
        executors=[ThreadPoolExecutor(label="threads", max_threads=2)],
        initialize_logging=False,
        run_dir=str(run_dir / "runinfo"),
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(DEMOS))
def test_demo_as_parsl_apps_on_threads(name: str, tmp_path: Path) -> None:
    config = _threads(tmp_path)
    run = run_demo(name, lambda d, i: run_parsl(d, i, config), size=SMALL[name], workdir=tmp_path)
    assert run.verification.ok, run.verification.failed


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_montage_as_parsl_apps_on_htex_workers_that_import_the_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # HTEX starts interchange.py and process_worker_pool.py from PATH: this interpreter's scripts
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    htex = HighThroughputExecutor(
        label="htex", max_workers_per_node=2, provider=LocalProvider(init_blocks=1, max_blocks=1)
    )
    config = Config(executors=[htex], run_dir=str(tmp_path / "runinfo"), initialize_logging=False)
    run = run_demo(
        "montage", lambda d, i: run_parsl(d, i, config, executors=["htex"]), size=2, workdir=tmp_path
    )
    assert run.verification.ok, run.verification.failed
    worker_pids = {p.name for p in (tmp_path / "runinfo").rglob("worker_*.log")}
    assert worker_pids, "the apps ran in HTEX worker processes"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(DEMOS))
def test_demo_as_a_prefect_flow_on_threads(name: str, tmp_path: Path, prefect_api: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.task_runners import ThreadPoolTaskRunner

    run = run_demo(
        name,
        lambda d, i: run_prefect(d, i, ThreadPoolTaskRunner(max_workers=2), name=name),
        size=SMALL[name],
        workdir=tmp_path,
    )
    assert run.verification.ok, run.verification.failed
    with get_client(sync_client=True) as client:
        names = {t.name.rsplit("-", 1)[0] for t in client.read_task_runs()}
    assert set(DEMOS[name].stages) <= names  # each stage function is a Prefect task named after its stage


@pytest.fixture
def failing_blastn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A ``blastn`` first on PATH that prints an error and exits 3 (what a broken installation does)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "blastn"
    fake.write_text("#!/bin/sh\necho 'BLAST query/options error: out of cheese' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    yield


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("frontend", ["elastic", "parsl", "prefect"])
def test_a_failing_program_reaches_the_driver_as_its_error(
    frontend: str, tmp_path: Path, failing_blastn: None, request: pytest.FixtureRequest
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(Exception) as info:
        if frontend == "elastic":
            with LocalBackend(2) as local, Elastic(local, "perstage", store=False, poll_interval=1.0) as el:
                run_demo("blast", lambda d, i: run_elastic(d, i, el), size=1, workdir=work)
        elif frontend == "parsl":
            config = _threads(tmp_path)
            run_demo("blast", lambda d, i: run_parsl(d, i, config), size=1, workdir=work)
        else:
            request.getfixturevalue("prefect_api")
            from prefect.task_runners import ThreadPoolTaskRunner

            runner = ThreadPoolTaskRunner(2)
            run_demo("blast", lambda d, i: run_prefect(d, i, runner, name="blast"), size=1, workdir=work)
    # the merge that needed the failed search fails, naming the original error (each system its own way)
    causes = list(_chain(info.value))
    failed = [e for e in causes if isinstance(e, ProgramError)]
    assert failed or "ProgramError" in str(info.value), causes
    text = " ".join(str(e) for e in causes)
    assert "exited with code 3: BLAST query/options error: out of cheese" in text


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """The exception, its causes, and the failed inputs Parsl lists in a DependencyError."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]
        todo += [d for d, _ in getattr(e, "dependent_exceptions_tids", [])]
