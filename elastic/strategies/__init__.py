"""Allocation strategies: Big-Job, Per-Stage and ASA, behind one :class:`Strategy` contract."""

from __future__ import annotations

from elastic.strategies.asa import ASA
from elastic.strategies.base import (
    STRATEGY_NAMES,
    Action,
    Cancel,
    Decision,
    RunView,
    StageView,
    Strategy,
    Submit,
    make_strategy,
)
from elastic.strategies.bigjob import BigJob
from elastic.strategies.knowledge import TOTAL, Knowledge, MemoryHistory
from elastic.strategies.perstage import PerStage

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
    "RunView",
    "StageView",
    "Strategy",
    "Submit",
    "make_strategy",
]
