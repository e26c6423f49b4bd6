"""``elastic mesos``: serve the Mesos scheduler API on a front door until interrupted.

``elastic mesos [--backend local|mock|slurm] [--strategy asa] [--host H] [--port P] [--authenticate]
[--credentials FILE] [--secret-dir DIR] [--speedup K] [--partition P] [--account A] [--bind IFACE]
[--workflow NAME] [--max-cores N] [--idle-timeout S] [--heartbeat S] [--offer-timeout S] [--gang-wait S]
[--allocation-interval S] [--submission-rate JOBS_PER_MIN] [--mem-per-core MB] [--disk-per-core MB]
[--store URL | --no-store]``

It prints the master address to give pymesos (``MesosSchedulerDriver(..., "HOST:PORT")``) and whether
frameworks must authenticate: not on a loopback ``--host`` (the default), unless ``--authenticate`` or
``--credentials`` (a Mesos ``--credentials`` JSON file) are given; on any other address always, with the
given credentials or one drawn (principal ``elastic``) and written to a printed 0600 file. It serves
frameworks until Ctrl-C or SIGTERM, then ends every framework's stream, releases every allocation and prints
the run's makespan and core-hours. Every option is checked before anything starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic.cli.arguments import add_submission_rate_argument
from elastic.cli.commands import add_command
from elastic.cli.values import int_in_range, nonnegative_float, positive_float, positive_int, speedup
from elastic.errors import ConfigError
from elastic.strategies import STRATEGY_NAMES

if TYPE_CHECKING:
    from elastic.front.settings import Settings

__all__ = ["register", "server_options"]

_BACKENDS = ("local", "mock", "slurm")


def register(subparsers: Any) -> None:
    """Add the ``mesos`` subcommand."""
    parser = add_command(
        subparsers,
        "mesos",
        _serve,
        description="Serve the Mesos v1 scheduler API on pilot allocations chosen by a strategy.",
    )
    parser.add_argument("--backend", choices=_BACKENDS, default="local", help="where allocations come from")
    parser.add_argument("--strategy", choices=STRATEGY_NAMES, default="asa", help="default: asa")
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface the API listens on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int_in_range(0, 65535), default=5050, help="TCP port, 0 for any (default 5050)"
    )
    parser.add_argument(
        "--authenticate",
        action="store_true",
        help="require credentials also on a loopback --host (always required on other addresses)",
    )
    parser.add_argument(
        "--credentials",
        metavar="FILE",
        help='JSON {"credentials": [{"principal": P, "secret": S}, ...]} as Mesos\' --credentials '
        "(default with authentication: one drawn, principal 'elastic')",
    )
    parser.add_argument(
        "--secret-dir", help="directory of a drawn credentials file (default: a private temporary one)"
    )
    parser.add_argument(
        "--speedup", type=speedup, help="mock backend: clock speed-up K, from 0.01 to 1000 (default 60)"
    )
    parser.add_argument("--partition", help="Slurm partition")
    parser.add_argument("--account", help="Slurm account")
    parser.add_argument("--bind", default="127.0.0.1", help="interface the pool listens on for agents")
    parser.add_argument("--workflow", default="mesos", help="name runs are kept under (default: mesos)")
    parser.add_argument("--max-cores", type=positive_int, help="no allocation wider")
    parser.add_argument(
        "--idle-timeout", type=nonnegative_float, default=300.0, help="seconds an idle stage keeps its cores"
    )
    parser.add_argument("--heartbeat", type=positive_float, default=15.0, help="seconds between HEARTBEATs")
    parser.add_argument(
        "--offer-timeout",
        type=nonnegative_float,
        help="seconds before an unanswered offer is rescinded, 0 for never (default 30, as MesosMaster)",
    )
    parser.add_argument(
        "--gang-wait",
        type=positive_float,
        default=10.0,
        help="seconds a framework waits, all its tasks running and none ended, with no core free, before "
        "it is taken for a gang short of cores and one more is asked for it; also how long one that "
        "declines every offer while it runs nothing waits before its tasks are taken as twice as wide "
        "(default 10)",
    )
    parser.add_argument(
        "--allocation-interval",
        type=nonnegative_float,
        default=0.0,
        metavar="S",
        help="seconds between batch allocations, as the Mesos master's --allocation_interval (1 there): "
        "cores freed by ended tasks, declines and rescinds are offered at the next one; 0 offers them at "
        "once (default 0)",
    )
    add_submission_rate_argument(parser)
    parser.add_argument(
        "--mem-per-core", type=positive_float, default=1024.0, help="mem (MB) offered per core (default 1024)"
    )
    parser.add_argument(
        "--disk-per-core",
        type=positive_float,
        default=10240.0,
        help="disk (MB) offered per core (default 10240; checked against launches, not enforced)",
    )
    parser.add_argument("--store", metavar="URL", help="SQLAlchemy URL of the store (default: see docs)")
    parser.add_argument("--no-store", action="store_true", help="keep nothing across runs")


def _check(args: argparse.Namespace) -> None:
    if args.speedup is not None and args.backend != "mock":
        raise ConfigError(f"--speedup applies to --backend mock only, got --backend {args.backend}")
    for option in ("partition", "account"):
        if getattr(args, option) is not None and args.backend != "slurm":
            raise ConfigError(f"--{option} applies to --backend slurm only, got --backend {args.backend}")
    if args.store is not None and args.no_store:
        raise ConfigError("--store and --no-store contradict each other; give one")
    if args.credentials is not None:
        from elastic.front.mesos.auth import read_credentials

        read_credentials(args.credentials)
    if args.secret_dir is not None:
        path = Path(args.secret_dir)
        if not path.is_dir():
            raise ConfigError(f"--secret-dir {path}: not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"--secret-dir {path}: cannot write there")


def _settings(args: argparse.Namespace, backend: Any) -> Settings:
    """Return the front door's settings the options give (checked: a bad one is refused here)."""
    from elastic.front.settings import Settings

    return Settings(
        backend=backend,
        strategy=args.strategy,
        workflow=args.workflow,
        store=False if args.no_store else args.store,
        max_cores=args.max_cores,
        idle_timeout=args.idle_timeout,
        speedup=args.speedup,
        submission_rate=args.submission_rate,
        pool={"bind": args.bind},
    )


