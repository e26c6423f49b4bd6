"""Evaluate queue-wait predictors: online over a real trace, and the paper's Figure 5 convergence run.

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

**Convergence experiment** (:func:`convergence_experiment`). The paper's Figure 5: 1000 iterations of
predict-then-observe on one key; the true wait jumps to a random grid value (seeded, never the same as
before) at iterations 0, 200, 400, 600 and 800. A policy has *converged* after a change at the first
iteration ``i`` from which its prediction equals the truth for ``window`` (default 10) consecutive
iterations inside the segment; iterations-to-converge is ``i - change`` (``None``: never in the segment).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

from elastic.errors import ConfigError, UnknownNameError
from elastic.learners.asa import ASAEstimator
from elastic.learners.asa_grid import DEFAULT_GRID, nearest_index
from elastic.learners.base import NotFittedError, PredictionUnavailableError, WaitPredictor
from elastic.learners.baselines import LastWait, QBETSUpperBound, RunningMean, RunningMedian, RunningQuantile
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


@dataclass(frozen=True, slots=True)
class ConvergenceResult:
    """Outcome of :func:`convergence_experiment`.

    Attributes
    ----------
    truth : ndarray of float64
        True wait at each iteration, seconds.
    estimates : dict of str to ndarray of float64
        Prediction of each policy at each iteration (made before observing that iteration's truth).
    change_points : tuple of int
        Iterations where the truth changes.
    iterations_to_converge : dict of str to tuple of (int or None)
        Per policy, one entry per change point (``None``: did not converge before the next change).
    window : int
        Consecutive correct predictions that define convergence.
    """

    truth: FloatArray
    estimates: dict[str, FloatArray]
    change_points: tuple[int, ...]
    iterations_to_converge: dict[str, tuple[int | None, ...]]
    window: int


def iterations_to_converge(
    estimates: npt.ArrayLike, truth: npt.ArrayLike, change_points: Sequence[int], window: int = 10
) -> tuple[int | None, ...]:
    """Return, per change point, the iterations until ``window`` consecutive exact predictions.

    Parameters
    ----------
    estimates, truth : array_like of float
        Predictions and true waits, one per iteration.
    change_points : sequence of int
        Sorted iterations where segments start (the first is usually 0).
    window : int, default 10
        Required run of consecutive correct predictions (>= 1).

    Returns
    -------
    tuple of (int or None)
        ``i - change`` for the first ``i`` that starts such a run inside the segment, else ``None``.

    Examples
    --------
    >>> iterations_to_converge([5, 1, 1, 1, 2, 2], [1, 1, 1, 1, 2, 2], [0, 4], window=2)
    (1, 0)
    """
    est = np.asarray(estimates, dtype=np.float64)
    tru = np.asarray(truth, dtype=np.float64)
    if est.shape != tru.shape:
        raise ConfigError(
            f"iterations_to_converge: estimates {est.shape} and truth {tru.shape} differ in shape"
        )
    if window < 1:
        raise ConfigError(f"iterations_to_converge: parameter 'window' must be >= 1; got {window!r}")
    bounds = [*change_points, len(tru)]
    out: list[int | None] = []
    for start, end in itertools.pairwise(bounds):
        ok = (est[start:end] == tru[start:end]).astype(np.int64)
        if len(ok) < window:
            out.append(None)
            continue
        runs = np.convolve(ok, np.ones(window, dtype=np.int64), mode="valid")  # run sums of length window
        hits = np.flatnonzero(runs == window)
        out.append(int(hits[0]) if len(hits) else None)
    return tuple(out)


def convergence_experiment(
    *,
    iterations: int = 1000,
    change_points: Sequence[int] = (0, 200, 400, 600, 800),
    policies: Sequence[str] = ("default", "tuned", "greedy"),
    grid: Sequence[float] | None = None,
    repetitions: int = 50,
    window: int = 10,
    seed: int = 0,
) -> ConvergenceResult:
    """Run the paper's Figure 5 experiment: ASA policies following a step-changing true wait.

    Parameters
    ----------
    iterations : int, default 1000
        Predict-then-observe steps.
    change_points : sequence of int, default (0, 200, 400, 600, 800)
        Iterations where the truth jumps to a new random grid value; must start at 0 and increase.
    policies : sequence of str, default ("default", "tuned", "greedy")
        ASA policies compared.
    grid : sequence of float or None, default None
        Candidate waits (:data:`elastic.learners.asa_grid.DEFAULT_GRID` if None).
    repetitions : int, default 50
        Repetitions of the tuned policy.
    window : int, default 10
        Consecutive exact predictions that count as converged.
    seed : int, default 0
        Seeds the truth and every estimator.

    Returns
    -------
    ConvergenceResult

    Raises
    ------
    ConfigError
        Bad ``iterations`` or ``change_points``.
    """
    points = tuple(int(c) for c in change_points)
    if iterations < 1:
        raise ConfigError(f"convergence_experiment: parameter 'iterations' must be >= 1; got {iterations!r}")
    if (
        not points
        or points[0] != 0
        or any(b <= a for a, b in itertools.pairwise(points))
        or points[-1] >= iterations
    ):
        raise ConfigError(
            "convergence_experiment: parameter 'change_points' must start at 0 and increase strictly "
            f"below 'iterations' ({iterations}); got {change_points!r}"
        )
    values = np.asarray(DEFAULT_GRID if grid is None else grid, dtype=np.float64)
    rng = np.random.default_rng(seed)
    truth = np.empty(iterations)
    previous = math.nan
    for start, end in zip(points, [*points[1:], iterations], strict=True):
        choice = float(rng.choice(values))
        while choice == previous:
            choice = float(rng.choice(values))
        truth[start:end] = previous = choice
    estimates: dict[str, FloatArray] = {}
    for policy in policies:
        est = ASAEstimator(grid=grid, policy=policy, repetitions=repetitions, random_state=seed)
        out = np.empty(iterations)
        for i, wait in enumerate(truth.tolist()):
            out[i] = est.predict("fig5")
            est.observe("fig5", wait)
        estimates[policy] = out
    converge = {p: iterations_to_converge(e, truth, points, window) for p, e in estimates.items()}
    return ConvergenceResult(truth, estimates, points, converge, window)


def plot_convergence(result: ConvergenceResult, path: str | Path) -> Path:
    """Plot the estimates of each policy against the true wait and save a PNG.

    Parameters
    ----------
    result : ConvergenceResult
        From :func:`convergence_experiment`.
    path : str or Path
        Output file (parent directories are created).

    Returns
    -------
    Path
        The written file.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    styles = {
        "default": {"color": "black", "linewidth": 2.0},
        "tuned": {"color": "deeppink", "linewidth": 0.9},
        "greedy": {"color": "red", "linewidth": 1.2, "linestyle": "--"},
    }
    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = np.arange(len(result.truth))
    ax.step(x, result.truth, where="post", color="tab:blue", linewidth=2.5, label="true wait", zorder=1)
    for policy, est in result.estimates.items():
        ax.plot(x, est, label=f"ASA {policy}", zorder=2, **styles.get(policy, {}))  # type: ignore[arg-type]
    ax.set_yscale("symlog", linthresh=10)
    ax.set_xlabel("iteration")
    ax.set_ylabel("queue wait (s)")
    ax.set_title("ASA convergence after changes of the true wait (cf. paper Figure 5)")
    for c in result.change_points:
        ax.axvline(c, color="grey", linewidth=0.5, alpha=0.5)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
