"""``elastic store``: look after the store of runs.

- ``elastic store replay JOURNAL``: a run whose store stopped answering keeps going (the store is written
  through a journal); what the store had not taken when the run ended is in a journal file the run's error
  log names. This writes it once the store answers again.
- ``elastic store recover``: a run whose driver was killed (``kill -9``, the OOM killer) stays
  ``running`` in the store, and on Slurm its batch jobs stay queued until their walltime. The next run on
  the same store cleans up after it; this does it now, without starting a run: it cancels the jobs that
  are still the dead run's own and marks the run ``interrupted`` (``--dry-run``: only says what it would
  do). Only runs of this host whose driver no longer exists are touched.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from elastic.cli.commands import add_command
from elastic.errors import ConfigError

__all__ = ["register"]

DESCRIPTION = """\
replay JOURNAL  A run whose store stopped answering keeps going: what the store had
                not taken when the run ended is in a journal file its error log
                names. This writes it once the store answers again.
recover         A run whose driver was killed (kill -9, the OOM killer) stays
                "running" in the store, and on Slurm its batch jobs stay queued until
                their walltime. The next run on the same store cleans up after it;
                this does it now: it cancels the jobs still the dead run's own and
                marks the run interrupted (--dry-run: only says what it would do).
                Only runs of this host whose driver no longer exists are touched."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``store`` subcommand to ``subparsers``."""
    parser = add_command(
        subparsers,
        "store",
        None,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    recover = actions.add_parser(
        "recover",
        help="end the runs whose driver was killed, and cancel their batch jobs still queued",
    )
    recover.add_argument(
        "--store",
        default=None,
        help="SQLAlchemy URL of the store (default: ELASTIC_STORE_URL, else the user's SQLite store)",
    )
    recover.add_argument("--dry-run", action="store_true", help="only say what would be cancelled and ended")
    recover.set_defaults(func=_recover)


def _replay(args: argparse.Namespace) -> int:
    from elastic.store import Store
    from elastic.store.journal import replay_journal

    if not args.journal.is_file():
        raise ConfigError(f"{args.journal}: no such journal file")
    with Store(args.store) as store:
        done = replay_journal(args.journal, store)
    print(f"wrote {done} call(s) from {args.journal} to {store.url}; the journal can be deleted")
    return 0


def _recover(args: argparse.Namespace) -> int:
    """End the abandoned runs of this host; exit 1 when one must be left (its queue cannot be read)."""
    from elastic.backends.base import BatchBackend
    from elastic.front.recovery import abandoned_runs, recover_run
    from elastic.store import Store

    with Store(args.store) as store:
        runs = abandoned_runs(store)
        if not runs:
            print(f"no run of this host was left running by a driver that died ({store.url})")
            return 0
        backends: dict[str, BatchBackend] = {}
        if any(r.has_jobs_left and r.backend == "slurm" for r in runs):
            from elastic.backends.slurm import SlurmBackend

            backends["slurm"] = SlurmBackend()
        left = 0
        for run in runs:
            done = recover_run(store, run, backends.get(run.backend), dry_run=args.dry_run)
            jobs = " ".join(done.cancelled)
            what = f"run {run.run_id} of {run.workflow!r} ({run.backend}, driver pid {run.pid})"
            if done.left is not None:
                left += 1
                print(f"{what}: left running: {done.left}")
            elif args.dry_run:
                cancel = (
                    f"would cancel {len(done.cancelled)} batch job(s) ({jobs})"
                    if jobs
                    else "no job to cancel"
                )
                print(f"{what}: {cancel}; would be marked interrupted")
            else:
                cancel = (
                    f"cancelled {len(done.cancelled)} batch job(s) ({jobs})" if jobs else "no job to cancel"
                )
                print(f"{what}: {cancel}; marked interrupted")
    return 1 if left else 0
