"""``elastic doctor``: check what a run needs on this machine, one line each; exit 1 when something fails.

Checks, in order:

- **slurm**: ``sbatch``, ``squeue``, ``scontrol``, ``scancel`` on ``PATH`` (needed with ``--backend slurm``;
  otherwise only reported), then the partition jobs go to and its limits (``scontrol show partition``: nodes,
  cores per node, longest walltime) and the site options, tried with ``sbatch --test-only``.
- **store**: the store opens (``--store URL``, else ``$ELASTIC_STORE_URL``, else the default SQLite file);
  a warning names the runs a killed driver left ``running`` (``elastic store recover`` ends them).
- **pool port**: the pool's socket can be bound on the chosen interface (``--bind``, ``--port``) and reached
  at the address agents would be given (connect from this host); binding loopback on Slurm is reported,
  since agents on compute nodes could not reach it.
- **pool port from a compute node** (``--from-node``, Slurm only, opt-in since it runs a job of at most
  a minute): a socket on this host, bound as the pool's, is connected to from a compute node through
  ``srun`` (the site's partition, account, QOS, reservation and constraint; the site's ``worker_init``
  and interpreter), so a firewall between the nodes and this host shows before a run; ``srun
  --immediate`` gives up after ``--from-node-wait`` seconds in the queue.
- **agents' interpreter**: the Python the agents run (the site's ``python``, else this one) starts and
  imports what an agent imports.

Each line starts with ``ok``, ``warn``, ``skip`` or ``FAIL``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elastic.cli.commands import add_command

if TYPE_CHECKING:
    from elastic.site import SiteConfig

__all__ = ["Check", "check_interpreter", "check_port", "check_slurm", "check_store", "register"]

SLURM_COMMANDS = ("sbatch", "squeue", "scontrol", "scancel")
"""The Slurm commands the Slurm backend runs."""

UNREACHABLE = (
    "configuration source",
    "Unable to contact slurm controller",
    "Could not establish",
    "Connection refused",
)
"""What the Slurm commands say when no controller answers or no slurm.conf is found."""

AGENT_IMPORTS = "import elastic.pool.agent, zmq, cloudpickle"
"""What an agent's interpreter must import (``python -m elastic.pool.agent``)."""


@dataclass(frozen=True)
class Check:
    """One line of the report.

    Attributes
    ----------
    status : {"ok", "warn", "skip", "FAIL"}
        ``FAIL`` makes ``elastic doctor`` exit 1.
    what : str
        What was checked.
    detail : str
        What was found, or what to do.
    """

    status: str
    what: str
    detail: str

    def line(self) -> str:
        """Return the report line: status, what, detail (a detail of several lines: its first and last)."""
        lines = [line.strip() for line in self.detail.splitlines() if line.strip()] or [""]
        detail = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
        return f"{self.status:<4}  {self.what}: {detail}"


