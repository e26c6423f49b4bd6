"""Progress by default: a run shows its stages and allocations without configuration; ``progress=False`` not.

Runs on the scaled mock queue (60 simulated seconds per real second) with standard error captured (so not
a terminal: plain lines); the live view is rendered into a string.
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import pytest
from rich.console import Console

from elastic import Elastic, task
from elastic.allocations import Allocation, AllocationState
from elastic.errors import ConfigError
from elastic.front.door import FrontDoorView
from elastic.front.progress import RunProgress, event_line
from elastic.metrics import Event, EventKind
from elastic.strategies.base import StageView


@task(runtime=30.0)
def square(x: int) -> int:
    return x * x


def _run(**options: object) -> int:
    with Elastic("mock", "asa", store=False, workflow="progress", **options) as el:  # type: ignore[arg-type]
        return sum(f.result() for f in [el.submit(square, i) for i in range(4)])


def test_event_lines_say_what_happened() -> None:
    submit = Event(
        10.0,
        EventKind.ALLOC_SUBMIT,
        stage="align",
        allocation="a1",
        cores=8,
        walltime=600.0,
        predicted_wait=40.0,
        note="initial",
        job_id="123",
    )
    start = Event(45.0, EventKind.ALLOC_START, allocation="a1")
    assert event_line(submit) == (
        "allocation a1 (job 123): requested 8 cores for stage align, walltime 10 min, predicted wait 40 s "
        "(initial)"
    )
    assert event_line(start, submitted={"a1": 10.0}) == "allocation a1: running after 35 s in the queue"
    assert event_line(Event(50.0, EventKind.STAGE_END, stage="align")) == "stage align: done"
    assert event_line(Event(60.0, EventKind.ALLOC_END, allocation="a1", note="COMPLETED")) == (
        "allocation a1: completed"  # as elastic run's lines say it
    )
    assert event_line(Event(1.0, EventKind.TASK_END, task="t1")) is None  # task events are not lines
    cancel = Event(70.0, EventKind.ALLOC_END, allocation="a1", note="CANCELLED")
    assert event_line(cancel, started={"a1"}) == "allocation a1: released"  # it ran: given back
    assert event_line(cancel) == "allocation a1: cancelled"  # it never started


def test_a_run_says_released_for_an_allocation_given_back_after_it_ran() -> None:
    """``RunProgress`` learns the starts from the run's own events: a running allocation the run gave back
    reads ``released``, one cancelled in the queue ``cancelled``."""
    out = io.StringIO()
    progress = RunProgress(stream=out, live=False)
    progress.start()
    try:
        progress.event(Event(0.0, EventKind.ALLOC_SUBMIT, allocation="a1", cores=2, walltime=60.0, stage="s"))
        progress.event(Event(0.0, EventKind.ALLOC_SUBMIT, allocation="a2", cores=2, walltime=60.0, stage="s"))
        progress.event(Event(5.0, EventKind.ALLOC_START, allocation="a1"))
        progress.event(Event(9.0, EventKind.ALLOC_END, allocation="a1", note="CANCELLED"))
        progress.event(Event(9.0, EventKind.ALLOC_END, allocation="a2", note="CANCELLED"))
    finally:
        progress.stop()
    text = out.getvalue()
    assert "allocation a1: released" in text and "allocation a2: cancelled" in text, text


def test_a_run_shows_stage_and_allocation_lines_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run() == 14
    err = capsys.readouterr().err
    assert "elastic: run started (asa)" in err
    assert "elastic: stage square: ready" in err and "elastic: stage square: done" in err
    assert re.search(r"allocation a1 \(job \d+\): requested \d+ cores for stage square", err), err
    assert "allocation a1: running after" in err
    assert "run ended: completed" in err
    assert not logging.getLogger("elastic.progress").handlers  # the run's handler is gone with the run


def test_progress_false_shows_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(progress=False) == 14
    captured = capsys.readouterr()
    assert "allocation" not in captured.err and "stage" not in captured.err
    assert "elastic:" not in captured.out + captured.err


def test_lines_go_to_a_given_logger(caplog: pytest.LogCaptureFixture) -> None:
    host = logging.getLogger("host.run")
    with caplog.at_level(logging.INFO, logger="host.run"):
        assert _run(progress=host) == 14
    lines = [r.getMessage() for r in caplog.records if r.name == "host.run"]
    assert "stage square: ready" in lines and any(m.startswith("allocation a1") for m in lines)


def test_a_bad_progress_value_is_refused_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match="progress must be True"):
        Elastic("mock", "asa", store=False, progress="yes")  # type: ignore[arg-type]


def _live(
    now: float, done: int, state: AllocationState, end: float | None, second: Allocation
) -> RunProgress:
    """A live view of stage align (8 tasks, ``done`` done) with a1 (started at 20 s) and ``second``."""
    a1 = Allocation(
        "a1",
        cores=4,
        walltime=600.0,
        stage="align",
        state=state,
        submit_time=0.0,
        start_time=20.0,
        end_time=end,
    )
    running = 2 if end is None else 0
    view = FrontDoorView(
        now=now,
        stages=(StageView("align", 0, tasks=8, cores=1, depends_on=(), done=done, running=running),),
        allocations=(a1, second),
        busy_cores={"a1": running} if running else {},
        queued=8 - done - running,
    )
    return RunProgress(view=lambda: view, stream=io.StringIO(), live=True)


def _rendered(progress: RunProgress) -> str:
    out = io.StringIO()
    Console(file=out, width=120).print(progress._render())
    return out.getvalue()


def test_the_live_view_shows_stages_done_and_allocations_with_their_waits() -> None:
    a2 = Allocation("a2", cores=4, walltime=600.0, stage="align", submit_time=40.0, predicted_wait=90.0)
    progress = _live(100.0, 3, AllocationState.RUNNING, None, a2)
    text = _rendered(progress)
    assert "t=100 s, 3 tasks queued" in text and "3/8" in text
    progress.event(Event(40.0, EventKind.RUN_START, note="asa"))
    assert "60 s into the run" in _rendered(progress)
    assert re.search(r"a1\s+4\s+running\s+20 s", text), text
    assert re.search(r"a2\s+4\s+requested \(queued\)\s+60 s\s+90 s", text), text


def test_the_live_view_words_ended_allocations_as_the_progress_lines_do() -> None:
    # once none is live it shows the last ones: one given back after it ran, one withdrawn from the queue
    a2 = Allocation("a2", cores=4, walltime=600.0, stage="align", state=AllocationState.CANCELLED)
    text = _rendered(_live(900.0, 8, AllocationState.CANCELLED, 500.0, a2))
    assert re.search(r"a1\s+4\s+released", text) and re.search(r"a2\s+4\s+cancelled", text), text


@pytest.mark.slow
def test_parsl_progress_lands_in_parsl_run_log_and_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parsl = pytest.importorskip("parsl")
    from parsl.config import Config

    from elastic.parsl import ElasticExecutor

    @parsl.python_app
    def double(x: int) -> int:
        return 2 * x

    executor = ElasticExecutor(backend="mock", strategy="perstage", store=False, workflow="progress")
    dfk = parsl.load(Config(executors=[executor], strategy="none", run_dir=str(tmp_path / "runinfo")))
    try:
        assert sum(double(i).result() for i in range(3)) == 6
    finally:
        dfk.cleanup()
    (log,) = (tmp_path / "runinfo").glob("*/parsl.log")
    text = log.read_text(encoding="utf-8")
    assert "stage double: ready" in text and re.search(r"allocation a1 \(job \d+\): requested", text)
    assert "stage double: ready" in capsys.readouterr().err


def test_two_runs_at_once_each_write_their_own_lines_once() -> None:
    first, second = io.StringIO(), io.StringIO()
    one, two = RunProgress(stream=first, live=False), RunProgress(stream=second, live=False)
    one.start()
    two.start()
    try:
        one.event(Event(0.0, EventKind.STAGE_READY, stage="a"))
        two.event(Event(0.0, EventKind.STAGE_READY, stage="b"))
    finally:
        one.stop()
        two.stop()
    assert first.getvalue().count("stage a: ready") == 1 and "stage b" not in first.getvalue()
    assert second.getvalue().count("stage b: ready") == 1 and "stage a" not in second.getvalue()
    one.event(Event(1.0, EventKind.STAGE_END, stage="a"))  # after stop: nothing more
    assert "done" not in first.getvalue()
