"""Random scenarios through the real control loop: stalls, stranded tasks and leftovers, with the time taken.

Each scenario (``tests/control/scenarios.py``: a random DAG of 1 to ``--max-stages`` stages, task widths
up to the partition, lognormal spread, outside kills of running allocations, a random strategy and
batch-job shape, one run of history or none: of the same workflow, or of the same name with other stages
or its first stage alone, a remembered plan that disagrees with the tasks) runs on the mock backend's
virtual clock, in one of two ways:

- declared to the real Runner (``elastic run``), which makes the tasks from the declared runtimes;
- submitted by a user's program to the front door's real intake, live demand, store record and
  AllocationController, with the pool simulated (``tests/control/live_front.py``): undeclared or declared
  (``Elastic(workflow=...)``), every task at once after the futures of its inputs, stage by stage with
  the held stages announced with their runtimes (as the Parsl executor and the Prefect runner do), or stage
  by stage with nothing announced and no runtime given (a plain script). Its tasks take their stage's true
  runtime, up to 3x longer or shorter than the runtime the program gives (on the Runner, the declared
  runtime is what the tasks take).

Counted:

- **stalls**: the run did not complete (or fail with the documented error of a task lost more often than
  its retries allow) within 60 virtual days;
- **stranded**: after some decision, a ready stage with queued tasks had no allocation kept for it at least
  as wide as its widest task;
- **leftovers**: batch jobs of the run still queued or running after it ended;
- **idle**: an allocation still pending, or running no task, more than 60 s after every stage it is kept
  for completed (the release rule cancels it at the next decision; not checked for ``asa``, whose planner
  keeps an idle allocation for a stage it plans to run there);
- **lost**: runs in which a task was lost more often than its retries allow (allowed, reported): on the
  Runner the run fails with that documented error; on the front door that task's future fails with it and
  the run goes on (its dependents run when submitted with ``submit_task(..., after=...)``, which only
  orders).

    .venv/bin/python benchmarks/bench_liveness.py [--scenarios 10000] [--max-stages 50] [--seed 1]
        [--first 0] [--processes 2] [--csv out.csv]
    .venv/bin/python benchmarks/bench_liveness.py --slurm 30 [--seed 1]

``--slurm N``: instead, N small scenarios (``tests/front/real_scenarios.py``: 1-3 stages of tasks that
sleep 1-4 s) through the real front door, with real agents in real jobs on a local Slurm cluster it starts
(the Debian packages of ``scripts/bootstrap.sh``): every task ends, ``squeue`` is empty within 10 s of the
end, the store keeps each run as completed.

``--first N`` starts at scenario ``N`` of the seed's sequence (scenario ``i`` is drawn from ``(seed, i)``
alone), so the 10,000 can be run in chunks on different days or machines and their CSVs joined
(``--join``). ``--resume`` goes on with a run that was stopped (Ctrl-C, SIGTERM): the scenarios already in
its ``--csv`` file are skipped and the others appended to it; run it on the same version of the code.

Cost: the run steps every 30 virtual seconds (the controller's poll), so a scenario's CPU grows with its
makespan (days of queue waits) times its allocations. Per-Stage, Big-Job and the paper's ASA variants
are not asked again while their decision holds (``Settles``, ``docs/never-stall.md``), with the same
decisions at the same polls; ``asa`` (the planner) is asked again only when something it reads changed,
at its wake-up, or every 5 minutes (``Paced``). The first 100 scenarios of seed 1 (``--scenarios 100
--processes 1``, load average about 5): 87 s of CPU, median 0.34 s, max 15.6 s; 0 stalls, 0 stranded, 0
leftovers, 3 documented lost-task failures (490 s when ``asa`` was asked at every poll). Figures for
longer runs: ``docs/results/performance.md``. The first 60, before and after the cheaper simulated
placement, poll and rules, run side by side: the 55 non-``asa`` scenarios 23.8 s and 17.6 s of CPU, the
CSV otherwise the same.

Every failing scenario is printed in full, so it can be pasted into ``tests/control/test_liveness_random.py``.
Ctrl-C or SIGTERM to the parent stops early and still prints the counts of the scenarios that ran.
"""

from __future__ import annotations

import argparse
import collections
import csv
import logging
import multiprocessing
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.control.scenarios import random_scenario, run_scenario


