"""``elastic mesos``: a pymesos framework runs with the printed address and credentials; bad options fail."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.front.mesos.framework import ShellFramework, running

pytestmark = pytest.mark.slow


@pytest.mark.timeout(120)
def test_serves_a_framework_until_interrupted_then_releases_everything(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "elastic", "mesos", "--backend", "local", "--strategy", "perstage"]
    cmd += [
        "--port",
        "0",
        "--no-store",
        "--idle-timeout",
        "5",
        "--secret-dir",
        str(tmp_path),
        "--authenticate",
        "--offer-timeout",
        "20",
        "--gang-wait",
        "3",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
    try:
        lines = [proc.stdout.readline() for _ in range(4)]  # type: ignore[union-attr]
        master = re.search(r"master \(for pymesos\): (\S+)", "".join(lines))
        credentials_file = re.search(r"credentials file .*: (\S+)", "".join(lines))
        assert master and credentials_file, lines
        path = Path(credentials_file.group(1))
        assert path.parent == tmp_path and (path.stat().st_mode & 0o777) == 0o600
        (credential,) = json.loads(path.read_text())["credentials"]
        framework = ShellFramework(3, command="true")
        with running(framework, master.group(1), credential["secret"], principal=credential["principal"]):
            assert framework.all_done.wait(60), framework.errors
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "run completed: makespan" in out
    assert not path.exists(), "the drawn credentials file is removed at the end"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--speedup", "5"], "--speedup applies to --backend mock only"),
        (["--partition", "p"], "--partition applies to --backend slurm only"),
        (["--port", "70000"], "--port"),
        (["--store", "sqlite://", "--no-store"], "contradict"),
        (["--secret-dir", "/nonexistent/dir"], "--secret-dir /nonexistent/dir: not a directory"),
        (["--offer-timeout", "-1"], "--offer-timeout"),
        (["--disk-per-core", "0"], "--disk-per-core"),
        (["--gang-wait", "0"], "--gang-wait: expected a finite number > 0"),
        (["--gang-wait", "-2"], "--gang-wait: expected a finite number > 0"),
        (["--gang-wait", "nan"], "--gang-wait: expected a finite number > 0"),
        (["--gang-wait", "soon"], "--gang-wait: expected a finite number > 0"),
        (["--credentials", "/nonexistent/c.json"], "credentials file /nonexistent/c.json: cannot read it"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(options: list[str], message: str) -> None:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "elastic", "mesos", *options], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert time.monotonic() - started < 30


def test_gang_wait_reaches_the_server_default_ten_seconds() -> None:
    from elastic.cli.mesos import register, server_options

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    assert server_options(parser.parse_args(["mesos", "--gang-wait", "2.5"]))["gang_wait"] == 2.5
    assert server_options(parser.parse_args(["mesos"]))["gang_wait"] == 10.0


def _parser() -> argparse.ArgumentParser:
    from elastic.cli.mesos import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser


def test_allocation_interval_and_submission_rate_reach_the_server_and_the_front_door() -> None:
    from elastic.cli.mesos import _settings, server_options

    args = _parser().parse_args(["mesos", "--allocation-interval", "1", "--submission-rate", "6"])
    assert server_options(args)["allocation_interval"] == 1.0
    limit = _settings(args, "local").submission_rate
    assert limit is not None and (limit.per_minute, limit.burst) == (6.0, 6)  # type: ignore[union-attr]
    args = _parser().parse_args(["mesos"])
    assert server_options(args)["allocation_interval"] == 0.0  # every free core offered at once
    assert _settings(args, "local").submission_rate is None  # the default cap


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--allocation-interval", "-1"], "--allocation-interval: expected a finite number >= 0"),
        (["--allocation-interval", "inf"], "--allocation-interval: expected a finite number >= 0"),
        (["--allocation-interval", "soon"], "--allocation-interval: expected a finite number >= 0"),
        (["--submission-rate", "0"], "--submission-rate: expected jobs a minute, a number in (0, 600]"),
        (["--submission-rate", "601"], "--submission-rate: expected jobs a minute, a number in (0, 600]"),
        (["--submission-rate", "nan"], "--submission-rate: expected jobs a minute, a number in (0, 600]"),
    ],
)
def test_bad_allocation_interval_or_submission_rate_is_refused_when_parsed(
    options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(["mesos", *options])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
