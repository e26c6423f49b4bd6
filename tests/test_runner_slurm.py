"""Whole runs on a real Slurm cluster (the session ``slurm_cluster`` fixture): agents in real batch jobs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic.backends.slurm import SlurmBackend
from elastic.control.execution import RunResult
from elastic.control.pool_execution import PoolExecution
from elastic.control.runner import Runner
from elastic.learners.asa import ASAEstimator
from elastic.metrics import Event, EventKind
from elastic.strategies import Knowledge, make_strategy
from elastic.workflow import Stage, Workflow
from tests.fixtures.slurm_cluster import LocalSlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

K = EventKind
# demo3's shape (1 task, then 8 tasks, then 1 task, 1 core each) with seconds-long tasks
SHORT_DEMO3 = Workflow(
    "demo3-short",
    (Stage("prepare", 1, 1, 4.0), Stage("process", 8, 1, 2.0, runtime_cv=0.2), Stage("merge", 1, 1, 1.0)),
)


@pytest.fixture
def backend(slurm_cluster: LocalSlurmCluster, tmp_path: Path) -> Iterator[SlurmBackend]:
    slurm_cluster.cancel_all()
    yield SlurmBackend(partition="debug", env=slurm_cluster.env, workdir=tmp_path, command_timeout=20)
    slurm_cluster.cancel_all()


def _of(events: tuple[Event, ...], kind: EventKind, **fields: object) -> list[Event]:
    return [e for e in events if e.kind is kind and all(getattr(e, k) == v for k, v in fields.items())]


def _run(strategy: str, backend: SlurmBackend) -> RunResult:
    # the learner predicts a 5 s wait until it has seen real ones; asa prices waits by it, not by Slurm's
    # estimate (0 s on this idle cluster), so its pre-submission is checkable
    knowledge = Knowledge(SHORT_DEMO3, waits=ASAEstimator(grid=[5.0, 1e5], policy="greedy"), backend="slurm")
    executor = PoolExecution(backend)
    chosen = make_strategy(strategy, **({"estimates": False} if strategy == "asa" else {}))
    try:
        runner = Runner(SHORT_DEMO3, chosen, backend, executor, knowledge, poll_interval=1.0)
        return runner.run()
    finally:
        executor.close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("strategy", ["bigjob", "perstage", "asa"])
def test_short_demo3_completes_on_slurm(strategy: str, backend: SlurmBackend) -> None:
    result = _run(strategy, backend)
    assert result.status == "completed"
    done = {e.task for e in _of(result.events, K.TASK_END)}
    assert done == {"prepare.0", "merge.0"} | {f"process.{i}" for i in range(8)}
    submits = _of(result.events, K.ALLOC_SUBMIT)
    assert all(e.job_id for e in submits)
    if strategy == "asa":
        # a later stage's batch job was submitted (by Slurm's own clock) before stage 1 ended (with stages
        # this short the planner may run "process" on the first allocation and pre-submit only "merge")
        (stage1_end,) = _of(result.events, K.STAGE_END, stage="prepare")
        later = [e.job_id for e in submits if e.stage != "prepare" and e.job_id is not None]
        assert later, [(e.stage, e.note) for e in submits]
        assert min(backend.state(job).submit_time for job in later) < stage1_end.time
    # every batch job of the run is over (released or cancelled; Slurm may need a moment to finish them)
    ours = {e.job_id for e in submits}
    for _ in range(30):
        if not ours & {j.job_id for j in backend.queue()}:
            break
        backend.sleep(0.5)
    assert not ours & {j.job_id for j in backend.queue()}


@pytest.mark.timeout(240)
def test_elastic_run_cli_on_slurm(
    slurm_cluster: LocalSlurmCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from elastic.cli import main

    slurm_cluster.cancel_all()
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])
    monkeypatch.chdir(tmp_path)  # Slurm writes the jobs' output files here
    wf = tmp_path / "wf.json"
    wf.write_text(
        '{"name": "two", "stages": [{"name": "a", "tasks": 1, "cores": 1, "runtime": 4},'
        ' {"name": "b", "tasks": 2, "cores": 1, "runtime": 3, "command": "hostname"}]}'
    )
    args = ["run", "--workflow", str(wf), "--strategy", "asa", "--backend", "slurm", "--partition", "debug"]
    assert main([*args, "--poll", "1", "--store", f"sqlite:///{tmp_path / 's.db'}"]) == 0
    assert "two under asa: completed" in capsys.readouterr().out
    slurm_cluster.cancel_all()
