"""Where the machine time of the speculative-scheduling paper's Figure 8 goes, per strategy.

Eq. (1) of Gainaru et al. (ICPP 2019) divides the useful work by ``P * sigma``. This script splits
``P * sigma`` (core-hours, mean over the runs) into: useful work per application (AbOrganSeq, maCRUISE,
FSL), killed runs (wasted reservations), held idle (a reservation's unused rest that no backfilling job
borrowed, per application) and unheld idle, the latter before and after the last large job completes
(the FSL backlog's drain). It also prints the FSL work done before the last large job completes, the
FSL backlog then, and the drain's length.

Usage: ``.venv/bin/python benchmarks/speculative_fig8_breakdown.py [--runs 20] [--fsl-processors N]``
(``--fsl-processors``: the same FSL work rate as runs of N processors each, instead of the 300 runs of
67 the paper's numbers imply; a sensitivity check).
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from elastic.papers import speculative as s
from elastic.papers.held import HeldBackfill
from elastic.papers.replay import JobSpec
from elastic.simulator.engine import Engine
from elastic.simulator.jobs import COMPLETED, TIMEOUT

HOUR = 3600.0
CASES = (("hpc", False), (f"atoptimal:{s.INTREPID_RATE}", False), ("toptimal", False))


def _app(engine: Engine, j: int) -> str:
    jobs = engine.jobs
    if jobs.name[j] != "large":
        return "FSL"
    return "AbOrganSeq" if jobs.walltime[j] > 5 * HOUR else "maCRUISE"  # requests: >= 29 h, <= 3 h


def breakdown(large: list[s.Large], small: list[JobSpec], strategy: str, seed: int) -> dict[str, float]:
    """Return core-hours per part of ``P * sigma`` for one run (keys as printed)."""
    box: list[Engine] = []
    out = s.simulate(large, strategy, speculative=False, seed=seed, small=small, on_done=box.append)
    eng = box[0]
    policy = eng.policy
    assert isinstance(policy, HeldBackfill)
    jobs = eng.jobs
    last_large = float(out.completion[out.large].max())
    sigma = last_large
    fsl = ~out.large
    while True:  # Eq. (1)'s sigma, as Replayed.utilisation(until_drained=True) computes it
        late = fsl & (out.arrival < sigma) & (out.completion > sigma)
        if not late.any():
            break
        sigma = float(out.completion[late].max())
    parts: dict[str, float] = defaultdict(float)
    events: list[tuple[float, int, str, int]] = []  # (time, busy delta, app holding, held delta)
    for j in range(len(jobs.state)):
        st, c = jobs.state[j], jobs.cores[j]
        a, b = jobs.start[j], jobs.end[j]
        if st not in (COMPLETED, TIMEOUT):
            continue
        kind = "useful" if st == COMPLETED else "killed"
        parts[f"{kind} {_app(eng, j)}"] += c * (min(b, sigma) - min(a, sigma))
        events += [(a, c, "", 0), (b, -c, "", 0)]
        if st == COMPLETED and jobs.name[j] == "large" and j not in policy.lent:
            until = a + jobs.walltime[j]
            if until > b:
                events += [(b, 0, _app(eng, j), c), (until, 0, _app(eng, j), -c)]
    events.sort(key=lambda e: e[0])
    busy, t0 = 0, 0.0
    held: dict[str, int] = defaultdict(int)

    def segment(t0: float, t1: float) -> None:
        idle = s.P - busy
        total = sum(held.values())
        in_holds = min(idle, total)
        for app, h in held.items():
            if total:
                parts[f"held idle {app}"] += in_holds * h / total * (t1 - t0)
        for lo, hi, tag in ((t0, min(t1, last_large), "large jobs left"), (max(t0, last_large), t1, "drain")):
            if hi > lo:
                parts[f"unheld idle, {tag}"] += (idle - in_holds) * (hi - lo)

    for t, db, app, dh in events:
        t = min(t, sigma)
        if t > t0:
            segment(t0, t)
            t0 = t
        busy += db
        if dh:
            held[app] += dh
    if sigma > t0:
        segment(t0, sigma)
    result = {k: v / HOUR for k, v in parts.items()}
    result["P x sigma"] = s.P * sigma / HOUR
    done_before = fsl & (out.completion <= last_large)
    result["FSL work done before the last large job"] = (
        float((out.cores * out.runtime)[done_before].sum()) / HOUR
    )
    backlog = fsl & (out.arrival < last_large) & (out.completion > last_large)
    result["FSL backlog then (runs)"] = float(backlog.sum())
    result["drain (h)"] = (sigma - last_large) / HOUR
    result["last large job (h)"] = last_large / HOUR
    result["utilisation (%)"] = 100 * out.utilisation(until_drained=True)
    return result


def main() -> None:
    """Print the breakdown, mean over ``--runs`` Fig. 8 workloads (the experiment's seeds)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--fsl-processors", type=int, default=None)
    args = parser.parse_args()
    acc: dict[tuple[str, bool], list[dict[str, float]]] = {c: [] for c in CASES}
    for r in range(args.runs):
        large, small = s.intrepid_workload(np.random.default_rng(1000 + r), args.fsl_processors)
        for case in CASES:
            acc[case].append(breakdown(large, small, case[0], r))
    keys = sorted({k for rows in acc.values() for row in rows for k in row})
    names = [c[0] for c in CASES]
    print("| part (core-hours unless said) | " + " | ".join(names) + f" | {names[1]} - hpc |")
    print("|---|" + "---:|" * (len(names) + 1))
    for k in keys:
        means = [float(np.mean([row.get(k, 0.0) for row in acc[c]])) for c in CASES]
        print(f"| {k} | " + " | ".join(f"{m:,.1f}" for m in means) + f" | {means[1] - means[0]:+,.1f} |")


if __name__ == "__main__":
    main()