def _worker_signals() -> None:
    # the parent stops the workers (Pool.terminate sends SIGTERM, which must kill them)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _one(args: tuple[int, int, int]) -> dict[str, object]:
    seed, index, max_stages = args
    logging.disable(logging.CRITICAL)
    rng = np.random.default_rng([seed, index])
    scenario = random_scenario(rng, max_stages=max_stages)
    start = time.process_time()
    try:
        out = run_scenario(scenario)
        violations, status, detail = out.violations, out.status, out.detail
    except Exception as exc:  # a crash is a finding too
        violations, status, detail = [f"exception: {exc!r}"], "exception", repr(exc)
    kinds = collections.Counter(
        "leftover"
        if "left after" in v
        else "stranded"
        if "waits with no allocation" in v
        else "idle"
        if "after its stages completed" in v
        else "stall"
        for v in violations
    )
    return {
        "seed": seed,
        "max_stages": max_stages,
        "index": index,
        "strategy": scenario.strategy,
        "stages": len(scenario.stages),
        "job_cores": scenario.job_cores,
        "front": scenario.front,
        "declares": scenario.declares,
        "remembered": scenario.remembered if scenario.history else "",
        "status": status,
        # the Runner's run fails; on the front door only that task's future does, and the run goes on
        "lost": status in ("failed", "completed") and "was lost" in detail,
        "stall": kinds["stall"] > 0,
        "stranded": kinds["stranded"] > 0,
        "leftover": kinds["leftover"] > 0,
        "idle": kinds["idle"] > 0,
        "cpu_s": round(time.process_time() - start, 3),
        "scenario": repr(scenario) if violations else "",
        "violations": "; ".join(violations[:3]),
    }


def _summary(rows: list[dict[str, object]], what: str) -> int:
    """Print the counts and CPU of ``rows``; return the exit status (1: an invariant broke)."""
    count = {
        k: sum(_true(r.get(k, False)) for r in rows)
        for k in ("stall", "stranded", "leftover", "idle", "lost")
    }
    cpu = sorted(float(r["cpu_s"]) for r in rows)  # type: ignore[arg-type]
    print(
        f"{len(rows)} scenarios{what}: "
        f"{count['stall']} stalls, {count['stranded']} stranded, {count['leftover']} leftovers, "
        f"{count['idle']} idle past the release rule; "
        f"{count['lost']} failed with the documented lost-task error; "
        f"CPU {sum(cpu):.0f} s in all, per scenario median {cpu[len(cpu) // 2]:.2f} s, max {cpu[-1]:.1f} s"
    )
    fronts = collections.Counter(str(r.get("front", "runner")) for r in rows)
    lost = collections.Counter(str(r.get("front", "runner")) for r in rows if _true(r["lost"]))
    print(
        "  lost-task failures by front: " + ", ".join(f"{f} {lost[f]}/{n}" for f, n in sorted(fronts.items()))
    )
    return 1 if count["stall"] or count["stranded"] or count["leftover"] or count["idle"] else 0


def _true(value: object) -> bool:
    return value is True or value == "True"  # a row read back from a CSV holds strings


def _done(path: Path, seed: int, max_stages: int) -> set[int]:
    """Return the indices of the scenarios of ``seed``, ``max_stages`` already in ``path`` (none: no file)."""
    if not path.exists():
        return set()
    with path.open(newline="") as f:
        return {
            int(r["index"])
            for r in csv.DictReader(f)
            if r["seed"] == str(seed) and r["max_stages"] == str(max_stages)
        }


def _join(paths: list[Path]) -> int:
    """Print the summary of chunks run apart (``--csv`` files of one seed), each scenario counted once."""
    rows: dict[tuple[str, str, str], dict[str, object]] = {}
    for path in paths:
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                rows[(row["seed"], row["max_stages"], row["index"])] = dict(row)
    if not rows:
        print("no scenario in the files", file=sys.stderr)
        return 2
    seeds = sorted({(k[0], k[1]) for k in rows})
    indices = sorted(int(k[2]) for k in rows)
    gaps = indices[-1] - indices[0] + 1 - len(indices)
    what = f" joined from {len(paths)} file(s) (seed, max stages: {seeds}; indices {indices[0]}-{indices[-1]}"
    return _summary(list(rows.values()), what + (f", {gaps} missing)" if gaps else ")"))


