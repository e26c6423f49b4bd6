"""The README's Slurm examples on the local Slurm cluster, exactly as a user writes them (issue 29).

The README's Slurm line is read from README.md and run here, so the two cannot drift apart.

``backend="slurm"`` is the string, so the executor builds its own :class:`SlurmBackend` from the
environment (``SLURM_CONF``) and Parsl's run directory, as in a user's fresh directory.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import parsl
import pytest
from parsl import python_app
from parsl.config import Config

from elastic import Elastic
from elastic.control.rate import SubmissionLimit
from elastic.errors import ElasticError
from elastic.executors.parsl_executor import ElasticExecutor
from elastic.site import SITE_ENV, SiteConfig, SiteConfigError
from tests.executors import apps
from tests.fixtures.prefect_server import PrefectServer
from tests.fixtures.slurm_cluster import LocalSlurmCluster
from tests.test_docs import README, Block, python_blocks

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_dir(
    slurm_cluster: LocalSlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A fresh working directory whose environment points at the local cluster, as a user's shell would."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the jobs' workers find the project, as installed
    monkeypatch.setenv("ELASTIC_STORE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    slurm_cluster.cancel_all()
    yield tmp_path
    parsl.clear()
    slurm_cluster.cancel_all()


@pytest.mark.timeout(240)
def test_the_readme_parsl_example_runs_from_a_fresh_directory_regression_29(
    fresh_dir: Path, slurm_cluster: LocalSlurmCluster
) -> None:
    assert not (fresh_dir / "runinfo").exists()
    # the README's Slurm line itself, so it cannot drift from what runs here
    (block,) = [b for b in python_blocks(README.read_text(encoding="utf-8")) if 'backend="slurm"' in b.code]
    assert block.not_run is not None and "tests/executors/test_site_slurm.py" in block.not_run
    names: dict[str, object] = {"ElasticExecutor": ElasticExecutor}
    exec(compile(block.code, f"README.md:{block.line}", "exec"), names)
    executor = names["executor"]
    assert isinstance(executor, ElasticExecutor)
    parsl.load(Config(executors=[executor], strategy="none"))
    try:
        assert apps.add_one(41).result(timeout=180) == 42
    finally:
        parsl.dfk().cleanup()
    assert slurm_cluster.queue() == [], "a job outlived parsl.dfk().cleanup()"
    secret_dir = fresh_dir / "runinfo" / "000" / "elastic"
    assert secret_dir.stat().st_mode & 0o777 == 0o700, "the run's secret directory is private"
    assert list((secret_dir / "slurm").glob("slurm-*.out")), "the job files are under the run directory"
    assert os.environ["SLURM_CONF"] == slurm_cluster.env["SLURM_CONF"]


def guide_block(guide: str, *needles: str) -> Block:
    """The one Python block of ``docs/guide/<guide>`` holding every needle, marked as run by this file."""
    source = f"docs/guide/{guide}"
    blocks = python_blocks((ROOT / source).read_text(encoding="utf-8"), source)
    (block,) = [b for b in blocks if all(needle in b.code for needle in needles)]
    assert block.not_run is not None and "tests/executors/test_site_slurm.py" in block.not_run
    return block


@pytest.mark.timeout(120)
def test_the_parsl_guide_s_slurm_example_runs_verbatim_regression_29(
    fresh_dir: Path, slurm_cluster: LocalSlurmCluster
) -> None:
    # the guide's block itself, run as a user's script: it loads Parsl, runs 64 + 1 apps, cleans up
    block = guide_block("parsl.md", 'backend="slurm"')
    exec(compile(block.code, f"{block.source}:{block.line}", "exec"), {"__name__": "docs_parsl_example"})
    assert slurm_cluster.queue() == [], "a job outlived parsl.dfk().cleanup()"
    (out,) = fresh_dir.glob("runinfo/000/task_logs/*/task_*_add.stdout")
    assert out.read_text().split() == [f"tile{t}.fits" for t in range(64)]
    assert list(fresh_dir.glob("runinfo/000/elastic/slurm/slurm-*.out")), "the tasks ran in Slurm jobs"


@python_app
def environment(*names: str) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


def read_env(*names: str) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


def job_comment(cluster: LocalSlurmCluster, job_id: str) -> str:
    """The job's comment as ``squeue -o %k`` shows it (a comment may hold spaces)."""
    return cluster.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%k"], timeout=5).stdout.strip()


