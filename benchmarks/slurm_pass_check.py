"""Every logged Slurm backfill pass replayed through the ``slurm-nodes`` planner, decision by decision.

``benchmarks/slurm_oracle.py --debug-flags Backfill,BackfillMap --json RUN.json`` keeps ``slurmctld``'s
log (its directory is printed, and recorded in the file as ``log``). Each backfill pass in it
(``_attempt_backfill: beginning``) is rebuilt from the log alone: the running jobs on the nodes Slurm
gave them (``_start_job: Started``, ``sched: Allocate``), each ending at its whole-second start plus its
limit as Slurm's ``end_time`` does, until ``_job_complete``; the pending jobs submitted before the pass,
in job-id order (every job here has the same priority). That state goes through
:class:`~elastic.simulator.slurm_nodes.SlurmNodeBackfill` once, and the jobs it starts are compared with
the jobs Slurm started in that pass; the planned start of every job that both reserve is compared with
Slurm's ``to start at``. Unlike an end-to-end replay, a difference found here cannot come from Slurm's
one-second passes or from what happened earlier: it is the planner deciding otherwise on the same state.

``--timed`` then replays the whole run on the mock as the oracle does, but with what the JSON file's
whole seconds leave out: every job submitted and ended at the millisecond the log gives, and the policy
run only at the logged backfill passes (Slurm starts nothing between them here). Starts are read back
in whole seconds as Slurm records them. What is left between that and the oracle's replay is the
timing of Slurm's passes, not its rules.

``python benchmarks/slurm_pass_check.py RUN.json [--log DIR] [--show N] [--timed]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
from bisect import insort
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from any directory

from elastic.simulator.engine import Engine
from elastic.simulator.jobs import PENDING
from elastic.simulator.slurm_nodes import SlurmNodeBackfill, best_fit
from tests.fixtures.slurm_oracle import Replay, compare

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT[\d:.]+)\] (.*)$")


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def node_set(spec: str) -> int:
    """Slurm's node list (``n[1,6-21]`` or ``n7``) as a bit set, bit ``i`` for node ``n{i+1}``.

    Examples
    --------
    >>> bin(node_set("n[1,3-4]")), bin(node_set("n2"))
    ('0b1101', '0b10')
    """
    spec = spec.strip()
    if not spec.startswith("n["):
        return 1 << (int(spec[1:]) - 1)
    out = 0
    for part in spec[2:-1].split(","):
        a, _, b = part.partition("-")
        for i in range(int(a), int(b or a) + 1):
            out |= 1 << (i - 1)
    return out


@dataclasses.dataclass
class Pass:
    """One backfill pass as logged: when it began, the jobs it started, the starts it planned."""

    at: float
    started: list[int] = dataclasses.field(default_factory=list)
    planned: dict[int, float] = dataclasses.field(default_factory=dict)
    tested: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Log:
    """What ``slurmctld`` logged: per job id, submit / start / end times and nodes; the backfill passes."""

    submit: dict[int, float]
    start: dict[int, float]
    end: dict[int, float]
    nodes: dict[int, int]
    passes: list[Pass]
    main: list[float] = dataclasses.field(default_factory=list)


def read_log(path: Path) -> Log:
    """Parse a ``slurmctld.log`` written with ``DebugFlags=Backfill``."""
    log = Log({}, {}, {}, {}, [])
    cur: Pass | None = None
    for line in path.read_text(errors="replace").splitlines():
        m = _STAMP.match(line)
        if m is None:
            continue
        t, text = _epoch(m[1]), m[2]
        if g := re.search(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", text):
            log.submit[int(g[1])] = t
        elif "_attempt_backfill: beginning" in text:
            cur = Pass(t)
            log.passes.append(cur)
        elif g := re.search(
            r"(?:_start_job: Started JobId=(\d+) in \S+ on|sched: Allocate JobId=(\d+) NodeList=) ?(\S+)",
            text,
        ):
            j = int(g[1] or g[2])
            log.start[j], log.nodes[j] = t, node_set(g[3])
            if cur is not None and g[1]:
                cur.started.append(j)
            elif g[2]:
                log.main.append(t)
        elif g := re.search(r"_dump_job_test: Test JobId=(\d+) ", text):
            if cur is not None and int(g[1]) not in cur.tested:
                cur.tested.append(int(g[1]))
        elif g := re.search(r"_dump_job_sched: JobId=(\d+) to start at (\S+),", text):
            if cur is not None:
                cur.planned[int(g[1])] = _epoch(g[2])
        elif g := re.search(r"_job_complete: JobId=(\d+) done", text):
            log.end.setdefault(int(g[1]), t)
        elif "completed testing" in text or "no jobs to backfill" in text:
            cur = None
    return log


def plan_pass(
    log: Log, p: Pass, cores: list[int], minutes: list[int], nodes: int
) -> SlurmNodeBackfill | None:
    """Run the planner once on Slurm's state at the beginning of pass ``p``; None when nothing pends.

    Job id ``i`` is the ``i``-th submitted job (``cores[i - 1]``); the planner's ``started`` attribute
    lists what it started. A pass Slurm cut short (it stops testing when the wall-clock second changes:
    ``bf_max_time`` is ``bf_interval``, 1 s, counted in whole seconds) plans only the jobs it tested.
    """
    now = math.floor(p.at)  # slurmctld plans in whole seconds (time(NULL))
    running = sorted(
        (math.floor(s) + 60.0 * minutes[j - 1], j)
        for j, s in log.start.items()
        if s < p.at and not (j in log.end and log.end[j] < p.at)
    )
    queue = sorted(
        j for j, s in log.submit.items() if s < p.at and not (j in log.start and log.start[j] < p.at)
    )
    if not queue:
        return None
    if p.tested and p.tested[-1] in queue:  # the jobs after the last one tested were not reached
        queue = queue[: queue.index(p.tested[-1]) + 1]
    n = max(log.submit) + 1
    state = np.full(n, PENDING)
    policy = SlurmNodeBackfill(origin=0.0)  # times are Unix seconds: the wall clock itself
    started: list[int] = []

    def start(j: int) -> None:  # as Engine.start: running until its walltime end, as far as plans go
        started.append(j)
        state[j] = PENDING + 1
        insort(running, (now + 60.0 * minutes[j - 1], j))

    eng = SimpleNamespace(
        queue=list(queue),
        jobs=SimpleNamespace(
            cores=np.array([0, *cores[: n - 1]], dtype=np.int64),
            walltime=np.array([0.0, *(60.0 * m for m in minutes[: n - 1])]),
            state=state,
        ),
        cluster=SimpleNamespace(total=nodes, cores_per_node=1),
        running=running,
        now=float(now),
        start=start,
    )
    policy.placement = {j: log.nodes[j] for _, j in running}
    policy.schedule(eng)  # type: ignore[arg-type]
    policy.started = started  # type: ignore[attr-defined]
    return policy


def _reach(log: Log, p: Pass) -> int:
    """How many pending jobs pass ``p`` tested when Slurm cut it short, else 0."""
    pending = sorted(
        j for j, t in log.submit.items() if t < p.at and not (j in log.start and log.start[j] < p.at)
    )
    if p.tested and p.tested[-1] in pending and p.tested[-1] != pending[-1]:
        return pending.index(p.tested[-1]) + 1
    return 0


class AtPasses:
    """A policy run only at Slurm's logged times: backfill passes (``inner`` plans) and main-scheduler runs.

    At a main-scheduler time (a logged ``sched: Allocate``) the queue is started in priority order
    while its first job fits, on the best-fit nodes, as ``schedule()`` in ``job_scheduler.c`` does.
    """

    def __init__(self, inner: SlurmNodeBackfill, passes: dict[float, int], main: list[float]) -> None:
        self.inner = inner
        self.passes = passes  # pass time -> how many pending jobs Slurm tested (0: all of them)
        self.main = frozenset(main)
        self.name = inner.name
        self.reservations = inner.reservations

    def schedule(self, engine: Engine) -> None:
        """Plan only when ``engine.now`` is a logged time (the engine is woken at every one)."""
        if engine.now in self.passes:
            reach = self.passes[engine.now]
            rest = engine.queue[reach:] if reach else []
            if rest:  # a pass cut at the wall-clock second: the jobs after those Slurm tested wait
                del engine.queue[reach:]
            self.inner.schedule(engine)
            engine.queue.extend(rest)
        elif engine.now in self.main:
            self.inner.schedule(engine)  # refresh the placement of finished jobs
            busy = 0
            for m in self.inner.placement.values():
                busy |= m
            full = (1 << engine.cluster.total) - 1
            for j in list(engine.queue):
                c = int(engine.jobs.cores[j])
                if bin(full & ~busy).count("1") < c:
                    break
                m = best_fit(full & ~busy, c, engine.cluster.total)
                engine.start(j)
                self.inner.placement[j] = m
                busy |= m
            engine.queue[:] = [j for j in engine.queue if engine.jobs.state[j] == PENDING]


def timed_replay(
    d: dict[str, object], log: Log, rng: np.random.Generator | None = None
) -> tuple[Replay, Replay]:
    """Slurm's schedule from the log and the mock's at Slurm's own sub-second times (see the docstring).

    With ``rng``, each submission keeps only its whole second from the log and gets a random fraction
    of it (in job-id order within a second): what a model exact in every rule would see if it knew
    submissions only to the second, as the oracle's replay does.
    """
    cores: list[int] = d["cores"]  # type: ignore[assignment]
    minutes: list[int] = d["minutes"]  # type: ignore[assignment]
    sleep: list[float] = d["sleep"]  # type: ignore[assignment]
    ids = sorted(log.submit)
    base = math.floor(min(log.submit.values()))
    policy = AtPasses(
        SlurmNodeBackfill(origin=float(base)),
        {p.at - base: _reach(log, p) for p in log.passes},
        [t - base for t in log.main],
    )
    eng = Engine(nodes=int(d["args"]["nodes"]), cores_per_node=1, policy=policy, priority="age")  # type: ignore[index]
    for t in [ps.at for ps in log.passes] + log.main:
        eng.wake_at(t - base)
    at = {j: log.submit[j] for j in ids}
    if rng is not None:
        by_second: dict[int, list[int]] = {}
        for j in ids:
            by_second.setdefault(math.floor(at[j]), []).append(j)
        for second, js in by_second.items():
            for j, frac in zip(js, np.sort(rng.random(len(js))), strict=True):
                at[j] = second + float(frac)
    idx = {}
    for j in ids:
        eng.run(until=at[j] - base)
        ran = log.end[j] - log.start[j] if j in log.end and j in log.start else sleep[j - 1]
        idx[j] = eng.submit(cores=cores[j - 1], walltime=60.0 * minutes[j - 1], runtime=ran)
    eng.run()
    sub = np.array([math.floor(log.submit[j]) for j in ids], dtype=float)
    got = np.array([math.floor(log.start[j]) if j in log.start else math.nan for j in ids], dtype=float)
    mock = np.floor(base + np.array([eng.jobs.start[idx[j]] for j in ids], dtype=float))  # NaN: not started
    c = np.array([cores[j - 1] for j in ids], dtype=np.int64)
    done = tuple("COMPLETED" for _ in ids)
    return Replay(sub, got, got, c, done), Replay(sub, mock, mock, c, done)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", type=Path, help="a slurm_oracle.py --json file of a run with DebugFlags=Backfill")
    p.add_argument("--log", type=Path, default=None, help="Slurm's log directory (default: the file's 'log')")
    p.add_argument("--show", type=int, default=10, help="print at most this many differing passes (10)")
    p.add_argument("--timed", action="store_true", help="also replay the run at Slurm's logged times")
    p.add_argument("--draws", type=int, default=0, help="--timed: also N replays with submit seconds only")
    args = p.parse_args(argv)
    d = json.loads(args.file.read_text())
    folder = args.log if args.log is not None else Path(d.get("log", ""))
    log = read_log(folder / "slurmctld.log")
    if not log.passes:
        raise SystemExit(f"{folder}: no backfill pass logged (run the oracle with --debug-flags Backfill)")
    nodes = int(d["args"]["nodes"]) * int(d["args"]["cores_per_node"])
    tested = starts_differ = planned = planned_same = cut = completing = 0
    for ps in log.passes:
        policy = plan_pass(log, ps, d["cores"], d["minutes"], nodes)
        if policy is None:
            continue
        tested += 1
        mine: list[int] = policy.started  # type: ignore[attr-defined]
        both = [j for j in ps.planned if j in policy.reservations and j not in mine]
        planned += len(both)
        planned_same += sum(policy.reservations[j] == ps.planned[j] for j in both)
        pending = [
            j for j, t in log.submit.items() if t < ps.at and not (j in log.start and log.start[j] < ps.at)
        ]
        cut += bool(ps.tested) and len(ps.tested) < len(pending)
        if set(mine) != set(ps.started):
            starts_differ += 1
            ended = [ps.at - t for t in log.end.values() if 0.0 <= ps.at - t < 1.0]
            completing += bool(ended)
            if starts_differ <= args.show:
                when = datetime.fromtimestamp(ps.at).time()
                why = f" (a job ended {1000 * min(ended):.0f} ms before the pass)" if ended else ""
                print(f"pass at {when}: Slurm started {sorted(ps.started)}, the planner {sorted(mine)}{why}")
                for j in sorted(set(mine) ^ set(ps.started)):
                    slurm = (
                        "start"
                        if j in ps.started
                        else f"planned {ps.planned.get(j, math.nan) - ps.at:+.0f} s"
                    )
                    model = (
                        "start"
                        if j in mine
                        else f"planned {policy.reservations.get(j, math.nan) - ps.at:+.0f} s"
                    )
                    size = f"{d['cores'][j - 1]} cores, {d['minutes'][j - 1]} min"
                    print(f"  job {j} ({size}): Slurm {slurm}, planner {model}")
    print(
        f"{args.file.name}: {tested} passes with pending jobs; the planner starts other jobs than Slurm in "
        f"{starts_differ} ({completing} of them less than 1 s after a job ended: its nodes still "
        f"completing); planned starts equal to Slurm's in {planned_same} of {planned}; {cut} passes cut "
        "at the wall-clock second (planned as far as Slurm tested)"
    )
    if args.timed:
        rows = compare(*timed_replay(d, log))
        print("the mock at Slurm's logged submit, end and pass times (slurm-nodes), Spearman of waits:")
        print(
            "  "
            + ", ".join(f"{a.label} {a.spearman:.3f}" for a in rows)
            + f"; median |dw| {rows[0].median_abs:.1f} s"
        )
        if args.draws:
            rng = np.random.default_rng(0)
            runs = [compare(*timed_replay(d, log, rng)) for _ in range(args.draws)]
            print(
                f"the same, each submission known to the second only ({args.draws} draws; median, min-max):"
            )
            for k, a in enumerate(rows):
                rho = np.array([r[k].spearman for r in runs])
                print(f"  {a.label}: {np.median(rho):.3f} ({rho.min():.3f}-{rho.max():.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
