"""``elastic run`` off a terminal: one line per stage and allocation change (``--no-progress``: none)."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

from rich.console import Console

from elastic.allocations import Allocation, AllocationState
from elastic.cli.run_view import PlainLines
from elastic.strategies.base import StageView


def _view(now: float, stages: list[StageView], allocations: list[Allocation]) -> SimpleNamespace:
    return SimpleNamespace(now=now, stages=stages, allocations=allocations)


def test_each_change_is_one_line_once() -> None:
    out = io.StringIO()
    lines = PlainLines(Console(file=out, width=200))
    a1 = Allocation("a1", cores=4, walltime=600.0, stage="s", submit_time=0.0)
    ready = StageView("s", 0, tasks=2, cores=1, depends_on=(), ready_time=0.0)
    lines(_view(0.0, [ready], [a1]))  # type: ignore[arg-type]
    lines(_view(5.0, [ready], [a1]))  # type: ignore[arg-type]  # nothing changed: no line
    running = a1.transition(AllocationState.RUNNING, at=30.0)
    done = StageView("s", 0, tasks=2, cores=1, depends_on=(), done=2, ready_time=0.0, end_time=90.0)
    lines(_view(90.0, [done], [running]))  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == [
        "t=0 s elastic: stage s: ready (2 tasks)",
        "t=0 s elastic: allocation a1: requested 4 cores for stage s",
        "t=90 s elastic: stage s: done (2/2 tasks)",
        "t=90 s elastic: allocation a1: running after 30 s in the queue",
    ]


def test_no_progress_is_an_option_of_run() -> None:
    from elastic.cli import _parser

    args = _parser(["run"]).parse_args(["run", "--workflow", "demo3", "--strategy", "asa", "--no-progress"])
    assert args.no_progress is True
    assert (
        _parser(["run"]).parse_args(["run", "--workflow", "demo3", "--strategy", "asa"]).no_progress is False
    )


def test_the_live_view_shows_each_allocations_wait_so_far_and_predicted_wait() -> None:
    from elastic.cli.run_view import live_view

    ready = StageView("s", 0, tasks=2, cores=1, depends_on=(), ready_time=0.0)
    queued = Allocation("a2", cores=4, walltime=600.0, stage="s", submit_time=40.0, predicted_wait=90.0)
    started = Allocation("a1", cores=4, walltime=600.0, stage="s", submit_time=0.0, eligible_time=5.0)
    started = started.transition(AllocationState.RUNNING, at=25.0)
    view = _view(100.0, [ready], [started, queued])
    view.workflow = SimpleNamespace(name="w")
    view.busy_cores = lambda alloc_id: 0
    out = io.StringIO()
    Console(file=out, width=200).print(live_view(view))  # type: ignore[arg-type]
    text = out.getvalue()
    assert re.search(r"waited\s+┃\s+predicted", text), text
    assert re.search(r"a1 .*RUNNING .*│\s+20 s\s+│\s+\?\s+│", text), text  # started after 25 - 5 s
    assert re.search(r"a2 .*REQUESTED .*│\s+60 s\s+│\s+90 s\s+│", text), text  # queued 100 - 40 s so far
    lines = PlainLines(Console(file=io.StringIO(), width=200)).lines(view)  # type: ignore[arg-type]
    assert "allocation a2: requested 4 cores for stage s, predicted wait 90 s" in lines
