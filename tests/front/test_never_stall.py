"""Never stall, never strand (issue: the liveness rule, remembered plans, task widths, signals, lifecycle).

Every test here runs the real front door on the local backend (agents as real processes, a real pool);
the Slurm versions are in ``test_never_stall_slurm.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.errors import ConfigError
from elastic.front.recovery import driver_identity, recover_abandoned
from elastic.front.tasks import task
from elastic.pool.agent import pool_listening
from elastic.store import Store
from elastic.workflow import Stage, Workflow
from tests.fixtures.processes import default_sighup

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = ["asa", "bigjob", "perstage", "asa-paper", "asa-after"]


def boom() -> int:
    return 1


def after(x: int) -> int:
    return x + 1


def long_sleep() -> str:
    time.sleep(0.2)
    return "ok"


@task(cores=2)
def two_cores() -> int:
    return os.getpid()


@task(cores=4, stage="quad")
def four_cores(i: int) -> int:
    return i


@task(cores=6, stage="wide")
def six_cores() -> str:
    return "wide"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_remembered_plan_with_other_stages_never_blocks_the_new_ones(strategy: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with Elastic("local", strategy, workflow="edited", store=url, poll_interval=1.0) as el:
        assert el.submit(after, el.submit(boom)).result(timeout=60) == 2
    # the script was edited since: its only app is now another one; the remembered plan is a hint
    with Elastic("local", strategy, workflow="edited", store=url, poll_interval=1.0) as el:
        assert el.submit(long_sleep).result(timeout=60) == "ok"
    assert el.result is not None and el.result.status == "completed"
    # the stages remembered now are the ones that ran, not the union
    with Store(url) as store:
        plan = store.runs(workflow="edited")["params"].iloc[-1]["plan"]
    assert [s["name"] for s in plan] == ["long_sleep"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy", ["asa", "perstage"])
def test_a_declared_plan_that_disagrees_with_the_tasks_is_a_hint(strategy: str) -> None:
    declared = Workflow("declared", (Stage("never", 4, 1, 60.0), Stage("later", 2, 1, 60.0)))
    with Elastic("local", strategy, workflow=declared, store=False, poll_interval=1.0) as el:
        assert el.submit(long_sleep).result(timeout=60) == "ok"


@pytest.mark.timeout(120)
def test_a_run_in_which_no_task_ran_leaves_no_plan(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with Elastic("local", "asa", workflow="empty", store=url):
        pass
    with Store(url) as store:
        params = store.runs(workflow="empty")["params"].iloc[-1]
    assert params.get("plan") is None  # no placeholder stage "default" to block the next run


@pytest.mark.timeout(300)
@pytest.mark.parametrize("job_cores", [None, 1])
@pytest.mark.parametrize("strategy", ["asa", "bigjob", "perstage", "asa-paper"])
def test_tasks_wider_than_a_piece_run_under_every_strategy_and_shape(
    strategy: str, job_cores: int | None
) -> None:
    backend = LocalBackend(cores=12)
    with Elastic(
        backend, strategy, workflow="widths", store=False, job_cores=job_cores, poll_interval=1.0, workers=1
    ) as el:
        assert el.submit(two_cores).result(timeout=60) > 0  # a lone 2-core task
        assert sorted(f.result(timeout=60) for f in [el.submit(four_cores, i) for i in range(3)]) == [0, 1, 2]
        assert el.submit(six_cores).result(timeout=60) == "wide"
        jobs = el.view().allocations
    assert all(a.cores >= 2 for a in jobs if a.stage == "two_cores")
    assert all(a.cores >= 4 for a in jobs if a.stage == "quad")


@pytest.mark.timeout(60)
def test_a_task_no_allocation_can_ever_run_fails_at_once() -> None:
    with Elastic(LocalBackend(cores=2), "asa", store=False) as el:
        future = el.submit(six_cores)
        with pytest.raises(ConfigError, match="6 cores"):
            future.result(timeout=5)
        assert el.view().allocations == ()


@pytest.mark.timeout(60)
def test_an_agent_finds_a_dead_pool_at_once() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert not pool_listening(f"tcp://127.0.0.1:{port}", pause=0.01)  # bound, not listening: refused
        s.listen()
        assert pool_listening(f"tcp://127.0.0.1:{port}")


_DRIVER = textwrap.dedent(
    """
    import sys, time
    from elastic import Elastic

    def forever():
        time.sleep(600)

    with Elastic("local", "asa", workflow="killed", store=sys.argv[1], poll_interval=1.0) as el:
        f = el.submit(forever)
        while not any(a.running for a in el.view().allocations):
            time.sleep(0.1)
        print("RUNNING", flush=True)
        f.result()
    """
)


def _start_driver(tmp_path: Path, url: str) -> subprocess.Popen[str]:
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with default_sighup():  # as from a terminal, even when the tests run under nohup
        proc = subprocess.Popen(
            [sys.executable, str(script), url], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "RUNNING", f"driver did not start: {line!r}"
    return proc


def _agents_of(tmp_path: Path) -> list[int]:
    out = subprocess.run(["pgrep", "-f", "elastic.pool.agent"], capture_output=True, text=True).stdout.split()
    mine = []
    for pid in map(int, out):
        try:
            if Path(f"/proc/{pid}/cwd").resolve().is_relative_to(tmp_path):
                mine.append(pid)
        except OSError:
            continue
    return mine


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_run_interrupted(sig: signal.Signals, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    proc = _start_driver(tmp_path, url)
    try:
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 128 + sig
    finally:  # a driver left running would hold its allocations for the rest of the session
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    with Store(url) as store:
        runs = store.runs(workflow="killed")
    assert list(runs["status"]) == ["interrupted"]
    assert runs["params"].iloc[0]["jobs"], "the run's batch jobs are recorded as they are submitted"


@pytest.mark.timeout(120)
def test_a_run_whose_driver_was_killed_is_ended_by_the_next_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    proc = _start_driver(tmp_path, url)
    proc.kill()
    proc.wait(timeout=30)
    with Store(url) as store:
        assert list(store.runs(workflow="killed")["status"]) == ["running"]
    with Elastic("local", "asa", workflow="next", store=url) as el:
        assert el.submit(long_sleep).result(timeout=60) == "ok"
    with Store(url) as store:
        runs = store.runs()
    assert dict(zip(runs["workflow"], runs["status"], strict=True)) == {
        "killed": "interrupted",
        "next": "completed",
    }


def test_live_drivers_and_other_hosts_are_left_alone(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        me = store.record_run("w", "asa", "local", params={"driver": driver_identity()})
        elsewhere = store.record_run(
            "w", "asa", "local", params={"driver": {"host": "not-this-host", "pid": 1, "since": 0}}
        )
        reused = store.record_run(  # this pid, but started at another time: a dead driver whose pid came back
            "w", "asa", "local", params={"driver": {**driver_identity(), "since": -1}}
        )
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        gone = store.record_run(
            "w", "asa", "local", params={"driver": {**driver_identity(), "pid": dead.pid}}
        )
        assert sorted(recover_abandoned(store, LocalBackend(cores=1))) == sorted([reused, gone])
        status = dict(zip(store.runs()["run_id"], store.runs()["status"], strict=True))
    assert status[me] == "running" and status[elsewhere] == "running"
    assert status[reused] == "interrupted" and status[gone] == "interrupted"


@pytest.mark.timeout(120)
def test_expect_carries_runtimes_into_the_first_walltime_request() -> None:
    with Elastic("local", "perstage", workflow="announced", store=False, poll_interval=1.0) as el:
        with pytest.raises(ConfigError, match="runtime"):
            el.expect("x", 1, runtime=-1.0)
        el.expect("later", 2, runtime=20.0, ready=True)  # announced, waiting for cores only
        deadline = time.monotonic() + 30
        while not any(a.stage == "later" for a in el.view().allocations) and time.monotonic() < deadline:
            time.sleep(0.1)
        asked = [a.walltime for a in el.view().allocations if a.stage == "later"]
        el.expect("later", 0)
    assert asked, "the announced stage got an allocation"
    assert asked[0] <= 2 * 20.0 + 120.0  # the declared runtime x slack, plus the agent's start-up allowance
