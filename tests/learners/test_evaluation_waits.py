"""Online evaluation of wait predictors, the Figure 5 convergence experiment, and `elastic waits`."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.cli import main
from elastic.errors import ConfigError, UnknownNameError
from elastic.learners.asa import ASAEstimator
from elastic.learners.asa_grid import DEFAULT_GRID
from elastic.learners.baselines import LastWait
from elastic.learners.evaluation import (
    DEFAULT_PREDICTORS,
    GeometryClass,
    OnlineEvaluation,
    convergence_experiment,
    evaluate_online,
    iterations_to_converge,
    make_predictor,
    plot_convergence,
)
from elastic.simulator.trace import read_swf
from elastic.simulator.workload import Workload


def workload(submit, wait, cores) -> Workload:
    n = len(submit)
    return Workload(
        job_id=np.arange(1, n + 1, dtype=np.int64),
        submit=np.asarray(submit, dtype=np.float64),
        cores=np.asarray(cores, dtype=np.int64),
        runtime=np.full(n, 10.0),
        walltime=np.full(n, 20.0),
        user=np.full(n, -1, dtype=np.int64),
        recorded_wait=np.asarray(wait, dtype=np.float64),
        processors=256,
        source="test",
    )


# -- classes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("target", "low", "high"), [(28, 20, 39), (56, 40, 79), (112, 80, 158), (1, 1, 1)])
def test_geometry_class_is_a_factor_sqrt2_either_side(target, low, high):
    gc = GeometryClass.around(target)
    assert (gc.low, gc.high) == (low, high)
    assert gc.key == f"cores={low}-{high}"


def test_geometry_class_rejects_non_positive_targets():
    with pytest.raises(ConfigError, match="'target' must be an integer >= 1 core; got 0"):
        GeometryClass.around(0)


# -- the online evaluation, known answer ----------------------------------------------------------------


def test_metrics_on_a_hand_made_trace():
    """Predictions by hand (LastWait, class 28 = 20..39 cores).

    job  submit  wait  start  cores   known at submit           prediction
    0    0       100   100    28      nothing                   none (scored 0)
    1    50      300   350    28      nothing                   none (scored 0)
    2    200     30    230    30      job 0                     100
    -    300     5     305    8       (other class)
    -    310     nan   -      28      (unknown wait: skipped)
    3    400     600   1000   28      jobs 0, 2, 1 (last: 1)    300
    4    1000    600   1600   28      job 3 starts at 1000 too  600 (observations first at ties)
    """
    wl = workload(
        [0, 50, 200, 300, 310, 400, 1000], [100, 300, 30, 5, np.nan, 600, 600], [28, 28, 30, 8, 28, 28, 28]
    )
    table = OnlineEvaluation(wl, classes=[28]).run({"last": LastWait()})
    row = table.iloc[0].to_dict()
    assert (row["cores"], row["low"], row["high"], row["jobs"]) == (28, 20, 39, 5)
    assert row["coverage"] == pytest.approx(3 / 5)
    assert (row["hit"], row["over"], row["under"]) == pytest.approx((1 / 5, 1 / 5, 3 / 5))
    assert row["mae"] == pytest.approx((100 + 300 + 70 + 300 + 0) / 5)
    assert row["idle_core_s"] == 30 * 70
    assert row["delay_s"] == 100 + 300 + 300
    assert row["cost"] == 30 * 70 + 700


def test_rank_correlation_says_whether_a_predictor_follows_the_queue():
    # Waits rise job after job, each known before the next submit: the last wait ranks the next one
    # exactly (Spearman 1); always-0 ranks nothing (NaN).
    n = 12
    wl = workload(np.arange(n) * 10_000.0, (np.arange(n) + 1) * 100.0, [28] * n)
    table = OnlineEvaluation(wl, classes=[28]).run(
        {"last": LastWait(), "zero": make_predictor("zero"), "ewma": make_predictor("ewma")}
    )
    corr = table.set_index("predictor")["rank_corr"]
    # The first job is scored as 0 s, the lowest prediction for the shortest wait: still a perfect rank.
    assert corr["last"] == pytest.approx(1.0) and corr["ewma"] == pytest.approx(1.0)
    assert np.isnan(corr["zero"])
    # Waits that alternate long/short: the last wait predicts the opposite of what comes.
    flip = workload(np.arange(n) * 10_000.0, np.tile([100.0, 5_000.0], n // 2), [28] * n)
    corr = OnlineEvaluation(flip, classes=[28]).run({"last": LastWait()}).iloc[0]["rank_corr"]
    assert corr < -0.5


def test_hits_are_counted_on_the_grid_for_non_grid_predictors():
    # waits 604, 596, 610: all closest to the grid value 600 -> every prediction after the first is a hit
    wl = workload([0, 1000, 2000, 3000], [604, 596, 610, 600], [28] * 4)
    row = OnlineEvaluation(wl, classes=[28]).run({"last": LastWait()}).iloc[0]
    assert row["hit"] == pytest.approx(3 / 4)
    assert row["under"] == pytest.approx(1 / 4)  # the first, unfitted, scored as 0 s


def test_every_predictor_and_class_gets_a_row_with_rates_summing_to_one():
    rng = np.random.default_rng(0)
    n = 300
    wl = workload(np.sort(rng.uniform(0, 1e5, n)), rng.exponential(900, n), rng.choice([24, 28, 50, 100], n))
    table = evaluate_online(wl, DEFAULT_PREDICTORS)
    assert len(table) == len(DEFAULT_PREDICTORS) * 3
    assert list(table["cores"].unique()) == [28, 56, 112]
    np.testing.assert_allclose(table[["hit", "over", "under"]].sum(axis=1), 1.0)
    assert (table["coverage"] > 0.9).all()


def test_unknown_predictor_names_list_the_known_ones():
    with pytest.raises(
        UnknownNameError, match="unknown predictor 'oracle'; choose one of: asa-cost, asa-default"
    ):
        make_predictor("oracle")


def test_a_stable_queue_is_learned_by_asa_and_the_baselines():
    wl = workload(np.arange(200) * 1000.0, np.full(200, 1500.0), np.full(200, 56))
    table = evaluate_online(wl, ["asa-tuned", "asa-default", "last", "median"], classes=[56]).set_index(
        "predictor"
    )
    # job i's wait is known at 1000 i + 1500: jobs 0 and 1 are submitted before any is known
    assert table.loc["last", "hit"] == pytest.approx(198 / 200)
    assert table.loc["asa-tuned", "hit"] > 0.9
    assert table.loc["asa-default", "hit"] > 0.7


# -- no predictor sees a wait before it is known --------------------------------------------------------


class Recorder:
    """Wraps a predictor and logs every call with the evaluation's clock."""

    def __init__(self, inner: Any, evaluation: OnlineEvaluation, log: list) -> None:
        self.inner, self.evaluation, self.log = inner, evaluation, log

    def get_params(self) -> dict[str, Any]:
        return self.inner.get_params()

    def predict(self, key: str) -> float:
        self.log.append(("predict", self.evaluation.now, key, None))
        return self.inner.predict(key)

    def observe(self, key: str, wait: float) -> Recorder:
        self.log.append(("observe", self.evaluation.now, key, wait))
        self.inner.observe(key, wait)
        return self

    partial_fit = observe

    def get_state(self, key: str) -> dict[str, Any]:
        return self.inner.get_state(key)

    def set_state(self, key: str, state: Any) -> Recorder:
        self.inner.set_state(key, state)
        return self


