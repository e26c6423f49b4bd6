"""The ``elastic`` entry point: subcommand table, lazy imports, errors."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from elastic.cli import _COMMANDS, main


@pytest.mark.parametrize("name", sorted(_COMMANDS))
def test_summary_matches_the_module_help(name: str) -> None:
    # The table's one-line summary is what `elastic --help` shows without importing the module; it
    # must say the same as the module's own parser.
    module, summary = _COMMANDS[name]
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    importlib.import_module(module).register(sub)
    (action,) = [a for a in sub._choices_actions if a.dest == name]
    assert action.help == summary


def test_help_lists_every_command_and_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from elastic.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('pandas', 'scipy', 'parsl', 'prefect', 'matplotlib')\n"
        "heavy = sorted(m for m in heavy if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for name in _COMMANDS:
        assert name in out
    assert "HEAVY []" in out


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_unknown_command_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["simulat"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_verbose_flag_before_the_command_still_selects_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["-v", "walltime", "--help"])
    assert exc.value.code == 0
    assert "--zeta" in capsys.readouterr().out


def test_every_subcommand_is_added_through_the_one_scaffold() -> None:
    """Each subcommand's parser comes from ``add_command`` (its summary written once, in ``COMMANDS``)."""
    import importlib.util
    from pathlib import Path

    from elastic.cli.commands import COMMANDS

    own = []
    for name, (module, _) in COMMANDS.items():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        if "add_command(" not in Path(spec.origin).read_text(encoding="utf-8"):
            own.append(name)
    assert own == []
