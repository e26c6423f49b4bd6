"""How an agent is started: :class:`AgentCommand`, both its command line and the job script running it.

The command line is parsed into the same dataclass that builds it, so the two cannot drift.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from elastic.errors import ConfigError

__all__ = ["MAX_CORES", "AgentCommand"]

MAX_CORES = 65_536
"""Cores (and warm workers) one agent may offer at most: more than any node has."""

_ADDRESS = re.compile(r"tcp://(?P<host>[^\s/:]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")


@dataclass(frozen=True, slots=True)
class AgentCommand:
    """How to start one agent; both the command line the agent parses and the script that runs it.

    Parameters
    ----------
    pool : str
        Pool address, ``tcp://HOST:PORT``.
    allocation : str
        Allocation id the agent runs in.
    secret_file : str
        Path of the pool run's secret file (mode 0600).
    cores : int or None, default None
        Cores the agent offers. Give exactly one of ``cores`` and ``cores_env``.
    cores_env : str or None, default None
        Environment variable to read the cores from (``SLURM_CPUS_ON_NODE`` for one agent per node of a
        multi-node job).
    walltime_end : float or None, default None
        Epoch seconds when the allocation will be killed.
    walltime : float or None, default None
        Script only: when set, the script computes ``walltime_end`` as its own start time + ``walltime``
        (seconds, fractions kept).
    nodes : int or None, default None
        Script only: more than one node runs one agent per node with ``srun``.
    register_timeout : float, default 30.0
        Seconds to wait for the pool to answer the registration.
    workers : int or None, default None
        Warm worker processes for Python tasks; ``None``: one per core.
    worker_memory : int or None, default None
        Bytes of address space each worker may use (``RLIMIT_AS``); ``None``: no limit.
    python : str, default sys.executable
        Script only: the interpreter to run the agent with.

    Examples
    --------
    >>> cmd = AgentCommand("tcp://127.0.0.1:5000", "a1", "/tmp/s", cores=4, python="py")
    >>> cmd.to_script()
    'exec py -m elastic.pool.agent --pool=tcp://127.0.0.1:5000 --allocation=a1 --secret-file=/tmp/s --cores=4'
    >>> AgentCommand.from_argv(cmd.to_argv()).cores
    4
    """

    pool: str
    allocation: str
    secret_file: str
    cores: int | None = None
    cores_env: str | None = None
    walltime_end: float | None = None
    walltime: float | None = None
    nodes: int | None = None
    register_timeout: float = 30.0
    workers: int | None = None
    worker_memory: int | None = None
    python: str = sys.executable

    def __post_init__(self) -> None:
        if (self.cores is None) == (self.cores_env is None):
            raise ConfigError(
                f"AgentCommand needs exactly one of cores (--cores) and cores_env (--cores-env); "
                f"got cores={self.cores}, cores_env={self.cores_env!r}"
            )
        if self.cores is not None and not 1 <= self.cores <= MAX_CORES:
            raise ConfigError(
                f"AgentCommand.cores (--cores) must be between 1 and {MAX_CORES} or None, got {self.cores}"
            )
        if self.nodes is not None and self.nodes < 1:
            raise ConfigError(f"AgentCommand.nodes must be >= 1 or None, got {self.nodes}")
        address = _ADDRESS.fullmatch(self.pool)
        if address is None or not 1 <= int(address["port"]) <= 65535:
            raise ConfigError(
                f"AgentCommand.pool (--pool) must look like tcp://HOST:PORT with a port from 1 to 65535, "
                f"got {self.pool!r}"
            )
        if not self.allocation:
            raise ConfigError("AgentCommand.allocation (--allocation) must be a non-empty allocation id")
        if self.walltime_end is not None and not math.isfinite(self.walltime_end):
            raise ConfigError(
                "AgentCommand.walltime_end (--walltime-end) must be finite epoch seconds, got "
                f"{self.walltime_end}"
            )
        if self.walltime is not None and not (math.isfinite(self.walltime) and self.walltime >= 0):
            raise ConfigError(f"AgentCommand.walltime must be finite seconds >= 0, got {self.walltime}")
        if not (math.isfinite(self.register_timeout) and self.register_timeout > 0):
            raise ConfigError(
                f"AgentCommand.register_timeout (--register-timeout) must be seconds > 0, got "
                f"{self.register_timeout}"
            )
        if self.workers is not None and not 1 <= self.workers <= MAX_CORES:
            raise ConfigError(
                f"AgentCommand.workers (--workers) must be between 1 and {MAX_CORES} or None, got "
                f"{self.workers}"
            )
        if self.worker_memory is not None and not 2**24 <= self.worker_memory < 2**63:
            raise ConfigError(
                f"AgentCommand.worker_memory (--worker-memory) must be from 16 MiB to 2**63 - 1 bytes, got "
                f"{self.worker_memory}"
            )

    def to_argv(self) -> list[str]:
        """Return the agent's arguments (after ``python -m elastic.pool.agent``)."""
        # "--option=value" keeps values that start with "-" from being read as options.
        argv = [f"--pool={self.pool}", f"--allocation={self.allocation}", f"--secret-file={self.secret_file}"]
        if self.cores is not None:
            argv.append(f"--cores={self.cores}")
        else:
            argv.append(f"--cores-env={self.cores_env}")
        if self.walltime_end is not None:
            argv.append(f"--walltime-end={self.walltime_end!r}")
        if self.register_timeout != 30.0:
            argv.append(f"--register-timeout={self.register_timeout!r}")
        if self.workers is not None:
            argv.append(f"--workers={self.workers}")
        if self.worker_memory is not None:
            argv.append(f"--worker-memory={self.worker_memory}")
        return argv

    def to_script(self) -> str:
        """Return the shell script body a backend runs in the allocation to start its agent(s)."""
        words = [self.python, "-m", "elastic.pool.agent", *self.to_argv()]
        line = " ".join(shlex.quote(w) for w in words)
        start = ""
        if self.walltime is not None and self.walltime_end is None:
            # Integer nanoseconds, as bash has no float arithmetic: 1.2 s stays 1.2 s (a scaled clock's
            # walltimes are short). GNU date's %N is on every Linux; bash >= 4.2 for the negative offset.
            start = f"end=$(( $(date +%s%N) + {round(self.walltime * 1e9)} )) && "
            line += ' --walltime-end="${end%?????????}.${end: -9}"'
        if self.nodes is not None and self.nodes > 1:
            n = self.nodes
            line = f"srun --nodes={n} --ntasks={n} --ntasks-per-node=1 --kill-on-bad-exit=0 {line}"
        return f"{start}exec {line}"

    @classmethod
    def parser(cls) -> argparse.ArgumentParser:
        """Return the agent's argument parser."""
        p = argparse.ArgumentParser(prog="python -m elastic.pool.agent", description="Elastic worker agent.")
        p.add_argument("--pool", required=True, help="pool address, tcp://HOST:PORT")
        p.add_argument("--allocation", required=True, help="allocation id this agent runs in")
        p.add_argument("--secret-file", required=True, help="the pool run's secret file (mode 0600)")
        cores = p.add_mutually_exclusive_group(required=True)
        cores.add_argument("--cores", type=int, help="cores to offer")
        cores.add_argument("--cores-env", help="environment variable holding the cores to offer")
        p.add_argument("--walltime-end", type=float, help="epoch seconds when the allocation ends")
        p.add_argument("--register-timeout", type=float, default=30.0, help="seconds (default 30)")
        p.add_argument("--workers", type=int, help="warm worker processes (default: one per core)")
        p.add_argument("--worker-memory", type=int, help="address space per worker, bytes (default: none)")
        return p

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> AgentCommand:
        """Parse the agent's arguments.

        Raises
        ------
        SystemExit
            Malformed arguments (argparse prints the usage and exits 2).
        ConfigError
            Well-formed but impossible values (the message names the option).
        """
        ns = cls.parser().parse_args(list(argv))
        return cls(
            pool=ns.pool,
            allocation=ns.allocation,
            secret_file=ns.secret_file,
            cores=ns.cores,
            cores_env=ns.cores_env,
            walltime_end=ns.walltime_end,
            register_timeout=ns.register_timeout,
            workers=ns.workers,
            worker_memory=ns.worker_memory,
        )

    def resolved_cores(self) -> int:
        """Return the cores to offer, reading ``cores_env`` when ``cores`` is None."""
        if self.cores is not None:
            return self.cores
        assert self.cores_env is not None  # __post_init__ checked it
        raw = os.environ.get(self.cores_env, "")
        try:
            value = int(raw.split("(")[0])  # Slurm may write e.g. "4(x2)"
        except ValueError:
            raise ConfigError(f"--cores-env {self.cores_env}: expected a number, got {raw!r}") from None
        if not 1 <= value <= MAX_CORES:
            raise ConfigError(f"--cores-env {self.cores_env}: expected 1 to {MAX_CORES} cores, got {value}")
        return value
