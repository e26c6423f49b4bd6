"""Issue 31: a task that daemonizes (forks twice, calls ``setsid``) does not survive its task or shutdown.

On this machine's backend nothing ended such a process: it left the worker's process group, and its
parent's exit handed it to init. The agent, its workers and fresh children are child subreapers now
(:mod:`elastic.pool.reaper`): orphans stay among their descendants and are ended. Where the agent can
create cgroups, each task runs in one of its own (:mod:`elastic.pool.cgroups`), which no process leaves by
daemonizing, even when the agent is killed with SIGKILL. The end-to-end tests run on both paths: ``cgroup``
(skipped where this machine does not let the tests create cgroups) and ``subreaper``
(``ELASTIC_TASK_CGROUPS=off``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.pool import cgroups
from elastic.pool.tasks import Task


def _cgroup_skip_reason() -> str | None:
    """Why this machine cannot run the cgroup path (None when it can): try what an agent would do."""
    tree = cgroups.agent_tree()
    if tree is None:
        return "no writable cgroup v2 or v1 freezer hierarchy here (not root, no delegated cgroup)"
    cgroups.end_cgroup(tree.root, tree.version)
    return None


_NO_CGROUPS = _cgroup_skip_reason()


def _with_token(token: str) -> list[int]:
    """Pids of the processes whose command line holds ``token``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state != b"Z" and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def _daemonize(token: str) -> str:
    """A shell command that double-forks a ``sleep 300`` under ``setsid`` and returns at once."""
    return f"( setsid bash -c 'exec -a {token} sleep 300' & ) ; sleep 0.2"


def _daemon(token: str) -> int:
    """The pid of the daemon itself (its ``argv[0]`` is ``token``), waiting for it to start."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for pid in _with_token(token):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[0] == token.encode():
                        return pid
            except OSError:
                continue
        time.sleep(0.1)
    raise AssertionError("the task never started its daemon")


def _gone(token: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while _with_token(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _with_token(token)


@pytest.fixture
def token() -> Iterator[str]:
    token = f"elastic-escape-{uuid.uuid4().hex}"
    yield token
    for pid in _with_token(token):  # never leave one behind, whatever the outcome
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(params=["cgroup", "subreaper"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which confinement the agents use: their own cgroups, or the subreaper alone (forced)."""
    if request.param == "cgroup":
        if _NO_CGROUPS:
            pytest.skip(f"cgroup path: {_NO_CGROUPS}")
        monkeypatch.delenv(cgroups.ENV, raising=False)
    else:
        monkeypatch.setenv(cgroups.ENV, "off")
    return str(request.param)


@pytest.fixture
def local(mode: str) -> Iterator[LocalBackend]:
    with LocalBackend(cores=2) as backend:
        yield backend


def _cgroup_of(pid: int) -> str:
    """The v2 (else v1 freezer) cgroup path of ``pid``, "" when it is gone."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        if cgroups.PREFIX in line:
            return line.split(":", 2)[2]
    return lines[-1].split(":", 2)[2] if lines else ""


def _nohup_in_python(token: str) -> int:
    """A Python task (warm worker) that leaves ``nohup sleep 300 &`` behind; returns the shell's status."""
    return subprocess.run(
        ["bash", "-c", f"nohup bash -c 'exec -a {token} sleep 300' >/dev/null 2>&1 &"]
    ).returncode


