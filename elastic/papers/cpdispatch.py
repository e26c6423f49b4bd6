"""Galleguillos et al., *Constraint Programming-Based Job Dispatching for Modern HPC Applications* (CP 2019).

The paper's claim: CP dispatchers that prioritise by slowdown and use job-duration predictions (PCP3 /
HCP3) cut the mean waiting time and slowdown on a workload dominated by short jobs, and decide fast
enough for on-line use. It compares them with the PBS dispatcher of the Eurora trace; Section 6.2 reports
PCP3-D 37 % lower slowdown and 29 % lower wait than PCP1-W, and Table 2 average decision times of
0.5-0.7 s (OR-Tools 6.7, the original dispatchers' 1 s limit).

Here, on the simulator, the dispatchers run the same workload with the same duration information
(:mod:`elastic.papers.dispatchers` holds the baselines and the predictor):

* ``pbs``: a priority-rule dispatcher like PBS's (longest-waiting first, smaller demand first on ties;
  every job that fits starts; no reservation);
* ``easy``: FCFS with EASY backfilling whose shadow time and backfill test use the durations;
* ``cp``: :class:`~elastic.simulator.cpsat.CpDispatch` (CP-SAT, slowdown objective: PCP3/HCP3);
  ``cp1``: the same with the waiting-time objective (PCP1/HCP1); ``cp-fit``: ``cp`` modelling only the
  jobs that fit now (the paper's reduction).

Durations come from one of: ``W`` the requested walltime, ``D`` the data-driven heuristic
(:class:`~elastic.papers.dispatchers.HistoryPredictor`: the mean of the last two runtimes of the same
user and job name, learnt on-line as jobs end) or ``R`` the real runtime. The workload
(:func:`eurora_like`) is the paper's Eurora mix of short (93 %), medium (6 %) and long (1 %) jobs with
queue-default requests, scaled to a 128-core partition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from elastic.errors import ConfigError
from elastic.papers.dispatchers import HistoryPredictor, PredictedEasy, PriorityRule
from elastic.papers.report import (
    IN_TREND,
    NOT_REPRODUCED,
    REPRODUCED,
    Check,
    PaperReport,
    Table,
    size_verdict,
    worst,
)
from elastic.simulator.cpsat import CpDispatch, require_ortools
from elastic.simulator.engine import Engine

__all__ = [
    "DISPATCHERS",
    "PREDICTIONS",
    "TITLE",
    "Jobs",
    "Result",
    "eurora_like",
    "reproduce",
    "simulate",
]

TITLE = "Constraint Programming-Based Job Dispatching for Modern HPC Applications (CP 2019), Sections 5-6"

HOUR = 3600.0
CORES = 128
"""Cores of the simulated partition (Eurora had 64 nodes of 16 cores; scaled down, pooled)."""
LOAD = 0.95
"""Offered load: arrival rate times mean core-seconds over the cores ('heavy workload')."""
DISPATCHERS = ("pbs", "easy", "cp", "cp1", "cp-fit")
"""``cp``: slowdown objective (PCP3/HCP3); ``cp1``: waiting-time objective (PCP1/HCP1, one queue);
``cp-fit``: ``cp`` with the paper's reduction to the jobs that fit now."""
PREDICTIONS = ("W", "D", "R")
#: Job-length classes of the paper (Section 5): short < 1 h <= medium < 5 h <= long.
CLASSES = (("short", 0.0, HOUR), ("medium", HOUR, 5 * HOUR), ("long", 5 * HOUR, math.inf))


@dataclass(frozen=True, slots=True)
class Jobs:
    """A workload: per job arrival, cores, runtime, request (seconds), user and job name."""

    arrival: npt.NDArray[np.float64]
    cores: npt.NDArray[np.int64]
    runtime: npt.NDArray[np.float64]
    request: npt.NDArray[np.float64]
    user: npt.NDArray[np.int64]
    name: npt.NDArray[np.int64]

    def __len__(self) -> int:
        """Return the number of jobs."""
        return len(self.arrival)


