"""Helpers for simulator tests: build small Workloads by hand and drive an engine with actions."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from elastic.simulator.workload import Workload


def workload_from_rows(rows: Sequence[tuple[float, int, float, float]], processors: int) -> Workload:
    """Rows of (submit, cores, walltime, runtime), already sorted by submit."""
    n = len(rows)
    arr = np.array(rows, dtype=np.float64).reshape(n, 4)
    return Workload(
        job_id=np.arange(1, n + 1, dtype=np.int64),
        submit=arr[:, 0].copy(),
        cores=arr[:, 1].astype(np.int64),
        walltime=arr[:, 2].copy(),
        runtime=arr[:, 3].copy(),
        user=np.full(n, -1, dtype=np.int64),
        recorded_wait=np.full(n, np.nan),
        processors=processors,
        source="hand-made",
    )


@pytest.fixture
def make_workload() -> Callable[[Sequence[tuple[float, int, float, float]], int], Workload]:
    return workload_from_rows
