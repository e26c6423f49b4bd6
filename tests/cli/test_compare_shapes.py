"""``elastic compare --shapes``: the baselines split too, and ASA read against the best shape of each."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from elastic.cli import main
from elastic.errors import ConfigError
from elastic.report.tables import versus_baselines


def test_the_default_compares_every_shape_of_each_baseline_over_common_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "runs.csv"
    args = ["compare", "--workflow", "montage", "--runs", "3", "--seed", "1", "--processors", "64"]
    assert main([*args, "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    runs = pd.read_csv(csv)
    labels = ["bigjob", "bigjob-split", "bigjob-fine", "perstage", "perstage-split", "perstage-fine", "asa"]
    assert list(dict.fromkeys(runs["strategy"])) == labels
    for label in labels:
        assert re.search(rf"│ {label} +│ +3/3 │", out), label
    assert "means over the 3 runs every strategy completed" in out
    # what the two waits are, under the table (queue wait sums requests that waited side by side)
    assert "may exceed the makespan" in " ".join(out.split())
    # split Big-Job asks for the 28-core stage as two 14-core jobs: it is charged less than one job
    charged = runs.groupby("strategy")["core_hours_charged"].mean()
    assert charged["bigjob-split"] < charged["bigjob"]
    # the verdict names the best shape of each baseline and reads asa against it
    means = runs.groupby("strategy", sort=False)[["makespan", "core_hours_charged"]].mean()
    v = versus_baselines(
        {s: m / 3600.0 for s, m in means["makespan"].items()}, dict(means["core_hours_charged"])
    )
    assert v is not None
    assert f"best Big-Job: {v.bigjob} ({v.bigjob_makespan:.2f} h)" in out
    assert f"best Per-Stage: {v.perstage} ({v.perstage_makespan:.2f} h)" in out
    assert f"asa: gap closed {v.cell('asa').split(',')[0]}, {v.core_hours['asa']:.2f}x" in out
    # and its makespan over the better baseline's, with the interval of resampling the runs in pairs
    better = v.bigjob if v.bigjob_makespan <= v.perstage_makespan else v.perstage
    found = re.search(
        rf"makespan (\S+)x {better}'s \(95 % interval (\S+)-(\S+), resampling the 3 runs in pairs\)",
        " ".join(out.split()),
    )
    assert found is not None
    ratio, low, high = (float(x) for x in found.groups())
    assert ratio == pytest.approx(means["makespan"]["asa"] / means["makespan"][better], abs=0.005)
    assert low <= high


def test_shapes_are_checked_and_plain_keeps_the_paper_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--shapes", "plain,round"])
    assert "unknown allocation shape round; choose from: plain, split, fine" in capsys.readouterr().err
    csv = tmp_path / "runs.csv"
    args = [
        "compare",
        "--runs",
        "1",
        "--processors",
        "32",
        "--strategies",
        "perstage,asa",
        "--shapes",
        "split",
    ]
    assert main([*args, "--csv", str(csv)]) == 0
    assert list(dict.fromkeys(pd.read_csv(csv)["strategy"])) == ["perstage-split", "asa"]
    out = capsys.readouterr().out
    assert "gap closed" not in out  # no Big-Job: nothing to read asa against, and it says why
    assert (
        "asa: not read against the baselines, which needs a Big-Job and a Per-Stage; --strategies has no "
        "bigjob" in " ".join(out.split())
    )


def test_the_fine_shape_runs_each_baseline_as_jobs_of_its_widest_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # BWA's alignment stage has 4-core tasks: fine Big-Job asks its 28 cores as seven 4-core jobs
    from elastic.experiments import simulate_runs
    from elastic.workflow import builtin_workflow

    wf = builtin_workflow("bwa")
    (run,) = simulate_runs(wf, "bigjob-fine", runs=1, seed=1)
    sizes = {e.cores for e in run.events if e.kind.value == "alloc_submit"}
    assert sizes == {4}, sizes
    (plain,) = simulate_runs(wf, "bigjob", runs=1, seed=1)
    assert {e.cores for e in plain.events if e.kind.value == "alloc_submit"} == {wf.max_width}
    with pytest.raises(ConfigError, match="bigjob-fine sets its own job_cores"):
        simulate_runs(wf, "bigjob-fine", runs=1, job_cores=2)
    # one rule for every strategy: each request in jobs of its own widest task, so Per-Stage asks a stage
    # of 1-core tasks in 1-core jobs beside one of 4-core tasks in 4-core jobs
    from elastic.workflow_model import Stage, Workflow

    mixed = Workflow("mixed", (Stage("narrow", 8, 1, runtime=600.0), Stage("wide", 2, 4, runtime=600.0)))
    (per,) = simulate_runs(mixed, "perstage-fine", runs=1, seed=1)
    asked = {(e.stage, e.cores) for e in per.events if e.kind.value == "alloc_submit"}
    assert asked == {("narrow", 1), ("wide", 4)}, asked
    (big,) = simulate_runs(mixed, "bigjob-fine", runs=1, seed=1)
    assert {e.cores for e in big.events if e.kind.value == "alloc_submit"} == {4}
    # on the command line: the fine rows beside the others, and the best shape read from all of them
    csv = tmp_path / "runs.csv"
    args = ["compare", "--workflow", "montage", "--runs", "2", "--seed", "1", "--processors", "64"]
    assert main([*args, "--shapes", "plain,split,fine", "--csv", str(csv)]) == 0
    labels = list(dict.fromkeys(pd.read_csv(csv)["strategy"]))
    assert labels == [
        "bigjob",
        "bigjob-split",
        "bigjob-fine",
        "perstage",
        "perstage-split",
        "perstage-fine",
        "asa",
    ]
    out = " ".join(capsys.readouterr().out.split())
    runs = pd.read_csv(csv)
    means = runs.groupby("strategy", sort=False)["makespan"].mean()
    best = min(("bigjob", "bigjob-split", "bigjob-fine"), key=lambda s: means[s])
    assert f"best Big-Job: {best} " in out


def test_asa_may_be_run_in_a_shape_too_and_is_read_against_the_baselines_like_asa(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "runs.csv"
    args = ["compare", "--workflow", "demo3", "--runs", "2", "--seed", "1", "--processors", "32"]
    strategies = ["--strategies", "bigjob,perstage,asa,asa-fine", "--shapes", "fine", "--weight", "1"]
    assert main([*args, *strategies, "--csv", str(csv)]) == 0
    runs = pd.read_csv(csv)
    assert list(dict.fromkeys(runs["strategy"])) == ["bigjob-fine", "perstage-fine", "asa", "asa-fine"]
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(r"asa-fine: gap closed \S+ %|asa-fine: gap closed n/a", out)
    # asa-fine asks 1-core jobs only (demo3's tasks are 1-core); asa its own, wider pieces
    from elastic.experiments import simulate_runs
    from elastic.workflow import builtin_workflow

    for label, one_core in (("asa-fine", True), ("asa", False)):
        (run,) = simulate_runs(builtin_workflow("demo3"), label, runs=1, seed=1)
        sizes = {e.cores for e in run.events if e.kind.value == "alloc_submit"}
        assert (sizes == {1}) is one_core, (label, sizes)
    with pytest.raises(SystemExit):
        main([*args, "--strategies", "bigjob,bigjob-fine"])  # a baseline's shape comes from --shapes
    err = " ".join(capsys.readouterr().err.split())
    assert "unknown strategy bigjob-fine" in err and "(bigjob-fine: --strategies bigjob --shapes fine)" in err
    # --weight is asa's, in any of its shapes, and the table's title says it
    assert main([*args, "--strategies", "asa-fine", "--weight", "0.5"]) == 0
    assert "asa's weight 0.5 (--weight)" in " ".join(capsys.readouterr().out.split())


def test_shapes_without_a_baseline_are_refused_not_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["compare", "--workflow", "demo3", "--runs", "2", "--seed", "1"]
    assert main([*args, "--strategies", "asa", "--shapes", "fine"]) == 2
    err = capsys.readouterr().err
    assert "--strategies asa has no baseline (bigjob, perstage)" in err
    assert "(--strategies asa-fine)" in err
    assert main([*args, "--strategies", "asa-fine", "--shapes", "plain,split"]) == 2
    assert "(--strategies asa-split)" in capsys.readouterr().err
    # with a baseline, the shapes are its own: no error
    assert main([*args, "--strategies", "perstage,asa", "--shapes", "fine"]) == 0


def test_of_baseline_shapes_as_fast_the_cheapest_is_the_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # demo3, seed 1, one run: every Per-Stage shape and two Big-Job shapes take the same time; asa is read
    # against the cheapest of them, not the first in row order
    csv = tmp_path / "runs.csv"
    assert main(["compare", "--workflow", "demo3", "--runs", "1", "--seed", "1", "--csv", str(csv)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    runs = pd.read_csv(csv).set_index("strategy")
    for kind in ("bigjob", "perstage"):
        shapes = runs[[s.startswith(kind) for s in runs.index]]
        fastest = shapes[shapes["makespan"] == shapes["makespan"].min()]
        assert len(fastest) > 1, "the shapes no longer tie: pick another seed"
        best = str(fastest["core_hours_charged"].idxmin())
        label = {"bigjob": "Big-Job", "perstage": "Per-Stage"}[kind]
        assert f"best {label}: {best} " in out
    ratio = runs.loc["asa", "core_hours_charged"] / runs.loc["perstage-fine", "core_hours_charged"]
    assert f"{ratio:.2f}x the best Per-Stage's core-hours" in out
