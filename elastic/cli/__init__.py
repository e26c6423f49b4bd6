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

#: Subcommands in the order ``elastic --help`` lists them: name -> (module, one-line summary).
#: Only the module of the command being run is imported (its ``register`` adds the full parser), so
#: ``elastic --help`` and each command pay only for their own imports (numpy, scipy, pandas, parsl
#: and prefect together cost seconds). ``tests/cli/test_main.py`` checks the summaries stay in sync.
_COMMANDS: dict[str, tuple[str, str]] = {
    "simulate": (
        "elastic.cli.simulate",
        "replay a workload (SWF trace or synthetic) on the simulated partition",
    ),
    "fidelity": (
        "elastic.cli.fidelity",
        "compare the mock backend's waits with a trace's recorded waits, per mode",
    ),
    "traces": ("elastic.cli.traces", "list, download and describe SWF workload traces"),
    "walltime": (
        "elastic.cli.walltime",
        "speculative walltime sequences (TOptimal, ATOptimal) against classical requests",
    ),
    "waits": (
        "elastic.cli.waits",
        "evaluate queue-wait predictors on a trace; ASA convergence experiment",
    ),
    "run": (
        "elastic.cli.run",
        "run a workflow under one strategy (mock or Slurm) and print its metrics",
    ),
    "compare": ("elastic.cli.compare", "compare Big-Job, Per-Stage and ASA over many simulated runs"),
    "doctor": (
        "elastic.cli.doctor",
        "check what a run needs here (Slurm, the store, the pool's port, the agents' Python)",
    ),
    "mesos": (
        "elastic.cli.mesos",
        "serve the Mesos scheduler API (pymesos frameworks) on allocations a strategy chooses",
    ),
}


def _chosen_command(argv: Sequence[str]) -> str | None:
    """Return the subcommand named in ``argv`` (the first argument that is one), if any."""
    for arg in argv:
        if arg in _COMMANDS:
            return arg
        if not arg.startswith("-"):
            return None
    return None


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Build the parser; only the subcommand named in ``argv`` gets its full (imported) parser."""
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
    chosen = _chosen_command(argv)
    for name, (module, summary) in _COMMANDS.items():
        if name == chosen:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``elastic`` command line; return the exit code."""
    if argv is None:
        argv = sys.argv[1:]
    parser = _parser(argv)
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
