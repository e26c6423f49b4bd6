"""The driver of a declared workflow: one loop that runs it under a strategy on any backend and execution.

:class:`Runner` is what ``elastic run`` and ``elastic compare`` use. It wires a
:class:`~elastic.control.demand.DeclaredDemand` (tasks made from the stages' runtime models) to an
:class:`~elastic.control.controller.AllocationController` and steps it until every stage is complete,
sleeping with ``backend.sleep`` until the earliest of: the strategy's wake-up, the execution's next known
event, the next poll. The same code runs on the mock backend's virtual clock (sleep advances simulated
time), its scaled clock and Slurm (real sleeps). Everything that happens is recorded as
:class:`~elastic.metrics.Event` records; the run's metrics are computed from them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from elastic.backends.base import BatchBackend
from elastic.control.controller import AllocationController, learn_runtimes
from elastic.control.demand import DeclaredDemand
from elastic.control.execution import Execution, RunResult
from elastic.control.rate import SubmissionLimit, submission_limit
from elastic.control.scheduler import check_node_fit
from elastic.errors import ConfigError, ElasticError
from elastic.metrics import Event, EventKind, compute_metrics
from elastic.strategies.base import RunView, Strategy
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Workflow

__all__ = ["Runner"]

logger = logging.getLogger(__name__)


class Runner:
    """Run one declared workflow under one strategy.

    Parameters
    ----------
    workflow : Workflow
        What to run (every stage with a runtime model).
    strategy : Strategy
        When and how big to request allocations.
    backend : BatchBackend
        Where allocations come from (its clock is the run's clock).
    execution : Execution
        Where tasks run.
    knowledge : Knowledge
        Wait learner and runtime history shared with the strategy.
    seed : int, default 0
        Seeds the sampling of task durations.
    poll_interval : float, default 30.0
        Backend seconds between polls of allocation states.
    max_duration : float or None, default None
        Give up (status ``"timeout"``) after this many backend seconds.
    name : str, default "elastic"
        Prefix of batch job names.
    user : str or None, default None
        Owner of the jobs (mock backend accounting).
    on_iteration : callable or None, default None
        Called with the :class:`RunView` after every step (the CLI's live view), and once more with the
        view at the run's end, after every allocation was released.
    job_cores : int or None, default None
        Most cores in one batch job (:class:`~elastic.control.controller.AllocationController`).
    max_cores : int or None, default None
        No allocation wider; default the backend's partition (a stage wider than the partition runs in
        waves, as on the front door, instead of being refused by the batch system).
    submission_rate : SubmissionLimit or None, default None
        How fast batch jobs may be submitted (:class:`~elastic.control.rate.SubmissionLimit`; None: the
        defaults, 30 at once then 30 a minute).
    label : str or None, default None
        Names this run among several in log lines (e.g. ``"run 3 of 30"``), after the workflow, its
        widest stage, the strategy and the job width.
    """

    def __init__(
        self,
        workflow: Workflow,
        strategy: Strategy,
        backend: BatchBackend,
        execution: Execution,
        knowledge: Knowledge,
        *,
        seed: int = 0,
        poll_interval: float = 30.0,
        max_duration: float | None = None,
        name: str = "elastic",
        user: str | None = None,
        on_iteration: Callable[[RunView], None] | None = None,
        job_cores: int | None = None,
        max_cores: int | None = None,
        submission_rate: SubmissionLimit | None = None,
        label: str | None = None,
    ) -> None:
        if not poll_interval > 0:
            raise ConfigError(f"Runner: poll_interval must be > 0 seconds, got {poll_interval!r}")
        self.workflow = workflow
        self.strategy = strategy
        self.backend = backend
        self.execution = execution
        self.knowledge = knowledge
        self.max_duration = max_duration
        self.on_iteration = on_iteration
        self.label = label
        self._events: list[Event] = []
        self._demand = DeclaredDemand(
            workflow, execution, knowledge, self._events.append, np.random.default_rng(seed)
        )
        node_cores = backend.partition().node_cores
        for stage in workflow.stages:  # a task wider than a node could never run: refused before any work
            check_node_fit(stage.name, stage.cores, node_cores)
        self.controller = AllocationController(
            strategy,
            backend,
            execution,
            knowledge,
            self._demand,
            record=self._events.append,
            poll_interval=poll_interval,
            name=name,
            user=user,
            job_cores=job_cores,
            max_cores=min(backend.partition().cores, max_cores or backend.partition().cores),
            node_cores=node_cores,
        )
        self.controller.rate = submission_limit(submission_rate).rate()

    def _label(self) -> str:
        """Name the run in a log line: workflow, widest stage, strategy, job width, and :attr:`label`."""
        jobs = self.controller.job_cores
        shape = "" if jobs is None else f" in jobs of at most {jobs} core{'s' if jobs > 1 else ''}"
        which = "" if self.label is None else f", {self.label}"
        return f"{self.workflow.name} ({self.workflow.max_width} cores), {self.strategy.name}{shape}{which}"

    @property
    def events(self) -> tuple[Event, ...]:
        """The timeline recorded so far."""
        return tuple(self._events)

    def run(self) -> RunResult:
        """Run the workflow to completion (or ``max_duration``); return the result.

        Ctrl-C (KeyboardInterrupt) and an Elastic error (a task failing under a fail-fast execution, a
        backend refusing) end the run early, ``interrupted`` or ``failed``: every allocation is released and
        the result has the metrics of what ran (attempts still running count as lost).
        """
        start = self.backend.now()
        self._events.append(Event(start, EventKind.RUN_START, note=self.strategy.name))
        status, detail = "completed", ""
        try:
            while True:
                now = self.backend.now()
                wake = self.controller.step(now)
                if wake is None:
                    break
                if self.max_duration is not None and now - start >= self.max_duration:
                    status = "timeout"
                    logger.warning(
                        "%s: gave up after %.1f h, its max_duration (a simulated run's horizon), with "
                        "stages not done: the run counts as not completed",
                        self._label(),
                        (now - start) / 3600,
                    )
                    break
                if self.on_iteration is not None:
                    self.on_iteration(self.controller.view(now))
                self.backend.sleep(max(wake - now, 1e-3))
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into it by the command line
            status, detail = "interrupted", "interrupted"
            logger.warning("%s: interrupted; releasing every allocation", self.strategy.name)
        except ElasticError as exc:  # a task failed (fail-fast execution), a backend refused...
            status, detail = "failed", str(exc)
            logger.error("%s: %s; releasing every allocation", self.strategy.name, exc)
        finally:
            end = self.backend.now()
            try:
                self.controller.shutdown(end)
            except ElasticError as exc:  # tasks lost by the release itself (retries exhausted): it is over
                logger.warning("%s: while releasing every allocation: %s", self.strategy.name, exc)
        if self.on_iteration is not None:  # the last stage's end and the release, which no step showed
            try:
                self.on_iteration(self.controller.view(end))
            except Exception as exc:  # a display of what is over never loses the run's result
                logger.warning("%s: could not show the run's last view: %s", self.strategy.name, exc)
        self._events.append(Event(end, EventKind.RUN_END, note=status))
        learn_runtimes(
            self.knowledge, self._demand.stages(), status=status, end=end, width=self.workflow.max_width
        )
        metrics = compute_metrics(self._events, stages=self.workflow.names, ended=end)
        return RunResult(self.workflow.name, self.strategy.name, status, tuple(self._events), metrics, detail)