def eurora_like(
    n: int, rng: np.random.Generator, *, cores: int = CORES, load: float = LOAD, users: int = 40
) -> Jobs:
    """Draw ``n`` jobs with the Eurora workload's characteristics (paper, Section 5).

    Each user runs a few job *names* (applications); a name has a class (short 93.14 %, medium 6.10 %,
    long 0.76 %) and a typical runtime, and each run varies around it (log-normal, sigma 0.4), so a
    name's history predicts its runs. Requests are the queue's default wall-time (users "tend to use the
    maximum wall-time"): 30 minutes for the debug queue (short names under 10 minutes), 6 hours for the
    parallel queue, 24 hours for long jobs; a run never exceeds its request. Arrivals are Poisson at
    the rate giving ``load``.

    Raises
    ------
    ConfigError
        ``n < 1``, ``cores < 32``, ``load`` not in (0, 2] or ``users < 1``.
    """
    if n < 1 or cores < 32 or not 0 < load <= 2 or users < 1:
        raise ConfigError(
            f"need n >= 1, cores >= 32, 0 < load <= 2, users >= 1; got {n}, {cores}, {load}, {users}"
        )
    names_per_user = 4
    kinds = rng.choice(3, size=users * names_per_user, p=[0.9314, 0.0610, 0.0076])
    base = np.where(
        kinds == 0,
        np.exp(rng.uniform(np.log(30.0), np.log(50 * 60.0), kinds.size)),
        np.where(
            kinds == 1,
            rng.uniform(1.2 * HOUR, 4.5 * HOUR, kinds.size),
            rng.uniform(5.5 * HOUR, 20 * HOUR, kinds.size),
        ),
    )
    request = np.where(kinds == 2, 24 * HOUR, np.where(base < 600.0, 1800.0, 6 * HOUR))
    width = rng.choice([1, 2, 4, 8, 16, 32], size=kinds.size, p=[0.45, 0.15, 0.15, 0.12, 0.09, 0.04])
    name = rng.integers(0, kinds.size, n)
    runtime = np.minimum(base[name] * rng.lognormal(0.0, 0.4, n), request[name])
    runtime = np.maximum(runtime, 1.0)
    job_cores = np.minimum(width[name], cores).astype(np.int64)
    work = float((runtime * job_cores).mean())
    gaps = rng.exponential(work / (load * cores), n)
    arrival = np.cumsum(gaps) - gaps[0]
    return Jobs(
        arrival,
        job_cores,
        runtime,
        request[name].astype(np.float64),
        (name // names_per_user).astype(np.int64),
        name.astype(np.int64),
    )


class _Learner:
    """Observer feeding ended jobs' runtimes to the predictor."""

    def __init__(self, engine_ids: dict[int, int], jobs: Jobs, predictor: HistoryPredictor) -> None:
        self.ids = engine_ids
        self.jobs = jobs
        self.predictor = predictor
        self.engine: Engine | None = None

    def job_started(self, job: int) -> None:
        """Nothing to learn when a job starts."""

    def job_ended(self, job: int) -> None:
        """Learn the ended job's runtime."""
        assert self.engine is not None
        i = self.ids[job]
        t = self.engine.jobs
        self.predictor.learn(int(self.jobs.user[i]), int(self.jobs.name[i]), t.end[job] - t.start[job])


@dataclass(frozen=True, slots=True)
class Result:
    """One dispatcher's run: per-job wait and slowdown, and its decision times (CP only)."""

    wait: npt.NDArray[np.float64]
    slowdown: npt.NDArray[np.float64]
    runtime: npt.NDArray[np.float64]
    decision_times: tuple[float, ...] = ()
    fallbacks: int = 0

    def mean(self, metric: str, cls: str | None = None) -> float:
        """Return the mean ``wait`` or ``slowdown`` over all jobs or one length class."""
        values = self.wait if metric == "wait" else self.slowdown
        if cls is None:
            return float(values.mean())
        lo, hi = next((lo, hi) for c, lo, hi in CLASSES if c == cls)
        mask = (self.runtime >= lo) & (self.runtime < hi)
        return float(values[mask].mean()) if mask.any() else math.nan


def simulate(
    jobs: Jobs,
    dispatcher: str,
    prediction: str,
    *,
    cores: int = CORES,
    time_limit: float = 0.05,
    work_limit: float | None = None,
) -> Result:
    """Replay ``jobs`` under one dispatcher with one kind of duration information.

    ``time_limit`` and ``work_limit`` go to :class:`~elastic.simulator.cpsat.CpDispatch` (a work limit
    makes the CP runs reproducible on a busy machine).

    Raises
    ------
    ConfigError
        Unknown dispatcher or prediction; OR-Tools missing for ``cp``.
    """
    if dispatcher not in DISPATCHERS:
        raise ConfigError(f"unknown dispatcher {dispatcher!r}; use one of {', '.join(DISPATCHERS)}")
    if prediction not in PREDICTIONS:
        raise ConfigError(f"unknown prediction {prediction!r}; use W (walltime), D (data-driven) or R (real)")
    durations: dict[int, float] = {}
    policy: PriorityRule | PredictedEasy | CpDispatch
    if dispatcher.startswith("cp"):
        policy = CpDispatch(
            durations,
            time_limit=time_limit,
            objective="wait" if dispatcher == "cp1" else "slowdown",
            fitting_only=dispatcher == "cp-fit",
            work_limit=work_limit,
        )
    elif dispatcher == "easy":
        policy = PredictedEasy(durations)
    else:
        policy = PriorityRule(durations)
    predictor = HistoryPredictor()
    ids: dict[int, int] = {}
    learner = _Learner(ids, jobs, predictor)
    eng = Engine(nodes=cores, policy=policy, observer=learner)
    learner.engine = eng
    index = np.empty(len(jobs), dtype=np.int64)
    for i in range(len(jobs)):
        eng.run(until=float(jobs.arrival[i]))
        j = len(eng.jobs)
        req = float(jobs.request[i])
        if prediction == "W":
            durations[j] = req
        elif prediction == "R":
            durations[j] = float(jobs.runtime[i])
        else:
            durations[j] = predictor.predict(int(jobs.user[i]), int(jobs.name[i]), req)
        ids[j] = i
        index[i] = eng.submit(
            cores=int(jobs.cores[i]), walltime=req, runtime=float(jobs.runtime[i]), notify=True
        )
    eng.run()
    t = eng.jobs
    start = np.array([t.start[j] for j in index])
    end = np.array([t.end[j] for j in index])
    wait = start - jobs.arrival
    run = end - start
    times = tuple(policy.decision_times) if isinstance(policy, CpDispatch) else ()
    fallbacks = policy.fallbacks if isinstance(policy, CpDispatch) else 0
    return Result(wait, (wait + run) / run, run, times, fallbacks)


#: (dispatcher, prediction) pairs of the experiment, in table order.
CASES = (
    *((d, p) for p in PREDICTIONS for d in ("pbs", "easy", "cp")),
    ("cp1", "W"),
    ("cp-fit", "D"),
)


WORK_LIMIT = 0.002
"""CP-SAT deterministic time units per decision in :func:`reproduce` (about 10-20 ms of CPU here)."""


def reproduce(runs: int = 1, jobs: int = 1500, *, work_limit: float = WORK_LIMIT) -> PaperReport:
    """Run every case of :data:`CASES` on ``runs`` workloads; return the report with the verdicts.

    Parameters
    ----------
    runs : int
        Workloads averaged (>= 1).
    jobs : int
        Jobs per workload (>= 1).
    work_limit : float
        CP-SAT deterministic time per decision (reproducible whatever the machine's load).

    Raises
    ------
    ConfigError
        ``runs < 1``, ``jobs < 1``, or OR-Tools missing (the message names the ``cp`` extra).
    """
    if runs < 1 or jobs < 1:
        raise ConfigError(f"runs and jobs must be >= 1, got {runs} and {jobs}")
    require_ortools()
    acc: dict[tuple[str, str], list[Result]] = {c: [] for c in CASES}
    for r in range(runs):
        work = eurora_like(jobs, np.random.default_rng(2019 + r))
        for d, p in CASES:
            acc[(d, p)].append(simulate(work, d, p, work_limit=work_limit))
    return _report(acc, runs, jobs, work_limit)


def _avg(results: Sequence[Result], metric: str, cls: str | None = None) -> float:
    return float(np.nanmean([r.mean(metric, cls) for r in results]))


_NAMES = {"pbs": "PBS-like", "easy": "EASY", "cp": "CP3", "cp1": "CP1", "cp-fit": "CP3 fit-only"}


def _report(
    acc: Mapping[tuple[str, str], Sequence[Result]], runs: int, jobs: int, limit: float
) -> PaperReport:
    report = PaperReport("cp", TITLE, runs, choices=list(_choices(jobs, limit)))
    rows = []
    for (d, p), res in acc.items():
        times = np.concatenate([np.asarray(r.decision_times) for r in res])
        rows.append(
            (
                f"{_NAMES[d]}-{p}",
                f"{_avg(res, 'wait'):.0f}",
                f"{_avg(res, 'slowdown'):.2f}",
                *(f"{_avg(res, 'slowdown', c):.2f}" for c, _, _ in CLASSES),
                f"{np.median(times) * 1000:.0f} / {np.percentile(times, 99) * 1000:.0f}"
                if times.size
                else "-",
            )
        )
    report.tables.append(
        Table(
            f"Mean wait [s] and slowdown per dispatcher and duration source ({jobs} jobs, {CORES} cores)",
            (
                "Dispatcher-durations",
                "Wait",
                "Slowdown",
                "Slowdown short",
                "Slowdown medium",
                "Slowdown long",
                "Decision ms median / p99",
            ),
            tuple(rows),
        )
    )

    def cut(a: tuple[str, str], b: tuple[str, str], metric: str) -> float:
        return 1.0 - _avg(acc[a], metric) / _avg(acc[b], metric)

    sd3, w3 = cut(("cp", "D"), ("cp1", "W"), "slowdown"), cut(("cp", "D"), ("cp1", "W"), "wait")
    v_pred = worst([size_verdict(sd3 > 0, sd3, 0.37, 0.37), size_verdict(w3 > 0, w3, 0.29, 0.29)])
    pbs = {p: (cut(("cp", p), ("pbs", p), "slowdown"), cut(("cp", p), ("pbs", p), "wait")) for p in "DR"}
    v_pbs = REPRODUCED if all(min(v) > 0 for v in pbs.values()) else NOT_REPRODUCED
    easy = {
        p: (cut(("cp", p), ("easy", p), "slowdown"), cut(("cp", p), ("easy", p), "wait")) for p in PREDICTIONS
    }
    v_easy = REPRODUCED if all(min(easy[p]) > 0 for p in "DR") else NOT_REPRODUCED
    w3_vs_w1 = _avg(acc[("cp", "W")], "slowdown") > _avg(acc[("cp1", "W")], "slowdown")
    worse = [
        c
        for c in ("medium", "long")
        if _avg(acc[("cp", "D")], "slowdown", c)
        > 1.25 * min(_avg(acc[(b, "D")], "slowdown", c) for b in ("pbs", "easy"))
    ]
    report.checks += [
        Check(
            "Sect. 6.2",
            "PCP3-D vs PCP1-W: slowdown -37 %, wait -29 %",
            f"CP3-D vs CP1-W: slowdown {-sd3:+.0%}, wait {-w3:+.0%}",
            v_pred,
            "direction and size hold"
            if v_pred == REPRODUCED
            else (
                "direction holds; the size differs from the paper's: CP1-W here is our own waiting-time "
                "variant of the same model, and the synthetic workload's job names repeat more than "
                "Eurora's (the predictions are better)"
                if v_pred == IN_TREND
                else "CP3-D is not below CP1-W in both metrics"
            ),
        ),
        Check(
            "Fig. 2 (W)",
            "PCP3-W worse than PCP1-W: with over-estimated walltimes the slowdown priority does not help",
            "CP3-W {} CP1-W in slowdown".format("above" if w3_vs_w1 else "below"),
            REPRODUCED if w3_vs_w1 else NOT_REPRODUCED,
            "as the paper"
            if w3_vs_w1
            else "our requests are queue defaults (30 min for the shortest names, 6 h, 24 h), so ranking by "
            "walltime ranks by queue, which already tells short jobs from long ones",
        ),
        Check(
            "Figs. 2-3",
            "PCP3-D and PCP3-R below PBS in slowdown and wait",
            "CP3 vs PBS-like slowdown / wait: "
            + ", ".join(f"{p} {-a:+.0%} / {-b:+.0%}" for p, (a, b) in pbs.items()),
            v_pbs,
            "PBS's recorded waits are not available: the baseline is a priority rule of PBS's kind",
        ),
        Check(
            "vs EASY",
            "not in the paper (asked by the issue): CP below EASY with the same predictions",
            "CP3 vs EASY slowdown / wait: "
            + ", ".join(f"{p} {-a:+.0%} / {-b:+.0%}" for p, (a, b) in easy.items()),
            v_easy,
            "checked for D and R; with walltimes (W) the paper itself finds the slowdown priority unhelpful",
        ),
        Check(
            "Fig. 4",
            "giving priority to short jobs does not penalise medium and long jobs",
            "CP3-D medium and long slowdowns within 1.25x of the better baseline's"
            if not worse
            else f"CP3-D {' and '.join(worse)} slowdown above 1.25x the better baseline's",
            REPRODUCED if not worse else NOT_REPRODUCED,
            "per-class slowdowns in the table",
        ),
    ]
    times = np.concatenate(
        [np.asarray(r.decision_times) for (d, _), v in acc.items() if d != "cp-fit" for r in v]
    )
    if times.size:
        report.choices.append(
            f"Decision time over every CP decision with competing jobs: median {np.median(times) * 1000:.0f} "
            f"ms, 99th percentile {np.percentile(times, 99) * 1000:.0f} ms (paper, Table 2: 523-743 ms on "
            "average); with 1,000 queued jobs see benchmarks/bench_cp_dispatch.py."
        )
    return report


def _choices(jobs: int, limit: float) -> tuple[str, ...]:
    return (
        f"Workload: the Eurora trace is not public; {jobs} jobs drawn with its stated class shares (93 % "
        f"under 1 h, 6 % 1-5 h, 1 % over 5 h), 40 users with 4 job names each, queue-default requests, "
        f"Poisson arrivals at load {LOAD} on {CORES} pooled cores (Eurora: 64 x 16 cores).",
        "Baselines: PBS's recorded waits are not available, so 'pbs' is a priority-rule dispatcher of the "
        "kind PBS runs (longest wait first, no reservation); EASY uses the same durations as CP.",
        f"CP: CP-SAT, one worker, {limit:g} deterministic time units per decision, so that a run gives the "
        "same decisions however busy the machine (about 10-20 ms of CPU; the paper: 1 s, doubled up to "
        "16 s; on-line use bounds the wall-clock time instead, see the benchmark); "
        "cores pooled as in HCP; the 100 highest-priority queued jobs per model. The paper's reduction to "
        "the jobs that fit now lets such a job delay a wider one that never enters the model (on "
        "pooled cores a wide job rarely fits), so it is shown apart ('CP3 fit-only').",
        "CP1: the waiting-time objective with one queue (PCP1's expected-wait weights are then equal).",
        "Data-driven prediction: mean of the last two runtimes of the same (user, job name), else of the "
        "user, else the request; learnt as jobs end (the paper's on-line heuristic [19]).",
    )
