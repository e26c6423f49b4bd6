"""Evaluate queue-wait predictors online over a real trace (and re-export the Figure 5 convergence run).

**Online trace evaluation** (:class:`OnlineEvaluation`). For each geometry class (a core range around a
target size, :meth:`GeometryClass.around`), every job of the class with a known recorded wait is
replayed as two events: at its submit time each predictor *predicts* its wait; at its start time
(submit + recorded wait), and never earlier, each predictor *observes* the true wait. Events are
processed in time order from a heap-ordered array (ties: observations before predictions at the same
instant, since a wait is known at its start time, then trace order). Each predictor instance serves all
classes, one key per class (``"cores=LOW-HIGH"``, which :func:`elastic.learners.asa_grid.key_cores`
understands).

A predictor that cannot predict yet (:class:`~elastic.learners.base.NotFittedError` or
:class:`~elastic.learners.base.PredictionUnavailableError`) is scored as predicting 0 s, i.e. submitting when
the resources are needed (the Per-Stage behaviour); ``coverage`` reports how often it did predict.

Metrics per predictor and class, with ``w`` the true wait, ``x`` the prediction, ``c`` the job's cores:

- ``rank_corr``: Spearman rank correlation between ``x`` and ``w`` over the class's jobs: whether the
  predictor tells a long wait coming from a short one, i.e. follows the queue (NaN when ``x`` or ``w``
  is constant, e.g. the always-0 predictor);
- ``hit``/``over``/``under``: share of jobs whose prediction snapped to the grid is the grid value
  closest to ``w`` / a larger one / a smaller one (ASA predictions are grid values already);
- ``mae``: mean ``|x - w|`` in seconds;
- ``idle_core_s``: sum of ``c * max(x - w, 0)``, core-seconds an allocation submitted ``x`` seconds
  ahead would idle because it started early;
- ``delay_s``: sum of ``max(w - x, 0)``, seconds the stage would wait because it started late;
- ``cost``: ``idle_core_s + delay_s``.

**Convergence experiment**: the paper's Figure 5, in :mod:`elastic.learners.convergence` (its names are
importable from here too).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

from elastic.errors import ConfigError, UnknownNameError
from elastic.learners.asa import ASAEstimator
from elastic.learners.asa_grid import DEFAULT_GRID, nearest_index
from elastic.learners.base import NotFittedError, PredictionUnavailableError, WaitPredictor
from elastic.learners.baselines import LastWait, QBETSUpperBound, RunningMean, RunningMedian, RunningQuantile
from elastic.learners.convergence import (
    ConvergenceResult,
    convergence_experiment,
    iterations_to_converge,
    plot_convergence,
)
from elastic.learners.ewma import LogEWMA
from elastic.learners.reference import AlwaysZero
from elastic.simulator.workload import Workload

__all__ = [
    "DEFAULT_CLASSES",
    "DEFAULT_PREDICTORS",
    "PREDICTORS",
    "ConvergenceResult",
    "GeometryClass",
    "OnlineEvaluation",
    "convergence_experiment",
    "evaluate_online",
    "iterations_to_converge",
    "make_predictor",
    "plot_convergence",
]

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

DEFAULT_CLASSES: tuple[int, ...] = (28, 56, 112)
"""Target core counts of the ASA paper's HPC2N experiments."""

PREDICTORS: dict[str, Callable[[int | None], WaitPredictor]] = {
    "asa-default": lambda seed: ASAEstimator(policy="default", random_state=seed),
    "asa-tuned": lambda seed: ASAEstimator(policy="tuned", random_state=seed),
    "asa-greedy": lambda seed: ASAEstimator(policy="greedy", random_state=seed),
    "asa-cost": lambda seed: ASAEstimator(policy="tuned", loss="cost", random_state=seed),
    "asa-floor": lambda seed: ASAEstimator(policy="tuned", eta_min=0.1, random_state=seed),
    "last": lambda seed: LastWait(),
    "mean": lambda seed: RunningMean(),
    "median": lambda seed: RunningMedian(),
    "qbets": lambda seed: QBETSUpperBound(),
    "zero": lambda seed: AlwaysZero(),
    "q25": lambda seed: RunningQuantile(window=10, quantile=0.25),
    "ewma": lambda seed: LogEWMA(alpha=0.3),
}
"""Predictor names of ``elastic waits --predictors``, each a factory taking a seed.

``asa-cost`` is ``asa-tuned`` with the cost-aware loss; ``asa-floor`` is ``asa-tuned`` with the
learning-rate floor ``eta_min=0.1``. ``zero`` always predicts 0 s (Per-Stage's behaviour); ``q25`` is the
0.25 quantile of the last 10 waits; ``ewma`` the median of a log-normal fitted to the recent waits with
weight 0.3 on the newest (:class:`~elastic.learners.ewma.LogEWMA`). The windows and weights of ``q25`` and
``ewma`` were chosen on the HPC2N trace (``docs/guide/learners.md``). The scheduler baseline
(:class:`~elastic.learners.reference.SchedulerEstimate`) needs a live backend, so it is not replayable here.
"""

