"""Issue 31: ``shutdown()`` works from any thread, a future's done callback included.

From a done callback (the thread that completes futures) it logged ``RuntimeError: cannot join current
thread`` and left the pool's secret directory behind.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend


def square(x: int) -> int:
    return x * x


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    with LocalBackend(cores=2) as backend:
        yield backend


def _ended(el: Elastic, within: float = 120.0) -> None:
    """Wait until the run is recorded (shutdown from a callback finishes in a thread of its own)."""
    deadline = time.monotonic() + within
    while el.result is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert el.result is not None, "the run never ended"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("wait", [True, False])
def test_shutdown_from_a_done_callback_ends_the_run_and_removes_the_secret(
    local: LocalBackend, wait: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    el = Elastic(local, "perstage", store=False, poll_interval=1.0)
    secret_dir = Path(el.pool.secret_file).parent
    slow = el.submit(nap, 1.0)  # still running when the first one's callback shuts down
    first = el.submit(square, 3)
    first.add_done_callback(lambda _: el.shutdown(wait=wait, cancel_futures=not wait))
    assert first.result(timeout=120) == 9
    _ended(el)
    assert el.result is not None and el.result.status == ("completed" if wait else "cancelled")
    if wait:
        assert slow.result(timeout=1) == 1.0  # waited for, not lost
    assert "cannot join current thread" not in caplog.text
    assert "exception calling callback" not in caplog.text
    assert not secret_dir.exists(), f"the pool's secret directory was left: {list(secret_dir.iterdir())}"
    assert all(a.state.is_final for a in el.view().allocations)
    assert not local.queue(), "an allocation outlived the front door"


@pytest.mark.timeout(180)
def test_shutdown_from_several_threads_at_once_ends_the_run_once(local: LocalBackend) -> None:
    el = Elastic(local, "perstage", store=False, poll_interval=1.0)
    futures = [el.submit(square, i) for i in range(4)]
    go = threading.Barrier(4)
    errors: list[BaseException] = []

    def end() -> None:
        go.wait()
        try:
            el.shutdown()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=end) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=150)
    assert not errors
    # every caller returns only once the run has ended
    assert el.result is not None and el.result.status == "completed"
    assert [f.result() for f in concurrent.futures.as_completed(futures)]
    assert not Path(el.pool.secret_file).exists()
