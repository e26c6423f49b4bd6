"""The worker agent: ``python -m elastic.pool.agent``, run inside each allocation.

A backend starts the agent with the script :meth:`~elastic.pool.agent_command.AgentCommand.to_script`
returns (the pool builds it in :meth:`elastic.pool.Pool.agent_script`). The agent connects to the pool,
registers its allocation and cores, starts its warm workers (:mod:`elastic.pool.worker`, one per core),
then runs the tasks the pool sends and sends back their results, batched: Python callables on the
workers, shell commands and isolated callables each in a fresh child process (:mod:`elastic.pool.child`).

Nothing is polled on a timer: one :class:`zmq.Poller` waits on the pool's socket, every worker's
connection, every child's pidfd and a signal wake-up pipe, so a result goes back as soon as it exists.
The agent sends a heartbeat every ``heartbeat_interval`` and leaves when the pool tells it to drain (after
its running tasks end) or stop, when it is sent SIGTERM (Slurm does so at the walltime limit), or when it
has heard nothing from the pool for ``pool_timeout`` seconds.

A batch system that stops an allocation signals the tasks' processes too. A task killed by a signal while
the agent is stopping (it got SIGTERM or a Stop, within :data:`SIGNAL_GRACE` of the task's death) is
reported lost (:class:`~elastic.pool.messages.TaskLost`), so the pool runs it again elsewhere; on a healthy
agent the death is the task's failure. A worker that dies is replaced.

The agent works in a directory of the pool run's spool (:func:`elastic.pool.spool.agent_dir`, beside the
secret file): its children's output and result files, and large calls and values
(:mod:`elastic.pool.spool`). It removes its directory when it leaves; the pool removes the allocation's
when the allocation ends, for agents that were killed.

Exit codes: 0 left normally, 2 bad arguments (a message, no traceback), 3 the pool never answered the
registration (wrong secret, unreachable), 4 the pool went silent.

Over 500 lines because one poll loop owns the agent's whole life (registration, workers, children, kills,
reports, and ending what tasks leave behind) and its parts share that loop's state.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import zmq

from elastic.errors import ConfigError
from elastic.pool.agent_command import AgentCommand
from elastic.pool.cgroups import CgroupTree, agent_tree, end_left
from elastic.pool.child import Child, run_in_child
from elastic.pool.job_checks import granted_end, pool_listening
from elastic.pool.messages import (
    Bye,
    Drain,
    Heartbeat,
    KillTasks,
    Message,
    Register,
    Report,
    RunTasks,
    Stop,
    TaskLost,
    TasksReturned,
    Welcome,
)
from elastic.pool.protocol import ProtocolError, batches, read_secret_file
from elastic.pool.reaper import become_subreaper, end_descendants
from elastic.pool.sockets import AgentSocket
from elastic.pool.spool import agent_dir, spool_dir
from elastic.pool.tasks import Task, TaskKind, TaskResult
from elastic.pool.worker import Worker

__all__ = [
    "EXIT_NO_POOL",
    "EXIT_POOL_SILENT",
    "SIGNAL_GRACE",
    "Agent",
    "AgentCommand",
    "granted_end",
    "main",
    "pool_listening",
]

logger = logging.getLogger(__name__)

EXIT_NO_POOL = 3
"""Exit code when the pool never answered the registration, or sent the agent away (its allocation had
ended, or the pool refused it)."""
EXIT_POOL_SILENT = 4
"""Exit code when the pool stopped answering."""

_REGISTER_TICK = 0.05
_PROBE_AFTER = 2.0
"""Seconds without a welcome after which the agent checks that something listens at the pool's port."""
"""Seconds between two looks at the socket while waiting for the pool's welcome."""

REPORT_DELAY = 0.002
"""Seconds a report may wait for more results while tasks sent ahead keep every core busy (batching)."""

_REPORT_BATCH = 64
"""Results that make a report go at once."""

