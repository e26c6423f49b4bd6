"""Issue 31: a task that daemonizes (forks twice, calls ``setsid``) does not survive its task or shutdown.

On this machine's backend nothing ended such a process: it left the worker's process group, and its
parent's exit handed it to init. The agent, its workers and fresh children are child subreapers now
(:mod:`elastic.pool.reaper`): orphans stay among their descendants and are ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.pool.tasks import Task


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


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    with LocalBackend(cores=2) as backend:
        yield backend


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
    assert _gone(token)


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
