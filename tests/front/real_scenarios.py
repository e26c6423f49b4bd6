"""Random scenarios through the real front door, with real agents and real time: the short version.

:func:`random_real_scenario` draws what ``tests/control/scenarios.py`` draws for the virtual clock, scaled
to a test: a DAG of 1-3 stages of 1-4 tasks that sleep 1-4 s, up to a node wide (4 cores on the local Slurm
cluster), any strategy and batch-job shape, submitted by user code in any of the three ways
(:class:`~tests.control.scenarios.UserProgram`), undeclared or declared, after a run of history or none
(the same workflow, or the same name with other stages or its first stage alone). :func:`run_real` runs
one through :class:`elastic.Elastic` on a real backend (the local Slurm cluster, or the mock backend on its
scaled clock) and checks what the virtual version checks, as a user sees it:

- every future completes, within a bound (no stall);
- after the front door ended, none of the run's batch jobs is queued or running within 10 s (no leftover);
- the store keeps the run as ``completed``.

Stranded tasks are not checked step by step here (the control loop is not stepped by the test); a stranded
stage stalls the run, which the bound catches.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from elastic import Elastic
from elastic.backends.base import BatchBackend
from elastic.pool.tasks import Task
from elastic.store import Store
from elastic.strategies import STRATEGY_NAMES
from tests.control.scenarios import Outcome, Scenario, StageSpec, UserProgram

__all__ = ["RealFront", "random_real_scenario", "run_real"]

Fut = concurrent.futures.Future


class RealFront:
    """:class:`~tests.control.scenarios.Front` over a real :class:`elastic.Elastic`: tasks sleep for real."""

    def __init__(self, elastic: Elastic) -> None:
        self.elastic = elastic

    def task(self, stage: str, cores: int, estimate: float | None, duration: float) -> Task:
        """Make a shell task of ``stage`` that sleeps ``duration`` seconds."""
        return Task.shell(f"sleep {duration:.2f}", cores=cores, estimate=estimate, stage=stage)

    def submit_task(self, task: Task, *, after: Iterable[Fut[Any]] = ()) -> Fut[Any]:
        """:meth:`elastic.Elastic.submit_task`."""
        return self.elastic.submit_task(task, after=after)

    def expect(
        self,
        stage: str,
        tasks: int,
        *,
        cores: int = 1,
        after: Sequence[str] = (),
        ready: bool = False,
        runtime: float | None = None,
    ) -> None:
        """:meth:`elastic.Elastic.expect`."""
        self.elastic.expect(stage, tasks, cores=cores, after=after, ready=ready, runtime=runtime)


def random_real_scenario(rng: np.random.Generator, *, node_cores: int = 4) -> Scenario:
    """Draw a small scenario in real seconds for a partition of 4 nodes of ``node_cores`` cores."""
    n = int(rng.integers(1, 4))
    stages = []
    for i in range(n):
        after = tuple(sorted({int(j) for j in rng.integers(0, i, size=int(rng.integers(1, 3)))})) if i else ()
        stages.append(
            StageSpec(
                tasks=int(rng.integers(1, 5)),
                cores=int(rng.choice([1, 1, 2, node_cores])),
                runtime=float(rng.choice([1.0, 2.0, 4.0])),
                cv=float(rng.choice([0.0, 0.3])),
                after=after,
                hint=float(rng.choice([1.0, 0.5, 2.0])),
            )
        )
    history = int(rng.integers(0, 2))
    return Scenario(
        tuple(stages),
        nodes=4 * node_cores,
        strategy=str(rng.choice(STRATEGY_NAMES)),
        job_cores=None if rng.random() < 0.5 else int(rng.integers(node_cores, 4 * node_cores + 1)),
        seed=int(rng.integers(0, 2**31)),
        history=history,
        remembered=str(rng.choice(["same", "other", "first"])) if history else "same",
        front=str(rng.choice(["futures", "announce", "loop"])),
        declares=bool(rng.random() < 0.3),
    )


def run_real(
    scenario: Scenario,
    backend: BatchBackend,
    store_url: str,
    *,
    leftovers: Callable[[], list[str]],
    bound: float = 300.0,
    name: str = "liveness",
) -> Outcome:
    """Run ``scenario`` (its history first) through :class:`elastic.Elastic` on ``backend``; check it.

    ``leftovers`` lists the batch jobs still queued or running (``squeue``); ``bound``: real seconds a run
    may take before it counts as stalled. Every run of the scenario uses the store at ``store_url``, so
    the last one remembers the plan of the one before (:attr:`Scenario.remembered`).
    """
    violations: list[str] = []
    status, makespan, count = "none", float("nan"), 0
    workflow = replace(scenario.workflow(), name=name)
    past = replace(scenario.past_workflow(), name=name)
    for run in range(scenario.history + 1):
        ran = workflow if run == scenario.history else past
        program = UserProgram(scenario, ran, np.random.default_rng([scenario.seed, run]))
        with Elastic(
            backend,
            scenario.strategy,
            workflow=ran if scenario.declares else name,
            store=store_url,
            poll_interval=1.0,
            job_cores=scenario.job_cores,
            progress=False,
        ) as el:
            front = RealFront(el)
            deadline = time.monotonic() + bound
            program.act(front)
            while not program.finished and time.monotonic() < deadline:
                time.sleep(0.05)
                program.act(front)
            if not program.finished:
                violations.append(f"run {run}: not every task ended within {bound:.0f} s: {el.view()}")
                el.shutdown(wait=False, cancel_futures=True, status="interrupted")
        result = el.result
        assert result is not None
        status, makespan = result.status, result.metrics.makespan
        count = len(el.view().allocations)
        failed = [
            f"{s}: {f.exception()!r}"
            for s, fs in program.futures.items()
            for f in fs
            if f.done() and f.exception()
        ]
        if failed:
            violations.append(f"run {run}: tasks failed: {failed[:3]}")
        deadline = time.monotonic() + 10.0
        while (left := leftovers()) and time.monotonic() < deadline:
            time.sleep(0.5)
        if left:
            violations.append(f"run {run}: batch jobs left 10 s after the end: {left}")
        with Store(store_url) as store:
            stored = str(store.runs(workflow=name)["status"].iloc[-1])
        if stored != "completed" or status != "completed":
            violations.append(f"run {run}: ended {status!r}, kept in the store as {stored!r}")
    return Outcome(status, makespan, count, violations)
