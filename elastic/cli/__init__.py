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

from elastic import __version__
from elastic.errors import ElasticError

__all__ = ["main"]

#: Subcommand modules, in the order ``elastic --help`` lists them.
_COMMANDS: tuple[str, ...] = (
    "elastic.cli.simulate",
    "elastic.cli.fidelity",
    "elastic.cli.traces",
    "elastic.cli.walltime",
    "elastic.cli.waits",
    "elastic.cli.run",
    "elastic.cli.compare",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elastic",
        description=(
            "Run HPC workflows on pilot batch allocations as one pool, and compare "
            "Big-Job, Per-Stage and ASA allocation strategies."
        ),
    )
    parser.add_argument("--version", action="version", version=f"elastic {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``elastic`` command line; return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
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
