"""The site configuration through the front door and both front-ends, without Slurm (issue 29).

What reaches a Slurm job is tested on the local cluster in ``tests/executors/test_site_slurm.py``.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.backends.slurm import SlurmBackend
from elastic.errors import ConfigError
from elastic.executors.parsl_executor import ElasticExecutor
from elastic.executors.prefect_runner import ElasticTaskRunner
from elastic.front.setup import resolve_backend
from elastic.site import SITE_ENV, SiteConfig, SiteConfigError


def pid() -> int:
    return os.getpid()


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    with LocalBackend(cores=2) as backend:
        yield backend


@pytest.fixture
def bad_site_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site.toml"
    path.write_text('directives = ["--comment=ok", "--time=5"]\n')
    monkeypatch.setenv(SITE_ENV, str(path))
    return path


def test_the_agents_run_the_sites_python(
    local: LocalBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a wrapper interpreter that leaves a mark, then is the real one
    mark = tmp_path / "used"
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(f'#!/bin/bash\necho "$@" >> {mark}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    site = SiteConfig(python=str(wrapper), mem="1G")
    with (
        caplog.at_level(logging.WARNING, "elastic.front.door"),
        Elastic(local, "bigjob", store=False, poll_interval=0.5, site=site) as el,
    ):
        assert el.site == site
        assert el.submit(pid).result(timeout=120) != os.getpid()
    assert "-m elastic.pool.agent" in mark.read_text()
    assert "site settings ['mem'] apply to Slurm jobs only; on the local backend only python is used" in (
        caplog.text
    )


def test_a_slurm_backend_object_brings_its_own_site(tmp_path: Path) -> None:
    site = SiteConfig(account="a")
    backend = SlurmBackend(site=site, workdir=tmp_path)
    assert resolve_backend(backend).site is site
    assert resolve_backend(backend, site=SiteConfig(account="a")).site == site  # the same, said twice
    with pytest.raises(
        ConfigError, match=r"differs from the site of the backend object .*SlurmBackend\(site="
    ):
        resolve_backend(backend, site=SiteConfig(account="b"))
    with pytest.raises(ConfigError, match="site must be a SiteConfig or None, got dict"):
        resolve_backend("local", site={"account": "a"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="differs from the site"):
        ElasticExecutor(backend=backend, site=SiteConfig(account="b"))
    assert ElasticExecutor(backend=backend).site is site


def test_the_parsl_executor_checks_the_site_file_when_written(bad_site_file: Path) -> None:
    with pytest.raises(SiteConfigError, match=r"site.toml: directives\[1\] = '--time=5': --time is set by"):
        ElasticExecutor(backend="slurm")
    ElasticExecutor(backend="local")  # the site file is for Slurm jobs: not read
    good = SiteConfig(directives=["--comment=x"])
    assert ElasticExecutor(backend="slurm", site=good).site is good  # given: the file is not read
    with pytest.raises(ConfigError, match="site must be a SiteConfig or None"):
        ElasticExecutor(backend="slurm", site="site.toml")  # type: ignore[arg-type]


def test_the_prefect_runner_checks_the_site_file_when_written(bad_site_file: Path) -> None:
    with pytest.raises(SiteConfigError, match=r"directives\[1\] = '--time=5'"):
        ElasticTaskRunner("slurm")
    ElasticTaskRunner("local")
    good = SiteConfig(directives=["--comment=x"])
    runner = ElasticTaskRunner("slurm", site=good)
    assert runner.duplicate() == runner  # the site travels with the configuration
    # given or read from the site file, the site is the flow run's setting (Slurm: test_site_slurm.py)
    assert runner._config is not None and runner.duplicate()._config.settings.site is good
    with pytest.raises(ConfigError, match="site must be a SiteConfig or None"):
        ElasticTaskRunner("slurm", site={"mem": "1G"})


def test_the_slurm_name_reads_the_site_file(bad_site_file: Path, tmp_path: Path) -> None:
    with pytest.raises(SiteConfigError, match="--time is set by Elastic"):
        resolve_backend("slurm")
    bad_site_file.write_text('qos = "long"\n')
    resolved = resolve_backend("slurm")
    assert resolved.site == SiteConfig(qos="long")
    assert isinstance(resolved.backend, SlurmBackend) and resolved.backend.qos == "long"


def test_elastic_run_agents_use_the_slurm_sites_python(tmp_path: Path) -> None:
    # `elastic run --backend slurm` builds PoolExecution(SlurmBackend(...)): the site's python is used
    from elastic.control.pool_execution import PoolExecution

    backend = SlurmBackend(site=SiteConfig(python="python3.11"), workdir=tmp_path)
    execution = PoolExecution(backend)
    try:
        script = execution.job_script("a1", cores=2, walltime=600.0, stage="s")
        assert script is not None and "exec python3.11 -m elastic.pool.agent" in script
    finally:
        execution.close()
    plain = PoolExecution(SlurmBackend(site=SiteConfig(), workdir=tmp_path))
    try:
        assert f"exec {sys.executable} -m elastic.pool.agent" in str(plain.job_script("a2", 1, 600.0, "s"))
    finally:
        plain.close()
