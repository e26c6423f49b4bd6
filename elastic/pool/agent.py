"""The worker agent: ``python -m elastic.pool.agent``, run inside each allocation.

A backend starts the agent with the script :meth:`AgentCommand.to_script` returns (the pool builds it in
:meth:`elastic.pool.pool.Pool.agent_script`). The agent connects to the pool, registers its allocation and
cores, then runs the tasks the pool sends, each in its own child process
(:func:`elastic.pool.tasks.run_in_child`), and sends back their results. It sends a heartbeat every
``heartbeat_interval`` and leaves when the pool tells it to drain (after its running tasks end) or stop, when
it is sent SIGTERM (Slurm does so at the walltime limit), or when it has heard nothing from the pool for
``pool_timeout`` seconds.

A batch system that stops an allocation signals the tasks' processes too. A task killed by a signal while
the agent is stopping (it got SIGTERM or a Stop, within :data:`SIGNAL_GRACE` of the task's death) is
reported lost (:class:`~elastic.pool.protocol.TaskLost`), so the pool runs it again elsewhere; on a healthy
agent the death is the task's failure.

The command line is parsed into the same :class:`AgentCommand` that builds it, so the two cannot drift.

Exit codes: 0 left normally, 2 bad arguments, 3 the pool never answered the registration (wrong secret,
unreachable), 4 the pool went silent.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from elastic.errors import ConfigError
from elastic.pool.protocol import (
    AgentSocket,
    Bye,
    Drain,
    Heartbeat,
    ProtocolError,
    Register,
    RunTask,
    Stop,
    TaskDone,
    TaskLost,
    Welcome,
    read_secret_file,
)
from elastic.pool.tasks import TaskResult, run_in_child

__all__ = ["EXIT_NO_POOL", "EXIT_POOL_SILENT", "SIGNAL_GRACE", "Agent", "AgentCommand", "main"]

logger = logging.getLogger(__name__)

EXIT_NO_POOL = 3
"""Exit code when the pool never answered the registration."""
EXIT_POOL_SILENT = 4
"""Exit code when the pool stopped answering."""

_TICK = 0.05
"""Seconds between two looks at the socket, the children and the clock."""

SIGNAL_GRACE = 1.0
"""Seconds the agent holds back the result of a task killed by a signal, to learn whether it is stopping.

