"""Online learners: ASA queue-wait estimation, wait-prediction baselines, speculative walltimes.

Names are loaded from their modules on first use (PEP 562), so that ``import learners.asa`` (what the
front door needs) does not pay for :mod:`scipy.stats` (the baselines and walltime learners), about 1 s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# ``toptimal`` the function is not re-exported: it would shadow the ``learners.toptimal`` module.
_MODULES: dict[str, tuple[str, ...]] = {
    "learners.asa": ("ASAEstimator",),
    "learners.asa_grid": ("DEFAULT_GRID", "geometry_key"),
    "learners.base": (
        "Learner",
        "NotFittedError",
        "PredictionUnavailableError",
        "WaitPredictor",
        "clone",
        "load_shared",
        "observe_shared",
    ),
    "learners.baselines": ("LastWait", "QBETSUpperBound", "RunningMean", "RunningMedian", "RunningQuantile"),
    "learners.ewma": ("LogEWMA",),
    "learners.reference": ("AlwaysZero", "SchedulerEstimate"),
    "learners.toptimal": ("ReservationSequence", "atoptimal", "toptimal_policy"),
    "learners.walltime": ("ESDD", "WalltimeLearner", "esdd", "esdd_from_runtimes"),
    "learners.walltime_baselines": (
        "MASI",
        "ClassicalHPC",
        "FixedSequence",
        "Neuroscience",
        "WalltimeStrategy",
        "strategy_expectation",
    ),
    "learners.walltime_cost": ("CostModel", "empirical_cost", "expected_cost", "expected_makespan"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'learners' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
