"""Prefect tasks and flow bodies the runner tests use (workers import this module: PYTHONPATH is the repo)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import INPUTS
from prefect.states import State
from prefect.utilities.annotations import allow_failure

import elastic


@task
def environ(*names: str) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


@task
def inc(x: int) -> int:
    return x + 1


@task
def boom(x: int) -> int:
    raise ValueError(f"bad input {x}")


@task
def describe(x: Any) -> str:
    return f"{type(x).__name__}: {x}"


@task(retries=2)
def flaky(counter: str) -> int:
    """Fails the first two times (counted in a file), then returns the attempt number."""
    path = Path(counter)
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    if n < 3:
        raise RuntimeError(f"attempt {n} fails")
    return n


@task(cache_policy=INPUTS, persist_result=True)
def cached_square(x: int) -> int:
    return x * x


@task
async def async_double(x: int) -> int:
    await asyncio.sleep(0.01)
    return 2 * x


@task
def nested(x: int) -> int:
    """Submits a task from inside a task (it runs in the worker's threads)."""
    return inc.submit(x).result() + 100


def features(counter: str) -> dict[str, Any]:
    """A flow body using what Prefect's runners support; returns what each part gave (comparable)."""
    a = inc.submit(1)
    b = inc.submit(a)  # a future as an argument
    bad = boom.submit(7, wait_for=[a])
    after_bad = inc.submit(bad)  # its input failed: Prefect leaves it NotReady
    tolerant = describe.submit(allow_failure(bad))
    mapped = inc.map([10, 20, 30])
    state: State[Any] = inc.submit(41, return_state=True)
    first = cached_square.submit(9)
    second = cached_square.submit(9, wait_for=[first])
    for f in (bad, after_bad, second):
        f.wait()  # ``state`` of an unfinished future is whatever the API has now
    result = {
        "b": b.result(),
        "bad": bad.state.type.value,
        "bad_message": str(bad.state.message),
        "after_bad": (after_bad.state.type.value, after_bad.state.name),
        "tolerant": tolerant.result(),
        "mapped": [f.result() for f in mapped],
        "return_state": (state.type.value, state.result()),
        "retried": flaky.submit(counter).result(),
        "cached": (first.result(), second.result(), second.state.name),
        "async": async_double.submit(21).result(),
        "nested": nested.submit(1).result(),
    }
    return result


@elastic.task(stage="prepare", runtime=1.0)
@task
def prepare(n: int) -> list[int]:
    get_run_logger().info("preparing %d items", n)
    time.sleep(1.0)
    return list(range(n))


@task(tags=["stage:process"])
def process(items: list[int], i: int) -> int:
    time.sleep(1.0)
    return items[i] * 10


@task
def merge(parts: list[int]) -> int:
    time.sleep(0.5)
    return sum(parts)


def staged(width: int) -> int:
    """prepare (1 task) -> process (``width`` tasks, a map) -> merge (1 task)."""
    items = prepare.submit(width)
    parts = process.map(items=[items] * width, i=list(range(width)))
    return merge.submit(parts).result()


@task
def where(marker: str, seconds: float) -> str:
    """Record the allocation it runs on (a file per attempt); the first attempt then sleeps ``seconds``."""
    job = os.environ.get("SLURM_JOB_ID") or os.environ["ELASTIC_JOB_ID"]
    attempt = len(list(Path(marker).iterdir())) + 1
    Path(marker, f"attempt-{attempt}").write_text(job)
    if attempt == 1:
        time.sleep(seconds)
    return job


def killed_allocation(marker: str, retries: int) -> tuple[str, str, str]:
    """One task whose first attempt sleeps (its allocation is killed meanwhile); retried ``retries`` times."""
    state = where.with_options(retries=retries).submit(marker, 120.0, return_state=True)
    return state.type.value, str(state.message), str(state.state_details.task_run_id)


@task
def sleeper(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def long_stage(width: int, seconds: float) -> list[float]:
    """``width`` tasks of ``seconds`` each, then one more after them."""
    parts = sleeper.map([seconds] * width)
    last = sleeper.submit(seconds, wait_for=parts)
    return [*(p.result() for p in parts), last.result()]
