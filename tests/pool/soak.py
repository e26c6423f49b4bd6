"""The soak of issue 10: tasks on two agents while a third connection attacks the pool (loopback only).

:func:`soak` runs a pool in this process with two one-core agents (real processes) and an attacker
(another process, :func:`attack`) that, until told to stop, cycles through:

- a stranger without the secret: garbage, and a new connection now and then (each refused at the
  handshake);
- a peer holding the secret: garbage (bad MACs), messages of thousands of empty frames, a message larger
  than any message may be (ZeroMQ drops the connection; it reconnects), and genuinely signed messages
  sent twice: a heartbeat, and a report of a forged result for a real task id (from a peer that is not a
  registered agent).

It checks that every result is correct and arrived exactly once (one DONE event per task, first attempt),
that no agent was declared lost, and samples this process' resident memory (the pool's) every 0.2 s.
Used by ``tests/pool/test_soak.py`` (a few thousand tasks) and ``benchmarks/bench_soak.py`` (20,000).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import zmq

from elastic.allocations import Allocation
from elastic.pool.events import AgentEvent, AgentEventKind, PoolEvent
from elastic.pool.messages import Heartbeat, Report
from elastic.pool.pool import Pool
from elastic.pool.protocol import MAX_MESSAGE, encode, read_secret_file
from elastic.pool.sockets import curve_keys
from elastic.pool.tasks import Task, TaskEvent, TaskResult, TaskState
from elastic.pool.worker import resident_bytes

__all__ = ["SoakReport", "attack", "soak"]

_ROOT = Path(__file__).resolve().parents[2]


def _value(i: int) -> tuple[int, int]:
    return i, i * i


@dataclass(frozen=True)
class SoakReport:
    """What one soak run saw."""

    tasks: int
    seconds: float
    rss_start: int
    rss_peak: int
    refused: int  # messages and connections refused while the tasks ran
    wrong: list[int] = field(default_factory=list)
    done_events: Counter[str] = field(default_factory=Counter)
    reruns: int = 0
    lost_agents: int = 0
    agents_used: int = 0


def soak(
    tasks: int, heartbeat_timeout: float = 10.0, shell_every: int = 200, attacked: bool = True
) -> SoakReport:
    """Run ``tasks`` tasks on two agents under attack; return what was seen (see the module docstring).

    One task in ``shell_every`` is a shell command (run in a child process), the others calls on the warm
    workers. ``attacked=False`` runs the same without the attacker (the baseline).
    """
    done: Counter[str] = Counter()
    reruns = 0
    lost = 0
    agents: set[str | None] = set()

    def watch(event: PoolEvent) -> None:
        nonlocal reruns, lost
        if isinstance(event, TaskEvent):
            if event.state is TaskState.DONE:
                done[event.task_id] += 1
                agents.add(event.alloc_id)
            elif event.attempt > 1:
                reruns += 1
        elif isinstance(event, AgentEvent) and event.kind is AgentEventKind.LOST:
            lost += 1

    procs: list[subprocess.Popen[bytes]] = []
    with Pool(heartbeat_interval=1.0, heartbeat_timeout=heartbeat_timeout) as pool:
        pool.subscribe(watch)
        for name in ("a1", "a2"):
            pool.add_allocation(Allocation(name, cores=1, walltime=3600.0))
            procs.append(
                subprocess.Popen(
                    ["bash", "-c", pool.agent_script(pool.allocation(name))], start_new_session=True
                )
            )
        try:
            assert pool.submit(Task.call(_value, (0,), task_id="warm-up")).result(timeout=60) == (0, 0)
            attacker = subprocess.Popen(
                [sys.executable, "-m", "tests.pool.soak", pool.address, str(pool.secret_file)]
                if attacked
                else ["cat"],
                cwd=_ROOT,
                stdin=subprocess.PIPE,
            )
            procs.append(attacker)
            if attacked:  # the tasks start once the attack has begun, so all of them run under it
                deadline = time.monotonic() + 60
                while pool.refused < 50 and time.monotonic() < deadline:
                    time.sleep(0.01)
            refused_before = pool.refused
            rss_start = peak = resident_bytes()
            stop = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not stop.wait(0.2):
                    peak = max(peak, resident_bytes())

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started = time.monotonic()
            futures = []
            for i in range(tasks):
                if shell_every and i % shell_every == 0:
                    futures.append(pool.submit(Task.shell(f"echo {i} {i * i}", task_id=f"t{i}")))
                else:
                    futures.append(pool.submit(Task.call(_value, (i,), task_id=f"t{i}")))
            wrong = []
            for i, future in enumerate(futures):
                value = future.result(timeout=600)
                if shell_every and i % shell_every == 0:
                    ok = value.stdout == f"{i} {i * i}\n"
                else:
                    ok = value == (i, i * i)
                if not ok:
                    wrong.append(i)
            seconds = time.monotonic() - started
            refused = pool.refused - refused_before
            stop.set()
            sampler.join()
            assert attacker.stdin is not None
            attacker.stdin.close()  # the attacker stops when its stdin closes
            attacker.wait(timeout=30)
        finally:
            for proc in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL) if proc is not procs[-1] else proc.kill()
                proc.wait()
    done.pop("warm-up", None)
    return SoakReport(
        tasks, seconds, rss_start, peak, refused, wrong, done, reruns, lost, len(agents - {None})
    )


def attack(address: str, secret_file: str) -> None:
    """Attack the pool at ``address`` until this process' standard input closes (see the module docstring)."""
    secret = read_secret_file(Path(secret_file))
    ctx = zmq.Context()
    stranger = _dealer(ctx, address, b"stranger/1", None)
    keyed = _dealer(ctx, address, b"evil/h/1", secret)
    forged = Report(done=(TaskResult("t1", ok=True, value=pickle.dumps("forged")),))
    stopped = threading.Event()

    def wait_for_eof() -> None:
        sys.stdin.read()
        stopped.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    seq, rounds = 1, 0
    while not stopped.is_set():
        rounds += 1
        with contextlib.suppress(zmq.Again):
            stranger.send(os.urandom(64), zmq.NOBLOCK)
            keyed.send(b"garbage" + os.urandom(64), zmq.NOBLOCK)  # a bad MAC
            for message in (Heartbeat(("t1",)), forged):  # signed, then sent again: a replay
                frame = encode(message, secret, seq)
                seq += 1
                keyed.send(frame, zmq.NOBLOCK)
                keyed.send(frame, zmq.NOBLOCK)
            if rounds % 50 == 0:
                keyed.send_multipart([b""] * 5000, zmq.NOBLOCK)
            if rounds % 500 == 0:
                keyed.send(b"x" * (MAX_MESSAGE + 2**20), zmq.NOBLOCK)  # over ZeroMQ's limit: disconnected
        if rounds % 100 == 0:
            stranger.close()
            stranger = _dealer(ctx, address, f"stranger/{rounds}".encode(), None)
        time.sleep(0.002)
    stranger.close()
    keyed.close()
    ctx.term()


def _dealer(
    ctx: zmq.Context[zmq.Socket[bytes]], address: str, ident: bytes, secret: bytes | None
) -> zmq.Socket[bytes]:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, ident)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 100)
    if secret is not None:
        public, private = zmq.curve_keypair()
        sock.curve_serverkey = curve_keys(secret)[0]
        sock.curve_publickey = public
        sock.curve_secretkey = private
    sock.connect(address)
    return sock


if __name__ == "__main__":
    attack(sys.argv[1], sys.argv[2])
