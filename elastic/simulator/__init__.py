"""Trace-driven discrete-event simulator of one Slurm-like partition (the mock backend's engine)."""

from __future__ import annotations

from elastic.simulator.workload import Workload

__all__ = ["Workload"]