def check_no_peeking(log: list, wl: Workload, evaluation: OnlineEvaluation) -> None:
    """Every observed wait belongs to a distinct job of that class that had started by then."""
    for ci, gc in enumerate(evaluation.classes):
        jobs = evaluation.jobs[ci]
        start = wl.submit[jobs] + wl.recorded_wait[jobs]
        seen: Counter[float] = Counter()
        observes = [(t, w) for kind, t, key, w in log if kind == "observe" and key == gc.key]
        predicts = sorted(t for kind, t, key, _ in log if kind == "predict" and key == gc.key)
        for now, wait in observes:
            seen[wait] += 1
            started = int(np.sum((wl.recorded_wait[jobs] == wait) & (start <= now)))
            assert seen[wait] <= started, f"wait {wait} observed at {now} before a job with it started"
        assert len(observes) == len(jobs)
        assert predicts == sorted(wl.submit[jobs].tolist())
        times = [t for kind, t, *_ in log]
        assert times == sorted(times)  # one clock, never going back


@settings(max_examples=40, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.integers(0, 5_000),  # submit
            st.one_of(st.integers(0, 3_000), st.just(0)),  # wait
            st.sampled_from([4, 28, 30, 56, 60]),  # cores
        ),
        min_size=1,
        max_size=40,
    )
)
def test_no_learner_ever_sees_a_wait_before_it_is_known(jobs):
    jobs.sort()
    submit, wait, cores = (list(c) for c in zip(*jobs, strict=True))
    wl = workload(submit, wait, cores)
    evaluation = OnlineEvaluation(wl, classes=[28, 56])
    logs: dict[str, list] = {name: [] for name in ("asa-tuned", "last", "qbets")}
    evaluation.run({name: Recorder(make_predictor(name), evaluation, log) for name, log in logs.items()})
    for log in logs.values():
        check_no_peeking(log, wl, evaluation)


