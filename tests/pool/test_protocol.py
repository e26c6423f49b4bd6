from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.errors import ConfigError
from elastic.pool.protocol import (
    MESSAGE_TYPES,
    VERSION,
    AgentSocket,
    AuthenticationError,
    Bye,
    Drain,
    Heartbeat,
    PoolSocket,
    ProtocolError,
    Register,
    RunTask,
    Stop,
    TaskDone,
    TaskLost,
    Welcome,
    _mac,
    decode,
    encode,
    new_secret,
    read_secret_file,
    write_secret_file,
)
from elastic.pool.tasks import Task, TaskKind, TaskResult

SECRET = b"s" * 32
text = st.text(max_size=20)
seconds = st.floats(min_value=0, max_value=1e9, allow_nan=False)

tasks = st.builds(
    Task,
    task_id=st.text(min_size=1, max_size=12),
    kind=st.sampled_from(list(TaskKind)),
    payload=st.binary(max_size=200),
    cores=st.integers(1, 128),
    estimate=st.none() | seconds,
    stage=text,
    check=st.booleans(),
)
results = st.builds(
    TaskResult,
    task_id=text,
    ok=st.booleans(),
    value=st.binary(max_size=100),
    error=st.binary(max_size=100),
    error_type=text,
    traceback=text,
    returncode=st.none() | st.integers(-255, 255),
    stdout=text,
    started=seconds,
    signal=st.none() | st.integers(1, 64),
)
by_type: dict[type[Any], st.SearchStrategy[Any]] = {
    Register: st.builds(
        Register, text, st.integers(1, 10**6), text, st.integers(0, 2**31), st.none() | seconds
    ),
    Welcome: st.builds(Welcome, seconds, seconds),
    Heartbeat: st.builds(Heartbeat, st.lists(text, max_size=5).map(tuple)),
    RunTask: st.builds(RunTask, tasks),
    TaskDone: st.builds(TaskDone, results),
    TaskLost: st.builds(TaskLost, text, text),
    Drain: st.builds(Drain, text),
    Stop: st.builds(Stop, text),
    Bye: st.builds(Bye, text),
}
messages = st.one_of(*by_type.values())


def test_every_message_type_is_generated() -> None:
    assert set(by_type) == set(MESSAGE_TYPES.values())


@given(messages)
def test_every_message_round_trips(message: Any) -> None:
    assert decode(encode(message, SECRET), SECRET) == message


@given(messages, st.integers(0, 100), st.integers(0, 255))
def test_any_changed_byte_is_refused(message: Any, where: int, xor: int) -> None:
    frames = encode(message, SECRET)
    i = where % len(frames)
    if not frames[i] or xor == 0:
        return
    frame = bytearray(frames[i])
    frame[where % len(frame)] ^= xor
    frames[i] = bytes(frame)
    with pytest.raises(AuthenticationError):
        decode(frames, SECRET)


def test_wrong_secret_and_missing_mac_are_refused() -> None:
    frames = encode(Heartbeat(("t",)), SECRET)
    with pytest.raises(AuthenticationError, match="wrong secret"):
        decode(frames, b"x" * 32, peer="a1/h/1")
    with pytest.raises(AuthenticationError, match="malformed message"):
        decode(frames[:2], SECRET)


def signed(*frames: bytes) -> list[bytes]:
    return [*frames, _mac(SECRET, list(frames))]


def test_authentic_but_malformed_messages_are_protocol_errors() -> None:
    good = json.dumps({"alloc_id": "a", "cores": 2, "hostname": "h", "pid": 1}).encode()
    assert decode(signed(VERSION, b"Register", good), SECRET) == Register("a", 2, "h", 1)
    with pytest.raises(ProtocolError, match="speaks b'elastic/0'"):
        decode(signed(b"elastic/0", b"Register", good), SECRET)
    with pytest.raises(ProtocolError, match="unknown message type b'Exec'"):
        decode(signed(VERSION, b"Exec", b"{}"), SECRET)
    bad = json.dumps({"alloc_id": "a", "cores": "2", "hostname": "h", "pid": 1}).encode()
    with pytest.raises(ProtocolError, match="malformed Register from peer: expected int, got str"):
        decode(signed(VERSION, b"Register", bad), SECRET)
    task = json.dumps({"task_id": "t", "kind": "call", "payload": 0, "cores": 0}).encode()
    with pytest.raises(ProtocolError, match="cores must be >= 1"):
        decode(signed(VERSION, b"RunTask", json.dumps({"task": json.loads(task)}).encode(), b""), SECRET)


def test_secret_file_is_private_and_round_trips(tmp_path: Path) -> None:
    secret = new_secret()
    path = write_secret_file(secret, tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_secret_file(path) == secret
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="mode 644 lets others read the secret; run chmod 600"):
        read_secret_file(path)
    with pytest.raises(ConfigError, match="cannot read it"):
        read_secret_file(tmp_path / "missing")
    junk = tmp_path / "junk"
    junk.write_text("not hex")
    junk.chmod(0o600)
    with pytest.raises(ConfigError, match="expected a hex secret"):
        read_secret_file(junk)


def test_sockets_talk_and_refuse_strangers() -> None:
    pool = PoolSocket(SECRET)
    address = f"tcp://127.0.0.1:{pool.port}"
    agent = AgentSocket(SECRET, address, b"a1/h/1")
    stranger = AgentSocket(b"w" * 32, address, b"a1/h/2")
    try:
        assert agent.send(Heartbeat(("t1",)))
        got = pool.recv(timeout=5.0)
        assert got == (b"a1/h/1", Heartbeat(("t1",)))
        assert pool.send(b"a1/h/1", Drain("soon"))
        assert agent.recv(timeout=5.0) == Drain("soon")
        stranger.send(Register("a1", 4, "h", 2))
        with pytest.raises(AuthenticationError, match="refused message from a1/h/2"):
            pool.recv(timeout=5.0)
        assert pool.recv(timeout=0.05) is None
    finally:
        for s in (agent, stranger, pool):
            s.close()


def test_binding_a_foreign_address_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"Pool\(bind='192.0.2.1', port=0\): cannot listen there"):
        PoolSocket(SECRET, bind="192.0.2.1")
