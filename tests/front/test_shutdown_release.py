"""The end of a run releases what it holds and asks for nothing more, whatever arrives meanwhile."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front import signals
from elastic.front.setup import resolve_strategy
from elastic.metrics import EventKind
from elastic.strategies.base import Decision, RunView, Submit


def one() -> int:
    return 1


class LateSubmit:
    """Big-Job until armed; then its next decision waits for the run's end and asks for one more job."""

    name = "late-submit"

    def __init__(self) -> None:
        self.inner = resolve_strategy("bigjob")
        self.armed = threading.Event()
        self.deciding = threading.Event()
        self.ending: threading.Event | None = None

    def decide(self, view: RunView) -> Decision:
        if not self.armed.is_set():
            return self.inner.decide(view)
        self.deciding.set()
        assert self.ending is not None
        self.ending.wait(30)
        return Decision((Submit("late", cores=1, walltime=60.0),))


@pytest.mark.timeout(120)
def test_no_batch_job_is_submitted_once_the_run_is_ending() -> None:
    """A decision under way when the run ends (Parsl's cleanup after its last task) submits nothing."""
    strategy = LateSubmit()
    with Elastic(LocalBackend(cores=1), strategy, store=False, workflow="late", poll_interval=0.2) as el:
        strategy.ending = el._closed  # set as the end begins
        assert el.submit(one).result(timeout=60) == 1
        strategy.armed.set()
        assert strategy.deciding.wait(30), "the control loop asked the strategy again"
    assert el.result is not None
    asked = [e.stage for e in el.result.events if e.kind is EventKind.ALLOC_SUBMIT]
    assert asked and "late" not in asked


@pytest.mark.timeout(120)
def test_sigterm_during_a_normal_shutdown_lets_every_allocation_be_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The signal ends the program (Terminated) only once the release it arrived in is complete."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL or threading.current_thread() is not (
        threading.main_thread()
    ):
        pytest.skip("needs SIGTERM's default action in the main thread (the front door's handler)")
    el = Elastic(LocalBackend(cores=1), "bigjob", store=False, workflow="term", poll_interval=0.2)
    assert el.submit(one).result(timeout=60) == 1
    controller = el._controller
    release = controller.shutdown

    def signalled_then_release(now: float, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs in this (the main) thread, right here
        time.sleep(0.01)
        release(now, **kwargs)

    monkeypatch.setattr(controller, "shutdown", signalled_then_release)
    with pytest.raises(signals.Terminated):
        el.shutdown()
    assert controller.allocations and all(a.ended for a in controller.allocations)
    assert el.result is not None and el.result.status == "completed"
