"""Issue 11 (speed of ``elastic waits``): the scalar nearest-alternative path agrees with the array one."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from elastic.learners.asa_grid import DEFAULT_GRID, nearest_index
from elastic.learners.asa_losses import paper_losses


@given(st.floats(0, 1e7) | st.sampled_from([float(g) for g in DEFAULT_GRID]))
def test_paper_losses_zero_at_the_nearest_alternative(wait: float) -> None:
    grid = np.asarray(DEFAULT_GRID, dtype=np.float64)
    losses = paper_losses(grid, wait)
    assert losses.sum() == len(grid) - 1
    assert int(np.argmin(losses)) == int(nearest_index(grid, [wait])[0])


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=5, unique=True), st.floats(0, 2e6))
def test_small_grids(values: list[float], wait: float) -> None:
    grid = np.sort(np.asarray(values))
    assert int(np.argmin(paper_losses(grid, wait))) == int(nearest_index(grid, [wait])[0])
