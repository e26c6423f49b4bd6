"""Tasks from user code as the controller's demand: stages learned as they come.

:class:`LiveDemand` is the :class:`~elastic.control.controller.Demand` of the front door
(:class:`elastic.front.door.Elastic`). A stage is a label on tasks; the plan strategies read (which stages,
how wide, in which order, after which others) comes from three sources, merged:

- a **declared plan** (a :class:`~elastic.workflow.Workflow`, runtimes optional), or the plan of the last
  completed run of the same workflow name kept in the store: its stages are known before their first task;
- **tasks** as they are submitted: a stage's width is the number of its tasks known so far times their cores,
  and a task submitted ``after`` futures of other stages makes its stage depend on those;
- **announcements** by front-ends (:meth:`LiveDemand.expect`): tasks that exist in the user's program but
  wait on their inputs there (Parsl's DataFlowKernel holds them until their dependencies are done), so
  that the next stage's width is known before its first task is submitted; or tasks that could run now
  but wait for cores to be offered (``ready=True``: a Mesos framework launches only on offers), which
  makes their stage ready at once.

A stage is *ready* once one of its tasks can run (queued in the pool). It is *complete* once nothing of it
is outstanding (held, announced, queued or running) and either a later stage of the plan has work, or it
has been idle for ``idle_timeout`` seconds (as HyperQueue's allocation queues release idle workers): a
user's loop that submits one task at a time does not release its allocation between two tasks. A stage
whose front-end said no more will come (``final``: a Mesos framework removed) completes at once: until
``idle_timeout`` its width would keep asking for cores.
A complete stage that gets new tasks is open again. Strategies need nothing else: see
``docs/guide/front-door.md``.

Each stage's task counts (held, announced, queued, running, done, failed) are kept here and nowhere else, in
a :class:`~elastic.control.counts.StageCounts` that follows each task by its id, so that they are right by
construction; they change from user threads (submit) and from the controller's thread (task events),
under one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from elastic.control.attempts import Attempts, lost_alone
from elastic.control.counts import StageCounts
from elastic.control.work import EventSink
from elastic.metrics import Event, EventKind
from elastic.strategies.base import StageView
from elastic.workflow import Stage, Workflow

__all__ = ["LiveDemand"]


@dataclass(slots=True)
class _Stage:
    name: str
    planned: int = 0  # tasks the declared plan says it has
    cores: int = 1
    depends_on: dict[str, None] = field(default_factory=dict)
    runtime: float | None = None  # declared mean task runtime (backend seconds)
    estimates: float = 0.0  # sum of the estimates of its tasks (backend seconds)
    estimated: int = 0
    counts: StageCounts = field(default_factory=StageCounts)
    expected_ready: bool = False  # the announced tasks could run now (they wait for cores, not inputs)
    withdrawn: bool = False  # its front-end said no more will come: complete once nothing is left
    expected_runtime: float | None = None  # the announced tasks' runtime estimate (backend seconds)
    ready_time: float | None = None
    first_start: float | None = None
    last_end: float | None = None
    end_time: float | None = None
    idle_since: float | None = None
    starved: float = 0.0  # seconds since its first start with none of its tasks running and some queued
    starved_since: float | None = None  # start of the current such gap
    attempts: Attempts = field(default_factory=Attempts)
    lost_spans: list[tuple[float, float]] = field(default_factory=list)  # (start, loss) of lost attempts
    kept_spans: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of ended ones
    alone: tuple[int, int, float] = (0, 0, 0.0)  # lost_alone of the spans, with their counts then


class LiveDemand:
    """The work user code submits, stage by stage (see the module docstring).

    Parameters
    ----------
    name : str
        Workflow name (runtime history and plans are kept under it).
    record : callable
        Event sink for STAGE_READY and STAGE_END.
    clock : callable
        The backend's clock (events from user threads are stamped with it).
    plan : Workflow or None, default None
        Declared (or remembered) stages; runtimes in backend seconds.
    idle_timeout : float, default 300.0
        Backend seconds a stage with nothing outstanding stays open when no later stage has work.
    speedup : float, default 1.0
        Backend seconds per real second: task estimates (real seconds) are scaled by it.
    """

    def __init__(
        self,
        name: str,
        *,
        record: EventSink,
        clock: Callable[[], float],
        plan: Workflow | None = None,
        idle_timeout: float = 300.0,
        speedup: float = 1.0,
    ) -> None:
        self.name = name
        self.idle_timeout = idle_timeout
        self.speedup = speedup
        self._record = record
        self._clock = clock
        self._lock = threading.Lock()
        self._stages: dict[str, _Stage] = {}
        self._closing = False
        self._finished = False
        self._plan: Workflow | None = None
        self._changes = 0  # bumped by every change a stage's view shows (under the lock)
        self._views: tuple[int, Workflow | None, tuple[StageView, ...]] = (-1, None, ())
        for s in plan.stages if plan is not None else ():
            st = self._stage(s.name)
            st.planned = s.tasks
            st.cores = s.cores
            st.runtime = s.runtime
            st.depends_on.update(dict.fromkeys(s.depends_on or ()))

    # -- from user threads ---------------------------------------------------------------------------

    def held(self, stage: str, cores: int, estimate: float | None, after: Iterable[str] = ()) -> None:
        """Count a task of ``stage`` that exists but waits for tasks of the stages ``after``."""
        with self._lock:
            st = self._add(stage, cores, estimate, after)
            st.counts.hold()
            self._changes += 1

    def released(self, stage: str, *, task: str | None) -> None:
        """Count a held task as queued in the pool as ``task``, or dropped (``None``: it will not run).

        Raises
        ------
        ValueError
            No task of ``stage`` is held.
        """
        with self._lock:
            self._stage(stage).counts.unhold(task)
            self._changes += 1

    def queued(
        self, stage: str, cores: int, estimate: float | None, after: Iterable[str] = (), *, task: str
    ) -> None:
        """Count ``task`` of ``stage`` as queued in the pool (before the pool has it: its events follow)."""
        with self._lock:
            self._add(stage, cores, estimate, after).counts.enqueue(task)
            self._changes += 1

    def expect(
        self,
        stage: str,
        tasks: int,
        *,
        cores: int = 1,
        after: Iterable[str] = (),
        ready: bool = False,
        runtime: float | None = None,
        final: bool = False,
    ) -> None:
        """Say that ``tasks`` tasks of ``stage`` exist in the user's program but are not submitted yet.

        The count replaces the previous one of the stage (front-ends call it with what they see now).
        ``ready``: they could run now and wait only for cores (the stage is ready once announced so).
        ``runtime``: their mean runtime estimate (real seconds), the stage's runtime until a declared one
        or the estimates of its submitted tasks say otherwise (walltimes are asked from it).
        ``final`` (with ``tasks`` 0): no more will come from the front-end (a Mesos framework removed), so
        the stage completes once nothing of it is outstanding, without waiting ``idle_timeout``.
        """
        with self._lock:
            self._changes += 1
            st = self._add(stage, cores, None, after)
            st.counts.announce(tasks)
            # its front-end is gone: until idle_timeout its width would still ask for cores
            st.withdrawn = final and tasks == 0
            st.expected_ready = ready
            if runtime is not None:
                if st.expected_runtime is None:
                    self._plan = None
                st.expected_runtime = runtime * self.speedup

    def close(self) -> None:
        """Say that the user is done submitting: every stage with nothing outstanding is complete."""
        with self._lock:
            self._closing = True

    def finish(self) -> None:
        """Say that the run is ending: no work will come that needs cores (:attr:`done` from now on)."""
        with self._lock:
            self._finished = True

    # -- from the controller's thread ----------------------------------------------------------------

    @property
    def plan(self) -> Workflow:
        """The stages known now, in the order they became known."""
        with self._lock:
            if self._plan is None:
                self._plan = self._build_plan()
            return self._plan

    @property
    def done(self) -> bool:
        """Never by itself: the user may submit more at any time; once the front door ends the run."""
        return self._finished

    def observe(self, event: Event) -> None:
        """Move the task of a start, end, failure, loss or drop to its next phase in its stage's counts."""
        kind = event.kind
        task = event.task
        if event.stage is None or task is None or kind not in _TASK_KINDS:
            return
        with self._lock:
            self._changes += 1
            st = self._stage(event.stage)
            c = st.counts
            if kind is EventKind.TASK_START:
                st.attempts.start(task, event.time)
                c.started(task)
                if st.first_start is None:
                    st.first_start = event.time
                if st.starved_since is not None:
                    st.starved += max(0.0, event.time - st.starved_since)
                    st.starved_since = None
                return
            begun = st.attempts.started.get(task)
            if begun is not None:  # this attempt's span (kept ones only matter beside lost ones)
                spans = st.lost_spans if kind is EventKind.TASK_LOST else st.kept_spans
                spans.append((begun, event.time))
            if kind is EventKind.TASK_LOST:
                st.attempts.lost(task, event.time)
                c.lost(task)  # queued again by the pool (a TASK_DROPPED follows if it may not run again)
            else:
                st.attempts.end(task, event.time)
                c.ended(task, ok=kind is EventKind.TASK_END)
                if kind is EventKind.TASK_DROPPED:
                    return
                if kind is EventKind.TASK_END:
                    st.last_end = event.time if st.last_end is None else max(st.last_end, event.time)
            if c.running == 0 and c.queued > 0:
                # its tasks now wait for cores (a gap with nothing queued waits for inputs: that is runtime)
                st.starved_since = event.time

    def update(self, now: float) -> None:
        """Open and complete stages (recording STAGE_READY and STAGE_END)."""
        with self._lock:
            order = list(self._stages.values())
            for i, st in enumerate(order):
                c = st.counts
                waiting = c.expected and st.expected_ready
                if st.ready_time is None and (c.queued or c.running or c.done or c.failed or waiting):
                    self._changes += 1
                    st.ready_time = now if st.first_start is None else min(now, st.first_start)
                    self._record(Event(st.ready_time, EventKind.STAGE_READY, stage=st.name))
                if c.outstanding:
                    st.idle_since = None
                    if st.end_time is not None:
                        self._changes += 1
                        st.end_time = None  # new work: open again
                    continue
                if st.ready_time is None or st.end_time is not None:
                    continue
                if st.idle_since is None:
                    st.idle_since = now
                later = st.withdrawn or any(o.counts.known for o in order[i + 1 :])
                if later or self._closing or now - st.idle_since >= self.idle_timeout:
                    # A task event can arrive between the step taking ``now`` and this update; the step
                    # stamps what it does at ``now``, so a stage it sees ended ended no later than that.
                    self._changes += 1
                    st.end_time = min(st.last_end, now) if st.last_end is not None else now
                    self._record(Event(st.end_time, EventKind.STAGE_END, stage=st.name))

    def next_idle_end(self) -> float | None:
        """When the earliest stage idle now completes by ``idle_timeout`` (None: no stage is idle).

        Run control wakes at its poll interval, or at a task event; a stage idle since its last task had
        to wait for the next of those to complete (with ``idle_timeout=5`` and a 30-s poll, after 30 s).
        """
        with self._lock:
            ends = [
                st.idle_since + self.idle_timeout
                for st in self._stages.values()
                if st.idle_since is not None and st.end_time is None and st.ready_time is not None
            ]
        return min(ends, default=None)

    def stages(self) -> tuple[StageView, ...]:
        """Progress of every known stage, in plan order (none before the first task or announcement).

        The same tuple while nothing it shows changed: run control asks for it twice per step, and a
        front door's step comes at every task event (rebuilding it was most of a long run's control CPU).
        """
        plan = self.plan
        views = []
        with self._lock:
            if not self._stages:
                return ()
            changes, seen_plan, seen = self._views
            if changes == self._changes and seen_plan is plan:
                return seen
            for i, s in enumerate(plan.stages):
                st = self._stages.get(s.name) or _Stage(s.name)
                c = st.counts
                floor, waiting = st.attempts.rerun_floor() or (None, 0)
                views.append(
                    StageView(
                        s.name,
                        i,
                        max(1, c.known, st.planned),
                        s.cores,
                        s.depends_on or (),
                        done=c.done + c.failed,
                        running=c.running,
                        ready_time=st.ready_time,
                        start_time=st.first_start,
                        end_time=st.end_time,
                        runtime=_runtime(st),
                        rerun_end=st.attempts.rerun_end(),
                        rerun_floor=floor,
                        rerun_waiting=waiting,
                        running_since=st.attempts.oldest_start(),
                        queued=c.queued,
                        outstanding=c.outstanding,
                        awaiting_offers=c.expected if st.expected_ready else 0,
                    )
                )
            out = tuple(views)
            self._views = (self._changes, plan, out)
        return out

    def taken(self) -> dict[str, int]:
        """Tasks taken so far by stage (:attr:`~elastic.control.counts.StageCounts.taken`), announced not."""
        with self._lock:
            return {name: st.counts.taken for name, st in self._stages.items()}

    def outstanding(self) -> int:
        """Tasks held, announced, queued or running, over every stage."""
        with self._lock:
            return sum(s.counts.outstanding for s in self._stages.values())

    # -- internals (lock held) -------------------------------------------------------------------------

    def _stage(self, name: str) -> _Stage:
        st = self._stages.get(name)
        if st is None:
            st = self._stages[name] = _Stage(name)
            self._plan = None
        return st

    def _add(self, stage: str, cores: int, estimate: float | None, after: Iterable[str]) -> _Stage:
        st = self._stage(stage)
        if cores > st.cores:
            st.cores = cores
            self._plan = None
        for dep in after:
            if dep != stage and dep not in st.depends_on:
                self._stage(dep)
                st.depends_on[dep] = None
                self._plan = None
        if estimate is not None:
            st.estimates += estimate * self.speedup
            st.estimated += 1
        known = st.counts.known
        if known == 0 or known + 1 > st.planned:
            self._plan = None  # the width changes
        return st

    def _build_plan(self) -> Workflow:
        stages: list[Stage] = []
        seen: set[str] = set()
        for st in self._stages.values():
            runtime = st.runtime
            if runtime is None and st.estimated:
                runtime = max(st.estimates / st.estimated, 1e-3)
            if runtime is None and st.expected_runtime is not None:
                runtime = max(st.expected_runtime, 1e-3)
            deps = tuple(d for d in st.depends_on if d in seen)  # only earlier stages: the order they came in
            stages.append(
                Stage(st.name, max(1, st.counts.known, st.planned), st.cores, runtime, depends_on=deps)
            )
            seen.add(st.name)
        if not stages:
            stages.append(Stage("default", 1, 1, None, depends_on=()))
        return Workflow(self.name, tuple(stages))


_TASK_KINDS = frozenset(
    {
        EventKind.TASK_START,
        EventKind.TASK_END,
        EventKind.TASK_FAILED,
        EventKind.TASK_LOST,
        EventKind.TASK_DROPPED,
    }
)


def _runtime(st: _Stage) -> float | None:
    """Return a complete stage's first start to end, less the gaps when its queued tasks waited for cores.

    And less the seconds when only attempts later lost ran (:func:`~elastic.control.attempts.lost_alone`:
    each runs again from scratch, so its seconds are not part of the stage's runtime).
    """
    if st.end_time is None or st.first_start is None:
        return None
    alone = 0.0
    if st.lost_spans:
        counts = (len(st.lost_spans), len(st.kept_spans))
        if st.alone[:2] != counts:  # the views are rebuilt at every change of any stage: once per change here
            st.alone = (*counts, lost_alone(st.lost_spans, st.kept_spans))
        alone = st.alone[2]
    return max(0.0, st.end_time - st.first_start - st.starved - alone)