def _run(args: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def check_slurm(needed: bool, partition: str | None = None) -> list[Check]:
    """Check the Slurm commands, the partition's limits and the site options.

    Parameters
    ----------
    needed
        Whether the run will use Slurm (a missing command is then a failure, else a skip).
    partition
        The partition to look at; None: the site's, else Slurm's default.
    """
    missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
    if missing:
        detail = f"{', '.join(missing)} not found on PATH"
        if not needed:
            return [Check("skip", "slurm", f"{detail} (not needed with this backend)")]
        return [Check("FAIL", "slurm", f"{detail}: install the Slurm client commands or fix PATH")]
    found = os.path.dirname(shutil.which("sbatch") or "")
    checks = [Check("ok", "slurm", f"{', '.join(SLURM_COMMANDS)} in {found}")]
    if not needed:
        return checks
    from elastic.backends.slurm import SlurmBackend
    from elastic.errors import ElasticError

    try:
        backend = SlurmBackend(partition)
        info = backend.partition()
    except (ElasticError, OSError, subprocess.SubprocessError) as exc:
        hint = (
            " (is slurmctld running and reachable from here? SLURM_CONF names the cluster's slurm.conf)"
            if any(s in str(exc) for s in UNREACHABLE)
            else ""
        )
        return [*checks, Check("FAIL", "slurm partition", f"{exc}{hint}")]
    wall = "no walltime limit" if info.max_walltime is None else f"walltime at most {info.max_walltime:.0f} s"
    checks.append(
        Check(
            "ok",
            "slurm partition",
            f"{info.name}: {info.nodes} nodes x {info.cores_per_node} cores "
            f"({info.nodes * info.cores_per_node} cores), {wall}",
        )
    )
    try:
        backend.check_site()
    except (ElasticError, OSError, subprocess.SubprocessError) as exc:
        checks.append(Check("FAIL", "slurm site options", str(exc)))
    else:
        checks.append(Check("ok", "slurm site options", "accepted by sbatch --test-only"))
    return checks


def check_store(url: str | None) -> Check:
    """Check the store opens (``url``: a SQLAlchemy URL; None: the default); name runs a dead driver left."""
    from elastic.errors import ElasticError
    from elastic.front.recovery import abandoned_runs
    from elastic.store import Store

    try:
        with Store(url) as store:
            where = store.url
            runs = len(store.runs())
            dead = abandoned_runs(store)
    except (ElasticError, OSError, ImportError) as exc:
        return Check("FAIL", "store", f"{url or 'the default store'}: {exc}")
    except Exception as exc:  # SQLAlchemy's own errors: a bad URL, a server not running
        return Check("FAIL", "store", f"{url or 'the default store'}: {type(exc).__name__}: {exc}")
    if dead:
        ids = ", ".join(str(r.run_id) for r in dead)
        jobs = " and may have left batch jobs queued" if any(r.has_jobs_left for r in dead) else ""
        return Check(
            "warn",
            "store",
            f"{where} ({runs} runs); run(s) {ids} were left running by a driver that died{jobs}: "
            "`elastic store recover` ends them and cancels their jobs",
        )
    return Check("ok", "store", f"{where} ({runs} runs)")


def check_port(bind: str, port: int, advertise: str | None, slurm: bool) -> Check:
    """Bind the pool's port on ``bind`` and connect to it at the address agents would be given.

    Parameters
    ----------
    bind, port, advertise
        As the pool takes them (``port`` 0: any free port).
    slurm
        Agents run on other hosts: a loopback address is then a failure.
    """
    host = advertise or (socket.gethostname() if bind in ("0.0.0.0", "*") else bind)
    what = f"pool port ({bind}:{port or 'any'})"
    try:
        infos = socket.getaddrinfo(bind if bind != "*" else "0.0.0.0", port, type=socket.SOCK_STREAM)
        family, _, _, _, address = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(address)
            server.listen(1)
            bound = server.getsockname()[1]
            with socket.create_connection((host, bound), timeout=5.0):
                pass
    except OSError as exc:
        return Check("FAIL", what, f"cannot bind {bind}:{port} and connect to {host}: {exc}")
    if slurm and (host.startswith("127.") or host in ("localhost", "::1")):
        return Check(
            "FAIL",
            what,
            f"agents on compute nodes cannot reach {host}: use --bind 0.0.0.0 (or the cluster interface)",
        )
    return Check("ok", what, f"bound port {bound}, reached at {host}:{bound}")


def check_port_from_node(
    bind: str,
    advertise: str | None,
    python: str,
    site: SiteConfig | None = None,
    partition: str | None = None,
    wait: float = 120.0,
) -> Check:
    """Connect from a compute node to a socket bound on this host as the pool's, through ``srun``.

    Parameters
    ----------
    bind, advertise
        As the pool takes them.
    python
        The interpreter the node runs the connect with (after the site's ``worker_init``).
    site
        Where the job goes (partition, account, QOS, reservation, constraint) and its prologue.
    partition
        The partition, over the site's.
    wait
        Seconds ``srun`` may wait in the queue for a node (``--immediate``) before giving up.
    """
    host = advertise or (socket.gethostname() if bind in ("0.0.0.0", "*") else bind)
    what = "pool port from a compute node"
    code = (
        f"import socket; socket.create_connection(({host!r}, PORT), timeout=10).close(); "
        "print(socket.gethostname())"
    )
    options = ["--nodes=1", "--ntasks=1", "--time=1", f"--immediate={max(1, round(wait))}", "--quiet"]
    options.append("--job-name=elastic-doctor")
    partition = partition or (site.partition if site else None)
    fields = {"partition": partition}
    if site is not None:
        fields |= {k: getattr(site, k) for k in ("account", "qos", "reservation", "constraint")}
    options += [f"--{name}={value}" for name, value in fields.items() if value]
    prologue = site.worker_init if site is not None else ""
    try:
        infos = socket.getaddrinfo(bind if bind != "*" else "0.0.0.0", 0, type=socket.SOCK_STREAM)
        family, _, _, _, address = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as server:
            server.bind(address)
            server.listen(4)  # the kernel completes the node's connect; nothing needs to accept it
            port = server.getsockname()[1]
            script = (
                f"{prologue}\nexec {shlex.quote(python)} -c {shlex.quote(code.replace('PORT', str(port)))}"
            )
            done = _run(["srun", *options, "bash", "-c", script], timeout=wait + 90.0)
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("FAIL", what, f"srun could not run the check: {exc}")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        return Check(
            "FAIL",
            what,
            f"a compute node could not connect to {host}:{port} ({last}); agents could not reach the pool: "
            "use --advertise with a name the nodes resolve, or ask which ports the nodes may reach",
        )
    node = (done.stdout.strip().splitlines() or ["a node"])[-1]
    return Check("ok", what, f"{node} connected to {host}:{port}")


def check_interpreter(python: str, worker_init: str = "") -> Check:
    """Check the agents' interpreter starts and imports what an agent imports.

    Parameters
    ----------
    python
        The interpreter (a path, or a name found on ``PATH``).
    worker_init
        The site's job prologue (``module load``, ``source venv/bin/activate``), run first in ``bash`` as
        a job runs it, so a ``python`` it puts on ``PATH`` is the one checked.
    """
    what = f"agents' interpreter ({python})"
    code = f"{AGENT_IMPORTS}; import sys; print(sys.version.split()[0])"
    args = [python, "-c", code]
    if worker_init.strip():
        what = f"agents' interpreter ({python} after worker_init)"
        args = ["bash", "-c", f"{worker_init}\nexec {shlex.quote(python)} -c {shlex.quote(code)}"]
    try:
        done = _run(args, timeout=60.0)
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("FAIL", what, f"does not start: {exc}")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("FAIL", what, f"cannot import the agent ({last}); install elastic-hpc in it")
    return Check("ok", what, f"Python {done.stdout.strip()}, imports the agent")


def diagnose(args: argparse.Namespace) -> list[Check]:
    """Run every check the arguments ask for, in order."""
    from elastic.site import load_site

    backend = args.backend
    if backend == "auto":
        backend = "slurm" if shutil.which("sbatch") else "local"
    slurm = backend == "slurm"
    checks: list[Check] = [
        Check(
            "ok",
            "backend",
            f"{backend}" + (" (chosen: sbatch on PATH)" if args.backend == "auto" and slurm else ""),
        )
    ]
    checks += check_slurm(slurm, args.partition)
    checks.append(check_store(args.store))
    checks.append(check_port(args.bind, args.port, args.advertise, slurm))
    python, worker_init = args.python, ""
    site: SiteConfig | None = None
    if slurm:  # the agents run in jobs: after the site's worker_init, with the site's python
        try:
            site = load_site()
        except Exception as exc:  # a bad site file: said here, checked by the Slurm lines too
            checks.append(Check("FAIL", "site file", str(exc)))
        else:
            python, worker_init = python or site.python, site.worker_init
    checks.append(check_interpreter(python or sys.executable, worker_init))
    if getattr(args, "from_node", False):
        if not slurm:
            checks.append(Check("skip", "pool port from a compute node", "only with the slurm backend"))
        elif any(c.status == "FAIL" for c in checks):
            checks.append(Check("skip", "pool port from a compute node", "fix the failures above first"))
        else:
            agents = python or sys.executable
            found = check_port_from_node(
                args.bind, args.advertise, agents, site, args.partition, args.from_node_wait
            )
            checks.append(found)
    return checks


def register(subparsers: Any) -> None:
    """Add the ``doctor`` subcommand."""
    parser = add_command(
        subparsers,
        "doctor",
        _doctor,
        description="Check what a run needs on this machine, one line each; exit 1 if something fails.",
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "local", "mock", "slurm"),
        default="auto",
        help="the backend the run will use (default auto: slurm when sbatch is on PATH, else local)",
    )
    parser.add_argument("--partition", help="Slurm partition (default: the site's, else Slurm's default)")
    parser.add_argument(
        "--store", metavar="URL", help="store URL (default: $ELASTIC_STORE_URL or the default)"
    )
    parser.add_argument(
        "--bind", default=None, help="interface the pool listens on (default: 127.0.0.1; 0.0.0.0 on Slurm)"
    )
    parser.add_argument("--port", type=int, default=0, help="the pool's TCP port (default: any free one)")
    parser.add_argument("--advertise", default=None, help="host name agents connect to (default: see bind)")
    parser.add_argument(
        "--python", default=None, help="the agents' interpreter (default: the site's, else this one)"
    )
    parser.add_argument(
        "--from-node",
        action="store_true",
        help="also connect to the pool's port from a compute node (srun, a job of at most a minute)",
    )
    parser.add_argument(
        "--from-node-wait",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long that job may wait for a node (default 120)",
    )


def _doctor(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    if args.bind is None:
        slurm = args.backend == "slurm" or (args.backend == "auto" and shutil.which("sbatch"))
        args.bind = "0.0.0.0" if slurm else "127.0.0.1"
    if not 0 <= args.port <= 65535:
        from elastic.errors import ConfigError

        raise ConfigError(f"--port must be 0 (any free port) to 65535, got {args.port}")
    if not 1 <= args.from_node_wait <= 3600:
        from elastic.errors import ConfigError

        raise ConfigError(f"--from-node-wait must be 1 to 3600 seconds, got {args.from_node_wait}")
    checks = diagnose(args)
    for check in checks:
        out(check.line())
    failed = sum(c.status == "FAIL" for c in checks)
    out(f"{failed} check(s) failed" if failed else "everything a run needs is here")
    return 1 if failed else 0
