"""Random scenarios through the real control loop: stalls, stranded tasks and leftovers, with the time taken.

Each scenario (``tests/control/scenarios.py``: a random DAG of 1 to ``--max-stages`` stages, task widths
up to the partition, runtimes up to 3x longer or shorter than their hints, lognormal spread, outside kills
of running allocations, a random strategy and batch-job shape, one run of history or none: of the same
workflow, or of the same name with other stages or its first stage alone, a remembered plan that disagrees
with the tasks) runs through
the real Runner and AllocationController on the mock backend's virtual clock. Counted:

- **stalls**: the run did not complete (or fail with the documented error of a task lost more often than
  its retries allow) within 60 virtual days;
- **stranded**: after some decision, a ready stage with queued tasks had no allocation kept for it at least
  as wide as its widest task;
- **leftovers**: batch jobs of the run still queued or running after it ended;
- **lost**: runs that failed with the documented retries-exhausted error (allowed, reported).

    .venv/bin/python benchmarks/bench_liveness.py [--scenarios 10000] [--max-stages 50] [--seed 1]
        [--first 0] [--processes 2] [--csv out.csv]

``--first N`` starts at scenario ``N`` of the seed's sequence (scenario ``i`` is drawn from ``(seed, i)``
alone), so the 10,000 can be run in chunks on different days or machines and their CSVs joined.

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
        "leftover" if "left after" in v else "stranded" if "waits with no allocation" in v else "stall"
        for v in violations
    )
    return {
        "seed": seed,
        "max_stages": max_stages,
        "index": index,
        "strategy": scenario.strategy,
        "stages": len(scenario.stages),
        "job_cores": scenario.job_cores,
        "status": status,
        "lost": status == "failed" and "was lost" in detail,
        "stall": kinds["stall"] > 0,
        "stranded": kinds["stranded"] > 0,
        "leftover": kinds["leftover"] > 0,
        "cpu_s": round(time.process_time() - start, 3),
        "scenario": repr(scenario) if violations else "",
        "violations": "; ".join(violations[:3]),
    }


def _summary(rows: list[dict[str, object]], what: str) -> int:
    """Print the counts and CPU of ``rows``; return the exit status (1: an invariant broke)."""
    count = {k: sum(_true(r[k]) for r in rows) for k in ("stall", "stranded", "leftover", "lost")}
    cpu = sorted(float(r["cpu_s"]) for r in rows)  # type: ignore[arg-type]
    print(
        f"{len(rows)} scenarios{what}: "
        f"{count['stall']} stalls, {count['stranded']} stranded, {count['leftover']} leftovers; "
        f"{count['lost']} failed with the documented lost-task error; "
        f"CPU {sum(cpu):.0f} s in all, per scenario median {cpu[len(cpu) // 2]:.2f} s, max {cpu[-1]:.1f} s"
    )
    return 1 if count["stall"] or count["stranded"] or count["leftover"] else 0


def _true(value: object) -> bool:
    return value is True or value == "True"  # a row read back from a CSV holds strings


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
    args = parser.parse_args()
    if args.join:
        return _join(args.join)
    if args.first < 0 or args.scenarios < 1:
        parser.error("--first must be >= 0 and --scenarios >= 1")
    # SIGTERM (and SIGINT where a background shell ignores it) stops early as Ctrl-C does
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    start = time.monotonic()
    jobs = [(args.seed, i, args.max_stages) for i in range(args.first, args.first + args.scenarios)]
    rows = []
    stopped = ""
    out = None if args.csv is None else args.csv.open("w", newline="")
    writer: csv.DictWriter[str] | None = None
    with multiprocessing.Pool(args.processes, initializer=_worker_signals) as pool:
        try:
            for n, row in enumerate(pool.imap_unordered(_one, jobs, chunksize=4), 1):
                rows.append(row)
                if out is not None:  # as it ends: a chunk stopped by anything keeps what ran
                    if writer is None:
                        writer = csv.DictWriter(out, fieldnames=list(row))
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
