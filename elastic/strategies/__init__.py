"""Allocation strategies: Big-Job, Per-Stage, the planner ``asa`` and the paper's ASA, behind one contract."""

from __future__ import annotations

from elastic.strategies.asa import ASA
from elastic.strategies.base import (
    STRATEGY_NAMES,
    Action,
    Cancel,
    Decision,
    RunView,
    Serve,
    Shorten,
    StageView,
    Strategy,
    Submit,
    make_strategy,
    strategy_learner,
)
from elastic.strategies.bigjob import BigJob
from elastic.strategies.knowledge import TOTAL, Knowledge, MemoryHistory
from elastic.strategies.perstage import PerStage
from elastic.strategies.planner import Planner

__all__ = [
    "ASA",
    "STRATEGY_NAMES",
    "TOTAL",
    "Action",
    "BigJob",
    "Cancel",
    "Decision",
    "Knowledge",
    "MemoryHistory",
    "PerStage",
    "Planner",
    "RunView",
    "Serve",
    "Shorten",
    "StageView",
    "Strategy",
    "Submit",
    "make_strategy",
    "strategy_learner",
]
