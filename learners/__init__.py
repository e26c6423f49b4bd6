"""Online learners: ASA queue-wait estimation, wait-prediction baselines, speculative walltimes."""

from __future__ import annotations

from learners.asa import ASAEstimator
from learners.asa_grid import DEFAULT_GRID, geometry_key
from learners.base import (
    Learner,
    NotFittedError,
    PredictionUnavailableError,
    WaitPredictor,
    clone,
    load_shared,
    observe_shared,
)
from learners.baselines import LastWait, QBETSUpperBound, RunningMean, RunningMedian, RunningQuantile
from learners.ewma import LogEWMA
from learners.reference import AlwaysZero, SchedulerEstimate

# ``toptimal`` the function is not re-exported: it would shadow the ``learners.toptimal`` module.
from learners.toptimal import ReservationSequence, atoptimal, toptimal_policy
from learners.walltime import ESDD, WalltimeLearner, esdd, esdd_from_runtimes
from learners.walltime_baselines import (
    MASI,
    ClassicalHPC,
    FixedSequence,
    Neuroscience,
    WalltimeStrategy,
    strategy_expectation,
)
from learners.walltime_cost import CostModel, empirical_cost, expected_cost, expected_makespan

__all__: list[str] = [
    # queue-wait learners (learners.base, learners.asa, learners.asa_grid, learners.baselines)
    "DEFAULT_GRID",
    "ASAEstimator",
    "LastWait",
    "Learner",
    "NotFittedError",
    "PredictionUnavailableError",
    "QBETSUpperBound",
    "RunningMean",
    "RunningMedian",
    "RunningQuantile",
    "LogEWMA",
    "AlwaysZero",
    "SchedulerEstimate",
    "WaitPredictor",
    "clone",
    "geometry_key",
    "load_shared",
    "observe_shared",
    # speculative walltimes (learners.toptimal, learners.walltime, .walltime_cost, .walltime_baselines)
    "ESDD",
    "MASI",
    "ClassicalHPC",
    "CostModel",
    "FixedSequence",
    "Neuroscience",
    "ReservationSequence",
    "WalltimeLearner",
    "WalltimeStrategy",
    "atoptimal",
    "empirical_cost",
    "esdd",
    "esdd_from_runtimes",
    "expected_cost",
    "expected_makespan",
    "strategy_expectation",
    "toptimal_policy",
]
