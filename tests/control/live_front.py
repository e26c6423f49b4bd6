"""The front door's run on the mock backend's virtual clock: every part but the pool and the control thread.

:class:`VirtualFrontDoor` wires the parts of one :class:`elastic.Elastic` run as
:func:`elastic.front.assembly.assemble` wires them: the :class:`~elastic.front.intake.Intake` user code
submits through, the :class:`~elastic.control.live.LiveDemand` (with a declared plan, or the plan the
store remembers for the workflow's name), the :class:`~elastic.strategies.Knowledge` on the store, the
:class:`~elastic.front.record.RunRecord` and the :class:`~elastic.control.controller.AllocationController`.
Two parts differ, so that thousands of runs take minutes instead of days:

- the pool is :class:`SimulatedPool`: the intake's tasks go to a
  :class:`~elastic.control.sim_execution.SimExecution` (placement by the pool's rules, in backend time), and
  their futures complete when it reports their end, as the pool's I/O thread completes them;
- the control thread is the loop of :meth:`VirtualFrontDoor.run`: it steps the controller at the times
  the controller asks for (its wake-up is at the latest the next task end), lets the user's program act on
  what completed, and steps again at once when that program submitted something (the front door's poke).
  The end of the run is :meth:`elastic.Elastic.shutdown`'s: the demand finished and closed, the last
  events taken, every allocation released, the run's runtimes learned and its row (with the plan of the
  stages that ran) kept in the store.

A user's program is a :class:`Program`: it submits at the start and after every step, and says when it has
nothing outstanding. ``tests/control/scenarios.py`` has the three kinds the front-ends produce.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from elastic.backends.mock import MockBackend
from elastic.control.controller import AllocationController, learn_runtimes
from elastic.control.execution import RunResult, TaskSpec
from elastic.control.live import LiveDemand
from elastic.control.sim_execution import SimExecution
from elastic.errors import ElasticError
from elastic.front.intake import Intake
from elastic.front.record import RunRecord
from elastic.front.setup import remembered_plan
from elastic.metrics import Event, EventKind
from elastic.pool.tasks import Task
from elastic.store import Store
from elastic.strategies import Knowledge, RunView, make_strategy
from elastic.workflow import Workflow

__all__ = ["Program", "SimulatedPool", "VirtualFrontDoor"]

Fut = concurrent.futures.Future


class SimulatedPool:
    """What the intake needs of a pool (``submit``), over a simulated execution.

    A task runs for the duration given to :meth:`VirtualFrontDoor.task` when it was made; its future
    completes (value None) when the execution reports its end.
    """

    def __init__(self, execution: SimExecution) -> None:
        self.execution = execution
        self.durations: dict[str, float] = {}
        self.submitted = 0
        """Tasks handed to the execution so far."""
        self._futures: dict[str, concurrent.futures.Future[Any]] = {}
        self._order = itertools.count()  # the pool takes its queue oldest first

    def submit(
        self, task: Task, future: concurrent.futures.Future[Any] | None = None
    ) -> concurrent.futures.Future[Any]:
        """Queue ``task``; return its future (``future`` when the intake made one for a held task)."""
        out: concurrent.futures.Future[Any] = future if future is not None else concurrent.futures.Future()
        self._futures[task.task_id] = out
        spec = TaskSpec(
            task.task_id,
            task.stage,
            next(self._order),
            task.cores,
            task.estimate or 0.0,
            self.durations[task.task_id],
        )
        self.execution.submit(spec)
        self.submitted += 1
        return out

    def complete(self, task_id: str) -> None:
        """Complete the future of ``task_id``: it ended, or was dropped (its done callbacks run here)."""
        future = self._futures.pop(task_id, None)
        if future is None or future.done():
            return
        dropped = self.execution.dropped.get(task_id)
        if dropped is None:
            future.set_result(None)
        else:
            future.set_exception(dropped)


class Program(Protocol):
    """A user's program on the front door: what it submits, and when."""

    def act(self, door: VirtualFrontDoor) -> None:
        """Submit what the program would submit now (called at the start and after every step)."""
        ...

    @property
    def finished(self) -> bool:
        """Whether every task the program will ever submit was submitted and is done."""
        ...


