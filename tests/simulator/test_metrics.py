"""Metrics on hand-made records (values computed by hand)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.errors import ConfigError
from elastic.simulator.metrics import by_size, summarize


def frame(rows):
    return pd.DataFrame(rows, columns=["submit", "start", "end", "cores"])


def test_summary_by_hand():
    # Partition of 4 cores. A: 1 core 0..100 (wait 0, run 100). B: 4 cores submitted 0, runs 100..105
    # (wait 100, run 5). C: 2 cores submitted 10, never started (cancelled while pending).
    rec = frame([(0.0, 0.0, 100.0, 1), (0.0, 100.0, 105.0, 4), (10.0, np.nan, 10.0, 2)])
    s = summarize(rec, processors=4)
    assert s.jobs == 2
    # (1*100 + 4*5) / (4 * 105)
    assert s.utilisation == pytest.approx(120 / 420)
    assert (s.mean_wait, s.median_wait) == (50.0, 50.0)
    assert s.mean_response == pytest.approx((100 + 105) / 2)
    # stretch: A 100/100 = 1, B 105/5 = 21 -> 11; bounded: A 1, B 105/max(5,10) = 10.5 -> 5.75
    assert s.mean_stretch == pytest.approx(11.0)
    assert s.mean_bounded_slowdown == pytest.approx(5.75)
    assert s.started_at_once == 0.5


def test_by_size_classes():
    rec = frame([(0.0, 0.0, 10.0, 1), (0.0, 10.0, 20.0, 3), (0.0, 20.0, 30.0, 4), (0.0, 0.0, 5.0, 100)])
    table = by_size(rec, processors=128)
    assert list(table.index) == ["1", "2-4", "65-128"]
    assert list(table["jobs"]) == [1, 2, 1]
    assert table.loc["2-4", "mean_wait"] == 15.0


def test_bad_parameters():
    with pytest.raises(ConfigError, match="processors must be >= 1, got 0"):
        summarize(frame([]), processors=0)
    with pytest.raises(ConfigError, match="increasing"):
        by_size(frame([]), processors=1, bins=(4, 2))
    assert math.isnan(summarize(frame([]), processors=1).mean_wait)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 100), st.integers(1, 8)),
        min_size=1,
        max_size=30,
    )
)
def test_metric_bounds(rows):
    rec = frame([(s, s + w, s + w + r, c) for s, w, r, c in rows])
    s = summarize(rec, processors=8)
    assert s.mean_bounded_slowdown >= 1.0
    assert s.median_wait <= s.p90_wait + 1e-9
    assert 0.0 <= s.started_at_once <= 1.0
