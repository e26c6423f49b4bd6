"""Messages a new user met trying the command line, each saying what to do instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main
from elastic.front.progress import event_line
from elastic.timeline import Event, EventKind

DAG = """name = "d"
[[stages]]
name = "a"
tasks = 2
runtime = 60
"""


def test_a_workflow_on_the_local_backend_is_told_where_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.toml"
    path.write_text(DAG)
    assert (
        main(["run", "--workflow", str(path), "--strategy", "asa", "--backend", "local", "--no-store"]) == 2
    )
    err = capsys.readouterr().err
    assert "--backend local runs the demos" in err and "--backend mock" in err


def test_an_unknown_workflow_in_compare_lists_the_groups_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--workflow", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "'nosuch'" in err and "suite (" in err and "published (" in err


@pytest.mark.parametrize(("cores", "said"), [(1, "requested 1 core for"), (4, "requested 4 cores for")])
def test_a_request_line_counts_its_cores(cores: int, said: str) -> None:
    line = event_line(
        Event(0.0, EventKind.ALLOC_SUBMIT, stage="s", allocation="a1", cores=cores, walltime=60.0)
    )
    assert line is not None and said in line


def test_verbose_after_the_subcommand_says_where_it_goes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "list", "-v"]) == 2
    assert "before the subcommand: elastic -v traces" in capsys.readouterr().err
