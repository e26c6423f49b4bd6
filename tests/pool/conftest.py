"""Fixtures for the pool tests: a real pool and agents started as real processes, as a backend would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from elastic.allocations import Allocation
from elastic.backends._proctrack import process_tree
from elastic.pool.cgroups import end_agents
from elastic.pool.events import PoolEvent
from elastic.pool.pool import Pool
from elastic.pool.sockets import curve_keys

AgentStarter = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def pool() -> Iterator[Pool]:
    """A pool on loopback with fast heartbeats (agents are declared lost after 2.5 s of silence)."""
    with Pool(heartbeat_interval=0.2, heartbeat_timeout=2.5, pool_timeout=5.0, drain_margin=1.0) as p:
        yield p


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[AgentStarter]:
    """Start ``bash -c SCRIPT`` in its own process group, the way the mock backend runs JobSpec.script.

    Every group started is killed at teardown.
    """
    procs: list[subprocess.Popen[bytes]] = []

    def start(script: str, name: str = "agent") -> subprocess.Popen[bytes]:
        log = (tmp_path / f"{name}-{len(procs)}.log").open("wb")
        env = {**os.environ, "ELASTIC_AGENT_LOG": "DEBUG"}
        proc = subprocess.Popen(["bash", "-c", script], stderr=log, env=env, start_new_session=True)
        procs.append(proc)
        return proc

    yield start
    agents = [(p.pid, p.start) for proc in procs for p in process_tree(proc.pid) if p.pid == proc.pid]
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    end_agents(agents)  # the tasks' cgroups of the agents killed here, as the mock backend does


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (in any process group or session), from ``/proc``."""
    return [p.pid for p in process_tree(pid) if p.pid != pid]


def signal_job(job: subprocess.Popen[bytes], sig: int, agent_delay: float = 0.0) -> None:
    """Signal every process of a job script, the way Slurm stops a job (proctrack/linuxproc or cgroup).

    Unlike a plain ``killpg`` this reaches the tasks too, which run in process groups of their own. The
    tasks' processes are signalled first and the agent ``agent_delay`` seconds later: Slurm signals the
    processes of a job one after the other, in no promised order.
    """
    agent = job.pid  # the script exec's the agent
    for pid in descendants(agent):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    time.sleep(agent_delay)
    with contextlib.suppress(ProcessLookupError):
        os.kill(agent, sig)


def start_allocation(pool: Pool, start_agent: AgentStarter, alloc: Allocation) -> subprocess.Popen[bytes]:
    """Add ``alloc`` to the pool and start its agent script."""
    pool.add_allocation(alloc)
    return start_agent(pool.agent_script(alloc), name=alloc.alloc_id)


def wait_for(pool: Pool, predicate: Callable[[PoolEvent], bool], timeout: float = 8.0) -> PoolEvent:
    """Wait until an event matching ``predicate`` was recorded; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in pool.events:
            if predicate(event):
                return event
        time.sleep(0.02)
    raise AssertionError(f"no matching event within {timeout} s; events: {pool.events}")


def plain_dealer(address: str, identity: bytes) -> zmq.Socket[bytes]:
    """A bare DEALER without the pool's key: a stranger who can reach the port, and no more."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDTIMEO, 2000)  # its connection never completes: sends cannot wait for it
    sock.connect(address)
    return sock


def curve_dealer(address: str, identity: bytes, secret: bytes) -> zmq.Socket[bytes]:
    """A bare DEALER that completes the pool's handshake (it holds the secret), to send frames by hand."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    sock.setsockopt(zmq.LINGER, 0)
    public, private = zmq.curve_keypair()
    sock.curve_serverkey = curve_keys(secret)[0]
    sock.curve_publickey = public
    sock.curve_secretkey = private
    sock.connect(address)
    return sock
