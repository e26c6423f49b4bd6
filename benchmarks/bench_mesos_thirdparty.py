"""Third-party Mesos frameworks, unmodified, on every backend under every strategy (on demand, not in CI).

The matrix issue 30 asks for: the pymesos repository's example scheduler and executor, ``pymesos.subprocess``
and TFMesos' ``tfrun`` (a gang of 3), without credentials or labels, against a front door on the local
backend, the mock queue on its scaled clock and a local Slurm cluster (started by the script:
``tests/fixtures/slurm_cluster.py``, 4 nodes x 4 cores), under Big-Job, Per-Stage and ASA. Each run gets a
fresh front door. A run passes when the framework exits 0, every task it should run finished, and the front
door sent ``TASK_FINISHED`` exactly once for every task and no failure state at all (see
``tests/front/mesos/thirdparty_runs.py``); at most once for the tasks still running when the framework
leaves: TFMesos leaves as soon as any of its jobs is done (its ``finished()``), the pymesos example is
stopped (SIGINT, its way out) once three tasks finished. The tests run a few cells (``test_thirdparty*.py``).

    .venv/bin/python benchmarks/bench_mesos_thirdparty.py [--backends local,mock,slurm]
        [--strategies bigjob,perstage,asa] [--frameworks example,subprocess,tfrun] [--repeat N]
        [--allocation-interval S]

It prints one row per run and exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elastic import Elastic  # noqa: E402
from elastic.front.mesos import MesosServer  # noqa: E402
from tests.front.mesos.thirdparty_runs import (  # noqa: E402
    FRAMEWORKS,
    Outcome,
    UpdateLog,
    run_example,
    run_subprocess,
    run_tfrun,
    thirdparty_environment,
)

BACKENDS = ("local", "mock", "slurm")
STRATEGIES = ("bigjob", "perstage", "asa")


@contextlib.contextmanager
def front_door(
    backend: str, strategy: str, workdir: Path, cluster: Any, interval: float = 0.0
) -> Iterator[MesosServer]:
    """A fresh backend, Elastic and Mesos front door (TFMesos needs a long heartbeat, see the tests).

    ``interval``: the front door's ``allocation_interval`` (0: free cores offered at once).
    """
    from elastic.backends.local import LocalBackend
    from elastic.backends.mock import MockBackend
    from elastic.backends.slurm import SlurmBackend

    poll, idle = 0.5, 1.0
    b: Any
    if backend == "local":
        b = LocalBackend(cores=3)
    elif backend == "mock":
        b = MockBackend(nodes=8, clock="scaled", speedup=5.0)
        poll, idle = 5.0, 20.0  # in the mock's clock: 1 s and 4 s
    else:
        cluster.cancel_all()
        b = SlurmBackend(partition="debug", env=cluster.env, workdir=workdir, command_timeout=20)
    with contextlib.ExitStack() as stack:
        if backend != "slurm":
            stack.enter_context(b)
        el = stack.enter_context(Elastic(b, strategy, store=False, poll_interval=poll, idle_timeout=idle))
        yield stack.enter_context(
            MesosServer(el, heartbeat_interval=300.0, gang_wait=2.0, allocation_interval=interval)
        )
    if backend == "slurm":
        cluster.cancel_all()


def one_run(
    backend: str, strategy: str, framework: str, workdir: Path, cluster: Any, interval: float = 0.0
) -> tuple[Outcome, float]:
    """Run one framework on a fresh front door; return its outcome (with the server's update counts)."""
    start = time.monotonic()
    door = front_door(backend, strategy, workdir, cluster, interval)
    with UpdateLog().watching() as log, door as server:
        if framework == "example":
            outcome = run_example(server.address, timeout=120)
        elif framework == "subprocess":
            outcome = run_subprocess(server.address, timeout=120)
        else:
            outcome = run_tfrun(server.address, workdir, timeout=90)
    outcome.problems += log.problems(every=framework == "subprocess")
    return outcome, time.monotonic() - start


def main(argv: Sequence[str] | None = None) -> int:
    """Run the matrix; print a row per run; return 1 if any run failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--repeat", type=int, default=1, help="runs of each cell (default 1)")
    parser.add_argument(
        "--allocation-interval",
        type=float,
        default=0.0,
        help="the front door's allocation_interval, seconds (default 0: at once; Mesos: 1)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat: expected an integer >= 1, got {args.repeat}")
    if not 0 <= args.allocation_interval < float("inf"):
        parser.error(f"--allocation-interval: expected a finite number >= 0, got {args.allocation_interval}")
    chosen = {}
    for option, known in (("backends", BACKENDS), ("strategies", STRATEGIES), ("frameworks", FRAMEWORKS)):
        chosen[option] = getattr(args, option).split(",")
        bad = set(chosen[option]) - set(known)
        if bad:
            parser.error(f"--{option}: unknown {', '.join(sorted(bad))}; choose among {', '.join(known)}")
    os.environ.update(thirdparty_environment())
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        cluster = None
        if "slurm" in chosen["backends"]:
            from benchmarks._support import LocalSlurmCluster

            cluster = stack.enter_context(LocalSlurmCluster(Path(tmp) / "slurm"))
        print(
            f"{'backend':8} {'strategy':9} {'framework':11} {'ok':3} {'rc':>3} {'done':>5} {'s':>6}  problems"
        )
        for backend in chosen["backends"]:
            for strategy in chosen["strategies"]:
                for framework in [f for f in chosen["frameworks"] for _ in range(args.repeat)]:
                    workdir = Path(tempfile.mkdtemp(dir=tmp))
                    try:
                        outcome, took = one_run(
                            backend, strategy, framework, workdir, cluster, args.allocation_interval
                        )
                    except Exception as exc:  # a timeout, a backend that failed: a failed cell, go on
                        outcome, took = Outcome(-1, 0, 0, [f"{type(exc).__name__}: {exc}"]), 0.0
                    failed += not outcome.ok
                    notes = outcome.problems[:3] + (
                        [f"forgiven: {outcome.forgiven}"] if outcome.forgiven else []
                    )
                    print(
                        f"{backend:8} {strategy:9} {framework:11} {'yes' if outcome.ok else 'NO':3} "
                        f"{outcome.returncode:>3} {outcome.finished:>2}/{outcome.expected:<2} {took:6.1f}  "
                        f"{'; '.join(notes)}",
                        flush=True,
                    )
                    if not outcome.ok and outcome.output:
                        print("    " + outcome.output[-800:].replace("\n", "\n    "), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
