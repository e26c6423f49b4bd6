from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from elastic.errors import ConfigError
from elastic.pool.agent import EXIT_NO_POOL, EXIT_POOL_SILENT
from elastic.pool.agent_command import AgentCommand
from elastic.pool.messages import Register, Welcome
from elastic.pool.protocol import write_secret_file
from elastic.pool.sockets import PoolSocket

words = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=15)


@given(
    words,
    words,
    st.one_of(st.integers(1, 4096).map(lambda c: (c, None)), words.map(lambda e: (None, e))),
    st.none() | st.floats(0, 4e9, allow_nan=False),
    st.floats(0.1, 1e4, allow_nan=False),
)
def test_command_line_round_trips(
    alloc: str, secret: str, cores: tuple[int | None, str | None], end: float | None, reg: float
) -> None:
    cmd = AgentCommand(f"tcp://h:{len(alloc)}", alloc, secret, *cores, end, register_timeout=reg)
    assert AgentCommand.from_argv(cmd.to_argv()) == cmd


def test_script_computes_walltime_end_and_parses_back(tmp_path: Path) -> None:
    """Run the script with ``echo`` as the interpreter: the agent would get exactly these arguments."""
    cmd = AgentCommand(
        "tcp://127.0.0.1:9", "a1;x", str(tmp_path / "s;f"), cores=2, walltime=600.0, python="echo"
    )
    out = subprocess.run(["bash", "-c", cmd.to_script()], capture_output=True, text=True, check=True).stdout
    argv = out.split()[2:]  # after "-m elastic.pool.agent"; echo joins the words, so no spaces in them here
    assert argv[0] == "--pool=tcp://127.0.0.1:9"
    parsed = AgentCommand.from_argv(["--pool=tcp://h:1", "--allocation=x", "--secret-file=y", *argv[-2:]])
    assert parsed.cores == 2
    assert parsed.walltime_end is not None and abs(parsed.walltime_end - (time.time() + 600)) < 5


def script_walltime_end(walltime: float) -> tuple[float, float, float]:
    """Run the script of an agent with ``walltime`` (``echo`` as interpreter): (before, its end, after)."""
    cmd = AgentCommand("tcp://h:1", "a1", "/s", cores=1, walltime=walltime, python="echo")
    before = time.time()
    out = subprocess.run(["bash", "-c", cmd.to_script()], capture_output=True, text=True, check=True).stdout
    after = time.time()
    end = AgentCommand.from_argv(out.split()[2:]).walltime_end
    assert end is not None
    return before, end, after


@settings(max_examples=25, deadline=None)
@given(st.floats(0.0, 1e7, allow_nan=False))
@example(1.2)  # the old script made it floor(now) + 1: up to 1.2 s too early
def test_script_keeps_fractional_walltime(walltime: float) -> None:
    """The end is the script's start + walltime, fractions kept (H12: 1.2 s was cut to 1 s)."""
    before, end, after = script_walltime_end(walltime)
    assert before + walltime - 1e-3 <= end <= after + walltime + 1e-3


def test_multi_node_script_runs_one_agent_per_node_with_srun() -> None:
    cmd = AgentCommand("tcp://h:1", "a1", "/s", cores_env="SLURM_CPUS_ON_NODE", walltime=60.0, nodes=3)
    script = cmd.to_script()
    assert "&& exec srun --nodes=3 --ntasks=3 --ntasks-per-node=1 " in script  # one end for every node
    assert "--cores-env=SLURM_CPUS_ON_NODE" in script


def test_cores_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = AgentCommand("tcp://h:1", "a1", "/s", cores_env="NCORES")
    monkeypatch.setenv("NCORES", "8(x2)")
    assert cmd.resolved_cores() == 8
    monkeypatch.setenv("NCORES", "lots")
    with pytest.raises(ConfigError, match="--cores-env NCORES: expected a number, got 'lots'"):
        cmd.resolved_cores()


def test_bad_command_values() -> None:
    with pytest.raises(ConfigError, match=r"pool \(--pool\) must look like tcp://HOST:PORT"):
        AgentCommand("127.0.0.1:5", "a", "/s", cores=1)
    with pytest.raises(ConfigError, match=r"cores \(--cores\) must be between 1 and 65536"):
        AgentCommand("tcp://h:1", "a", "/s", cores=0)
    with pytest.raises(ConfigError, match="exactly one of cores"):
        AgentCommand("tcp://h:1", "a", "/s")


def run_agent(cmd: AgentCommand) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "elastic.pool.agent", *cmd.to_argv()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_agent_refuses_a_readable_secret_file(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("ab" * 32)
    path.chmod(0o644)
    done = run_agent(AgentCommand("tcp://127.0.0.1:1", "a1", str(path), cores=1))
    assert done.returncode == 2
    assert "run chmod 600" in done.stderr


def test_agent_gives_up_when_nobody_answers(tmp_path: Path) -> None:
    secret = write_secret_file(b"k" * 32, tmp_path)
    silent = PoolSocket(b"other-secret-0123456789")  # wrong secret: it can never answer validly
    try:
        cmd = AgentCommand(f"tcp://127.0.0.1:{silent.port}", "a1", str(secret), cores=1, register_timeout=1.0)
        done = run_agent(cmd)
    finally:
        silent.close()
    assert done.returncode == EXIT_NO_POOL
    assert "did not answer within 1 s" in done.stderr


def test_agent_leaves_when_the_pool_goes_silent(tmp_path: Path) -> None:
    secret = b"k" * 32
    path = write_secret_file(secret, tmp_path)
    pool = PoolSocket(secret)
    try:
        cmd = AgentCommand(f"tcp://127.0.0.1:{pool.port}", "a1", str(path), cores=1)
        proc = subprocess.Popen(
            [sys.executable, "-m", "elastic.pool.agent", *cmd.to_argv()], stderr=subprocess.PIPE, text=True
        )
        got = pool.recv(timeout=10.0)
        assert got is not None and isinstance(got[1], Register) and got[1].alloc_id == "a1"
        pool.send(got[0], Welcome(heartbeat_interval=0.1, pool_timeout=0.8))
        _, err = proc.communicate(timeout=10)
    finally:
        pool.close()
    assert proc.returncode == EXIT_POOL_SILENT
    assert "heard nothing from the pool" in err