DEFAULT_PREDICTORS: tuple[str, ...] = (
    "zero",
    "asa-default",
    "asa-tuned",
    "asa-greedy",
    "last",
    "mean",
    "median",
    "q25",
    "ewma",
    "qbets",
)
"""Predictors evaluated when none are named."""


def make_predictor(name: str, seed: int | None = 0) -> WaitPredictor:
    """Return a fresh predictor by name (see :data:`PREDICTORS`).

    Raises
    ------
    UnknownNameError
        ``name`` is not in :data:`PREDICTORS`; the message lists the names.
    """
    try:
        factory = PREDICTORS[name]
    except KeyError:
        raise UnknownNameError("predictor", name, PREDICTORS) from None
    return factory(seed)


@dataclass(frozen=True, slots=True)
class GeometryClass:
    """Jobs asking for ``low`` to ``high`` cores (inclusive), named by a ``target`` size."""

    target: int
    low: int
    high: int

    @classmethod
    def around(cls, target: int) -> GeometryClass:
        """Return the class ``[ceil(target / sqrt 2), floor(target * sqrt 2)]`` cores.

        A factor sqrt(2) either side, i.e. the sizes closer (on a log scale) to ``target`` than to its
        half or double: 28 -> 20-39, 56 -> 40-79, 112 -> 80-158 cores, so the paper's three
        geometries give disjoint classes.

        Raises
        ------
        ConfigError
            ``target`` < 1.
        """
        if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or target < 1:
            raise ConfigError(
                f"GeometryClass: parameter 'target' must be an integer >= 1 core; got {target!r}"
            )
        return cls(int(target), math.ceil(target / math.sqrt(2)), math.floor(target * math.sqrt(2)))

    @property
    def key(self) -> str:
        """Predictor key of the class, ``"cores=LOW-HIGH"``."""
        return f"cores={self.low}-{self.high}"


# Event kinds; at the same instant observations sort first (the wait is known at the start time).
_OBSERVE, _PREDICT = 0, 1