def job_field(cluster: LocalSlurmCluster, job_id: str, key: str) -> str:
    """One field of ``scontrol show job -o`` (the record is kept MinJobAge = 300 s after the job)."""
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], env=cluster.env, capture_output=True, text=True, check=True
    ).stdout
    fields = dict(word.split("=", 1) for word in out.split() if "=" in word)
    return fields[key]


SITE_FILE = """
directives = ["--comment=elastic-site-29", "#SBATCH --requeue"]
worker_init = '''
export SITE_INIT_VAR="from-init:$SITE_ENV_VAR"
'''

[env]
SITE_ENV_VAR = "from-env"
"""


@pytest.mark.timeout(240)
def test_the_site_file_reaches_the_slurm_job(
    fresh_dir: Path, slurm_cluster: LocalSlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fresh_dir / "site.toml").write_text(SITE_FILE)
    monkeypatch.setenv(SITE_ENV, str(fresh_dir / "site.toml"))
    ex = ElasticExecutor(backend="slurm", strategy="bigjob", store=False, poll_interval=1.0)
    assert ex.site is not None and ex.site.env == {"SITE_ENV_VAR": "from-env"}
    parsl.load(Config(executors=[ex], strategy="none"))
    try:
        seen = environment("SITE_ENV_VAR", "SITE_INIT_VAR").result(timeout=180)
        jobs = [str(a.backend_job_id) for a in ex.view().allocations]
    finally:
        parsl.dfk().cleanup()
    assert seen == {"SITE_ENV_VAR": "from-env", "SITE_INIT_VAR": "from-init:from-env"}
    assert jobs and all(job_comment(slurm_cluster, j) == "elastic-site-29" for j in jobs)
    assert all(job_field(slurm_cluster, j, "Requeue") == "1" for j in jobs)
    assert slurm_cluster.queue() == []


@pytest.mark.timeout(240)
def test_the_front_door_site_reaches_the_slurm_job(fresh_dir: Path, slurm_cluster: LocalSlurmCluster) -> None:
    site = SiteConfig(
        directives=["--comment=front door"],
        worker_init="export SITE_INIT_VAR=door",
        env={"SITE_ENV_VAR": "e"},
    )
    with Elastic("slurm", "bigjob", store=False, poll_interval=1.0, site=site) as el:
        seen = el.submit(read_env, "SITE_ENV_VAR", "SITE_INIT_VAR").result(timeout=180)
        jobs = [str(a.backend_job_id) for a in el.view().allocations]
    assert seen == {"SITE_ENV_VAR": "e", "SITE_INIT_VAR": "door"}
    assert jobs and all(job_comment(slurm_cluster, j) == "front door" for j in jobs)