def test_the_reaper_ends_a_double_forked_setsid_daemon(token: str) -> None:
    script = (
        "import subprocess, sys, time\n"
        "from elastic.pool.reaper import become_subreaper, end_descendants\n"
        "assert become_subreaper()\n"
        f"subprocess.run(['bash', '-c', {_daemonize(token)!r}], check=True)\n"
        "print(end_descendants())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 1
    assert _gone(token, within=2.0)


def test_without_a_subreaper_the_daemon_escapes(token: str) -> None:
    """What the reaper is for: the same daemon outlives a plain parent (so the test above means it)."""
    subprocess.run(["bash", "-c", _daemonize(token)], check=True, timeout=60)
    time.sleep(0.3)
    assert _with_token(token), "the daemon did not start: the command does not test what it should"


@pytest.mark.timeout(180)
def test_a_daemon_started_by_a_task_is_gone_after_the_task_and_shutdown(
    local: LocalBackend, token: str
) -> None:
    with Elastic(local, "perstage", store=False, poll_interval=1.0) as el:
        done = el.submit_task(Task.shell(_daemonize(token), stage="escape"))
        assert done.result(timeout=120).returncode == 0
        assert _gone(token), "the daemon outlived its task"
        nohup = el.submit_task(Task.call(_nohup_in_python, (token + "-nohup",), stage="escape"))
        assert nohup.result(timeout=120) == 0
        assert _gone(token + "-nohup"), "nohup sleep & outlived its Python task (warm worker)"
    assert _gone(token)


def _running_daemon(el: Elastic, token: str) -> tuple[int, str]:
    """Start a task that leaves a setsid daemon and keeps running; return the daemon's pid and cgroup."""
    el.submit_task(Task.shell(_daemonize(token) + "; sleep 300", stage="escape"))
    daemon = _daemon(token)
    return daemon, _cgroup_of(daemon)


@pytest.mark.timeout(180)
def test_a_running_daemon_is_in_its_task_cgroup_which_is_removed_after_shutdown(
    local: LocalBackend, mode: str, token: str
) -> None:
    el = Elastic(local, "perstage", store=False, poll_interval=1.0)
    try:
        _, where = _running_daemon(el, token)
    finally:
        el.shutdown(wait=False, cancel_futures=True)
    assert _gone(token), "the daemon outlived shutdown()"
    if mode == "subreaper":
        assert cgroups.PREFIX not in where, f"{cgroups.ENV}=off still put the task in a cgroup: {where}"
        return
    # .../elastic-AGENTPID-START/cPID-1: the task's own cgroup, under its agent's
    agent_dir, task_dir = where.rsplit("/", 2)[-2:]
    assert agent_dir.startswith(cgroups.PREFIX) and task_dir.startswith("c"), where
    home = _cgroup_home()
    # shutdown(wait=False) returns before the agent has ended: its cgroup goes with it, soon after
    deadline = time.monotonic() + 30.0
    while (home / agent_dir).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (home / agent_dir).exists(), "the agent's cgroup was left behind"


def _cgroup_home() -> Path:
    tree = cgroups.agent_tree()
    assert tree is not None
    cgroups.end_cgroup(tree.root, tree.version)
    return tree.home


@pytest.mark.timeout(180)
def test_after_the_agent_is_killed_with_sigkill_the_cgroup_path_ends_the_daemon(
    local: LocalBackend, mode: str, token: str
) -> None:
    """The guarantee only cgroups give: the agent's death by SIGKILL ends a task's setsid daemon."""
    el = Elastic(local, "perstage", store=False, poll_interval=1.0)
    try:
        daemon, where = _running_daemon(el, token)
        os.kill(_agent_of(daemon), signal.SIGKILL)
        if mode == "cgroup":
            assert _gone(token), "the daemon outlived its agent's SIGKILL on the cgroup path"
            home = _cgroup_home()  # an agent's start: removes the dead agent's (empty) cgroup
            assert not (home / where.lstrip("/")).exists(), "the task's cgroup was left behind"
            assert not (home / where.lstrip("/")).parent.exists(), "the dead agent's cgroup was left behind"
        else:
            time.sleep(1.0)
            assert _with_token(token), "expected the documented limit: the subreaper dies with the agent"
    finally:
        el.shutdown(wait=False, cancel_futures=True)


def _agent_of(pid: int) -> int:
    """The pid of the agent above ``pid`` (the ``python -m elastic.pool.agent`` among its ancestors)."""
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"elastic.pool.agent" in f.read():
                return pid
        with open(f"/proc/{pid}/stat", "rb") as f:
            pid = int(f.read().rsplit(b")", 1)[1].split()[1])
    raise AssertionError("no agent among the daemon's ancestors")


@pytest.mark.skipif(_NO_CGROUPS is not None, reason=f"cgroup path: {_NO_CGROUPS}")
def test_an_agent_removes_the_stale_cgroup_of_a_dead_agent_and_ends_what_is_in_it(token: str) -> None:
    """A whole agent tree killed at once leaves its cgroup; the next agent's start ends and removes it."""
    home = _cgroup_home()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = home / f"{cgroups.PREFIX}{dead.pid}-1" / "c1-1"
    stale.mkdir(parents=True)
    try:
        sleeper = subprocess.Popen(["bash", "-c", f"exec -a {token} sleep 300"], start_new_session=True)
        (stale / "cgroup.procs").write_text(str(sleeper.pid))
        home_again = _cgroup_home()  # what an agent does at its start
        assert home_again == home
        assert sleeper.wait(timeout=5) == -signal.SIGKILL
        assert not stale.parent.exists()
    finally:
        if stale.parent.exists():
            cgroups.end_cgroup(stale.parent)


def _v1_freezer() -> Path | None:
    path = Path("/sys/fs/cgroup/freezer")
    return path if os.access(path / "cgroup.procs", os.W_OK) else None


@pytest.mark.skipif(_v1_freezer() is None, reason="no writable cgroup v1 freezer hierarchy here")
def test_the_freeze_and_kill_loop_empties_a_cgroup_whose_member_keeps_forking(tmp_path: Path) -> None:
    """The path of kernels without ``cgroup.kill`` (and of the v1 freezer): nothing forks out of it."""
    freezer = _v1_freezer()
    assert freezer is not None
    group = freezer / f"{cgroups.PREFIX}test-{uuid.uuid4().hex}"
    group.mkdir()
    forker = subprocess.Popen(
        ["bash", "-c", "while true; do sleep 30 & disown; sleep 0.01; done"], start_new_session=True
    )
    try:
        (group / "cgroup.procs").write_text(str(forker.pid))
        time.sleep(0.3)
        assert len((group / "cgroup.procs").read_text().split()) > 2, "the loop did not fork"
        assert cgroups.end_cgroup(group, 1) > 2
        assert not group.exists()
        assert forker.wait(timeout=5) == -signal.SIGKILL
    finally:
        forker.kill()
        if group.exists():
            cgroups.end_cgroup(group, 1)


@pytest.mark.timeout(180)
def test_a_daemon_of_a_task_still_running_at_shutdown_is_gone_after_it(
    local: LocalBackend, token: str
) -> None:
    el = Elastic(local, "perstage", store=False, poll_interval=1.0)
    try:
        el.submit_task(Task.shell(_daemonize(token) + "; sleep 300", stage="escape"))
        deadline = time.monotonic() + 120
        while not _with_token(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _with_token(token), "the task never started its daemon"
    finally:
        el.shutdown(wait=False, cancel_futures=True)
    assert _gone(token), "the daemon outlived shutdown()"


def test_the_quick_no_child_check_still_finds_a_live_child() -> None:
    # in a process of its own: end_descendants kills every descendant of the process that calls it
    script = """
import subprocess
from elastic.pool.reaper import end_descendants
assert end_descendants() == 0
live = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
assert end_descendants() == 1, "a live child was not seen"
live.wait(timeout=10)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
