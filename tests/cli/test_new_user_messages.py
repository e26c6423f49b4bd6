"""Messages a new user met trying the command line, each saying what to do instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.cli import main
from elastic.cli.commands import COMMANDS
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


@pytest.mark.parametrize(
    "argv",
    [[name, "--help"] for name in COMMANDS] + [["store", "replay", "--help"], ["store", "recover", "--help"]],
    ids=lambda argv: " ".join(argv[:-1]),
)
def test_no_help_text_shows_docstring_markup(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``elastic store --help`` showed its module docstring's reST, backquotes and all."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    out = capsys.readouterr().out
    for markup in ("``", ":func:", ":class:", ":mod:", ":data:", ":meth:"):
        assert markup not in out, f"{' '.join(argv)} shows {markup!r}"


def test_walltime_names_its_own_option_when_the_longest_run_was_killed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs.txt"
    runs.write_text("3100\n2900\n3600 1\n3300\n3600 1\n")
    assert main(["walltime", "--runtimes", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "the longest run (3600 s) was killed" in err and "give --upper, in s," in err
    assert "upper=" not in err  # the library's keyword, not an option of the command
    assert main(["walltime", "--runtimes", str(runs), "--upper", "3000"]) == 2
    assert "more than --upper 3000 s" in capsys.readouterr().err