def test_the_no_peeking_check_catches_a_cheat():
    wl = workload([0, 10], [500, 500], [28, 28])
    evaluation = OnlineEvaluation(wl, classes=[28])
    cheat = [
        ("predict", 0.0, "cores=20-39", None),
        ("observe", 5.0, "cores=20-39", 500.0),  # job 0 only starts at 500
        ("predict", 10.0, "cores=20-39", None),
        ("observe", 510.0, "cores=20-39", 500.0),
    ]
    with pytest.raises(AssertionError, match=r"observed at 5\.0 before"):
        check_no_peeking(cheat, wl, evaluation)


# -- convergence experiment -----------------------------------------------------------------------------


def test_convergence_experiment_changes_the_truth_at_the_change_points():
    result = convergence_experiment(seed=4)
    assert len(result.truth) == 1000
    changes = [0, *(np.flatnonzero(np.diff(result.truth)) + 1).tolist()]
    assert changes == [0, 200, 400, 600, 800]
    assert set(result.truth.tolist()) <= set(DEFAULT_GRID)
    again = convergence_experiment(seed=4)
    for policy in ("default", "tuned", "greedy"):
        np.testing.assert_array_equal(result.estimates[policy], again.estimates[policy])


def test_convergence_experiment_reproduces_figure_5_qualitatively():
    result = convergence_experiment(seed=0)
    tuned, default, greedy = (result.iterations_to_converge[p] for p in ("tuned", "default", "greedy"))
    assert all(t is not None for t in tuned)
    assert all(d is not None for d in default)
    assert sum(tuned) < sum(default)  # tuned converges far faster
    assert all(g is None for g in greedy[1:])  # greedy never recovers from the first change
    assert iterations_to_converge(result.estimates["tuned"], result.truth, result.change_points) == tuned


