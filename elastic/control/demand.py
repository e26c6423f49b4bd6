"""A declared workflow as the controller's demand: stages known up front, tasks made from runtime models.

:class:`DeclaredDemand` is the :class:`~elastic.control.controller.Demand` of ``elastic run`` and
``elastic compare``: the workflow's stages and their task counts are known before the run; when a stage's
dependencies are complete its tasks are made (durations drawn from the stage's runtime model) and handed
to the execution; a stage is complete when all its tasks completed.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from elastic.control.attempts import Attempts
from elastic.control.execution import Execution, TaskFailedError, TaskSpec
from elastic.control.work import EventSink
from elastic.errors import ConfigError
from elastic.metrics import Event, EventKind
from elastic.strategies.base import StageView
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Workflow

__all__ = ["DeclaredDemand"]


@dataclass(slots=True)
class _Stage:
    name: str
    index: int
    tasks: int
    cores: int
    depends_on: tuple[str, ...]
    done: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    ready_time: float | None = None
    end_time: float | None = None
    first_start: float | None = None
    last_end: float | None = None
    attempts: Attempts = field(default_factory=Attempts)
    longest_task: float | None = None
    task_runs: list[float] = field(default_factory=lambda: [0, 0.0, 0.0])
    """Completed tasks' runtimes (the attempt that completed each): count, sum, sum of squares."""

    def task_runtime(self) -> float | None:
        """Return the mean plus one standard deviation of the completed tasks' runtimes (None: none)."""
        n, total, squares = self.task_runs
        if not n:
            return None
        mean = total / n
        return mean + math.sqrt(max(0.0, squares / n - mean * mean))

    def view(self) -> StageView:
        floor, waiting = self.attempts.rerun_floor() or (None, 0)
        return StageView(
            self.name,
            self.index,
            self.tasks,
            self.cores,
            self.depends_on,
            done=len(self.done),
            running=len(self.running),
            ready_time=self.ready_time,
            start_time=self.first_start,
            end_time=self.end_time,
            runtime=self.longest_task,
            task_runtime=self.task_runtime(),
            rerun_end=self.attempts.rerun_end(),
            rerun_floor=floor,
            rerun_waiting=waiting,
            running_since=self.attempts.oldest_start(),
        )


