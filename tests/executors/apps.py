"""Parsl apps the executor tests share: a 3-stage workflow of python and bash apps, and failing apps.

Apps defined with the decorators are pickled by value (the module name refers to the app object); the
workers never import this module.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import parsl
from parsl import bash_app, python_app
from parsl.config import Config
from parsl.dataflow.dflow import DataFlowKernel
from parsl.executors.base import ParslExecutor


@python_app
def prepare(n: int, pause: float, parsl_resource_specification: dict[str, Any] | None = None) -> list[int]:
    time.sleep(pause)
    return list(range(n))


@python_app
def process(
    items: list[int], i: int, pause: float, parsl_resource_specification: dict[str, Any] | None = None
) -> int:
    time.sleep(pause)
    return items[i] * 10


@bash_app
def merge(
    *parts: int,
    stdout: Any = parsl.AUTO_LOGNAME,
    stderr: Any = parsl.AUTO_LOGNAME,
    parsl_resource_specification: dict[str, Any] | None = None,
) -> str:
    return f"echo merged {sum(parts)}; echo to stderr >&2"


def three_stages(width: int = 4, pause: float = 0.5, runtime: float | None = None) -> Future[int]:
    """prepare (1 task) -> process (``width`` tasks) -> merge (1 bash task); returns merge's future.

    ``runtime`` (real seconds) is given to each app as ``parsl_resource_specification["runtime"]``.
    """
    spec = {} if runtime is None else {"runtime": runtime}
    items = prepare(width, pause, parsl_resource_specification=spec)
    parts = [process(items, i, pause, parsl_resource_specification=spec) for i in range(width)]
    return merge(*parts, parsl_resource_specification=spec)


def expected_total(width: int = 4) -> int:
    return sum(i * 10 for i in range(width))


@python_app
def boom(x: int) -> int:
    raise ValueError(f"bad input {x}")


@python_app
def leave(how: str) -> int:
    """End the app by a BaseException that is not an Exception, as a wrapped command-line main() does."""
    import argparse
    import asyncio

    if how == "argparse":
        argparse.ArgumentParser(prog="tool").parse_args(["--no-such-option"])  # sys.exit(2)
    if how == "cancelled":
        raise asyncio.CancelledError()
    raise KeyboardInterrupt


@python_app
def add_one(x: int) -> int:
    return x + 1


@bash_app
def exit_with(code: int, stdout: Any = parsl.AUTO_LOGNAME, stderr: Any = parsl.AUTO_LOGNAME) -> str:
    return f"echo before the failure; exit {code}"


@python_app
def sleep_and_return(
    seconds: float, value: int, parsl_resource_specification: dict[str, Any] | None = None
) -> int:
    time.sleep(seconds)
    return value


@python_app
def fail_until(marker: str, failures: int) -> int:
    """Fail the first ``failures`` calls (counted in the file ``marker``), then return the call count."""
    path = Path(marker)
    calls = len(path.read_text()) if path.exists() else 0
    path.write_text("x" * (calls + 1))
    if calls < failures:
        raise RuntimeError(f"failure {calls + 1} of {failures}")
    return calls + 1


@python_app(cache=True)
def counted(x: int, marker: str) -> int:
    """Return ``2 x`` and append one line to ``marker`` per real execution."""
    with open(marker, "a") as fh:
        fh.write(f"{x}\n")
    return 2 * x


@parsl.join_app
def fan_out(n: int) -> list[Future[int]]:
    return [add_one(i) for i in range(n)]


@contextlib.contextmanager
def loaded(executor: ParslExecutor, run_dir: Path, **config: Any) -> Iterator[DataFlowKernel]:
    """A DataFlowKernel with ``executor`` (as in a user's script); cleaned up at the end, whatever happens."""
    dfk = parsl.load(
        Config(
            executors=[executor], run_dir=str(run_dir), strategy="none", initialize_logging=False, **config
        )
    )
    try:
        yield dfk
    finally:
        if not dfk.cleanup_called:
            dfk.cleanup()
        parsl.clear()