def test_plot_convergence_writes_a_png(tmp_path):
    result = convergence_experiment(iterations=300, change_points=(0, 150), seed=1)
    path = plot_convergence(result, tmp_path / "sub" / "fig5.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_iterations_to_converge_definition():
    truth = [1, 1, 1, 1, 2, 2, 2]
    assert iterations_to_converge([1, 1, 1, 1, 2, 2, 2], truth, [0, 4], window=3) == (0, 0)
    assert iterations_to_converge([0, 1, 1, 1, 0, 2, 2], truth, [0, 4], window=3) == (1, None)
    with pytest.raises(ConfigError, match="'window' must be >= 1"):
        iterations_to_converge(truth, truth, [0], window=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"iterations": 0}, "'iterations' must be >= 1"),
     ({"change_points": (5, 10)}, "'change_points' must start at 0"),
     ({"change_points": (0, 300, 200)}, "increase strictly"),
     ({"iterations": 100, "change_points": (0, 100)}, "below 'iterations'")],
)  # fmt: skip
def test_convergence_experiment_rejects_bad_schedules(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        convergence_experiment(**kwargs)


# -- the real HPC2N trace -------------------------------------------------------------------------------


def test_hpc2n_window_evaluates_every_class_job_once(hpc2n_trace):
    wl = read_swf(hpc2n_trace, window=(0.0, 30 * 86400.0))
    table = evaluate_online(wl, ["asa-tuned", "last", "qbets"])
    known = np.isfinite(wl.recorded_wait)
    for target, low, high in [(28, 20, 39), (56, 40, 79), (112, 80, 158)]:
        expected = int(np.sum(known & (wl.cores >= low) & (wl.cores <= high)))
        assert (table.loc[table["cores"] == target, "jobs"] == expected).all()
    assert table["jobs"].sum() > 0
    np.testing.assert_allclose(table[["hit", "over", "under"]].sum(axis=1), 1.0)


# -- `elastic waits` ------------------------------------------------------------------------------------


SWF = """; MaxProcs: 64
1 0 100 50 28 -1 -1 28 100 -1 1 1 -1 -1 -1 -1 -1 -1
2 10 200 50 28 -1 -1 28 100 -1 1 1 -1 -1 -1 -1 -1 -1
3 400 200 50 30 -1 -1 30 100 -1 1 1 -1 -1 -1 -1 -1 -1
4 500 40 50 56 -1 -1 56 100 -1 1 1 -1 -1 -1 -1 -1 -1
5 900 60 50 56 -1 -1 56 100 -1 1 1 -1 -1 -1 -1 -1 -1
"""


def test_cli_evaluates_a_trace_and_writes_csv(tmp_path, capsys):
    trace = tmp_path / "tiny.swf"
    trace.write_text(SWF)
    out = tmp_path / "table.csv"
    code = main(["waits", "--trace", str(trace), "--cores", "28,56", "--predictors", "last,asa-tuned",
                 "--csv", str(out)])  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "asa-tuned" in text and "20-39" in text and "40-79" in text
    table = pd.read_csv(out)
    assert table[["predictor", "cores", "jobs"]].values.tolist() == [
        ["last", 28, 3], ["asa-tuned", 28, 3], ["last", 56, 2], ["asa-tuned", 56, 2]
    ]  # fmt: skip
    last28 = table.iloc[0]
    assert last28["coverage"] == pytest.approx(1 / 3)  # job 3 sees job 1's wait (known at 100 <= 400)
    assert "rank corr" in text and "rank_corr" in table.columns


def test_cli_convergence_writes_the_figure_and_prints_iterations(tmp_path, capsys):
    png = tmp_path / "fig.png"
    assert main(["waits", "--plot-convergence", str(png), "--iterations", "400"]) == 0
    assert png.exists()
    text = capsys.readouterr().out
    assert "Iterations to converge" in text and "tuned" in text and "greedy" in text


def test_cli_needs_a_trace_or_a_figure(capsys):
    assert main(["waits"]) == 2
    assert "give --trace PATH" in capsys.readouterr().err


def test_cli_rejects_unknown_predictors(capsys):
    with pytest.raises(SystemExit):
        main(["waits", "--trace", "x.swf", "--predictors", "last,oracle"])
    assert "unknown predictor(s) oracle; choose from:" in capsys.readouterr().err


def test_cli_reports_trace_errors_with_file_and_line(tmp_path, capsys):
    trace = tmp_path / "bad.swf"
    trace.write_text(SWF + "6 1000 x 50 28\n")
    assert main(["waits", "--trace", str(trace)]) == 2
    assert f"{trace}:7" in capsys.readouterr().err


def test_asa_grid_and_evaluation_grid_agree():
    assert tuple(ASAEstimator().get_state("k")["grid"]) == DEFAULT_GRID
