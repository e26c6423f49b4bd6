"""The ``elastic`` command.

Each subcommand lives in its own module of this package and exposes ``register(subparsers)``, which
adds its parser and sets ``func`` to a callable taking the parsed namespace and returning an exit
code. Only this package prints; library code logs.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from elastic import __version__
from elastic.cli.commands import COMMANDS
from elastic.errors import ElasticError

__all__ = ["main"]

_COMMANDS = COMMANDS  # the name tests and other modules have used


def _chosen_command(argv: Sequence[str]) -> str | None:
    """Return the subcommand named in ``argv`` (the first argument that is one), if any."""
    for arg in argv:
        if arg in _COMMANDS:
            return arg
        if not arg.startswith("-"):
            return None
    return None


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, as every other bad input's (``docs/guide/cli.md``).

    argparse prints the whole usage (16 lines for ``elastic compare``) before the line that says what
    is wrong; the line alone, with where to find the usage, is what a user reads.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, _error_line(self.prog, message) + "\n")


def _error_line(prog: str, message: str) -> str:
    """Return the one line an option error is: what is wrong and where the usage is."""
    return f"{prog}: error: {message} (usage: {prog} -h)"


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Build the parser; only the subcommand named in ``argv`` gets its full (imported) parser."""
    parser = _Parser(
        prog="elastic",
        description=(
            "Run HPC workflows on pilot batch allocations as one pool, and compare "
            "Big-Job, Per-Stage and ASA allocation strategies."
        ),
    )
    parser.add_argument("--version", action="version", version=f"elastic {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen_command(argv)
    for name, (module, summary) in _COMMANDS.items():
        if name == chosen:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


_HINTS: dict[tuple[str | None, str], str] = {
    ("compare", "--job-cores"): "; a strategy runs in jobs of one task as NAME-fine (--strategies "
    "bigjob,perstage,asa,asa-fine)",
}
"""For an option given to the wrong subcommand: what the user likely meant."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``elastic`` command line; return the exit code."""
    if argv is None:
        argv = sys.argv[1:]
    parser = _parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the subcommand, whose options they were taken for
        command = getattr(args, "command", None)
        prog = f"elastic {command}" if command else "elastic"
        first = unknown[0].split("=")[0]
        hint = _HINTS.get((command, first), "")
        if not hint and command and first in ("-v", "-vv", "-vvv", "--verbose"):
            hint = (
                f"; -v is an option of elastic itself, before the subcommand: elastic {first} {command} ..."
            )
        print(_error_line(prog, f"unrecognized arguments: {' '.join(unknown)}{hint}"), file=sys.stderr)
        return 2
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except ElasticError as exc:
        print(f"elastic {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"elastic {args.command}: interrupted", file=sys.stderr)
        return 130
    return code