@pytest.mark.timeout(120)
def test_a_bad_directive_is_refused_before_any_sbatch(
    fresh_dir: Path, slurm_cluster: LocalSlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = slurm_cluster.job_ids()
    (fresh_dir / "site.toml").write_text('directives = ["--comment=fine", "--nodes=8"]\n')
    monkeypatch.setenv(SITE_ENV, str(fresh_dir / "site.toml"))
    with pytest.raises(SiteConfigError, match=r"directives\[1\] = '--nodes=8': --nodes is set by Elastic"):
        ElasticExecutor(backend="slurm")
    with pytest.raises(SiteConfigError, match=r"directives\[1\] = '--nodes=8'"):
        Elastic("slurm", store=False)
    with pytest.raises(SiteConfigError, match=r"directives\[0\] = '--ntasks 2'"):
        SiteConfig(directives=["--ntasks 2"])
    assert slurm_cluster.job_ids() == before, "nothing was submitted"


@pytest.mark.timeout(120)
def test_options_slurm_does_not_take_are_refused_before_any_allocation(
    fresh_dir: Path, slurm_cluster: LocalSlurmCluster
) -> None:
    # well-formed, so SiteConfig takes them; Slurm itself refuses them at the front door's start
    for site, said in [
        (SiteConfig(directives=["--frobnicate=3"]), "frobnicate"),
        (SiteConfig(reservation="no-such-reservation"), "eservation"),
    ]:
        with pytest.raises(SiteConfigError, match=f"sbatch --test-only. refused them .*{said}") as info:
            Elastic("slurm", store=False, site=site)
        assert info.value.value == site.sbatch_options()
        assert slurm_cluster.queue() == [], "no allocation was submitted"
    with Elastic("slurm", store=False, site=SiteConfig(directives=["--comment=fine"])) as el:
        assert el.site is not None and el.site.directives == ("--comment=fine",)


@pytest.mark.timeout(300)
def test_the_prefect_guide_s_slurm_example_runs_verbatim_with_the_site_file(
    fresh_dir: Path,
    slurm_cluster: LocalSlurmCluster,
    api: PrefectServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the guide's block itself, run as a user's script (4 two-core tasks and a merge, ASA, "slurm"),
    # with a site file whose directive and worker_init the runner must bring to every job
    (fresh_dir / "site.toml").write_text(
        f'directives = ["--comment=prefect site"]\nworker_init = "echo $SLURM_JOB_ID >> {fresh_dir}/init"\n'
    )
    monkeypatch.setenv(SITE_ENV, str(fresh_dir / "site.toml"))
    block = guide_block("prefect.md", 'ElasticTaskRunner("slurm"')
    before = set(slurm_cluster.job_ids())
    exec(compile(block.code, f"{block.source}:{block.line}", "exec"), {"__name__": "docs_prefect_example"})
    assert capsys.readouterr().out.splitlines()[-1] == "4"  # its print: merge's len(parts)
    assert slurm_cluster.queue() == [], "a job outlived the flow run"
    jobs = set(slurm_cluster.job_ids()) - before
    assert jobs, "the tasks ran in Slurm jobs"
    assert all(job_comment(slurm_cluster, j) == "prefect site" for j in jobs)
    started = set((fresh_dir / "init").read_text().split())
    assert started and started <= jobs, "worker_init ran in the jobs that started"


@pytest.mark.timeout(240)
def test_the_mesos_guide_s_slurm_example_runs_verbatim(
    fresh_dir: Path, slurm_cluster: LocalSlurmCluster
) -> None:
    # the guide's block itself (a pymesos scheduler running 16 one-core shell tasks on ASA's allocations)
    block = guide_block("mesos.md", 'Elastic("slurm"', "MesosServer")
    before = set(slurm_cluster.job_ids())
    namespace: dict[str, object] = {"__name__": "docs_mesos_example"}
    exec(compile(block.code, f"{block.source}:{block.line}", "exec"), namespace)
    scheduler = namespace["driver"].sched  # type: ignore[attr-defined]
    assert scheduler.left == 0 and scheduler.todo == [], "every task finished"
    assert set(slurm_cluster.job_ids()) - before, "the tasks ran in Slurm jobs"
    assert slurm_cluster.queue() == [], "an allocation outlived the block"


@pytest.mark.timeout(240)
def test_a_job_script_that_fails_at_start_stops_the_run_with_its_error_file(
    fresh_dir: Path, slurm_cluster: LocalSlurmCluster
) -> None:
    # an agent interpreter the nodes do not have: every job fails as it starts. Before, the run waited
    # for ever, resubmitting under the back-off, with "allocation a1: failed" as all it said
    site = SiteConfig(python="/nonexistent/python3")
    fast = SubmissionLimit(failure_delays=(0.0, 1.0, 2.0))  # the default back-off takes 2.5 minutes
    with Elastic("slurm", "perstage", store=False, poll_interval=1.0, site=site, submission_rate=fast) as el:
        future = el.submit(read_env, "HOME")
        with pytest.raises(ElasticError, match="batch jobs in a row failed within 60 s") as info:
            future.result(timeout=180)
    said = str(info.value)
    assert "/nonexistent/python3" in said and "slurm-" in said and ".err ends:" in said
    assert slurm_cluster.queue() == []
