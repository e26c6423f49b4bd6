"""The grid benchmark's verdict and how sure it is (``met_share``), on hand-made runs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.bench_planner_grid import met_share, verdict

LABELS = ("bigjob", "bigjob-split", "perstage", "perstage-split", "asa")


def _measured(
    spans: dict[str, list[float]], core_h: dict[str, list[float]]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {s: (np.array(spans[s]), np.array(core_h[s])) for s in LABELS}


def _point(measured: dict[str, tuple[np.ndarray, np.ndarray]]) -> bool:
    row: dict[str, object] = {}
    for s, (span, ch) in measured.items():
        row[f"{s}_completed"], row[f"{s}_h"], row[f"{s}_ch"] = len(span), span.mean(), ch.mean()
    return bool(verdict(row)["goal_met"])


def test_runs_that_all_agree_give_the_cells_own_verdict_in_every_resample() -> None:
    base = {
        "bigjob": [10.0] * 5,
        "bigjob-split": [9.0] * 5,
        "perstage": [20.0] * 5,
        "perstage-split": [18.0] * 5,
    }
    ch = {s: [100.0] * 5 for s in LABELS}
    met = _measured({**base, "asa": [10.0] * 5}, ch)  # closes 89 % of the gap at 1.00x
    missed = _measured({**base, "asa": [13.0] * 5}, ch)  # 56 %
    assert _point(met) and met_share(met) == 1.0
    assert not _point(missed) and met_share(missed) == 0.0


def test_one_run_that_decides_the_mean_leaves_the_verdict_unsure() -> None:
    # easy cell: asa as fast as split Per-Stage in 9 runs, 30 h slower in one: missed on the means
    spans = {
        "bigjob": [12.0] * 10,
        "bigjob-split": [12.0] * 10,
        "perstage": [11.0] * 10,
        "perstage-split": [10.0] * 10,
    }
    measured = _measured({**spans, "asa": [10.0] * 9 + [40.0]}, {s: [100.0] * 10 for s in LABELS})
    assert not _point(measured)
    assert 0.2 < met_share(measured) < 0.5  # the resamples without run 10 meet it: (0.9)^10 = 0.35


def test_a_cell_with_no_paired_run_has_no_share() -> None:
    assert np.isnan(met_share(_measured({s: [] for s in LABELS}, {s: [] for s in LABELS})))


@settings(max_examples=40, deadline=None)
@given(
    runs=st.lists(
        st.tuples(*[st.floats(0.5, 50.0) for _ in LABELS], st.floats(0.5, 2.0)), min_size=1, max_size=12
    ),
    faster=st.floats(0.5, 1.0),
)
def test_a_faster_asa_in_every_run_is_never_less_sure_to_meet_the_goal(
    runs: list[tuple[float, ...]], faster: float
) -> None:
    spans = {s: [r[i] for r in runs] for i, s in enumerate(LABELS)}
    ch = {s: [10.0] * len(runs) for s in LABELS}
    ch["asa"] = [10.0 * r[-1] for r in runs]
    share = met_share(_measured(spans, ch), resamples=200)
    quicker = met_share(_measured({**spans, "asa": [x * faster for x in spans["asa"]]}, ch), resamples=200)
    assert 0.0 <= share <= quicker <= 1.0