A batch system stopping an allocation (Slurm at the walltime or on ``scancel``) signals every process of the
job one after the other, the task's before or after the agent's. A task killed by a signal is reported
lost (:class:`~elastic.pool.protocol.TaskLost`) when the agent gets SIGTERM or a Stop within this time, and as
the task's failure otherwise.
"""


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
    python: str = sys.executable

    def __post_init__(self) -> None:
        if (self.cores is None) == (self.cores_env is None):
            raise ConfigError(
                f"AgentCommand needs exactly one of cores (--cores) and cores_env (--cores-env); "
                f"got cores={self.cores}, cores_env={self.cores_env!r}"
            )
        if self.cores is not None and self.cores < 1:
            raise ConfigError(f"AgentCommand.cores (--cores) must be >= 1 or None, got {self.cores}")
        if self.nodes is not None and self.nodes < 1:
            raise ConfigError(f"AgentCommand.nodes must be >= 1 or None, got {self.nodes}")
        if not self.pool.startswith("tcp://"):
            raise ConfigError(f"AgentCommand.pool (--pool) must look like tcp://HOST:PORT, got {self.pool!r}")

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
        return p

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> AgentCommand:
        """Parse the agent's arguments (raises SystemExit on bad ones, like argparse)."""
        ns = cls.parser().parse_args(list(argv))
        return cls(
            pool=ns.pool,
            allocation=ns.allocation,
            secret_file=ns.secret_file,
            cores=ns.cores,
            cores_env=ns.cores_env,
            walltime_end=ns.walltime_end,
            register_timeout=ns.register_timeout,
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
        if value < 1:
            raise ConfigError(f"--cores-env {self.cores_env}: expected >= 1 cores, got {value}")
        return value


@dataclass(slots=True)
class _Running:
    proc: subprocess.Popen[bytes]
    collect: Callable[[], TaskResult]
    result: TaskResult | None = None
    """Collected but held back (the task died by a signal) until ``held_until``."""
    held_until: float = 0.0


class Agent:
    """One agent: registers with the pool, runs tasks, reports results. Use :meth:`run`."""

    def __init__(self, command: AgentCommand, secret: bytes) -> None:
        self.command = command
        self.cores = command.resolved_cores()
        self._secret = secret
        self._ident = f"{command.allocation}/{socket.gethostname()}/{os.getpid()}"
        self._running: dict[str, _Running] = {}
        self._signalled: str | None = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signalled = signal.Signals(signum).name

    def run(self) -> int:
        """Serve the pool until told to leave; return the process exit code."""
        cmd = self.command
        prefix = f"agent {self._ident}:"
        signal.signal(signal.SIGTERM, self._on_signal)
        workdir = Path(tempfile.mkdtemp(prefix="elastic-agent-"))
        sock = AgentSocket(self._secret, cmd.pool, self._ident.encode())
        try:
            reg = Register(cmd.allocation, self.cores, socket.gethostname(), os.getpid(), cmd.walltime_end)
            sock.send(reg)
            welcome = self._await_welcome(sock, prefix)
            if welcome is None:
                logger.error(
                    "%s the pool at %s did not answer within %.0f s (wrong secret, pool gone, unreachable?)",
                    prefix,
                    cmd.pool,
                    cmd.register_timeout,
                )
                return EXIT_NO_POOL
            logger.info("%s registered with %d cores at %s", prefix, self.cores, cmd.pool)
            return self._serve(sock, welcome, workdir, prefix)
        finally:
            self._kill_all()
            sock.close()
            shutil.rmtree(workdir, ignore_errors=True)

    def _await_welcome(self, sock: AgentSocket, prefix: str) -> Welcome | None:
        deadline = time.monotonic() + self.command.register_timeout
        while time.monotonic() < deadline and self._signalled is None:
            try:
                msg = sock.recv(_TICK)
            except ProtocolError as exc:
                logger.warning("%s %s", prefix, exc)
                continue
            if isinstance(msg, Welcome):
                return msg
            if isinstance(msg, Stop):
                logger.error("%s the pool refused this agent: %s", prefix, msg.reason)
                return None
        return None

    def _serve(self, sock: AgentSocket, welcome: Welcome, workdir: Path, prefix: str) -> int:
        heard = sent = time.monotonic()
        draining = False
        while True:
            try:
                msg = sock.recv(_TICK)
            except ProtocolError as exc:
                logger.warning("%s %s", prefix, exc)
                msg = None
            now = time.monotonic()
            if msg is not None:
                heard = now
            if isinstance(msg, RunTask):
                task = msg.task
                proc, collect = run_in_child(task, workdir)
                self._running[task.task_id] = _Running(proc, collect)
                logger.debug("%s started task %s (%d cores)", prefix, task.task_id, task.cores)
            elif isinstance(msg, Drain):
                logger.info("%s draining: %s", prefix, msg.reason)
                draining = True
            elif isinstance(msg, Stop):
                logger.info("%s stopping: %s", prefix, msg.reason)
                self._report(sock, now, prefix, stopping=f"the pool stopped the agent: {msg.reason}")
                self._kill_all()
                sock.send(Bye(f"stopped: {msg.reason}"))
                return 0
            self._report(sock, now, prefix)
            if self._signalled is not None:
                logger.info("%s got %s, leaving", prefix, self._signalled)
                self._kill_all()
                sock.send(Bye(f"agent got {self._signalled}"))
                return 0
            if draining and not self._running:
                sock.send(Bye("drained"))
                return 0
            if now - heard > welcome.pool_timeout:
                logger.error("%s heard nothing from the pool for %.1f s, leaving", prefix, now - heard)
                return EXIT_POOL_SILENT
            if now - sent >= welcome.heartbeat_interval:
                sock.send(Heartbeat(tuple(self._running)))
                sent = now

    def _report(self, sock: AgentSocket, now: float, prefix: str, stopping: str | None = None) -> None:
        """Report the tasks that ended: done or failed, or lost when a signal killed them as the agent stops.

        ``stopping`` names why the agent is stopping (a Stop); SIGTERM received counts too.
        """
        if stopping is None and self._signalled is not None:
            stopping = f"the agent got {self._signalled}"
        for task_id, run in list(self._running.items()):
            if run.result is None:
                if run.proc.poll() is None:
                    continue
                assert run.proc.stdin is not None
                run.proc.stdin.close()
                run.result = run.collect()
                run.held_until = now + SIGNAL_GRACE
            result = run.result
            if result.signal is not None and stopping is not None:
                cause = f"killed by {result.signal_name}; {stopping}"
                logger.info("%s task %s lost: %s", prefix, task_id, cause)
                sock.send(TaskLost(task_id, cause))
            elif result.signal is None or now >= run.held_until:
                sock.send(TaskDone(result))
            else:
                continue  # killed by a signal: wait a moment for a SIGTERM or Stop of the whole allocation
            del self._running[task_id]

    def _kill_all(self) -> None:
        """Stop every running task (closing its stdin makes the child kill its process group)."""
        for run in self._running.values():
            if run.proc.stdin is not None and not run.proc.stdin.closed:
                run.proc.stdin.close()
        for run in self._running.values():
            try:
                run.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                run.proc.kill()
                run.proc.wait()
        self._running.clear()


def main(argv: Sequence[str] | None = None) -> int:
    """Run an agent from the command line; return its exit code."""
    command = AgentCommand.from_argv(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=os.environ.get("ELASTIC_AGENT_LOG", "WARNING"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        secret = read_secret_file(Path(command.secret_file))
        agent = Agent(command, secret)
    except ConfigError as exc:
        logger.error("agent for allocation %s: %s", command.allocation, exc)
        return 2
    return agent.run()


if __name__ == "__main__":
    # Run the copy imported as ``elastic.pool.agent`` so log records name the real module, not __main__.
    from elastic.pool.agent import main as _main

    sys.exit(_main())
