"""Online learners: ASA queue-wait estimation, wait-prediction baselines, speculative walltimes.

Names are loaded from their modules on first use (PEP 562), so that ``import elastic.learners.asa`` (what the
front door needs) does not pay for :mod:`scipy.stats` (the baselines and walltime learners), about 1 s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from elastic.learners.asa import ASAEstimator
    from elastic.learners.asa_grid import DEFAULT_GRID, geometry_key
    from elastic.learners.base import (
        Learner,
        NotFittedError,
        PredictionUnavailableError,
        WaitPredictor,
        clone,
        load_shared,
        observe_shared,
    )
    from elastic.learners.baselines import (
        LastWait,
        QBETSUpperBound,
        RunningMean,
        RunningMedian,
        RunningQuantile,
    )
    from elastic.learners.ewma import LogEWMA
    from elastic.learners.reference import AlwaysZero, SchedulerEstimate
    from elastic.learners.toptimal import ReservationSequence, atoptimal, toptimal_policy
    from elastic.learners.walltime import ESDD, WalltimeLearner, esdd, esdd_from_runtimes
    from elastic.learners.walltime_baselines import (
        MASI,
        ClassicalHPC,
        FixedSequence,
        Neuroscience,
        WalltimeStrategy,
        strategy_expectation,
    )
    from elastic.learners.walltime_cost import CostModel, empirical_cost, expected_cost, expected_makespan

__all__: list[str] = [
    # queue-wait learners (elastic.learners.base, elastic.learners.asa, elastic.learners.asa_grid,
    # elastic.learners.baselines)
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
    # speculative walltimes (elastic.learners.toptimal, elastic.learners.walltime, .walltime_cost,
    # .walltime_baselines)
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

# ``toptimal`` the function is not re-exported: it would shadow the ``elastic.learners.toptimal`` module.
_MODULES: dict[str, tuple[str, ...]] = {
    "elastic.learners.asa": ("ASAEstimator",),
    "elastic.learners.asa_grid": ("DEFAULT_GRID", "geometry_key"),
    "elastic.learners.base": (
        "Learner",
        "NotFittedError",
        "PredictionUnavailableError",
        "WaitPredictor",
        "clone",
        "load_shared",
        "observe_shared",
    ),
    "elastic.learners.baselines": (
        "LastWait",
        "QBETSUpperBound",
        "RunningMean",
        "RunningMedian",
        "RunningQuantile",
    ),
    "elastic.learners.ewma": ("LogEWMA",),
    "elastic.learners.reference": ("AlwaysZero", "SchedulerEstimate"),
    "elastic.learners.toptimal": ("ReservationSequence", "atoptimal", "toptimal_policy"),
    "elastic.learners.walltime": ("ESDD", "WalltimeLearner", "esdd", "esdd_from_runtimes"),
    "elastic.learners.walltime_baselines": (
        "MASI",
        "ClassicalHPC",
        "FixedSequence",
        "Neuroscience",
        "WalltimeStrategy",
        "strategy_expectation",
    ),
    "elastic.learners.walltime_cost": ("CostModel", "empirical_cost", "expected_cost", "expected_makespan"),
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