SIGNAL_GRACE = 1.0
"""Seconds the agent holds back the result of a task killed by a signal, to learn whether it is stopping.

A batch system stopping an allocation (Slurm at the walltime or on ``scancel``) signals every process of the
job one after the other, the task's before or after the agent's. A task killed by a signal is reported
lost (:class:`~elastic.pool.messages.TaskLost`) when the agent gets SIGTERM or a Stop within this time, and
as the task's failure otherwise.
"""


class Agent:
    """One agent: registers with the pool, runs tasks, reports results. Use :meth:`run`."""

    def __init__(self, command: AgentCommand, secret: bytes) -> None:
        self.command = command
        self.cores = command.resolved_cores()
        self.spool = spool_dir(Path(command.secret_file))
        if not self.spool.is_dir():
            raise ConfigError(
                f"--secret-file {command.secret_file}: the spool directory beside it, {self.spool}, is "
                "missing (the pool creates it with the secret file; is this the pool's secret file?)"
            )
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        memory = command.worker_memory
        if memory is not None and hard != resource.RLIM_INFINITY and memory > hard:
            raise ConfigError(
                f"--worker-memory {command.worker_memory}: above this node's hard limit of {hard} bytes of "
                "address space (ulimit -Hv); give at most that"
            )
        self._secret = secret
        self._ident = f"{command.allocation}/{socket.gethostname()}/{os.getpid()}"
        self._prefix = f"agent {self._ident}:"
        self._signalled: str | None = None
        self._workers: list[Worker] = []
        self._children: dict[int, Child] = {}  # by pidfd
        self._waiting: deque[Task] = deque()  # received, waiting for an idle worker
        # killed by a signal, reported after SIGNAL_GRACE: (result, hold until, cores it holds meanwhile)
        self._held: dict[str, tuple[TaskResult, float, int]] = {}
        self._done: list[TaskResult] = []
        self._started: list[str] = []
        self._unreported_since: float | None = None
        self._lost: list[TaskLost] = []
        self._killed: set[str] = set()  # tasks the pool asked to kill, not ended yet
        self._poller = zmq.Poller()
        self._cgroups: CgroupTree | None = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signalled = signal.Signals(signum).name

    # -- life cycle ------------------------------------------------------------------------------------

    def run(self) -> int:
        """Serve the pool until told to leave; return the process exit code."""
        cmd = self.command
        become_subreaper()
        self._cgroups = agent_tree()  # each task in a cgroup of its own where the machine allows it
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.signal(signal.SIGTERM, self._on_signal)
        old_wakeup = signal.set_wakeup_fd(wake_write)
        workdir = agent_dir(self.spool, cmd.allocation, self._ident)
        workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            sock = AgentSocket(self._secret, cmd.pool, self._ident.encode())
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        try:
            walltime_end = granted_end(cmd.walltime_end)
            reg = Register(cmd.allocation, self.cores, socket.gethostname(), os.getpid(), walltime_end)
            sock.send(reg)
            welcome = self._await_welcome(sock)
            if isinstance(welcome, Stop):
                if welcome.allocation_ended:  # its job started as the allocation was cancelled
                    logger.info("%s sent away: %s", self._prefix, welcome.reason)
                else:
                    logger.error("%s the pool refused this agent: %s", self._prefix, welcome.reason)
                return EXIT_NO_POOL
            if welcome is None:
                logger.error(
                    "%s the pool at %s did not answer within %.0f s (wrong secret, pool gone, unreachable?)",
                    self._prefix,
                    cmd.pool,
                    cmd.register_timeout,
                )
                return EXIT_NO_POOL
            logger.info("%s registered with %d cores at %s", self._prefix, self.cores, cmd.pool)
            self._poller.register(sock.socket, zmq.POLLIN)
            self._poller.register(wake_read, zmq.POLLIN)
            for _ in range(cmd.workers or self.cores):
                self._add_worker()
            return self._serve(sock, welcome, workdir, wake_read)
        finally:
            self._kill_all()
            end_descendants()  # what tasks left running, adopted by this subreaper (elastic.pool.reaper)
            end_left(self._cgroups)  # and every task's cgroup (elastic.pool.cgroups)
            sock.close()
            signal.set_wakeup_fd(old_wakeup)
            os.close(wake_read)
            os.close(wake_write)
            shutil.rmtree(workdir, ignore_errors=True)

    def _await_welcome(self, sock: AgentSocket) -> Welcome | Stop | None:
        """Return the pool's answer to the registration: welcome, refusal, or None (no answer, signalled)."""
        start = time.monotonic()
        deadline = start + self.command.register_timeout
        probed = False
        while time.monotonic() < deadline and self._signalled is None:
            if not probed and time.monotonic() - start >= _PROBE_AFTER:
                # a live pool welcomes within milliseconds; ZeroMQ would retry a dead one silently until
                # the timeout. A job held by a dependency, or queued, that starts after its driver died
                # finds nothing listening: it does no work and gives its cores back at once
                probed = True
                if not pool_listening(self.command.pool):
                    logger.error("%s nothing listens at %s: pool gone", self._prefix, self.command.pool)
                    return None
            try:
                msg = sock.recv(_REGISTER_TICK)
            except ProtocolError as exc:
                logger.warning("%s %s", self._prefix, exc)
                continue
            if isinstance(msg, Welcome):
                return msg
            if isinstance(msg, Stop):
                return msg
        return None

    def _add_worker(self) -> None:
        cmd, cgroups = self.command, self._cgroups
        worker = Worker(cmd.python, cmd.worker_memory, spool=self.spool, cgroups=cgroups)
        self._workers.append(worker)
        self._poller.register(worker.fileno(), zmq.POLLIN)

    def _replace_worker(self, worker: Worker) -> None:
        with contextlib.suppress(KeyError):
            self._poller.unregister(worker.fileno())
        self._workers.remove(worker)
        worker.stop()
        self._add_worker()

    # -- the loop --------------------------------------------------------------------------------------

    @property
    def _busy(self) -> bool:
        return bool(
            self._waiting or self._children or self._held or any(w.task is not None for w in self._workers)
        )

    def _running_ids(self) -> tuple[str, ...]:
        ids = [t.task_id for t in self._waiting]
        ids += [c.task.task_id for c in self._children.values()]
        ids += [w.task.task_id for w in self._workers if w.task is not None]
        return (*ids, *self._held)

    def _serve(self, sock: AgentSocket, welcome: Welcome, workdir: Path, wake_read: int) -> int:
        heard = sent = time.monotonic()
        draining = ""  # why, once asked to drain
        stopping: str | None = None  # why the agent stops, as the cause of the tasks it kills
        bye = ""  # what it tells the pool when it leaves
        while True:
            now = time.monotonic()
            timeout = max(0.0, min(sent + welcome.heartbeat_interval, heard + welcome.pool_timeout) - now)
            if self._held:
                timeout = min(timeout, max(0.0, min(until for _, until, _ in self._held.values()) - now))
            if self._unreported_since is not None:
                timeout = min(timeout, max(0.0, self._unreported_since + REPORT_DELAY - now))
            ready = dict(self._poller.poll(round(timeout * 1000)))
            now = time.monotonic()
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)
            if sock.socket in ready:
                for msg in self._receive_all(sock):
                    heard = now
                    if isinstance(msg, RunTasks):
                        self._waiting.extend(msg.tasks)
                    elif isinstance(msg, KillTasks):
                        self._kill(sock, msg)
                    elif isinstance(msg, Drain):
                        logger.info("%s draining: %s", self._prefix, msg.reason)
                        draining = f"draining: {msg.reason}"
                    elif isinstance(msg, Stop):
                        logger.info("%s stopping: %s", self._prefix, msg.reason)
                        stopping = f"the pool stopped the agent: {msg.reason}"
                        bye = f"stopped: {msg.reason}"
            if stopping is None and self._signalled is not None:
                stopping = f"the agent got {self._signalled}"
                bye = f"agent got {self._signalled}"
            self._collect(ready, now, replace=stopping is None)
            if stopping is not None:
                self._give_back(sock, stopping)
                self._kill_all(now)  # the tasks' deaths are reported lost below, not as failures
            self._settle(now, stopping)
            if stopping is not None:
                self._flush(sock)
                logger.info("%s leaving: %s", self._prefix, stopping)
                sock.send(Bye(bye))
                return 0
            self._dispatch(workdir)
            if draining:  # what could not start at once (sent ahead, or before the pool knew) goes back
                self._give_back(sock, draining)
            self._flush(sock, now)
            if draining and not self._busy:
                sock.send(Bye("drained"))
                return 0
            if now - heard > welcome.pool_timeout:
                logger.error("%s heard nothing from the pool for %.1f s, leaving", self._prefix, now - heard)
                return EXIT_POOL_SILENT
            if now - sent >= welcome.heartbeat_interval:
                sock.send(Heartbeat(self._running_ids()))
                sent = now

    def _receive_all(self, sock: AgentSocket) -> list[Message]:
        out: list[Message] = []
        while True:
            try:
                msg = sock.recv(0.0)
            except ProtocolError as exc:
                logger.warning("%s %s", self._prefix, exc)
                continue
            if msg is None:
                return out
            out.append(msg)

    def _busy_cores(self) -> int:
        running = [c.task for c in self._children.values()] + [w.task for w in self._workers if w.task]
        return sum(t.cores for t in running) + sum(cores for _, _, cores in self._held.values())

    def _dispatch(self, workdir: Path) -> None:
        """Start the waiting tasks that fit the free cores, in order.

        Callables run on idle workers, shell commands and isolated callables in children. Tasks sent ahead
        (prefetch) wait here until cores free.
        """
        free = self.cores - self._busy_cores()
        if free <= 0 or not self._waiting:
            return
        idle = [w for w in self._workers if w.task is None]
        kept: list[Task] = []
        while self._waiting and free > 0:
            task = self._waiting.popleft()
            if task.cores > free:
                kept.append(task)
                continue
            if task.kind is TaskKind.SHELL or task.isolate:
                child = run_in_child(task, workdir, spool=self.spool, cgroups=self._cgroups)
                self._children[child.exited_fd] = child
                self._poller.register(child.exited_fd, zmq.POLLIN)
                self._started.append(task.task_id)
                free -= task.cores
            elif idle:
                worker = idle.pop()
                try:
                    worker.run(task)
                except OSError:  # died since it last answered: its task goes to the next worker
                    worker.task = None
                    self._replace_worker(worker)
                    kept.append(task)
                    continue
                self._started.append(task.task_id)
                free -= task.cores
            else:
                kept.append(task)
        self._waiting.extendleft(reversed(kept))

    def _collect(self, ready: dict[object, int], now: float, *, replace: bool = True) -> None:
        """Take results from workers and children that have one, or died (``ready``: what the poll said)."""
        for worker in [w for w in self._workers if w.fileno() in ready]:
            cores = worker.task.cores if worker.task is not None else 0
            try:
                result, _rss = worker.receive()
                self._finished(result, now, cores)
                continue
            except (EOFError, OSError):
                pass  # it exited: retired after a leak, or died (with its task)
            if worker.task is not None:
                self._finished(worker.death(), now, cores)
            with contextlib.suppress(KeyError):
                self._poller.unregister(worker.fileno())
            self._workers.remove(worker)
            worker.stop()
            if replace:
                logger.info(
                    "%s worker %d ended (%s); starting another", self._prefix, worker.pid, worker.proc.poll()
                )
                self._add_worker()
        for fd in [fd for fd in self._children if fd in ready]:
            child = self._children.pop(fd)
            self._poller.unregister(fd)
            self._finished(child.collect(), now, child.task.cores)

    def _kill(self, sock: AgentSocket, msg: KillTasks) -> None:
        """Kill the tasks the pool names: give back those waiting, kill the process groups of the others."""
        ids = set(msg.task_ids)
        logger.info("%s killing tasks %s: %s", self._prefix, sorted(ids), msg.reason)
        waiting = [t.task_id for t in self._waiting if t.task_id in ids]
        if waiting:
            self._waiting = deque(t for t in self._waiting if t.task_id not in ids)
            sock.send(TasksReturned(tuple(waiting), f"killed: {msg.reason}"))
        for child in self._children.values():
            if child.task.task_id in ids:
                self._killed.add(child.task.task_id)
                child.stop()
        for worker in self._workers:
            if worker.task is not None and worker.task.task_id in ids:
                self._killed.add(worker.task.task_id)
                worker.kill()  # it is replaced once its death is collected

    def _finished(self, result: TaskResult, now: float, cores: int) -> None:
        if result.task_id in self._killed:  # killed on request: nothing to wait for
            self._killed.discard(result.task_id)
            self._done.append(result)
        elif result.signal is not None:
            self._held[result.task_id] = (result, now + SIGNAL_GRACE, cores)
        else:
            self._done.append(result)

    def _settle(self, now: float, stopping: str | None) -> None:
        """Decide what the held results (deaths by a signal) were: lost when stopping, failed otherwise."""
        for task_id, (result, until, _) in list(self._held.items()):
            if stopping is not None:
                cause = f"killed by {result.signal_name}; {stopping}"
                logger.info("%s task %s lost: %s", self._prefix, task_id, cause)
                self._lost.append(TaskLost(task_id, cause))
            elif now >= until:
                self._done.append(result)
            else:
                continue
            del self._held[task_id]

    def _give_back(self, sock: AgentSocket, reason: str) -> None:
        """Return the tasks not started yet: the pool queues them for another agent."""
        if self._waiting:
            sock.send(TasksReturned(tuple(t.task_id for t in self._waiting), reason))
            self._waiting.clear()

    def _flush(self, sock: AgentSocket, now: float | None = None) -> None:
        """Send what started and ended; with ``now``, a report may wait a little while work is queued here.

        While tasks sent ahead wait on this agent its cores stay busy without the pool's answer, so the
        report waits up to :data:`REPORT_DELAY` (or :data:`_REPORT_BATCH` results) to go as one message.
        """
        if self._done or self._started:
            if now is not None and self._waiting and len(self._done) < _REPORT_BATCH:
                if self._unreported_since is None:
                    self._unreported_since = now
                if now - self._unreported_since < REPORT_DELAY:
                    return
            started: tuple[str, ...] = tuple(self._started)
            for done in batches(self._done, _result_bytes) or [[]]:  # a few MiB per message at most
                sock.send(Report(started, tuple(done)))
                started = ()
            self._done = []
            self._started = []
            self._unreported_since = None
        for lost in self._lost:
            sock.send(lost)
        self._lost = []

    def _kill_all(self, now: float | None = None) -> None:
        """Stop every running task and worker; with ``now``, keep the killed tasks' results (held)."""
        for child in self._children.values():
            child.stop()
        for worker in self._workers:
            worker.kill()
        for fd, child in list(self._children.items()):
            self._poller.unregister(fd)
            result = child.collect()
            if now is not None:
                self._finished(result, now, child.task.cores)
        self._children.clear()
        for worker in self._workers:
            with contextlib.suppress(KeyError):
                self._poller.unregister(worker.fileno())
            if worker.task is not None and now is not None:
                cores = worker.task.cores
                self._finished(worker.death(), now, cores)
            worker.stop()
        self._workers.clear()


def _result_bytes(result: TaskResult) -> int:
    """Roughly the bytes ``result`` takes in a message."""
    texts = (result.stdout, result.stderr, result.traceback, result.error_message)
    return 256 + len(result.value) + len(result.error) + sum(len(t) for t in texts)


def main(argv: Sequence[str] | None = None) -> int:
    """Run an agent from the command line; return its exit code."""
    logging.basicConfig(
        level=os.environ.get("ELASTIC_AGENT_LOG", "WARNING"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        command = AgentCommand.from_argv(sys.argv[1:] if argv is None else argv)
        secret = read_secret_file(Path(command.secret_file))
        agent = Agent(command, secret)
        return agent.run()
    except ConfigError as exc:
        logger.error("agent: %s", exc)
        return 2


if __name__ == "__main__":
    # Run the copy imported as ``elastic.pool.agent`` so log records name the real module, not __main__.
    from elastic.pool.agent import main as _main

    sys.exit(_main())
