"""What strategies know: queue-wait predictions and runtime history turned into durations and walltimes.

:class:`Knowledge` is the one place strategies ask

- how long an allocation of ``c`` cores will wait: one value (:meth:`Knowledge.predict_wait`) or the
  distribution (:meth:`Knowledge.wait_quantiles`), from any :class:`~elastic.learners.base.WaitPredictor`
  keyed by
  :func:`elastic.learners.asa_grid.geometry_key`. Waits are also kept apart by *phase*: the first allocation
  of a
  run (nothing of the run holds cores when it becomes eligible) and follow-ups (another allocation of the
  run holds, or held, cores by then), which differ by hours on a queue whose cores, once released by a
  run, go back to it first (HPC2N's capacity mode: first waits of hours, follow-ups of minutes);
- how long a stage (or, with label ``"*"``, the whole workflow) will run, given how long it has run already
  ("its runtime history and its progress so far");
- how long one task of a stage runs, the estimate walltime-aware placement starts it by
  (:meth:`Knowledge.task_estimate`): a task-level figure, learned apart from the stage's runtime;
- which walltime to request next for a stage: the next value of its speculative reservation sequence
  (:mod:`elastic.learners.walltime`, fitted on the censored runtime history), given the requests already made.

Runtime history lives in a :class:`RuntimeHistory`: the project's :class:`~elastic.store.Store` fits the
protocol as is (so history persists across runs); :class:`MemoryHistory` keeps it in memory for pure
simulation. Before ``min_history`` runtimes exist the workflow's own estimate (each stage's mean task
runtime) is the prior: first request ``slack`` x the estimate, then doubling (the classical HPC habit).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from elastic.errors import ConfigError
from elastic.strategies.runtime_history import (
    BoolArray,
    FloatArray,
    MemoryHistory,
    RuntimeHistory,
    WaitStore,
    task_label,
)
from elastic.workflow import Workflow

if TYPE_CHECKING:
    from elastic.learners.base import LearnerStateStore

__all__ = ["OUTLIVED", "TOTAL", "Knowledge", "MemoryHistory", "RuntimeHistory", "WaitStore", "task_label"]

logger = logging.getLogger(__name__)

TOTAL = "*"
"""Label of the whole workflow (Big-Job allocations, total-runtime history)."""

OUTLIVED = 1.1
"""A stage that has run longer than every estimate of it is expected to take this many times as long as
it has run so far (:meth:`Knowledge.expected_duration`)."""


class _Predictor(Protocol):
    def predict(self, key: str) -> float: ...

    def observe(self, key: str, wait: float) -> Any: ...


class Knowledge:
    """Wait predictions, expected durations and walltime requests for one workflow.

    Parameters
    ----------
    workflow : Workflow
        The workflow being run.
    waits : WaitPredictor or None, default None
        Queue-wait learner (e.g. :class:`elastic.learners.asa.ASAEstimator`); ``None`` predicts 0 s (no
        learning).
    history : RuntimeHistory or None, default None
        Stage runtime history; ``None`` = a fresh :class:`MemoryHistory`.
    wait_store : WaitStore or None, default None
        Where every observed wait is also kept (the store), if anywhere.
    partition, user, backend : str or None
        Passed to :func:`elastic.learners.asa_grid.geometry_key` and the wait store.
    min_history : int, default 3
        Runtimes needed before the history replaces the workflow's own estimate.
    slack : float, default 1.5
        First walltime request = ``slack`` x the prior estimate while history is short (> 1).
    max_walltime : float or None, default None
        Requests are capped here (the partition limit).
    overhead : float, default 60.0
        Seconds added to every walltime request for starting agents and noticing the start (a stage's
        recorded runtime runs from its first task start, later than its allocation's start).
    default_runtime : float, default 3600.0
        Prior task runtime of a stage whose plan gives none (and no task brought an estimate), seconds.
    shared : LearnerStateStore or None, default None
        Where the wait learner's state is shared with other runs (the store): every observed wait is
        learned into it atomically when it is made (:func:`elastic.learners.base.observe_shared`), and a
        prediction
        starts from its latest state (read at most every ``refresh`` seconds per geometry), so concurrent
        runs never lose each other's observations.
    learner_name : str, default "asa"
        Name the learner's state is shared under (:func:`elastic.learners.choice.shared_name` of the learner).
    refresh : float, default 60.0
        Real seconds a shared state read for a prediction is reused.
    """

    def __init__(
        self,
        workflow: Workflow,
        *,
        waits: _Predictor | None = None,
        history: RuntimeHistory | None = None,
        wait_store: WaitStore | None = None,
        partition: str | None = None,
        user: str | None = None,
        backend: str | None = None,
        min_history: int = 3,
        slack: float = 1.5,
        max_walltime: float | None = None,
        overhead: float = 60.0,
        default_runtime: float = 3600.0,
        shared: LearnerStateStore | None = None,
        learner_name: str = "asa",
        refresh: float = 60.0,
    ) -> None:
        if slack <= 1.0:
            raise ConfigError(f"Knowledge: slack must be > 1, got {slack}")
        if not default_runtime > 0:
            raise ConfigError(f"Knowledge: default_runtime must be > 0 seconds, got {default_runtime}")
        self.workflow = workflow
        self.waits = waits
        self.history: RuntimeHistory = MemoryHistory() if history is None else history
        self.wait_store = wait_store
        self.partition = partition
        self.user = user
        self.backend = backend
        self.min_history = min_history
        self.slack = slack
        self.max_walltime = max_walltime
        self.overhead = overhead
        self.default_runtime = default_runtime
        self.shared = shared
        self.learner_name = learner_name
        self.refresh = refresh
        self._loaded: dict[str, float] = {}
        self._cache: dict[str, tuple[FloatArray, BoolArray]] = {}
        self._priors: tuple[Workflow | None, dict[str, float]] = (None, {})
        # expected_duration(label) of a stage not started, by label, for the (workflow, min_history,
        # default_runtime) it was computed with: the rules sum it over every stage left at every decision
        self._unstarted: tuple[tuple[object, ...], dict[str, float]] = ((), {})
        # each label's prior_duration, for the workflow it was computed from (strategies ask for every
        # stage's at every decision)
        self._requests: dict[tuple[str, int, tuple[float, ...]], float | None] = {}
        """Learned walltime requests by (label, runtimes seen, requests already made)."""
        self._recorded: list[str] = []  # the label of every runtime recorded, in order (recorded_since)
        self.version = 0
        """Waits and runtimes fed so far (:meth:`observe_wait`, :meth:`record_runtime`): what was derived
        from this knowledge may be reused while it is the same."""
        self.predictions = 0
        """Calls of :meth:`predict_wait` so far. A learner may draw its prediction at random (the paper's
        ASA learner), so a decision that asked for one cannot be taken as repeatable: run control reuses
        a decision only if making it asked for none (:class:`~elastic.strategies.base.Settles`)."""

    # -- queue waits ------------------------------------------------------------------------------

    def wait_key(self, cores: int | None, follow_up: bool | None = None) -> str:
        """Return the learner key of an allocation of ``cores`` cores (of one phase, if ``follow_up`` is set).

        ``cores=None`` is every geometry together (a phase's waits of all widths).

        Examples
        --------
        >>> from elastic.workflow import builtin_workflow
        >>> k = Knowledge(builtin_workflow("demo3"))
        >>> k.wait_key(28), k.wait_key(28, follow_up=True), k.wait_key(None, follow_up=False)
        ('cores=17-32', 'cores=17-32/follow-up', 'cores=any/first')
        """
        from elastic.learners.asa_grid import geometry_key

        key = geometry_key(1 if cores is None else cores, self.partition, self.user)
        if cores is None:
            key = "cores=any" + key[key.index("/") :] if "/" in key else "cores=any"
        if follow_up is None:
            return key
        return f"{key}/{'follow-up' if follow_up else 'first'}"

    def _fresh(self, key: str) -> None:
        """Load the shared state of ``key`` into the predictor if our copy is older than ``refresh``."""
        if self.waits is None or self.shared is None:
            return
        if time.monotonic() - self._loaded.get(key, -math.inf) >= self.refresh:
            from elastic.learners.base import load_shared

            load_shared(self.waits, self.shared, self.learner_name, key)  # type: ignore[type-var]
            self._loaded[key] = time.monotonic()

    def predict_wait(self, cores: int) -> float:
        """Predicted queue wait in seconds for ``cores`` cores, every phase together.

        0 without a learner, and while the learner has seen no wait of this geometry (a learner that
        predicts only what it has seen, such as :class:`~elastic.learners.ewma.LogEWMA`, has nothing to say
        yet).
        """
        from elastic.learners.base import NotFittedError

        self.predictions += 1
        if self.waits is None:
            return 0.0
        key = self.wait_key(cores)
        self._fresh(key)
        try:
            return max(0.0, float(self.waits.predict(key)))
        except NotFittedError:
            return 0.0

    def wait_quantiles(
        self, cores: int, probs: Sequence[float], *, follow_up: bool | None = None
    ) -> FloatArray:
        """Return quantiles (``probs`` in (0, 1)) of the queue wait of an allocation of ``cores`` cores.

        From the first of these the learner has seen a wait of: this geometry in this phase
        (``follow_up`` True or False), every geometry in this phase, this geometry in every phase; else 0
        s everywhere (nothing known: acquiring cores is taken as free, so a planner behaves like
        Per-Stage until it has seen the queue). A learner that gives one value only (not a
        :class:`~elastic.learners.base.WaitDistribution`) gives it for every quantile.
        """
        from elastic.learners.base import NotFittedError

        p = np.asarray(probs, dtype=np.float64)
        if self.waits is None:
            return np.zeros_like(p)
        keys = [self.wait_key(cores)]
        if follow_up is not None:
            keys[:0] = [self.wait_key(cores, follow_up), self.wait_key(None, follow_up)]
        for key in keys:
            self._fresh(key)
            try:
                quantiles = getattr(self.waits, "quantiles", None)
                if quantiles is not None:
                    out = np.asarray(quantiles(key, p), dtype=np.float64)
                else:
                    out = np.full_like(p, float(self.waits.predict(key)))
            except NotFittedError:
                continue
            return np.maximum(out, 0.0)
        return np.zeros_like(p)

    def observe_wait(
        self, cores: int, wait: float, *, submit_time: float | None = None, follow_up: bool | None = None
    ) -> None:
        """Feed one real queue wait to the learner (and the wait store).

        It is learned under the geometry's key and, when ``follow_up`` is given, under the phase's keys
        too (this geometry's and every geometry's, :meth:`wait_key`); the wait store keeps it once, under
        the geometry's key.
        """
        self.version += 1
        keys = [self.wait_key(cores)]
        if follow_up is not None:
            keys += [self.wait_key(cores, follow_up), self.wait_key(None, follow_up)]
        for key in keys:
            if self.waits is not None and self.shared is not None:
                from elastic.learners.base import observe_shared

                observe_shared(self.waits, self.shared, self.learner_name, key, max(0.0, wait))  # type: ignore[type-var]
                self._loaded[key] = time.monotonic()  # the predictor now holds the latest shared state
            elif self.waits is not None:
                self.waits.observe(key, max(0.0, wait))
        key = keys[0]
        if self.wait_store is not None:
            self.wait_store.add_wait(
                key,
                max(0.0, wait),
                cores=cores,
                user=self.user,
                backend=self.backend,
                submit_time=submit_time,
            )

    # -- runtimes ---------------------------------------------------------------------------------

    def record_runtime(
        self, label: str, runtime: float, *, censored: bool = False, cores: int | None = None
    ) -> None:
        """Add one runtime of stage ``label`` (or :data:`TOTAL`) to the history."""
        self.version += 1
        self._recorded.append(label)
        self.history.add_stage_runtime(self.workflow.name, label, runtime, censored=censored, cores=cores)
        self._cache.pop(label, None)
        self._unstarted[1].pop(label, None)
        self._requests = {k: v for k, v in self._requests.items() if k[0] != label}

    def recorded_since(self, count: int) -> tuple[int, list[str]]:
        """Return how many runtimes were recorded so far, and the labels of those after the first ``count``.

        A label's :meth:`walltime` changes only when one of its runtimes is recorded (given the attributes
        it is computed with): what was derived per label may be kept for every other one.
        """
        return len(self._recorded), self._recorded[count:]

    def _runtimes(self, label: str) -> tuple[FloatArray, BoolArray]:
        if label not in self._cache:
            self._cache[label] = self.history.stage_runtimes(self.workflow.name, label)
        return self._cache[label]

    def prior_duration(self, label: str) -> float:
        """Return the workflow's own estimate of a stage's (or the whole workflow's) execution time.

        A stage runs its tasks in one wave on an allocation as wide as the stage; the estimate is the
        mean task runtime raised by one standard deviation (the slowest of several tasks sets the end). A
        stage without a runtime counts ``default_runtime``.
        """
        if self._priors[0] is not self.workflow:  # a live plan is a new workflow when it grows
            self._priors = (self.workflow, {})
        known = self._priors[1].get(label)
        if known is not None:
            return known
        stages = self.workflow.stages if label == TOTAL else (self.workflow.stage(label),)
        self._priors[1][label] = prior = sum(
            (self.default_runtime if s.runtime is None else s.runtime)
            * (1.0 + (s.runtime_cv if s.tasks > 1 else 0.0))
            for s in stages
        )
        return prior

    def expected_duration(self, label: str, elapsed: float = 0.0) -> float:
        """Return the expected execution time of ``label`` given it has run ``elapsed`` seconds so far.

        With enough history: the mean of the recorded runtimes longer than ``elapsed`` (censored ones
        count as lasting at least their value); without: the prior estimate. A stage that has already
        outlived every estimate is expected to end soon: :data:`OUTLIVED` ``x elapsed``.
        """
        if elapsed == 0.0:
            known = self.unstarted_durations().get(label)
            if known is None:
                known = self._unstarted[1][label] = self._expected_duration(label, 0.0)
            return known
        return self._expected_duration(label, elapsed)

    def unstarted_durations(self) -> Mapping[str, float]:
        """Return the :meth:`expected_duration` of stages not started, by label, as far as known now.

        A label absent has not been asked yet (ask :meth:`expected_duration`, which fills it in). Valid
        until the next :meth:`record_runtime` or change of :attr:`workflow`, ``min_history`` or
        ``default_runtime``; the rules that sum the work left over every stage at every decision read
        it instead of calling :meth:`expected_duration` for each.
        """
        key = (self.workflow, self.min_history, self.default_runtime)
        if self._unstarted[0] != key:
            self._unstarted = (key, {})
        return self._unstarted[1]

    def _expected_duration(self, label: str, elapsed: float) -> float:
        runtimes, _ = self._runtimes(label)
        if len(runtimes) >= self.min_history:
            longer = runtimes[runtimes > elapsed]
            if len(longer):
                return float(longer.mean())
            return OUTLIVED * elapsed
        prior = self.prior_duration(label)
        return prior if prior > elapsed else OUTLIVED * elapsed

    def expected_duration_until(self, label: str, elapsed: float = 0.0) -> float | None:
        """Return the ``elapsed`` up to which :meth:`expected_duration` keeps its value at ``elapsed``.

        :meth:`expected_duration` is a step function of ``elapsed`` (the mean of the recorded runtimes
        longer than it, or the prior) until ``elapsed`` outlives every estimate; from then on it grows with
        ``elapsed`` (``1.1 x elapsed``). The result is the ``elapsed`` at which the value first changes
        (it holds for every ``elapsed`` before it), or None where it already grows.

        Examples
        --------
        >>> from elastic.workflow import Stage, Workflow
        >>> k = Knowledge(Workflow("w", (Stage("a", 1, 1, runtime=100.0),)))
        >>> k.expected_duration("a", 20.0), k.expected_duration_until("a", 20.0)
        (100.0, 100.0)
        >>> k.expected_duration_until("a", 150.0) is None
        True
        """
        runtimes, _ = self._runtimes(label)
        if len(runtimes) >= self.min_history:
            longer = runtimes[runtimes > elapsed]
            return float(longer.min()) if len(longer) else None
        prior = self.prior_duration(label)
        return prior if prior > elapsed else None

    def task_estimate(self, label: str) -> float:
        """Return the runtime estimate of one task of stage ``label``, which placement starts it by.

        A task's figure, not the stage's (whose runtime is its slowest task: see
        ``docs/guide/strategies.md``): the mean of the recorded per-run task figures
        (:func:`task_label`: each run's mean plus one standard deviation) once ``min_history`` exist, else
        :meth:`prior_duration` (the same statistic from the model); never more than
        :meth:`expected_duration`.
        """
        runtimes, _ = self._runtimes(task_label(label))
        learned = len(runtimes) >= self.min_history
        own = float(runtimes.mean()) if learned else self.prior_duration(label)
        return min(own, self.expected_duration(label))

    def walltime(self, label: str, previous: Sequence[float] = ()) -> float:
        """Next walltime request for ``label``: the next value of its speculative sequence.

        Parameters
        ----------
        label : str
            Stage name or :data:`TOTAL`.
        previous : sequence of float
            Walltimes already requested for it in this run (each ran out); the result is larger than all.
        """
        runtimes, censored = self._runtimes(label)
        request: float | None = None
        if len(runtimes) >= self.min_history:
            # the sequence's dynamic programme is the planner's costliest step: once per history and previous
            key = (label, len(runtimes), tuple(previous))
            if key not in self._requests:
                self._requests[key] = _learned_request(runtimes, censored, previous, self.max_walltime)
            request = self._requests[key]
            if request is not None:
                # Small-sample margin: with n runtimes the empirical distribution ends at the largest
                # one seen, which underestimates the upper tail; widen by 1/sqrt(n) (x1.58 at n=3).
                request = request * (1.0 + 1.0 / math.sqrt(len(runtimes))) + self.overhead
        if request is None:
            last = max(previous, default=0.0)
            request = self.slack * self.prior_duration(label) + self.overhead
            while request <= last:
                request *= 2.0
        request = math.ceil(request)
        if self.max_walltime is not None:
            request = min(request, self.max_walltime)
        return float(request)


def _learned_request(
    runtimes: FloatArray, censored: BoolArray, previous: Sequence[float], upper: float | None
) -> float | None:
    """Next value of the TOptimal sequence learned from censored runtimes, or None to use the prior."""
    from elastic.learners.walltime import WalltimeLearner

    # Let requests go beyond the longest runtime seen (twice it), unless the partition caps them.
    top = float(runtimes.max()) * 2.0
    learner = WalltimeLearner(upper=top if upper is None else min(top, upper))
    try:
        return float(learner.fit(runtimes, censored=censored).next_request(list(previous)))
    except ConfigError:  # a previous request already reached the upper bound
        return None
