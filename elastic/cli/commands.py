"""The ``elastic`` subcommands: their table, and the scaffold each module adds its parser with.

:data:`COMMANDS` names each subcommand's module and one-line summary; :func:`add_command` adds the
subcommand's parser with that summary, so it is written once (``elastic --help`` shows it without
importing the module).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["COMMANDS", "add_command"]

#: Subcommands in the order ``elastic --help`` lists them: name -> (module, one-line summary).
#: Only the module of the command being run is imported (its ``register`` adds the full parser), so
#: ``elastic --help`` and each command pay only for their own imports (numpy, scipy, pandas, parsl
#: and prefect together cost seconds).
COMMANDS: dict[str, tuple[str, str]] = {
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
    "reproduce": (
        "elastic.cli.reproduce",
        "reproduce a paper's experiment and print its figures beside ours with a verdict",
    ),
    "doctor": (
        "elastic.cli.doctor",
        "check what a run needs here (Slurm, the store, the pool's port, the agents' Python)",
    ),
    "store": (
        "elastic.cli.store",
        "write a run's journal to the store; end the runs a killed driver left, cancelling their jobs",
    ),
    "mesos": (
        "elastic.cli.mesos",
        "serve the Mesos scheduler API (pymesos frameworks) on allocations a strategy chooses",
    ),
}


def add_command(
    subparsers: Any,
    name: str,
    func: Callable[[argparse.Namespace], int] | None,
    **parser_options: Any,
) -> argparse.ArgumentParser:
    """Add subcommand ``name``'s parser, with its summary from :data:`COMMANDS` and ``func`` to run it.

    Parameters
    ----------
    subparsers
        What ``ArgumentParser.add_subparsers`` returned.
    name : str
        A key of :data:`COMMANDS`.
    func : callable or None
        Takes the parsed namespace, returns the exit code (None: the subcommand's actions set their own).
    **parser_options
        Passed to ``add_parser`` (``description``, ``epilog``, ...).

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser, to add its options to.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=COMMANDS[name][1], **parser_options)
    if func is not None:
        parser.set_defaults(func=func)
    return parser