class OnlineEvaluation:
    """Replay the jobs of some geometry classes of a trace through wait predictors, online.

    Parameters
    ----------
    workload : Workload
        Jobs with their ``recorded_wait`` (jobs whose wait is NaN or negative are skipped).
    classes : sequence of int or GeometryClass, default (28, 56, 112)
        Target sizes (turned into classes by :meth:`GeometryClass.around`) or explicit classes.
    grid : sequence of float or None, default None
        Grid used to score hits (:data:`elastic.learners.asa_grid.DEFAULT_GRID` if None); use the ASA
        estimators'.

    Attributes
    ----------
    now : float
        Time of the event being processed (the trace's clock), so instrumented predictors can check
        they are never shown a wait before it is known.
    """

    def __init__(
        self,
        workload: Workload,
        *,
        classes: Sequence[int | GeometryClass] = DEFAULT_CLASSES,
        grid: Sequence[float] | None = None,
    ) -> None:
        if not classes:
            raise ConfigError("OnlineEvaluation: parameter 'classes' must name at least one geometry class")
        self.workload = workload
        self.classes = tuple(c if isinstance(c, GeometryClass) else GeometryClass.around(c) for c in classes)
        self.grid = np.asarray(DEFAULT_GRID if grid is None else grid, dtype=np.float64)
        self._now = -math.inf
        known = np.isfinite(workload.recorded_wait) & (workload.recorded_wait >= 0)
        self.jobs: list[npt.NDArray[np.int64]] = [
            np.flatnonzero(known & (workload.cores >= c.low) & (workload.cores <= c.high))
            for c in self.classes
        ]
        # One row per event: (time, kind, class, job); sorted by time, then kind, then job order.
        parts = []
        for ci, jobs in enumerate(self.jobs):
            submit = workload.submit[jobs]
            start = submit + workload.recorded_wait[jobs]
            for kind, times in ((_PREDICT, submit), (_OBSERVE, start)):
                parts.append((times, np.full(len(jobs), kind), np.full(len(jobs), ci), jobs))
        times = np.concatenate([p[0] for p in parts])
        kinds = np.concatenate([p[1] for p in parts])
        cls = np.concatenate([p[2] for p in parts])
        job = np.concatenate([p[3] for p in parts])
        order = np.lexsort((job, cls, kinds, times))
        self._events = (times[order], kinds[order], cls[order], job[order])

    @property
    def now(self) -> float:
        """Time of the event being processed, in seconds on the trace's clock."""
        return self._now

    def run(self, predictors: Mapping[str, WaitPredictor]) -> pd.DataFrame:
        """Replay every event through every predictor and return one metrics row per predictor x class.

        Parameters
        ----------
        predictors : mapping of str to WaitPredictor
            Fresh predictors by display name; each serves every class (one key per class).

        Returns
        -------
        pandas.DataFrame
            Columns ``predictor, cores, low, high, jobs, coverage, rank_corr, hit, over, under, mae,
            idle_core_s, delay_s, cost`` (see the module docstring).
        """
        wl = self.workload
        names = list(predictors)
        keys = [c.key for c in self.classes]
        # Per class, predictions are stored per job; a job in two overlapping classes gets one per class.
        per_class = {
            (name, ci): np.full(len(wl), np.nan) for name in names for ci in range(len(self.classes))
        }
        times, kinds, cls, job = self._events
        for t, kind, ci, j in zip(times.tolist(), kinds.tolist(), cls.tolist(), job.tolist(), strict=True):
            self._now = t
            key = keys[ci]
            if kind == _OBSERVE:
                wait = float(wl.recorded_wait[j])
                for name in names:
                    predictors[name].observe(key, wait)
            else:
                for name in names:
                    with contextlib.suppress(NotFittedError, PredictionUnavailableError):
                        per_class[name, ci][j] = predictors[name].predict(key)
        rows = []
        for ci, gc in enumerate(self.classes):
            for name in names:
                jobs = self.jobs[ci]
                rows.append(self._metrics(name, gc, jobs, per_class[name, ci][jobs]))
        return pd.DataFrame(rows)

    def _metrics(
        self, name: str, gc: GeometryClass, jobs: npt.NDArray[np.int64], pred: FloatArray
    ) -> dict[str, object]:
        truth = self.workload.recorded_wait[jobs]
        cores = self.workload.cores[jobs].astype(np.float64)
        n = len(jobs)
        covered = np.isfinite(pred)
        x = np.where(covered, pred, 0.0)
        snapped_x = nearest_index(self.grid, x)
        snapped_w = nearest_index(self.grid, truth)
        idle = float(np.sum(cores * np.maximum(x - truth, 0.0)))
        delay = float(np.sum(np.maximum(truth - x, 0.0)))

        def share(mask: npt.NDArray[np.bool_]) -> float:
            return float(mask.mean()) if n else math.nan

        rank_corr = math.nan
        if n > 1 and np.ptp(x) > 0 and np.ptp(truth) > 0:
            rank_corr = float(stats.spearmanr(x, truth).statistic)

        return {
            "predictor": name,
            "cores": gc.target,
            "low": gc.low,
            "high": gc.high,
            "jobs": n,
            "coverage": share(covered),
            "rank_corr": rank_corr,
            "hit": share(snapped_x == snapped_w),
            "over": share(snapped_x > snapped_w),
            "under": share(snapped_x < snapped_w),
            "mae": float(np.mean(np.abs(x - truth))) if n else math.nan,
            "idle_core_s": idle,
            "delay_s": delay,
            "cost": idle + delay,
        }


def evaluate_online(
    workload: Workload,
    predictors: Sequence[str] = DEFAULT_PREDICTORS,
    *,
    classes: Sequence[int | GeometryClass] = DEFAULT_CLASSES,
    seed: int | None = 0,
) -> pd.DataFrame:
    """Evaluate predictors by name over a trace (see :class:`OnlineEvaluation`).

    Parameters
    ----------
    workload : Workload
        Trace with recorded waits, e.g. from :func:`elastic.simulator.trace.read_swf`.
    predictors : sequence of str, default DEFAULT_PREDICTORS
        Names from :data:`PREDICTORS`.
    classes : sequence of int or GeometryClass, default (28, 56, 112)
        Geometry classes.
    seed : int or None, default 0
        Seed of the ASA estimators' sampling.

    Returns
    -------
    pandas.DataFrame
        One row per predictor and class (columns in :meth:`OnlineEvaluation.run`).

    Raises
    ------
    UnknownNameError
        A predictor name is unknown.
    """
    built = {name: make_predictor(name, seed) for name in predictors}
    return OnlineEvaluation(workload, classes=classes).run(built)