class DeclaredDemand:
    """The work of a declared workflow, made from its stages' runtime models.

    Parameters
    ----------
    workflow : Workflow
        What to run; every stage needs a ``runtime`` (durations are drawn from it).
    execution : Execution
        Where the tasks go.
    knowledge : Knowledge
        Gives the runtime estimate tasks are placed with (what the strategy believes).
    record : callable
        Event sink for STAGE_READY and STAGE_END.
    rng : numpy.random.Generator
        Draws task durations.

    Raises
    ------
    ConfigError
        A stage has no runtime model.
    """

    def __init__(
        self,
        workflow: Workflow,
        execution: Execution,
        knowledge: Knowledge,
        record: EventSink,
        rng: np.random.Generator,
    ) -> None:
        missing = [s.name for s in workflow.stages if s.runtime is None]
        if missing:
            raise ConfigError(
                f"workflow {workflow.name!r}: stages {missing} have no runtime; running a declared workflow "
                "makes its tasks from each stage's runtime model (give 'runtime' in seconds)"
            )
        self._workflow = workflow
        self._execution = execution
        self._knowledge = knowledge
        self._record = record
        self._rng = rng
        self._stages = [
            _Stage(s.name, i, s.tasks, s.cores, s.depends_on or ()) for i, s in enumerate(workflow.stages)
        ]
        self._by_name = {s.name: s for s in self._stages}
        self._order = 0
        self._newly_ready: list[_Stage] = []
        # what a step looks at is kept up to date as tasks end, so that a step costs what changed rather
        # than a scan of every stage (a run of n stages takes about 2n steps)
        self._dependents: list[list[int]] = [[] for _ in self._stages]
        self._unmet = [0] * len(self._stages)
        """Per stage: its dependencies not complete yet (it becomes ready at 0)."""
        for st in self._stages:
            for d in dict.fromkeys(st.depends_on):
                self._dependents[self._by_name[d].index].append(st.index)
                self._unmet[st.index] += 1
        self._due = [st.index for st in self._stages if self._unmet[st.index] == 0]
        """Stages the next :meth:`update` looks at (a heap of indexes): none unmet, or all tasks done."""
        self._ended = 0
        self._view_list = [st.view() for st in self._stages]
        self._changed: set[int] = set()
        """Stages whose view is out of date."""
        self._views: tuple[StageView, ...] | None = None
        """The stages' views as of the last change (the controller reads them several times a step)."""
        self._failed: tuple[str, str] | None = None
        """The first task that failed or was dropped (its id, what was said): the run cannot complete."""

    @property
    def plan(self) -> Workflow:
        """The declared workflow."""
        return self._workflow

    @property
    def done(self) -> bool:
        """Every stage complete."""
        return self._ended == len(self._stages)

    def observe(self, event: Event) -> None:
        """Count a task start, end, loss or failure in its stage, and the seconds each task ran.

        The stage's runtime for the history is its longest task, not first start to last end: all its
        tasks are released together, so that is its runtime on its own width, whereas tasks that waited
        for cores (on a narrower allocation that started early, or for one still queued) would stretch
        first start to last end by hours and make every later walltime and estimate that long. A task's
        time is the attempt that completed it: a lost attempt is started again from scratch, so the
        seconds it ran are not part of the runtime a later allocation must cover. Summed in, they taught
        the next runs a walltime as long as a loss and a full run together: on SDSC Blue capacity,
        Seismology 56, `asa` in jobs of one task asked 41,549 s in run 28 and fine Per-Stage 37,777 s, each
        from its own earlier runs' lost attempts (with completing attempts only, both ask 26,830 s); the
        shorter job started at once, the longer one after 43 h (the queue plans every job's walltime).
        """
        s = self._by_name.get(event.stage or "")
        if s is None or event.task is None:
            return
        self._views = None
        self._changed.add(s.index)
        task = event.task
        if event.kind is EventKind.TASK_START:
            s.running.add(task)
            s.attempts.start(task, event.time)
            if s.first_start is None:
                s.first_start = event.time
        elif event.kind is EventKind.TASK_END:
            s.running.discard(task)
            s.done.add(task)
            s.last_end = event.time if s.last_end is None else max(s.last_end, event.time)
            final = event.time - s.attempts.started.get(task, event.time)  # the attempt that completed it
            s.task_runs[0] += 1
            s.task_runs[1] += final
            s.task_runs[2] += final * final
            s.attempts.end(task, event.time)
            s.longest_task = final if s.longest_task is None else max(s.longest_task, final)
            if len(s.done) == s.tasks:
                heapq.heappush(self._due, s.index)
        elif event.kind is EventKind.TASK_LOST:
            s.running.discard(task)
            s.attempts.lost(task, event.time)
        elif event.kind in (EventKind.TASK_FAILED, EventKind.TASK_DROPPED):
            # it will not run again (its command failed, or it was lost more often than the execution
            # retries): without it the stage never completes, and waiting for it would stall for ever
            s.running.discard(task)
            if self._failed is None and task not in s.done:
                self._failed = (task, event.note or event.kind.value)

    def update(self, now: float) -> None:
        """Complete stages whose tasks are all done; make ready the stages whose dependencies are done.

        Only the stages that may have changed are looked at, in workflow order: the events come in the
        order a scan of every stage gives them (dependencies are earlier stages, so a stage made ready by
        one completed in this update comes after it).

        Raises
        ------
        TaskFailedError
            A task failed or was dropped (:meth:`observe`): the workflow cannot complete.
        """
        if self._failed is not None:
            raise TaskFailedError(*self._failed)
        due = self._due
        last = -1
        while due:
            i = heapq.heappop(due)
            if i == last:  # pushed twice
                continue
            last = i
            s = self._stages[i]
            if s.end_time is None and s.ready_time is not None and len(s.done) == s.tasks:
                s.end_time = s.last_end if s.last_end is not None else now
                self._record(Event(s.end_time, EventKind.STAGE_END, stage=s.name))
                self._ended += 1
                self._changed.add(i)
                for j in self._dependents[i]:
                    self._unmet[j] -= 1
                    if self._unmet[j] == 0:
                        heapq.heappush(due, j)
            if s.ready_time is None and self._unmet[i] == 0:
                ready = max((self._by_name[d].end_time or now for d in s.depends_on), default=now)
                s.ready_time = min(ready, now) if s.depends_on else now
                self._record(Event(s.ready_time, EventKind.STAGE_READY, stage=s.name))
                self._newly_ready.append(s)
                self._changed.add(i)
        if self._changed:
            self._views = None

    def stages(self) -> tuple[StageView, ...]:
        """Progress of every stage, in workflow order."""
        if self._views is None:
            for i in self._changed:
                self._view_list[i] = self._stages[i].view()
            self._changed.clear()
            self._views = tuple(self._view_list)
        return self._views

    def dispatch(self, now: float) -> None:
        """Make the tasks of the stages that became ready and hand them to the execution.

        Called after the strategy acted, so the pool cannot place them on an allocation it is releasing.
        """
        for s in self._newly_ready:
            stage = self._workflow.stages[s.index]
            durations = stage.sample_runtimes(self._rng)
            # the runtime estimate for placement is a task's, as the strategy believes it (history, else
            # the workflow's estimate; never more than the stage's expected runtime): not the stage's,
            # which is its slowest task (Knowledge.task_estimate)
            estimate = self._knowledge.task_estimate(s.name)
            for i, d in enumerate(durations):
                self._order += 1
                task_id = f"{s.name}.{i}"
                self._execution.submit(
                    TaskSpec(task_id, s.name, self._order, stage.cores, estimate, float(d), stage.command)
                )
        self._newly_ready.clear()
