"""Small versions of the on-the-fly vs. reservation experiment: the direction of each headline effect."""

from __future__ import annotations

import numpy as np
import pytest

from elastic.errors import ConfigError
from elastic.papers import onthefly as o
from elastic.papers.replay import JobSpec, replay


def _runs(pattern: str, mu_er: float, seeds: range = range(2)) -> dict[str, list[o.Outcome]]:
    out: dict[str, list[o.Outcome]] = {s: [] for s in o.SCHEDULERS}
    for seed in seeds:
        work = o.draw(pattern, mu_er, np.random.default_rng(seed), jobs=300)
        for s in o.SCHEDULERS:
            out[s].append(o.simulate(work, s, nodes=15))
    return out


@pytest.mark.parametrize("pattern", ["large80", "equal"])
def test_on_the_fly_beats_reservations_in_utilisation_and_stretch(pattern: str) -> None:
    res = _runs(pattern, o.TYPICAL_ER)
    util = {s: np.mean([r.utilisation for r in v]) for s, v in res.items()}
    stretch = {s: np.mean([r.stretch for r in v]) for s, v in res.items()}
    assert max(util["sejf"], util["lejf"]) > util["rbs"]
    assert min(stretch["sejf"], stretch["lejf"]) < stretch["rbs"]
    assert stretch["sejf"] < stretch["lejf"]  # favouring short jobs lowers the average stretch
    assert all(r.failures == 0 for s in ("sejf", "lejf") for r in res[s])  # on-the-fly never kills


def test_reservations_fail_less_and_waste_less_as_requests_grow() -> None:
    low, high = _runs("normal", 0.5, range(1)), _runs("normal", 1.5, range(1))
    assert high["rbs"][0].failures < low["rbs"][0].failures
    assert high["rbs"][0].utilisation > low["rbs"][0].utilisation


def test_estimate_order_sees_the_estimate_not_the_runtime() -> None:
    # Two jobs queued behind a blocker: the longer one has the shorter estimate, so SEJF starts it first.
    jobs = [JobSpec(0.0, 1, 10.0, (10.0,)), JobSpec(1.0, 1, 100.0, (100.0,)), JobSpec(1.0, 1, 5.0, (5.0,))]
    estimates = [10.0, 1.0, 50.0]
    policy = o.EstimateOrder(longest=False)
    out = replay(jobs, processors=1, policy=policy, on_submit=lambda j, i, k: policy.know(j, estimates[i]))
    assert out.completion[1] < out.completion[2]


def test_rbs_kills_an_underestimated_job_and_resubmits_it_larger() -> None:
    work = o.Workload(np.array([0.0]), np.array([100.0]), np.array([0.5]))
    assert o.simulate(work, "rbs", nodes=1).failures == 2  # 50 -> 75 -> 112.5


def test_bad_input_is_refused_before_any_work() -> None:
    with pytest.raises(ConfigError, match="pattern"):
        o.draw("nope", 1.0, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="mu_ER"):
        o.draw("equal", 0.0, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="figure"):
        o.reproduce((7,))
