"""Toil's Mesos batch system (unmodified, from the package index) runs a Toil workflow and a CWL workflow
through the front door's Mesos endpoint: every job on a Toil executor started through the executor API.

Toil is not a dependency of Elastic; ``scripts/bootstrap.sh test`` installs it (``toil[cwl,mesos]==9.6.0``,
about 25 s, packages added only) so CI runs this test. Elsewhere the test is skipped unless ``toil`` (with
its ``cwl`` extra) imports, or ``ELASTIC_TEST_TOIL_SITE`` names a directory it was installed into, e.g.
``pip install --target /tmp/toil-site "toil[cwl]==9.6.0"`` (Toil 9.6 keeps its Mesos batch system; its
``mesos`` extra installs pymesos only below Python 3.11, and the pymesos already here does). Toil's options
``--defaultMemory 256Mi --defaultDisk 64Mi`` make its jobs fit one core's offer (its defaults ask 2 GiB).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.front.mesos import MesosServer

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent / "thirdparty" / "toil"
SITE = os.environ.get("ELASTIC_TEST_TOIL_SITE")
if SITE is None and importlib.util.find_spec("toil") is None:
    pytest.skip("Toil is not installed (see the module docstring)", allow_module_level=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[MesosServer]:
    # Toil's executor command (``_toil_mesos_executor``) is a script beside this Python, found on the PATH
    # the agents, hence Toil's executors, inherit: there when the venv is activated (the bootstrap script),
    # not when its python is run by path (exit 127, "command not found")
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    if SITE is not None:  # the agents, hence Toil's executors, inherit these
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([SITE, os.environ.get("PYTHONPATH", "")]))
        monkeypatch.setenv("PATH", os.pathsep.join([str(Path(SITE) / "bin"), os.environ["PATH"]]))
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
        MesosServer(el, heartbeat_interval=5.0) as server,
    ):
        yield server


def toil(
    server: MesosServer, tmp_path: Path, command: list[str], *tail: str
) -> subprocess.CompletedProcess[str]:
    """Run a Toil command (its options, then ``tail``) against ``server``."""
    options = ["--batchSystem", "mesos", "--mesosEndpoint", server.address, "--defaultMemory", "256Mi",
               "--defaultDisk", "64Mi", "--workDir", str(tmp_path)]  # fmt: skip
    return subprocess.run(
        [*command, *options, *tail], capture_output=True, text=True, timeout=150, cwd=tmp_path
    )


@pytest.mark.timeout(300)
def test_a_toil_workflow_and_a_cwl_workflow_run_on_toils_mesos_batch_system(
    server: MesosServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="elastic.front.mesos.master")
    done = toil(server, tmp_path, [sys.executable, str(HERE / "workflow.py"), f"file:{tmp_path / 'js'}"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RESULT hello a + hello b" in done.stdout
    executors = [
        r for r in caplog.records if "executor toil-" in r.getMessage() and "subscribed" in r.getMessage()
    ]
    assert executors, "Toil's jobs ran on its executors, started through the executor API"
    # toil-cwl-runner is installed beside the Python that has Toil
    runner = str((Path(SITE) / "bin" if SITE else Path(sys.executable).parent) / "toil-cwl-runner")
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"message": "hello from cwl"}))
    cwl = [
        sys.executable,
        runner,
        "--jobStore",
        f"file:{tmp_path / 'js2'}",
        "--outdir",
        str(tmp_path / "out"),
    ]
    done = toil(server, tmp_path, cwl, "--no-container", str(HERE / "echo.cwl"), str(job))
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "out.txt").read_text() == "hello from cwl\n"
