"""Authentication as Mesos does it, and framework ids nobody can guess or squat.

Off on loopback (an unmodified pymesos framework without credentials runs), required on other addresses
or when asked, one secret per principal from a Mesos ``--credentials`` file, failover only by the
principal that subscribed the framework; ids are random and a made-up id is refused.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.errors import ConfigError
from elastic.front.mesos import MesosServer
from elastic.front.mesos.auth import is_loopback, principal_of, read_credentials
from tests.front.mesos.framework import ShellFramework, running
from tests.front.mesos.raw import RawScheduler, basic

pytestmark = pytest.mark.slow


@pytest.fixture
def el() -> Iterator[Elastic]:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
    ):
        yield el


def subscribe(address: str, headers: dict[str, str], framework_id: str | None = None, **info: str) -> int:
    """Send a SUBSCRIBE and return its status (the stream is closed at once)."""
    body: dict = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": "x", **info}}}
    if framework_id is not None:
        body["framework_id"] = {"value": framework_id}
    url = f"http://{address}/api/v1/scheduler"
    with httpx.stream("POST", url, json=body, headers=headers, timeout=10) as response:
        return response.status_code


def write(path: Path, credentials: object) -> Path:
    path.write_text(json.dumps(credentials))
    return path


@pytest.mark.timeout(120)
def test_an_unmodified_pymesos_framework_without_credentials_runs_on_loopback(el: Elastic) -> None:
    with MesosServer(el, heartbeat_interval=0.5) as server:
        assert not server.authenticate and server.secret is None and server.credentials_file is None
        framework = ShellFramework(3, command="true")
        with running(framework, server.address):  # no principal, no secret
            assert framework.all_done.wait(60), framework.errors
        assert not framework.errors


@pytest.mark.timeout(120)
def test_credentials_are_required_off_loopback_with_a_drawn_mesos_credentials_file(
    el: Elastic, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="authentication is required on the non-loopback address"):
        MesosServer(el, host="0.0.0.0", authenticate=False)
    with MesosServer(el, host="0.0.0.0", secret_dir=tmp_path) as server:
        assert server.authenticate and server.credentials_file is not None
        assert server.credentials_file.parent == tmp_path
        assert server.credentials_file.stat().st_mode & 0o777 == 0o600
        assert read_credentials(server.credentials_file) == {"elastic": server.secret}
        local = f"127.0.0.1:{server.port}"
        assert subscribe(local, {}) == 401
        assert subscribe(local, basic(server.secret, "someone-else")) == 401
        framework = ShellFramework(2, command="true")
        with running(framework, local, server.secret, principal="elastic"):
            assert framework.all_done.wait(60), framework.errors
        drawn = server.credentials_file
    assert not drawn.exists(), "a drawn credentials file is removed at the end"


@pytest.mark.timeout(120)
def test_one_secret_per_principal_and_failover_only_by_the_same_principal(
    el: Elastic, tmp_path: Path
) -> None:
    secrets = {"alice": "a" * 20, "bob": "b" * 20}
    path = write(
        tmp_path / "creds.json", {"credentials": [{"principal": p, "secret": s} for p, s in secrets.items()]}
    )
    with MesosServer(el, authenticate=True, credentials=path, heartbeat_interval=0.5) as server:
        assert server.authenticate
        assert subscribe(server.address, basic(secrets["bob"], "alice")) == 401
        alice = RawScheduler(server.address, secrets["alice"], principal="alice")
        # bob knows alice's framework id: he may neither fail it over nor call for it
        assert subscribe(server.address, basic(secrets["bob"], "bob"), alice.framework_id) == 403
        bob_call = httpx.post(
            f"http://{server.address}/api/v1/scheduler",
            json={"type": "REVIVE", "framework_id": {"value": alice.framework_id}},
            headers={**basic(secrets["bob"], "bob"), "Mesos-Stream-Id": alice.stream_id},
            timeout=10,
        )
        assert bob_call.status_code == 403
        assert subscribe(server.address, basic(secrets["bob"], "bob"), principal="alice") == 403
        assert alice.call("REVIVE").status_code == 202, "alice's framework is untouched"
        again = RawScheduler(
            server.address, secrets["alice"], principal="alice", info={"id": {"value": alice.framework_id}}
        )
        assert again.framework_id == alice.framework_id
        alice.wait_for(lambda e: e["type"] == "ERROR" and "failed over" in e["error"]["message"])
        alice.close()
        again.close()
    assert path.exists(), "a given credentials file is left alone"


def test_framework_ids_are_random_and_an_id_never_issued_cannot_be_squatted(el: Elastic) -> None:
    with MesosServer(el, heartbeat_interval=0.5) as server:
        first = RawScheduler(server.address, None)
        squatted = [str(uuid.uuid4()), first.framework_id[:-1] + "x", f"{first.framework_id}-0002"]
        for made_up in squatted:
            assert subscribe(server.address, {}, made_up) == 403
        later = [RawScheduler(server.address, None, name=f"n{i}") for i in range(3)]
        ids = [first.framework_id] + [r.framework_id for r in later]
        assert len(set(ids)) == 4 and not set(ids) & set(squatted)
        for framework_id in ids:
            assert uuid.UUID(framework_id).version == 4
        for raw in [first, *later]:
            raw.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not JSON"),
        ('{"credentials": {}}', 'expected {"credentials"'),
        ('{"credentials": [{"principal": "a"}]}', "secret of principal 'a' must be a non-empty string"),
        ('{"credentials": [{"principal": "a:b", "secret": "s"}]}', "without ':'"),
        ('{"credentials": [{"principal": "a", "secret": "s", "x": 1}]}', "credentials[0] must be"),
        (
            '{"credentials": [{"principal": "a", "secret": "s"}, {"principal": "a", "secret": "t"}]}',
            "given twice",
        ),
        ('{"credentials": []}', "no credentials"),
    ],
)
def test_bad_credentials_files_are_refused_naming_the_problem(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "c.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        read_credentials(path)
    with pytest.raises(ConfigError, match="cannot read it"):
        read_credentials(tmp_path / "missing.json")


def test_principal_of_and_loopback() -> None:
    creds = {"alice": "s3cret"}
    assert principal_of(basic("s3cret", "alice")["Authorization"], creds) == "alice"
    assert principal_of(basic("s3cret", "bob")["Authorization"], creds) is None
    assert principal_of(basic("wrong", "alice")["Authorization"], creds) is None
    assert principal_of("Basic !!!", creds) is None
    assert principal_of("Bearer x", creds) is None
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", os.uname().nodename + ".invalid"))