def server_options(args: argparse.Namespace) -> dict[str, Any]:
    """Return the :class:`~elastic.front.mesos.MesosServer` keyword arguments the parsed options give.

    Parameters
    ----------
    args : argparse.Namespace
        The ``mesos`` subcommand's parsed options.

    Returns
    -------
    dict
        ``host``, ``port``, authentication, heartbeat, offer timeout, gang wait, allocation interval and
        per-core resources.
    """
    from elastic.front.mesos.master import DEFAULT_OFFER_TIMEOUT

    return {
        "host": args.host,
        "port": args.port,
        "authenticate": True if args.authenticate else None,
        "credentials": args.credentials,
        "secret_dir": args.secret_dir,
        "heartbeat_interval": args.heartbeat,
        "offer_timeout": DEFAULT_OFFER_TIMEOUT if args.offer_timeout is None else args.offer_timeout or None,
        "gang_wait": args.gang_wait,
        "allocation_interval": args.allocation_interval,
        "mem_per_core": args.mem_per_core,
        "disk_per_core": args.disk_per_core,
    }


def _serve(args: argparse.Namespace) -> int:
    _check(args)
    _settings(args, args.backend)
    from rich.console import Console

    from elastic import Elastic
    from elastic.front.mesos import MesosServer

    console = Console(soft_wrap=True)
    backend: Any = args.backend
    if args.backend == "slurm":
        from elastic.backends.slurm import SlurmBackend

        backend = SlurmBackend(partition=args.partition, account=args.account)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with Elastic(settings=_settings(args, backend)) as el:
        server = MesosServer(el, **server_options(args))
        console.print(f"Mesos scheduler API at http://{server.address}/api/v1/scheduler", highlight=False)
        console.print(f"master (for pymesos): {server.address}", highlight=False)
        if not server.authenticate:
            console.print("authentication: off (loopback address; --authenticate to require it)")
        else:
            console.print(
                f"credentials file (principal and secret for pymesos): {server.credentials_file}",
                highlight=False,
            )
        console.print(
            f"strategy {args.strategy} on the {args.backend} backend; Ctrl-C to stop", highlight=False
        )
        try:
            stop.wait()
        finally:
            server.close()
    result = el.result
    if result is not None:
        m = result.metrics
        hours = f"core-hours charged {m.core_hours_charged:.3f}, used {m.core_hours_used:.3f}"
        console.print(f"run {result.status}: makespan {m.makespan:.0f} s, {hours}", highlight=False)
    return 0
