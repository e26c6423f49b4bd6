"""Decision time of the CP-SAT dispatcher with 1,000 queued jobs (goal: median under 100 ms).

Each repetition builds a busy 128-core partition: running jobs hold all but a few cores, and 1,000 jobs
of the Eurora-like mix (``elastic.papers.cpdispatch.eurora_like``) wait in the queue with data-driven-like
predictions (the true runtime times a log-normal error). One :meth:`CpDispatch.schedule` call is timed:
the priority sort of the whole queue, the model of its 100 highest-priority jobs, the solve (50 ms
limit, one worker) and the starts. Printed: median and 99th percentile over the repetitions, how many
decisions came from the solver and how many from the list-schedule fallback, and the same for the
PBS-like rule and EASY on the same states (for scale).

Run: ``.venv/bin/python benchmarks/bench_cp_dispatch.py [--repeat 50] [--limit 0.05]`` (about 10 s).
Needs the ``cp`` extra (OR-Tools).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from elastic.papers.cpdispatch import eurora_like
from elastic.papers.dispatchers import PredictedEasy, PriorityRule
from elastic.simulator.cpsat import CpDispatch
from elastic.simulator.engine import Engine

CORES = 128
QUEUED = 1000
FREE = 24  # cores left free when the decision is taken


class _Hold:
    """A policy that starts nothing: the state is set up by hand."""

    name = "hold"

    def __init__(self) -> None:
        self.reservations: dict[int, float] = {}

    def schedule(self, engine: Engine) -> None:
        """Start nothing."""


def busy_state(seed: int) -> tuple[Engine, dict[int, float]]:
    """Return an engine at t = 1 h with CORES - FREE cores running and QUEUED jobs queued, and predictions."""
    rng = np.random.default_rng(seed)
    jobs = eurora_like(QUEUED + 400, rng, cores=CORES)
    eng = Engine(nodes=CORES, policy=_Hold())
    durations: dict[int, float] = {}
    noise = rng.lognormal(0.0, 0.5, len(jobs))
    i = 0
    while eng.cluster.free > FREE:  # the running jobs, started at t = 0
        c = min(int(jobs.cores[i]), eng.cluster.free - FREE)
        j = eng.submit(cores=c, walltime=float(jobs.request[i]), runtime=float(jobs.runtime[i]) + 3600.0)
        durations[j] = float(jobs.runtime[i] * noise[i]) + 3600.0
        eng.queue.remove(j)
        eng.start(j)
        i += 1
    eng.run(until=3600.0)
    for k in range(i, i + QUEUED):
        c, wall, run = int(jobs.cores[k]), float(jobs.request[k]), float(jobs.runtime[k])
        j = eng.submit(cores=c, walltime=wall, runtime=run)
        durations[j] = min(float(jobs.runtime[k] * noise[k]), float(jobs.request[k]))
    assert len(eng.queue) == QUEUED, len(eng.queue)
    return eng, durations


def timed(make: Callable[[dict[int, float]], object], repeat: int) -> tuple[np.ndarray, list[object]]:
    """Time one ``schedule`` call of a fresh policy on ``repeat`` fresh busy states."""
    times, policies = [], []
    for r in range(repeat):
        eng, durations = busy_state(r)
        policy = make(durations)
        eng.policy = policy  # type: ignore[assignment]
        start = time.perf_counter()
        policy.schedule(eng)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
        policies.append(policy)
    return np.array(times), policies


def main() -> None:
    """Print the decision times and the goal."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--limit", type=float, default=0.05, help="CP-SAT seconds per decision")
    args = ap.parse_args()
    print(f"{QUEUED} queued jobs, {CORES - FREE} of {CORES} cores busy, {args.repeat} decisions each")
    cp_times, cps = timed(lambda d: CpDispatch(d, time_limit=args.limit), args.repeat)
    solved = sum(p.solved for p in cps)  # type: ignore[attr-defined]
    fallbacks = sum(p.fallbacks for p in cps)  # type: ignore[attr-defined]
    for name, times in (
        ("cp (CP-SAT)", cp_times),
        ("pbs-like rule", timed(PriorityRule, args.repeat)[0]),
        ("easy (predictions)", timed(PredictedEasy, args.repeat)[0]),
    ):
        med, p99 = np.median(times) * 1000, np.percentile(times, 99) * 1000
        print(f"{name:20s} median {med:7.1f} ms   p99 {p99:7.1f} ms")
    print(f"cp decisions from the solver: {solved}, from the list-schedule fallback: {fallbacks}")
    median = float(np.median(cp_times))
    verdict = "met" if median < 0.1 else "NOT met"
    print(f"goal: median decision under 100 ms with {QUEUED} queued jobs: {verdict} ({median * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
