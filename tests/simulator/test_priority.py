"""Priority models: where a dependency- or begin-held job ranks once eligible (issue 9).

Hand-made queues whose start order under each model is worked out by hand, and hypothesis properties
that check the engine against the model computed independently of it.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic.backends.mock import MockBackend
from elastic.batch import DependencyKind
from elastic.errors import ConfigError, UnknownNameError
from elastic.simulator.engine import Engine
from elastic.simulator.priority import (
    DEFAULT_PRIORITY,
    PRIORITY_MODELS,
    EligibleRanking,
    describe_priority,
)

AFTERANY = DependencyKind.AFTERANY


def _starts(eng: Engine, jobs: dict[str, int]) -> dict[str, float]:
    eng.run()
    return {name: eng.jobs.start[j] for name, j in jobs.items()}


def _dependency_queue(priority: str, policy: str = "fcfs", **kw: float) -> dict[str, float]:
    """4 cores. A holds them 0-100. H (submitted at 0) waits for A; B is submitted at 10 and waits for
    cores; C is submitted at 20 with --begin 30. Each of H, B, C needs all 4 cores for 50 s."""
    eng = Engine(nodes=4, policy=policy, priority=priority, **kw)
    a = eng.submit(cores=4, walltime=100.0, runtime=100.0)
    h = eng.submit(cores=4, walltime=50.0, runtime=50.0, dependencies=[(AFTERANY, a)])
    eng.run(until=10.0)
    b = eng.submit(cores=4, walltime=50.0, runtime=50.0)
    eng.run(until=20.0)
    c = eng.submit(cores=4, walltime=50.0, runtime=50.0, begin=30.0)
    return _starts(eng, {"A": a, "H": h, "B": b, "C": c})


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_basic_and_accrue_always_keep_the_submit_place(policy: str) -> None:
    for priority in ("basic", "accrue-always"):
        assert _dependency_queue(priority, policy) == {"A": 0.0, "H": 100.0, "B": 150.0, "C": 200.0}


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_age_ranks_a_held_job_from_when_it_became_eligible(policy: str) -> None:
    # B waits since 10, C since its begin time 30, H only since A ended at 100.
    assert _dependency_queue("age", policy) == {"A": 0.0, "B": 100.0, "C": 150.0, "H": 200.0}


def test_age_is_the_default() -> None:
    assert DEFAULT_PRIORITY == "age" and Engine(nodes=1).ranking.name == "age"
    assert _dependency_queue(DEFAULT_PRIORITY) == _dependency_queue("age")


def test_capped_age_gives_the_submit_place_back() -> None:
    # D is submitted at 0 with --begin 40, E at 5; both wait for A until 100. With PriorityMaxAge 50 s
    # both ages are capped by 100 (D eligible 60 s, E 95 s): equal priority, so submit order: D first.
    def starts(max_age: float) -> dict[str, float]:
        eng = Engine(nodes=4, policy="fcfs", priority="age", max_age=max_age)
        a = eng.submit(cores=4, walltime=100.0, runtime=100.0)
        d = eng.submit(cores=4, walltime=50.0, runtime=50.0, begin=40.0)
        eng.run(until=5.0)
        e = eng.submit(cores=4, walltime=50.0, runtime=50.0)
        return _starts(eng, {"A": a, "D": d, "E": e})

    assert starts(50.0) == {"A": 0.0, "D": 100.0, "E": 150.0}
    assert starts(70.0) == {"A": 0.0, "E": 100.0, "D": 150.0}  # D eligible only 60 s at 100
    assert starts(math.inf) == {"A": 0.0, "E": 100.0, "D": 150.0}


def test_jobs_eligible_at_the_same_instant_go_in_submit_order() -> None:
    # P1 and P2 end together at 100 (P1's end is processed first); the child of P2 was submitted
    # before the child of P1, so it ranks first (Slurm: equal priority -> submit time).
    eng = Engine(nodes=4, policy="fcfs", priority="age")
    p1 = eng.submit(cores=2, walltime=100.0, runtime=100.0)
    p2 = eng.submit(cores=2, walltime=100.0, runtime=100.0)
    eng.run(until=1.0)
    c2 = eng.submit(cores=4, walltime=50.0, runtime=50.0, dependencies=[(AFTERANY, p2)])
    eng.run(until=2.0)
    c1 = eng.submit(cores=4, walltime=50.0, runtime=50.0, dependencies=[(AFTERANY, p1)])
    assert _starts(eng, {"c2": c2, "c1": c1}) == {"c2": 100.0, "c1": 150.0}
    assert eng.ranking.eligible_at == {c2: 100.0, c1: 100.0}


def test_bad_model_and_max_age_are_refused_with_the_choices() -> None:
    with pytest.raises(UnknownNameError, match=r"priority model 'multifactor'.*accrue-always, age, basic"):
        Engine(nodes=1, priority="multifactor")
    with pytest.raises(ConfigError, match="max_age must be > 0 seconds"):
        Engine(nodes=1, max_age=0.0)
    with pytest.raises(UnknownNameError):
        EligibleRanking("fifo")


def test_the_backend_default_is_age_and_models_are_described() -> None:
    assert MockBackend(nodes=1).priority == "age"
    assert MockBackend(nodes=1, priority="basic").priority == "basic"
    assert "ACCRUE_ALWAYS" in describe_priority("accrue-always")


# -- properties ---------------------------------------------------------------------------------

job_st = st.fixed_dictionaries(
    {
        "gap": st.integers(0, 20),
        "runtime": st.integers(0, 30),
        "begin": st.one_of(st.none(), st.integers(0, 60)),
        "deps": st.lists(st.tuples(st.sampled_from(list(DependencyKind)), st.integers(0, 1000)), max_size=2),
    }
)


def _submit_all(eng: Engine, jobs: list[dict]) -> list[int]:
    t = 0.0
    index: list[int] = []
    for job in jobs:
        t += job["gap"]
        eng.run(until=t)
        deps = [(kind, index[p % len(index)]) for kind, p in job["deps"]] if index else []
        index.append(
            eng.submit(
                cores=1,
                walltime=float(job["runtime"]) + 1.0,
                runtime=float(job["runtime"]),
                dependencies=deps,
                begin=None if job["begin"] is None else t + job["begin"],
            )
        )
    eng.run()
    return index


def _eligible_time(eng: Engine, j: int) -> float:
    """When job ``j`` could first start, from its parents' records (independent of the engine's queue)."""
    jobs = eng.jobs
    t = max(jobs.submit[j], jobs.begin[j])
    for dep in jobs.deps.get(j, []):
        p = dep.parent
        if dep.kind is DependencyKind.AFTER and not math.isnan(jobs.start[p]):
            t = max(t, jobs.start[p])
        else:
            t = max(t, jobs.end[p])
    return t


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    jobs=st.lists(job_st, min_size=2, max_size=14),
    priority=st.sampled_from(PRIORITY_MODELS),
    max_age=st.sampled_from([math.inf, 15.0]),
)
def test_one_core_fcfs_starts_jobs_in_the_models_priority_order(jobs, priority, max_age) -> None:
    # On one core under FCFS every start picks the first eligible job in priority order, so the start
    # order checks the model: at the start of job a, every job b waiting then (eligible, not started)
    # must rank after a. Key at time t: basic and accrue-always (submit, index); age: (max(eligible,
    # t - max_age), submit, index): the capped age gives the submit order back.
    eng = Engine(nodes=1, policy="fcfs", priority=priority, max_age=max_age)
    index = _submit_all(eng, jobs)
    rec = eng.jobs
    started = [j for j in index if not math.isnan(rec.start[j])]
    eligible = {j: _eligible_time(eng, j) for j in started}

    def key(j: int, t: float) -> tuple[float, ...]:
        if priority == "age":
            return (max(eligible[j], t - max_age), rec.submit[j], j)
        return (rec.submit[j], j)

    for a in started:
        t = rec.start[a]
        for b in started:
            if b != a and eligible[b] <= t < rec.start[b]:
                assert key(a, t) < key(b, t), (a, b, t)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(job_st, min_size=1, max_size=14), nodes=st.integers(1, 3))
def test_accrue_always_orders_exactly_like_basic(jobs, nodes) -> None:
    # Age from submit is a non-increasing function of the submit time (ties: submit time), so with age
    # as the only factor ACCRUE_ALWAYS gives the FIFO order of priority/basic: identical schedules.
    records = []
    for priority in ("basic", "accrue-always"):
        eng = Engine(nodes=nodes, policy="easy", priority=priority)
        _submit_all(eng, jobs)
        records.append(eng.records())
    assert records[0].equals(records[1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(job_st, min_size=1, max_size=14), priority=st.sampled_from(PRIORITY_MODELS))
def test_eligible_at_is_when_the_last_hold_cleared(jobs, priority) -> None:
    eng = Engine(nodes=2, policy="easy", priority=priority)
    index = _submit_all(eng, jobs)
    for j, at in eng.ranking.eligible_at.items():
        assert j in index and at == _eligible_time(eng, j) and at > eng.jobs.submit[j] - 1e-9
        assert math.isnan(eng.jobs.start[j]) or eng.jobs.start[j] >= at
