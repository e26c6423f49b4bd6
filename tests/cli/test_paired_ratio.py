"""``elastic compare``'s makespan ratio against the better baseline, and its paired interval."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.cli import main
from elastic.cli.compare import paired_ratio

RUNS = st.lists(st.floats(0.1, 100.0), min_size=2, max_size=30)


def test_a_queue_that_differs_from_run_to_run_does_not_widen_the_paired_interval() -> None:
    # the baseline's makespans span 1-50 h with the queue; asa is 10 % faster in every run, give or take 1 %
    rng = np.random.default_rng(1)
    baseline = rng.uniform(1.0, 50.0, size=30)
    asa = baseline * rng.uniform(0.89, 0.91, size=30)
    ratio, low, high = paired_ratio(asa, baseline)
    assert 0.89 <= low <= ratio <= high <= 0.91
    # unpaired (each strategy's runs shuffled apart), the same means say far less
    _, low_apart, high_apart = paired_ratio(asa, rng.permutation(baseline))
    assert high_apart - low_apart > 10 * (high - low)


def test_one_run_gives_a_ratio_and_no_interval() -> None:
    ratio, low, high = paired_ratio(np.array([3.0]), np.array([2.0]))
    assert ratio == 1.5 and math.isnan(low) and math.isnan(high)


@settings(max_examples=50, deadline=None)
@given(runs=RUNS, factor=st.floats(0.2, 5.0), unit=st.floats(0.01, 100.0))
def test_a_strategy_a_fixed_factor_slower_in_every_run_gets_that_factor_and_no_spread(
    runs: list[float], factor: float, unit: float
) -> None:
    b = np.array(runs) * unit  # any unit: hours or seconds
    ratio, low, high = paired_ratio(b * factor, b)
    assert all(math.isclose(x, factor, rel_tol=1e-9) for x in (ratio, low, high))


def test_compare_of_one_run_gives_the_ratio_and_says_there_is_no_interval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compare", "--workflow", "demo3", "--runs", "1", "--processors", "64", "--seed", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "demo3: 1 run per strategy" in out
    found = re.search(r"asa: gap closed .*?; makespan (\S+)x \S+'s \(one run: no interval\)", out)
    assert found is not None and float(found.group(1)) > 0
