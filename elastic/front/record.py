"""The front door's record of its run: events, metrics, the store's run row and the run's batch job ids.

:class:`RunRecord` is what :class:`~elastic.front.door.Elastic` hands allocation control and the live demand
as their ``record`` callback. It keeps

- the run's events: every one goes to a :class:`~elastic.metrics.MetricsRecorder` (task events are folded
  into it, not kept), the others also to the timeline of the :class:`~elastic.control.execution.RunResult`;
  each is passed on to the live progress, if any;
- the store's row of the run (:meth:`~elastic.store.Store.record_run` at the start,
  :meth:`~elastic.store.Store.finish_run` at the end, with the metrics and the stages that ran), and the
  batch job ids submitted so far in its parameters, so that the next front door on the same store can
  cancel the jobs of a run whose driver was killed (:func:`~elastic.front.recovery.recover_abandoned`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from elastic.control.execution import RunResult
from elastic.errors import ElasticError
from elastic.front.progress import RunProgress
from elastic.front.recovery import driver_identity, recover_abandoned
from elastic.front.setup import plan_to_json
from elastic.metrics import Event, EventKind, MetricsRecorder
from elastic.workflow import Workflow

if TYPE_CHECKING:
    from elastic.backends.base import BatchBackend
    from elastic.store import Store
    from elastic.store.resilient import ResilientStore
    from elastic.strategies.base import StageView

__all__ = ["RunRecord"]

logger = logging.getLogger("elastic.front.door")

_TASK_KINDS = frozenset(
    {
        EventKind.TASK_START,
        EventKind.TASK_END,
        EventKind.TASK_LOST,
        EventKind.TASK_FAILED,
        EventKind.TASK_DROPPED,
    }
)
"""Events folded into the metrics and not kept in the timeline (they come by thousands)."""


class RunRecord:
    """One front-door run's events, metrics and store row (see the module docstring).

    Parameters
    ----------
    store : Store, ResilientStore or None
        Where the run is recorded (None: nowhere; the events and metrics are still kept).
    """

    def __init__(self, store: Store | ResilientStore | None) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._recorder = MetricsRecorder()
        self._timeline: list[Event] = []
        self._jobs: list[str] = []
        self._job_meta: dict[str, list[str | float | None]] = {}
        self._job_of: dict[str, str] = {}  # allocation id -> its job id, while not known to have ended
        self._run_id: int | None = None
        self.progress: RunProgress | None = None
        """The live progress each event is passed on to (None: none)."""

    def start(self, workflow: str, strategy: str, backend: BatchBackend) -> None:
        """Cancel what abandoned runs left in ``backend``, then record this run in the store (if any)."""
        if self._store is None:
            return
        recover_abandoned(self._store, backend)
        self._run_id = self._store.record_run(
            workflow, strategy, backend.name, params={"frontdoor": True, "driver": driver_identity()}
        )

    def add(self, event: Event) -> None:
        """Record ``event`` (any thread); a submitted batch job's id is kept in the store's run row."""
        with self._lock:
            self._recorder.add(event)
            if event.kind not in _TASK_KINDS:  # task events are folded in, not kept
                self._timeline.append(event)
        if event.kind is EventKind.ALLOC_SUBMIT and event.job_id is not None:
            self._remember_job(event.job_id, event.allocation, event.time)
        elif event.kind is EventKind.ALLOC_END and event.allocation is not None:
            with self._lock:  # ended: no longer one to cancel (written with the next job's record)
                job = self._job_of.pop(event.allocation, None)
                if job is not None:
                    self._job_meta.pop(job, None)
        if self.progress is not None:
            self.progress.event(event)

    def _remember_job(self, job_id: str, allocation: str | None, submitted: float) -> None:
        """Keep the run's batch jobs in the store, so a run whose driver was killed can be cleaned up.

        The next front door on the same store finds such a run
        (:func:`~elastic.front.recovery.recover_abandoned`) and cancels these jobs; a store that cannot be
        written only loses that safety net. With the id of each job not known to have ended go its
        allocation and submit time (``job_meta``): a job id alone may name another job by then (another
        cluster, ids reused). Only those, so a run of thousands of jobs does not write them all each time
        (a random scenario of 43 stages took 5.7 s with ids alone, minutes with every job's record).
        """
        with self._lock:
            self._jobs.append(job_id)
            self._job_meta[job_id] = [allocation, submitted]
            if allocation is not None:
                self._job_of[allocation] = job_id
            params = {"jobs": list(self._jobs), "job_meta": dict(self._job_meta)}
        if self._store is None or self._run_id is None:
            return
        try:
            self._store.add_run_params(self._run_id, params)
        except ElasticError as exc:
            logger.warning("front door: cannot record batch job %s in the store: %s", job_id, exc)

    def end(self, status: str, at: float) -> None:
        """End the task attempts still running and record the run's end (``status``) at ``at``."""
        with self._lock:
            for task in self._recorder.running_tasks:  # left running when the run stopped
                logger.info("front door: task attempt %s was still running at the end", task)
            self._recorder.end_running(at)
            self._recorder.add(Event(at, EventKind.RUN_END, note=status))
            self._timeline.append(Event(at, EventKind.RUN_END, note=status))
        if self.progress is not None:
            self.progress.event(Event(at, EventKind.RUN_END, note=status))

    def finish(
        self, workflow: str, strategy: str, status: str, plan: Workflow, stages: Sequence[StageView]
    ) -> RunResult:
        """Return the ended run's result and keep it in the store, with the stages that ran when completed.

        Call :meth:`end` first. ``plan`` is the demand's plan, ``stages`` its stages at the end.
        """
        metrics = self._recorder.metrics(stages=plan.names)
        if self._store is not None and self._run_id is not None:
            summary = {k: (None if v != v else v) for k, v in metrics.summary().items()}
            self._store.finish_run(
                self._run_id,
                status,
                summary,
                params={"plan": plan_seen(plan, stages) if status == "completed" else None},
            )
        logger.info("front door: run %s, makespan %.0f s", status, metrics.makespan)
        return RunResult(workflow, strategy, status, tuple(self._timeline), metrics)


def plan_seen(plan: Workflow, stages: Sequence[StageView]) -> list[dict[str, Any]] | None:
    """Return the stages of ``plan`` that had a task in this run, as the store keeps plans (None: none did).

    A stage remembered from an earlier run or declared, that got no task this time (the script changed),
    is not carried on to the next run; a run in which no task ran leaves no plan at all (no placeholder).
    """
    ran = {s.name for s in stages if s.ready}
    kept = [
        dataclasses.replace(s, depends_on=tuple(d for d in (s.depends_on or ()) if d in ran))
        for s in plan.stages
        if s.name in ran
    ]
    return plan_to_json(Workflow(plan.name, tuple(kept))) if kept else None
