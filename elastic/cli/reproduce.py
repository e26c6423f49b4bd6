"""``elastic reproduce PAPER``: a paper's experiment, its stated results beside ours, a verdict per figure.

- ``elastic reproduce speculative [--figure N] [--runs R] [--out DIR] [--full]``: Gainaru et al., ICPP 2019.
- ``elastic reproduce onthefly [--figure 8|9] [--runs R] [--out DIR] [--full]``: Gainaru et al., IJHPCA
  (on-the-fly vs. reservation-based scheduling).
- ``elastic reproduce cp [--runs R] [--out DIR] [--full]``: Galleguillos et al., CP 2019 (CP-based
  dispatching; needs the ``cp`` extra, OR-Tools).
- ``elastic reproduce asa [--trace PATH] [--runs R] [--out DIR] [--full]``: Souza et al. (ASA), Table 1's
  HPC2N rows: ``elastic compare``'s experiment on the HPC2N 2002 trace (``--trace``, else
  ``$ELASTIC_TRACES/HPC2N-2002-2.2-cln.swf.gz``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from elastic.cli.commands import add_command
from elastic.cli.values import int_in_range, processors

__all__ = ["register"]

PAPERS = ("speculative", "onthefly", "cp", "asa")

#: Random workloads per point unless --runs is given: what fits in a few minutes on two cores.
DEFAULT_RUNS = {"speculative": 5, "onthefly": 10, "cp": 1, "asa": 10}

#: asa: runs per cell with --full (the count of the comparison on the results page; the paper ran one).
ASA_FULL_RUNS = 30

#: asa: the trace file looked for in $ELASTIC_TRACES when --trace is not given.
HPC2N_TRACE = "HPC2N-2002-2.2-cln.swf.gz"


def register(subparsers: Any) -> None:
    """Add the ``reproduce`` subcommand."""
    parser = add_command(
        subparsers,
        "reproduce",
        _run,
        description="Run a paper's experiment on the simulator; print our tables beside its results.",
    )
    parser.add_argument("paper", choices=PAPERS, help="which paper")
    parser.add_argument(
        "--figure",
        type=int,
        action="append",
        default=None,
        help="only this figure (repeatable); speculative: 2-8, by default 2-5 and 8 (6-7 replay ~10^4 "
        "backfilling jobs, about 20 minutes a run: with --figure or --full); onthefly: 8, 9",
    )
    parser.add_argument(
        "--runs",
        type=int_in_range(1, 1000, "runs are averaged one by one"),
        default=None,
        help="random workloads per point (default: speculative 5, onthefly 10, cp 1, asa 10; the papers: "
        "50, 10, one trace, one run per cell)",
    )
    parser.add_argument(
        "--trace",
        metavar="PATH",
        default=None,
        help=f"asa: the HPC2N 2002 SWF trace (default: $ELASTIC_TRACES/{HPC2N_TRACE}; "
        "elastic traces download hpc2n fetches it)",
    )
    parser.add_argument(
        "--processors",
        type=processors,
        default=None,
        metavar="N",
        help="asa: the trace's cores where its header gives no size (as the reader's warning asks); with a "
        "header, jobs are scaled to this size (no longer the paper's setting)",
    )
    parser.add_argument("--out", metavar="DIR", default=None, help="also write PAPER.md into DIR")
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"the paper's full sweeps (slower); speculative: also Figs. 6-7, finer k, share and rate grids; "
        f"cp: 4,000 jobs, not 1,500; asa: {ASA_FULL_RUNS} runs a cell",
    )


def _hpc2n_trace(given: str | None) -> Path:
    """Return the HPC2N trace's path: ``--trace``, else ``$ELASTIC_TRACES``' copy; refuse a missing file."""
    from elastic.errors import ConfigError

    if given is not None:
        path = Path(given)
    elif os.environ.get("ELASTIC_TRACES"):
        path = Path(os.environ["ELASTIC_TRACES"]) / HPC2N_TRACE
    else:
        raise ConfigError(
            f"elastic reproduce asa needs the HPC2N 2002 trace: pass --trace PATH/{HPC2N_TRACE} or set "
            "ELASTIC_TRACES to its folder (elastic traces download hpc2n fetches it)"
        )
    if not path.is_file():
        raise ConfigError(f"the HPC2N trace {str(path)!r} is not a file (elastic traces download hpc2n)")
    return path


def _asa(args: argparse.Namespace) -> Any:
    from elastic.cli.arguments import read_trace
    from elastic.errors import ConfigError
    from elastic.papers import asa

    if args.figure:
        raise ConfigError("the ASA reproduction has no --figure: it prints Table 1's HPC2N rows")
    trace = _hpc2n_trace(args.trace)
    runs = args.runs if args.runs is not None else ASA_FULL_RUNS if args.full else DEFAULT_RUNS["asa"]
    background = read_trace(str(trace), "reproduce", load=1.0, processors=args.processors).workload
    return asa.reproduce(
        background, runs=runs, queue=f"the {trace.name} trace replayed behind the workflow (plain replay)"
    )


def _run(args: argparse.Namespace) -> int:
    runs = args.runs if args.runs is not None else DEFAULT_RUNS[args.paper]
    if (args.trace is not None or args.processors is not None) and args.paper != "asa":
        from elastic.errors import ConfigError

        option = "--trace" if args.trace is not None else "--processors"
        raise ConfigError(f"{option} is the asa reproduction's (the HPC2N trace it replays)")
    if args.paper == "asa":
        report = _asa(args)
    elif args.paper == "cp":
        from elastic.errors import ConfigError
        from elastic.papers import cpdispatch

        if args.figure:
            raise ConfigError("the CP-dispatching reproduction has no --figure: it prints all its results")
        report = cpdispatch.reproduce(runs=runs, jobs=4000 if args.full else 1500)
    elif args.paper == "onthefly":
        from elastic.papers import onthefly

        figures = tuple(args.figure) if args.figure else onthefly.FIGURES
        report = onthefly.reproduce(figures, runs=runs, full=args.full)
    else:
        from elastic.papers import speculative

        # Figs. 6-7 replay ~10^4 backfilling jobs per run (about 20 minutes a run): only when asked for.
        default = speculative.FIGURES if args.full else (2, 3, 4, 5, 8)
        figures = tuple(args.figure) if args.figure else default
        report = speculative.reproduce(figures, runs=runs, full=args.full)
    text = report.markdown()
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.paper}.md").write_text(text, encoding="utf-8")
    return 0
