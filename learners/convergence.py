"""The paper's Figure 5 convergence run of the ASA learner's policies.

**Convergence experiment** (:func:`convergence_experiment`). The paper's Figure 5: 1000 iterations of
predict-then-observe on one key; the true wait jumps to a random grid value (seeded, never the same as
before) at iterations 0, 200, 400, 600 and 800. A policy has *converged* after a change at the first
iteration ``i`` from which its prediction equals the truth for ``window`` (default 10) consecutive
iterations inside the segment; iterations-to-converge is ``i - change`` (``None``: never in the segment).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError
from elastic.learners.asa import ASAEstimator
from elastic.learners.asa_grid import DEFAULT_GRID

__all__ = ["ConvergenceResult", "convergence_experiment", "iterations_to_converge", "plot_convergence"]

FloatArray = npt.NDArray[np.float64]


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
