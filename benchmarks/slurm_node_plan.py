"""Slurm's backfill planned node by node, checked offline against every recorded Slurm schedule.

The variants of the mock's ``slurm-nodes`` policy (``elastic/simulator/slurm_nodes.py``, which is
``busy+1`` here), side by side: the ``slurm`` policy (``SlurmBackfill``) plans cores and groups every
running job in its will-run estimate. Slurm 22.05 plans nodes (``_attempt_backfill`` in
``src/plugins/sched/backfill/backfill.c``, ``_will_run_test`` in
``src/plugins/select/cons_common/job_test.c``), and this file models what that adds, for one-CPU nodes
(the oracle's partition, where a node is a core):

- a pending job may only use the nodes that no higher-priority job has reserved anywhere in its window
  ``[start_res, start_res + limit]`` (both ends included, as ``node_space`` is scanned);
- its will-run test removes only the running jobs on those nodes, grouped as ``will_run_groups`` does
  (the barrier taken from the first of them, a group closed by the next running job of *all*), and plans
  it at the end of the last job of the first group after which it fits;
- ``TRY_LATER``: if that start lies after ``later_start`` (the first time at which a node reserved in the
  window is released), the job is tested again from there on the nodes free then, and again when its
  chosen nodes overlap a reservation (``_test_resv_overlap``);
- which nodes a reservation takes: with ``bf_busy_nodes`` (as the oracle configures Slurm)
  ``_eval_nodes_busy`` (cons_tres) takes the nodes running jobs now, lowest index first, then idle
  ones; when the busy nodes were enough, its second pass (over idle nodes) still runs once and adds
  one idle node before it stops (its ``break`` leaves only the inner loop), so a reservation holds one
  idle node more than it needs (``busy+1``; seen in the backfill map of a replay: a 10-CPU job
  "to start at ... on nodes n[1-11]"). ``busy`` leaves that node out; ``index`` takes the lowest-index
  usable nodes (Slurm without ``bf_busy_nodes``), ``idle`` idle first;
- a job that starts now takes Slurm's best fit of consecutive free nodes (``_eval_nodes``);
- the reservations are kept as Slurm's ``node_space`` records, one pair of equal neighbours merged
  after each reservation (``add_reservation``), which decides where ``later_start`` falls.

Every variant is the policy (``SlurmNodeBackfill``) with another choice of a reservation's nodes.

``python benchmarks/slurm_node_plan.py syn.json hpc2n.json blue.json`` compares, on each recorded
schedule (``benchmarks/slurm_oracle.py --json``), the ``slurm`` and ``conservative`` policies with these
node-level plans. Where a file has no ``t0`` (Slurm's wall-clock time 0, which aligns the will-run
windows), every origin modulo 30 s is tried and the median, min and max of Spearman are printed.
The figures and what they say are in docs/results/simulator.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from any directory

from elastic.simulator.conservative import SlurmBackfill
from elastic.simulator.engine import Engine
from elastic.simulator.slurm_nodes import SlurmNodeBackfill
from elastic.simulator.slurm_nodes import lowest as _lowest
from tests.fixtures.slurm_oracle import Replay, ScaledJobs, compare, scale_workload


def _count(mask: int) -> int:
    return mask.bit_count()


class NodeBackfill(SlurmNodeBackfill):
    """The ``slurm-nodes`` policy with another choice of a reservation's nodes.

    ``choice`` is how a reservation picks its nodes: ``busy+1`` (``bf_busy_nodes`` as Slurm 22.05 does
    it: the policy itself), ``busy`` (without its extra idle node), ``index`` (no ``bf_busy_nodes``) or
    ``idle``.
    """

    def __init__(self, window: float = 30.0, origin: float = 0.0, choice: str = "busy") -> None:
        if choice not in ("busy", "busy+1", "index", "idle"):
            raise ValueError(f"choice must be busy, busy+1, index or idle, got {choice!r}")
        super().__init__(window=window, origin=origin)
        self.choice = choice

    def _reserve_nodes(self, free_now: int, removed: int, cores: int) -> int:
        if self.choice == "busy+1":
            return super()._reserve_nodes(free_now, removed, cores)
        if self.choice == "index":
            return _lowest(free_now | removed, cores)
        first, then = (removed, free_now) if self.choice == "busy" else (free_now, removed)
        m = _lowest(first, cores)
        return m | _lowest(then, cores - _count(m))


def load(path: Path) -> tuple[ScaledJobs, Replay, int, bool]:
    """A recorded Slurm schedule (``slurm_oracle.py --json``): jobs, Slurm's replay, cores, t0 known."""
    d = json.loads(path.read_text())
    s = d["slurm"]
    if "start" not in s or "submit" not in s:
        raise SystemExit(
            f"{path}: no Slurm schedule in it (an early file whose 'slurm' key holds the mock's)"
        )
    n = len(s["start"])
    jobs = ScaledJobs(
        submit=np.array(s["submit"], dtype=float),
        cores=np.array(d["cores"], dtype=np.int64),
        minutes=np.array(d["minutes"], dtype=np.int64),
        sleep=np.array(d["sleep"], dtype=float),
        k=float(d.get("k", 60.0)),
    )
    slurm = Replay(
        submit=jobs.submit.copy(),
        start=np.array(s["start"], dtype=float),
        end=np.array(s["end"], dtype=float),
        cores=jobs.cores.copy(),
        state=tuple(s.get("state", ["COMPLETED"] * n)),
        t0=float(s.get("t0", 0.0)),
    )
    return jobs, slurm, int(d["args"]["nodes"]) * int(d["args"]["cores_per_node"]), "t0" in s