def _slurm(count: int, seed: int, first: int) -> int:
    """Run ``count`` scenarios of ``tests/front/real_scenarios.py`` on a local Slurm cluster started here."""
    import tempfile

    from elastic.backends.slurm import SlurmBackend
    from tests.fixtures.slurm_cluster import LocalSlurmCluster
    from tests.front.real_scenarios import random_real_scenario, run_real

    logging.disable(logging.WARNING)
    bad = 0
    fronts: collections.Counter[str] = collections.Counter()
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, LocalSlurmCluster(Path(tmp) / "slurm") as cluster:
        for index in range(first, first + count):
            scenario = random_real_scenario(np.random.default_rng([seed, index]))
            work = Path(tmp) / f"s{index}"
            work.mkdir()
            backend = SlurmBackend(partition="debug", env=cluster.env, workdir=work, command_timeout=20)
            began = time.monotonic()
            out = run_real(scenario, backend, f"sqlite:///{work / 'store.db'}", leftovers=cluster.queue)
            fronts[scenario.front] += 1
            took = time.monotonic() - began
            if out.violations:
                bad += 1
                print(f"FAIL {index} {'; '.join(out.violations[:3])}\n  {scenario!r}", flush=True)
            else:
                print(
                    f"{index}: {scenario.strategy}, {scenario.front}, {len(scenario.stages)} stages, "
                    f"history {scenario.history}: {out.status} in {took:.0f} s",
                    flush=True,
                )
            cluster.cancel_all()
    wall = time.monotonic() - start
    print(
        f"{count} scenarios on the local Slurm cluster (seed {seed}, from {first}; {dict(fronts)}): "
        f"{bad} with a stall, a failed task, a leftover job or a run not kept as completed; {wall:.0f} s wall"
    )
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=10_000)
    parser.add_argument("--max-stages", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="index of the first scenario (chunks)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--csv", type=Path, help="one row per scenario, written as each one ends")
    parser.add_argument("--join", type=Path, nargs="+", help="only print the summary of these --csv files")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with a stopped run: skip the scenarios already in the --csv file, append the others",
    )
    parser.add_argument(
        "--slurm",
        type=int,
        metavar="N",
        help="instead: N small scenarios through the real front door on Slurm",
    )
    args = parser.parse_args()
    if args.join:
        return _join(args.join)
    if args.slurm is not None:
        return _slurm(args.slurm, args.seed, args.first)
    if args.first < 0 or args.scenarios < 1:
        parser.error("--first must be >= 0 and --scenarios >= 1")
    # SIGTERM (and SIGINT where a background shell ignores it) stops early as Ctrl-C does
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    start = time.monotonic()
    done: set[int] = set()
    if args.resume:
        if args.csv is None:
            parser.error("--resume needs --csv (the file of the run to go on with)")
        done = _done(args.csv, args.seed, args.max_stages)
    jobs = [
        (args.seed, i, args.max_stages)
        for i in range(args.first, args.first + args.scenarios)
        if i not in done
    ]
    rows = []
    stopped = ""
    out = None if args.csv is None else args.csv.open("a" if done else "w", newline="")
    writer: csv.DictWriter[str] | None = None
    with multiprocessing.Pool(args.processes, initializer=_worker_signals) as pool:
        try:
            for n, row in enumerate(pool.imap_unordered(_one, jobs, chunksize=4), 1):
                rows.append(row)
                if out is not None:  # as it ends: a chunk stopped by anything keeps what ran
                    if writer is None:
                        writer = csv.DictWriter(out, fieldnames=list(row))
                        if not done:
                            writer.writeheader()
                    writer.writerow(row)
                    out.flush()
                if row["scenario"]:
                    print(f"FAIL {row['index']} {row['violations']}\n  {row['scenario']}", flush=True)
                if n % 100 == 0:
                    print(f"{n}/{args.scenarios} scenarios, {time.monotonic() - start:.0f} s", flush=True)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: report the scenarios that ran
            pool.terminate()
            stopped = f" (stopped after {len(rows)} of {args.scenarios})"
    if out is not None:
        out.close()
    if not rows:
        return 1
    wall = time.monotonic() - start
    what = f"{stopped} (max {args.max_stages} stages, seed {args.seed}, from {args.first}; {wall:.0f} s wall"
    return _summary(rows, what + f" on {args.processes} processes)")


if __name__ == "__main__":
    raise SystemExit(main())
