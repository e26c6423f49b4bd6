"""SIGTERM ends the run even while a non-daemon thread of the program waits on a task.

Found trying the front door as a user: the run was ended by an :mod:`atexit` hook, which Python runs
only after joining non-daemon threads; a consumer thread blocked on a task's result kept the program,
and its allocations, alive until the task was done (on Slurm, until the batch system's SIGKILL).
"""

from __future__ import annotations

import concurrent.futures
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.fixtures.processes import default_sighup

ROOT = Path(__file__).resolve().parents[2]

_DRIVER = textwrap.dedent(
    """
    import os, threading, time
    from elastic import Elastic

    def slow(x, marker):
        open(marker, "w").close()
        time.sleep(x)
        return x

    el = Elastic("local", "perstage", progress=False, store=False)

    def consumer():
        try:
            el.submit(slow, 300, "started").result()
        except Exception as exc:
            print("consumer:", type(exc).__name__, flush=True)

    threading.Thread(target=consumer).start()
    while not os.path.exists("started"):  # the task runs
        time.sleep(0.1)
    print("running", flush=True)
    time.sleep(3600)
    """
)


def _start(driver: str, tmp_path: Path) -> subprocess.Popen[str]:
    """Run ``driver`` as a program of its own in ``tmp_path`` (output piped, text)."""
    script = tmp_path / "driver.py"
    script.write_text(driver)
    with default_sighup():
        return subprocess.Popen(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.mark.timeout(120)
def test_sigterm_with_a_non_daemon_thread_waiting_on_a_task(tmp_path: Path) -> None:
    proc = _start(_DRIVER, tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "running"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert took < 30, f"the program took {took:.0f} s to end after SIGTERM (its task runs 300 s)"
    assert "consumer: PoolClosedError" in out


_CTRL_C_IN_EXIT = textwrap.dedent(
    """
    import os, signal, threading, time
    from elastic import Elastic

    def slow(x):
        time.sleep(120)
        return x

    el = Elastic("local", "perstage", progress=False, store=False)
    try:
        with el:
            fs = [el.submit(slow, i) for i in range(4)]
            threading.Timer(3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()  # in __exit__'s wait
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
    print("status", el.result.status if el.result else None, flush=True)
    print("allocations", sorted({a.state.name for a in el.view().allocations}), flush=True)
    try:
        el.submit(slow, 9)
    except RuntimeError as exc:
        print("submit refused", flush=True)
    """
)


@pytest.mark.timeout(120)
def test_ctrl_c_while_leaving_the_with_block_ends_the_run_interrupted(tmp_path: Path) -> None:
    """Found trying the front door: the KeyboardInterrupt escaped ``__exit__`` and left the run open."""
    proc = _start(_CTRL_C_IN_EXIT, tmp_path)
    try:
        out, err = proc.communicate(timeout=100)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    lines = out.splitlines()
    assert lines == [
        "KeyboardInterrupt",
        "status interrupted",
        "allocations ['CANCELLED']",
        "submit refused",
    ], err[-2000:]


def _nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@pytest.mark.timeout(120)
def test_a_task_submitted_while_shutdown_waits_is_refused_and_held_ones_still_run() -> None:
    """Found trying the front door: such a task was taken, then killed as the allocations went."""
    from elastic import Elastic

    el = Elastic("local", "perstage", progress=False, store=False, poll_interval=1.0)
    running = el.submit(_nap, 3.0)
    held = el.submit(_nap, running)  # taken before the shutdown, waits for its input
    ender = threading.Thread(target=el.shutdown)
    ender.start()
    deadline = time.monotonic() + 10
    while el._intake._stopped.is_set() is False and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(RuntimeError, match="shutting down"):
        el.submit(_nap, 0.1)
    ender.join(timeout=60)
    assert running.result() == 3.0 and held.result() == 3.0
    assert el.result is not None and el.result.status == "completed"


@pytest.mark.timeout(120)
def test_shutdown_without_waiting_for_outstanding_tasks_records_the_run_cancelled() -> None:
    """It was recorded ``completed`` while its running tasks were lost."""
    from elastic import Elastic

    el = Elastic("local", "perstage", progress=False, store=False, poll_interval=1.0)
    lost = el.submit(_nap, 60.0)
    el.shutdown(wait=False)
    assert el.result is not None and el.result.status == "cancelled"
    with pytest.raises((RuntimeError, concurrent.futures.CancelledError)):
        lost.result(timeout=30)
    quiet = Elastic("local", "perstage", progress=False, store=False, poll_interval=1.0)
    assert quiet.submit(_nap, 0.0).result(timeout=60) == 0.0
    quiet.shutdown(wait=False)
    assert quiet.result is not None and quiet.result.status == "completed"