def replay(
    jobs: ScaledJobs, observed: Replay, policy: Any, cores: int, submit: np.ndarray | None = None
) -> Replay:
    """The jobs on the mock under ``policy``, submitted and running as on Slurm.

    ``submit``: submit the jobs at these times instead of Slurm's whole seconds (starts are then read
    back in whole seconds, as Slurm records them).
    """
    eng = Engine(nodes=cores, cores_per_node=1, policy=policy, priority="age")
    run = jobs.sleep.copy()
    ran = observed.end - observed.start
    ok = np.array([s == "COMPLETED" for s in observed.state]) & np.isfinite(ran)
    run[ok] = ran[ok]
    idx = np.empty(len(jobs), dtype=np.int64)
    at = observed.submit if submit is None else submit
    for i in np.argsort(at, kind="stable").tolist():
        eng.run(until=float(at[i]))
        idx[i] = eng.submit(
            cores=int(jobs.cores[i]), walltime=float(jobs.minutes[i] * 60), runtime=float(run[i])
        )
    eng.run()
    start = np.array([eng.jobs.start[j] for j in idx.tolist()], dtype=float)
    if submit is not None:
        start = np.floor(start)
    return Replay(observed.submit, start, start, jobs.cores.copy(), tuple("COMPLETED" for _ in start))


POLICIES: dict[str, Callable[[float], Any]] = {
    "slurm": lambda o: SlurmBackfill(origin=o),
    "conservative": lambda o: "conservative",
    "nodes-busy": lambda o: NodeBackfill(origin=o, choice="busy"),
    "nodes-busy+1": lambda o: NodeBackfill(origin=o, choice="busy+1"),
    "nodes-index": lambda o: NodeBackfill(origin=o, choice="index"),
    "nodes-idle": lambda o: NodeBackfill(origin=o, choice="idle"),
}


def scaled_submits(path: Path) -> np.ndarray:
    """The scaled submit times the harness submitted a recorded run's jobs at (seconds after its t0).

    The workload is rebuilt from the arguments recorded in the file (a trace window needs
    ``ELASTIC_TRACES``).
    """
    from slurm_oracle import _workload  # the oracle's own workload builder (a sibling script)

    d = json.loads(path.read_text())
    ns = argparse.Namespace(**d["args"])
    cores = int(ns.nodes) * int(ns.cores_per_node)
    jobs = scale_workload(_workload(ns, cores), float(d.get("k", 60.0)))
    if len(jobs) != len(d["cores"]) or list(jobs.cores) != list(d["cores"]):
        raise SystemExit(f"{path}: the rebuilt workload is not the recorded one")
    return jobs.submit


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", type=Path, help="slurm_oracle.py --json files (one-CPU nodes)")
    p.add_argument("--policies", default=",".join(POLICIES), help=f"of {', '.join(POLICIES)}")
    p.add_argument(
        "--scaled-submits",
        type=float,
        default=None,
        metavar="LATENCY",
        help="submit each job at its scaled time (as the harness did) plus LATENCY s, not at Slurm's second",
    )
    args = p.parse_args(argv)
    for path in args.files:
        jobs, slurm, cores, has_t0 = load(path)
        submit = None if args.scaled_submits is None else scaled_submits(path) + args.scaled_submits
        print(
            f"{path.name}: {len(jobs)} jobs, {cores} cores, "
            f"t0 {'recorded' if has_t0 else 'unknown: origins 0-29 s'}"
        )
        for name in args.policies.split(","):
            make = POLICIES[name]
            origins = [slurm.t0] if has_t0 or name == "conservative" else [float(o) for o in range(30)]
            rows = [compare(slurm, replay(jobs, slurm, make(o), cores, submit)) for o in origins]
            rho = [r[0].spearman for r in rows]
            mid = rows[int(np.argsort(rho)[len(rho) // 2])]
            spread = f" (min {min(rho):.3f}, max {max(rho):.3f})" if len(rho) > 1 else ""
            cls = " ".join(f"{a.label}:{a.spearman:.2f}" for a in mid[1:] if math.isfinite(a.spearman))
            a = mid[0]
            print(
                f"  {name:>13}: Spearman {np.median(rho):.3f}{spread}, median |dw| {a.median_abs:.1f} s, "
                f"p90 {a.p90_abs:.1f} s, mean wait {a.mean_wait_a:.1f} / {a.mean_wait_b:.1f} s; {cls}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
