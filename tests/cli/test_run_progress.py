"""``elastic run`` off a terminal: one line per stage and allocation change (``--no-progress``: none)."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
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
        "t=30 s elastic: allocation a1: running after 30 s in the queue",  # when it started, not when seen
        "t=90 s elastic: stage s: done (2/2 tasks)",
    ]


def test_an_allocation_that_ran_between_two_views_shows_each_step_at_its_time() -> None:
    """Requested, started and released between two views (17 s of 14 cores, charged): its start is shown,
    not only its request and end (a new user saw ``requested`` then ``cancelled``, and an ``--events``
    file with its start)."""
    out = io.StringIO()
    lines = PlainLines(Console(file=out, width=200))
    ready = StageView("s", 0, tasks=2, cores=1, depends_on=(), ready_time=0.0)
    lines(_view(0.0, [ready], []))  # type: ignore[arg-type]
    a3 = Allocation("a3", cores=14, walltime=600.0, stage="s", submit_time=5.0)
    a3 = a3.transition(AllocationState.RUNNING, at=13.0).transition(AllocationState.CANCELLED, at=30.0)
    lines(_view(30.0, [ready], [a3]))  # type: ignore[arg-type]
    assert out.getvalue().splitlines()[1:] == [
        "t=5 s elastic: allocation a3: requested 14 cores for stage s",
        "t=13 s elastic: allocation a3: running after 8 s in the queue",
        "t=30 s elastic: allocation a3: released",  # it ran: given back, not cancelled while waiting
    ]
    queued = Allocation("a4", cores=2, walltime=600.0, stage="s", submit_time=31.0)
    lines(_view(40.0, [ready], [a3, queued.transition(AllocationState.CANCELLED, at=35.0)]))  # type: ignore[arg-type]
    assert out.getvalue().splitlines()[4:] == [  # never started: no running line
        "t=31 s elastic: allocation a4: requested 2 cores for stage s",
        "t=35 s elastic: allocation a4: cancelled",
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


def _every_line(views: list[SimpleNamespace]) -> list[str]:
    """The lines of ``views`` as read record by record, every record of every view (the reference), each
    view's in the order of the times they happened (the record's own time, at most the view's)."""
    stages: dict[str, tuple[bool, bool]] = {}
    allocs: dict[str, str] = {}
    out = []
    for view in views:
        lines: list[tuple[float, str]] = []
        for s in view.stages:
            now = (s.ready_time is not None, s.end_time is not None)
            before = stages.get(s.name, (False, False))
            if now[0] and not before[0]:
                lines.append((min(s.ready_time, view.now), f"{s.name} ready"))
            if now[1] and not before[1]:
                lines.append((min(s.end_time, view.now), f"{s.name} done"))
            stages[s.name] = now
        for a in view.allocations:
            before = allocs.get(a.alloc_id)
            if before != a.state.value:
                if before is None:
                    lines.append((min(a.submit_time, view.now), f"{a.alloc_id} REQUESTED"))
                if a.state is AllocationState.RUNNING:
                    lines.append((min(a.start_time, view.now), f"{a.alloc_id} RUNNING"))
                allocs[a.alloc_id] = a.state.value
        out += [line for _, line in sorted(lines, key=lambda x: x[0])]
    return out


@given(
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["ready", "done", "same", "start"])), max_size=40)
)
def test_only_records_that_changed_are_read_and_the_lines_are_those_of_every_record(
    steps: list[tuple[int, str]],
) -> None:
    """Records kept from one view to the next are skipped; the lines are the same as reading every one."""
    stages = [StageView(f"s{i}", i, tasks=1, cores=1, depends_on=()) for i in range(6)]
    allocations: list[Allocation] = []
    views: list[SimpleNamespace] = []
    for i, kind in steps:
        s = stages[i]
        if kind == "ready":
            stages[i] = dataclasses.replace(s, ready_time=1.0)
        elif kind == "done":
            stages[i] = dataclasses.replace(s, ready_time=1.0, end_time=2.0)
        elif kind == "same":
            stages[i] = dataclasses.replace(s)  # a new object, the same state: no line
        else:
            allocations.append(
                Allocation(f"a{len(allocations)}", cores=1, walltime=60.0, stage=s.name, submit_time=0.0)
            )
            first = allocations[0]
            if len(allocations) > 1 and i % 2 and first.state is AllocationState.REQUESTED:
                allocations[0] = first.transition(AllocationState.RUNNING, at=1.0)
        views.append(_view(float(len(views)), list(stages), list(allocations)))
    lines = PlainLines(Console(file=io.StringIO(), width=200))
    got = []
    for view in views:
        for line in lines.lines(view):  # type: ignore[arg-type]
            words = line.split()
            if words[0] == "stage":
                got.append(f"{words[1].rstrip(':')} {words[2]}")
            else:
                got.append(f"{words[1].rstrip(':')} {'RUNNING' if words[2] == 'running' else 'REQUESTED'}")
    assert got == _every_line(views)


def test_run_shows_the_last_stages_end_and_the_release_of_every_allocation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's last step ends it before any view: the final view shows what happened then (a new user
    saw every stage done but the last, and its allocation never end)."""
    from elastic.cli import main

    wf = tmp_path / "two.toml"
    wf.write_text(
        '[[stages]]\nname = "a"\ntasks = 2\ncores = 1\nruntime = 60\n\n'
        '[[stages]]\nname = "b"\ntasks = 1\ncores = 1\nruntime = 60\ndepends_on = ["a"]\n'
    )
    for strategy in ("asa", "bigjob", "perstage"):
        args = ["run", "--workflow", str(wf), "--strategy", strategy, "--simulate", "--no-store"]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert "elastic: stage a: ready (2 tasks)" in out and "elastic: stage b: ready (1 task)" in out
        assert "elastic: stage b: done (1/1 task)" in out, out
        requested = set(re.findall(r"allocation (a\d+): requested", out))
        ended = set(re.findall(r"allocation (a\d+): (?:released|cancelled|completed|timeout|failed)", out))
        assert requested and requested == ended, out
        assert out.index("stage b: done") < out.index("makespan (s)")


def test_a_last_view_that_cannot_be_shown_does_not_lose_the_run(caplog: pytest.LogCaptureFixture) -> None:
    from elastic.backends.mock import MockBackend
    from elastic.control.runner import Runner
    from elastic.control.sim_execution import SimExecution
    from elastic.strategies import Knowledge, RunView
    from elastic.strategies.perstage import PerStage
    from elastic.workflow import Stage, Workflow

    wf = Workflow("one", (Stage("a", 2, 1, runtime=60.0),))
    shown: list[float] = []

    def show(view: RunView) -> None:
        if all(s.complete for s in view.stages):
            raise RuntimeError("the terminal went away")
        shown.append(view.now)

    runner = Runner(
        wf, PerStage(), MockBackend(nodes=2), SimExecution(), Knowledge(wf), seed=1, on_iteration=show
    )
    result = runner.run()
    assert result.status == "completed" and shown
    assert result.metrics.makespan > 0
    assert "could not show the run's last view: the terminal went away" in caplog.text