class VirtualFrontDoor:
    """One front-door run on the mock backend's virtual clock (see the module docstring).

    Parameters
    ----------
    name : str
        The workflow's name (the store keeps its plan and runtimes under it).
    strategy : str
        A strategy's registry name.
    backend : MockBackend
        On its virtual clock.
    store : Store
        The run's store (shared by the runs of one scenario).
    waits : WaitPredictor
        The wait learner (shared by the runs of one scenario, as a store shares it between processes).
    plan : Workflow or None
        A declared plan (``Elastic(workflow=...)``); None: the store's remembered one, if any.
    job_cores : int or None
        Most cores in one batch job.
    max_retries : int, default 2
        The front door's default.
    idle_timeout : float, default 300.0
        The front door's default.
    """

    def __init__(
        self,
        name: str,
        strategy: str,
        backend: MockBackend,
        store: Store,
        waits: Any,
        *,
        plan: Workflow | None = None,
        job_cores: int | None = None,
        max_retries: int = 2,
        idle_timeout: float = 300.0,
    ) -> None:
        self.backend = backend
        self.store = store
        self.name = name
        if plan is None:
            plan = remembered_plan(store, name)
        self.record = RunRecord(store)
        self._ended: list[str] = []  # task ends taken by the controller, futures not completed yet
        self.task_ends: list[str] = []
        """Every task end the controller took, in order (a task ending twice is there twice)."""
        self.demand = LiveDemand(
            name, record=self.record.add, clock=backend.now, plan=plan, idle_timeout=idle_timeout
        )
        partition = backend.partition()
        self.knowledge = Knowledge(
            self.demand.plan,
            waits=waits,
            history=store,
            wait_store=store,
            backend=backend.name,
            max_walltime=partition.max_walltime,
        )
        self.execution = SimExecution(max_retries=max_retries, drop_exhausted=True)
        self.pool = SimulatedPool(self.execution)
        self.strategy = make_strategy(strategy)
        self.controller = AllocationController(
            self.strategy,
            backend,
            self.execution,
            self.knowledge,
            self.demand,
            record=self._add,
            poll_interval=30.0,
            name="elastic",
            max_cores=partition.cores,
            job_cores=job_cores,
            node_cores=partition.node_cores,
        )
        self._poke = threading.Event()
        self._closed = threading.Event()
        self.intake = Intake(
            self.pool,  # type: ignore[arg-type]  # duck-typed: the intake calls submit only
            self.demand,
            poke=self._poke,
            closed=self._closed,
            max_cores=self.controller.max_cores,
            max_walltime=partition.max_walltime,
            speedup=1.0,
            node_cores=partition.node_cores,
        )
        self._ids = itertools.count()

    def task(self, stage: str, cores: int, estimate: float | None, duration: float) -> Task:
        """Make a task of ``stage`` that runs ``duration`` backend seconds (its command is never run)."""
        task = Task.shell(
            "true", cores=cores, estimate=estimate, stage=stage, task_id=f"{stage}.{next(self._ids)}"
        )
        self.pool.durations[task.task_id] = duration
        return task

    def submit_task(self, task: Task, *, after: Iterable[Fut[Any]] = ()) -> Fut[Any]:
        """:meth:`elastic.Elastic.submit_task`: run ``task`` after the futures ``after``."""
        return self.intake.prepared(task, after)

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
        """:meth:`elastic.Elastic.expect`: announce tasks not submitted yet."""
        self.intake.expect(stage, tasks, cores=cores, after=after, ready=ready, runtime=runtime)

    def run(
        self,
        program: Program,
        *,
        max_duration: float,
        on_iteration: Callable[[RunView], None] | None = None,
    ) -> RunResult:
        """Run ``program`` to its end (or ``max_duration`` backend seconds, status ``timeout``); end the run.

        A task lost more often than ``max_retries`` allows fails its future (with
        :class:`~elastic.control.sim_execution.TaskRetriesExhaustedError`) and the run goes on, as on the
        real pool; the program decides what its dependents do.
        """
        self.record.start(self.name, self.strategy.name, self.backend)  # (in assemble)
        start = now = self.backend.now()
        self.record.add(Event(now, EventKind.RUN_START, note=self.strategy.name))
        status, detail = "completed", ""
        try:
            program.act(self)
            while not program.finished:
                before = self.pool.submitted
                wake = self.controller.step(now)
                ended, self._ended = self._ended, []
                for task_id in ended:  # as the pool's I/O thread completes futures
                    self.pool.complete(task_id)
                program.act(self)
                if program.finished or wake is None:
                    break
                if now - start >= max_duration:
                    status = "timeout"
                    break
                if on_iteration is not None:
                    on_iteration(self.controller.view(now))
                if self.pool.submitted == before:  # else the front door is poked: step again at once
                    self.backend.sleep(max(wake - now, 1e-3))
                now = self.backend.now()
        except ElasticError as exc:
            status, detail = "failed", str(exc)
        result = self._finish(status)
        return RunResult(result.workflow, result.strategy, status, result.events, result.metrics, detail)

    def _add(self, event: Event) -> None:
        """The controller's event sink: the run's record, and the task ends whose futures to complete."""
        self.record.add(event)
        if event.kind is EventKind.TASK_END and event.task is not None:
            self._ended.append(event.task)
            self.task_ends.append(event.task)
        elif event.kind is EventKind.TASK_DROPPED and event.task is not None:
            self._ended.append(event.task)  # its future fails

    def _finish(self, status: str) -> RunResult:
        """End the run as :meth:`elastic.Elastic.shutdown` does."""
        self.demand.finish()
        self._closed.set()
        self.demand.close()
        now = self.backend.now()
        self.controller.take_events(now)
        self.demand.update(now)
        self.controller.shutdown(now)  # cancels every allocation: their running tasks are lost
        end = self.backend.now()
        self.record.end(status, end)
        plan, stages = self.demand.plan, self.demand.stages()
        width = max((s.width for s in stages), default=1)
        learn_runtimes(self.knowledge, stages, status=status, end=end, width=width)
        return self.record.finish(self.name, self.strategy.name, status, plan, stages)
