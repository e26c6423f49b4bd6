"""The report's parts on their own: Table 1's percentages, scaling to a peak, held cores, one learner per
strategy carried across every run of the experiment."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from elastic.experiments import default_background, simulate_runs
from elastic.report.experiment import ExperimentPlan, RunRequest, Simulation, emulation, run_experiment
from elastic.report.figures import held_cores
from elastic.report.records import AllocationSpan, RunRecord
from elastic.report.scaling import scale_workflow
from elastic.report.tables import METRICS, table1
from elastic.workflow import BUILTIN_WORKFLOWS, builtin_workflow

#: Metrics are seconds or core-hours: 0, or at least a millisecond (a subnormal best overflows the ratio).
metric = st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=1e6))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([8, 16]), metric, metric, metric),
        min_size=1,
        max_size=30,
    )
)
def test_every_row_has_a_best_at_zero_and_none_below(
    rows: list[tuple[str, int, float, float, float]],
) -> None:
    runs = pd.DataFrame(
        rows, columns=["strategy", "cores", "makespan", "perceived_wait", "core_hours_charged"]
    )
    runs["workflow"] = "w"
    runs["status"] = "completed"
    runs["run"] = runs.groupby(["strategy", "cores"]).cumcount()
    t = table1(runs)
    for cores in set(runs["cores"]):
        row = t.cells.loc[("w", cores)]
        for key, _, _ in METRICS:
            over = np.array([float(row[(s, key, "over")]) for s in t.strategies])
            means = np.array([float(row[(s, key, "mean")]) for s in t.strategies])
            finite = np.isfinite(over)
            if np.nanmin(means) > 0:
                assert finite[np.isfinite(means)].all()
                assert math.isclose(float(np.nanmin(over)), 0.0, abs_tol=1e-12)
            assert (over[finite] >= -1e-12).all()


def test_incomplete_runs_are_counted_but_not_averaged() -> None:
    runs = pd.DataFrame(
        {
            "workflow": ["w"] * 3,
            "cores": [8] * 3,
            "strategy": ["a", "a", "b"],
            "run": [0, 1, 0],
            "status": ["completed", "failed", "completed"],
            "makespan": [3600.0, 99e6, 7200.0],
            "perceived_wait": [0.0, 0.0, 0.0],
            "core_hours_charged": [1.0, 1.0, 1.0],
        }
    )
    row = table1(runs).cells.loc[("w", 8)]
    assert float(row[("a", "makespan", "mean")]) == 1.0
    assert (float(row[("a", "runs", "completed")]), float(row[("a", "runs", "total")])) == (1.0, 2.0)
    assert float(row[("b", "makespan", "over")]) == 1.0


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(BUILTIN_WORKFLOWS)), st.integers(1, 400), st.sampled_from(["strong", "weak"]))
def test_scaling_makes_the_widest_stage_the_peak(name: str, peak: int, scaling: str) -> None:
    wf = builtin_workflow(name)
    widest_task = max(s.cores for s in wf.stages if s.width == wf.max_width)
    assume(peak % widest_task == 0)  # 4-core shapes refuse other peaks (tested in test_workflow_suite)
    scaled = scale_workflow(wf, peak, scaling=scaling)
    assert scaled.max_width == peak
    assert scaled.names == wf.names
    for old, new in zip(wf.stages, scaled.stages, strict=True):
        if old.tasks == 1:
            assert (new.tasks, new.runtime) == (1, old.runtime)
        elif scaling == "strong" and old.runtime is not None and new.runtime is not None:
            assert math.isclose(new.tasks * new.runtime, old.tasks * old.runtime)


spans = st.lists(
    st.tuples(st.floats(0, 1e4), st.floats(0, 1e4), st.floats(0, 1e4), st.integers(1, 64), st.booleans()),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(spans)
def test_held_cores_are_never_negative_and_end_at_zero(
    items: list[tuple[float, float, float, int, bool]],
) -> None:
    allocations = []
    for submit, wait, run, cores, started in items:
        start = submit + wait if started else None
        end = (start if start is not None else submit) + run
        allocations.append(AllocationSpan("s", cores, submit, submit, start, end, None, "initial"))
    record = RunRecord("w", 8, "a", 0, 0, "completed", ("s",), {"makespan": 1.0}, tuple(allocations))
    _, pending, running = held_cores(record)
    assert (pending >= 0).all() and (running >= 0).all()
    assert pending[-1] == 0 and running[-1] == 0
    assert running.max(initial=0) <= sum(a.cores for a in allocations if a.start is not None)


def test_each_strategy_keeps_one_learner_across_every_cell_and_run() -> None:
    background = default_background(32, seed=1)
    seen: list[tuple[str, str, int]] = []

    def run_one(request: RunRequest):  # type: ignore[no-untyped-def]
        seen.append((request.cell.strategy, request.cell.workflow.name, id(request.waits)))
        return simulate_runs(
            request.cell.workflow,
            request.cell.strategy,
            runs=1,
            seed=request.seed,
            background=background,
            waits=request.waits,
            warmup=3600.0,  # an hour of background fills the queue; the default day took 4 s a run
        )[0]

    plan = ExperimentPlan(
        (builtin_workflow("blast"), builtin_workflow("statistics")),
        ("perstage", "asa"),
        runs=2,
        cores=(8, 16),
    )
    result = run_experiment(plan, emulation(run_one))
    assert len(result.records) == 2 * 2 * 2 * 2 == len(seen)
    learners = {s: {i for strategy, _, i in seen if strategy == s} for s in plan.strategies}
    assert all(len(ids) == 1 for ids in learners.values()), "a strategy's learner was replaced"
    assert learners["asa"] != learners["perstage"], "strategies share a learner"
    assert {w for _, w, _ in seen} == {"blast-8c", "blast-16c", "statistics-8c", "statistics-16c"}
    asa = [r for r in result.records if r.strategy == "asa"]
    assert [r.order for r in asa] == list(range(len(asa)))


def test_simulation_compares_strategies_on_the_same_queue_states() -> None:
    plan = ExperimentPlan((builtin_workflow("blast"),), ("bigjob", "bigjob"), runs=3, cores=(8,))
    # the same strategy twice: same start points and seeds, so the same runs, only the learner differs
    result = run_experiment(plan, Simulation(default_background(32, seed=2), seed=5))
    first, second = result.records[:3], result.records[3:]
    assert [r.metrics["makespan"] for r in first] == [r.metrics["makespan"] for r in second]
    kept = [r for r in result.records if r.busy is not None]
    assert [r.index for r in kept] == [2, 2]


def test_runtimes_from_the_store_replace_the_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from elastic.cli import main
    from elastic.store import Store

    url = f"sqlite:///{tmp_path / 'store.db'}"
    with Store(url) as store:
        for _ in range(3):
            store.add_stage_runtime("blast", "search", 60.0)
            store.add_stage_runtime("blast", "merge", 30.0)
    out = tmp_path / "out"
    argv = ["compare", "--workflow", "blast", "--peak-cores", "8", "--strategies", "bigjob", "--runs", "2"]
    argv += ["--processors", "32", "--runtimes", "store", "--store", url, "--out", str(out)]
    assert main(argv) == 0
    runs = pd.read_csv(out / "runs.csv")
    # 28 tasks of 60 s (the recorded stage) strongly scaled to 8 tasks: 210 s each; the merge 30 s
    np.testing.assert_allclose(runs["search.execution_time"], 60.0 * 28 / 8, rtol=0.01)
    np.testing.assert_allclose(runs["merge.execution_time"], 30.0, rtol=0.01)
    assert "task runtimes from the store (recorded runs)" in (out / "report.html").read_text()
