"""``elastic store replay JOURNAL``: write what a run could not write to its store.

A run whose store stopped answering keeps going (the store is written through a journal); what
the store had not taken when the run ended is in a journal file the run's error log names. This writes
it once the store answers again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from elastic.cli.commands import add_command
from elastic.errors import ConfigError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``store`` subcommand to ``subparsers``."""
    parser = add_command(
        subparsers, "store", None, description=__doc__.split("\n\n", 1)[1] if __doc__ else None
    )
    actions = parser.add_subparsers(dest="store_action", metavar="ACTION", required=True)
    replay = actions.add_parser("replay", help="write a journal's calls to the store, in order")
    replay.add_argument("journal", type=Path, help="the journal file the run's error log named")
    replay.add_argument(
        "--store",
        default=None,
        help="SQLAlchemy URL of the store (default: ELASTIC_STORE_URL, else the user's SQLite store)",
    )
    replay.set_defaults(func=_replay)


def _replay(args: argparse.Namespace) -> int:
    from elastic.store import Store
    from elastic.store.journal import replay_journal

    if not args.journal.is_file():
        raise ConfigError(f"{args.journal}: no such journal file")
    with Store(args.store) as store:
        done = replay_journal(args.journal, store)
    print(f"wrote {done} call(s) from {args.journal} to {store.url}; the journal can be deleted")
    return 0
