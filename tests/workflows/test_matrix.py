"""``elastic run DEMO``: every demo, every strategy, every front-end, on the mock queue and on Slurm.

Each case runs a demo at its test size as a user does (``elastic run NAME --strategy S --backend B
--frontend F``): the real programs (Montage, BLAST+, pandas) in agents' warm workers, on allocations the
strategy asks the backend for. It checks the demo's own verification (what the input planted is found in
the output), the run and every stage's runtime in the store, and, on Slurm, that no batch job outlives
the command.

The whole matrix (3 demos x 6 strategies x 3 front-ends x 2 backends = 108 runs, about a quarter of an
hour here) runs with ``pytest tests/workflows/test_matrix.py --full-matrix``. By default the suite runs a
pairwise subset of 18 cases: every pair of values of any two factors (demo and strategy, strategy and
front-end, front-end and backend, ...) appears in at least one case, so a fault that needs two of them
together is still caught; ``test_the_default_cases_cover_every_pair`` checks that property.
"""

from __future__ import annotations

import importlib
import itertools
from pathlib import Path

import pytest

from elastic.cli import main
from elastic.store import Store
from elastic.strategies.base import STRATEGY_NAMES
from elastic.workflows.demos import DEMOS
from tests.fixtures.slurm_cluster import LocalSlurmCluster
from tests.workflows.conftest import SMALL

FRONTENDS = ("elastic", "parsl", "prefect")
BACKENDS = ("mock", "slurm")
Case = tuple[str, str, str, str]  # demo, strategy, front-end, backend


def full_matrix() -> list[Case]:
    """Every combination of demo, strategy, front-end and backend."""
    return list(itertools.product(sorted(DEMOS), STRATEGY_NAMES, FRONTENDS, BACKENDS))


#: Strategy index whose front-ends of demos 1 and 2 (montage, statistics) are swapped: see pairwise_cases.
SWAPPED = 4


def pairwise_cases() -> list[Case]:
    """18 cases in which every pair of values of two factors appears at least once.

    Strategy i and demo j (18 pairs, the largest product of two factors) fix the case; the front-end is
    (i + j) mod 3 and the backend (i + j) mod 2, which covers the other pairs (checked by a test). For
    strategy ``SWAPPED`` (asa-after) montage and statistics swap front-ends, which keeps every pair: then
    montage, by far the slowest demo under Prefect (about 35 s a case, 10 s through the others), goes
    through Prefect in one case, not two.
    """
    demos = sorted(DEMOS)

    def frontend(i: int, j: int) -> str:
        return FRONTENDS[(i + (j if i != SWAPPED else (0, 2, 1)[j])) % 3]

    return [
        (demo, strategy, frontend(i, j), BACKENDS[(i + j) % 2])
        for i, strategy in enumerate(STRATEGY_NAMES)
        for j, demo in enumerate(demos)
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        cases = full_matrix() if metafunc.config.getoption("--full-matrix") else pairwise_cases()
        metafunc.parametrize("case", cases, ids=["-".join(c) for c in cases])


def test_the_default_cases_cover_every_pair() -> None:
    cases = pairwise_cases()
    factors = [sorted(DEMOS), list(STRATEGY_NAMES), list(FRONTENDS), list(BACKENDS)]
    for a, b in itertools.combinations(range(4), 2):
        seen = {(c[a], c[b]) for c in cases}
        assert seen == set(itertools.product(factors[a], factors[b])), (a, b)
    assert set(cases) <= set(full_matrix()) and len(set(cases)) == len(cases) == 18
    assert sum(1 for c in cases if (c[0], c[2]) == ("montage", "prefect")) == 1


CHECKS = {
    "montage": ("dimensions", "no holes", "star flux", "background offsets removed", "preview"),
    "blast": ("planted matches found", "identity", "position and strand", "decoys"),
    "statistics": (),  # its check names depend on the periods; "every check passed" covers them
}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_demo_under_a_strategy_through_a_front_end_on_a_backend(
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    name, strategy, frontend, backend = case
    module = {"parsl": "elastic.executors.parsl_executor", "prefect": "elastic.executors.prefect_runner"}.get(
        frontend
    )
    if module is not None:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            pytest.skip(f"{module} cannot be imported ({exc}): the front-end's adapter is not installed")
    if frontend == "prefect":
        request.getfixturevalue("prefect_api")
    args = ["run", name, "--strategy", strategy, "--backend", backend, "--frontend", frontend]
    cluster: LocalSlurmCluster | None = None
    if backend == "slurm":
        cluster = request.getfixturevalue("slurm_cluster")
        cluster.cancel_all()
        monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
        monkeypatch.setenv("PATH", cluster.env["PATH"])
        monkeypatch.chdir(tmp_path)  # the batch scripts' output files
        args += ["--partition", "debug", "--poll", "1"]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    work = tmp_path / "work"  # on this one machine every node sees it; on a real cluster, a shared one
    work.mkdir()
    args += ["--size", str(SMALL[name]), "--workdir", str(work), "--store", url]
    try:
        code = main(args)
        printed = capsys.readouterr()
        assert code == 0, printed.out + printed.err
        out = " ".join(printed.out.split())
        assert f"{name} under {strategy} on {backend} through {frontend}: checks" in out
        for check in CHECKS[name]:
            assert f"{check} │ pass" in out, check
        assert f"{name}: every check passed" in out
        with Store(url) as store:
            (run,) = store.runs(workflow=name).itertuples()
            assert (run.status, run.strategy, run.backend) == ("completed", strategy, backend)
            assert run.allocations >= 1
            for stage in DEMOS[name].stages:  # every stage function ran as a task of its stage
                runtimes, _ = store.stage_runtimes(name, stage)
                assert len(runtimes) == 1 and runtimes[0] > 0, stage
        if cluster is not None:
            assert cluster.queue() == [], "a Slurm job outlived the run"
    finally:
        if cluster is not None:
            cluster.cancel_all()
