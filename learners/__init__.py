"""Online learners: ASA queue-wait estimation, wait-prediction baselines, speculative walltimes."""

from __future__ import annotations

__all__: list[str] = []
