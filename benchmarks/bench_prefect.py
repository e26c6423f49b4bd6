"""2,000 no-op Prefect tasks through ElasticTaskRunner and Prefect's runners, one run each, same server.

    .venv/bin/python benchmarks/bench_prefect.py                 # all four runners, 2,000 tasks
    .venv/bin/python benchmarks/bench_prefect.py --tasks 500 --runners elastic,thread --api-wait 0

Runners: ``ElasticTaskRunner`` on one local allocation of 2 cores (Big-Job, this machine's backend limited
to 2 cores: one allocation, two warm workers), ``ThreadPoolTaskRunner(2)``, ``ProcessPoolTaskRunner(2)``
and ``DaskTaskRunner`` on a local cluster of 2 single-threaded worker processes (needs ``prefect-dask``;
left out, with the reason, when it is not installed). The benchmark starts one Prefect server on
127.0.0.1 (private ``PREFECT_HOME``, telemetry off, as ``tests/fixtures/prefect_server.py`` does) and runs
every runner against it, each in a fresh Python process, one after the other. After each flow it waits
(at most ``--api-wait`` seconds) until the server has recorded every task run Completed, so the next
runner does not pay for this one's backlog on the server's SQLite database.

Per runner: the flow's wall time (from the call to its return: allocations, workers and clusters are
started inside, as a user's flow would), tasks per second and milliseconds per task over that time, how
long the flow function took to submit every task and until the first one was done (what starting workers
costs), and how long the server took after the flow returned until it had recorded every task run
Completed. Goals (issue 13): Elastic >= 10x ProcessPool, within 1.5x of ThreadPool, ahead of Dask.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNNERS = ("thread", "elastic", "dask", "process")


def make_runner(name: str) -> Any:
    """Return a fresh task runner for ``name`` (one of :data:`RUNNERS`), with 2 workers."""
    if name == "thread":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=2)
    if name == "process":
        from prefect.task_runners import ProcessPoolTaskRunner

        return ProcessPoolTaskRunner(max_workers=2)
    if name == "dask":
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": 2,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
            }
        )
    from elastic.backends.local import LocalBackend
    from elastic.executors.prefect_runner import ElasticTaskRunner

    return ElasticTaskRunner(LocalBackend(cores=2), "bigjob", store=False, poll_interval=1.0)


def recorded(flow_run_id: Any, n: int, timeout: float) -> float | None:
    """Seconds until the API has ``n`` Completed task runs of the flow run, or None after ``timeout``."""
    import httpx
    from prefect.settings import get_current_settings

    body = {
        "flow_runs": {"id": {"any_": [str(flow_run_id)]}},
        "task_runs": {"state": {"type": {"any_": ["COMPLETED"]}}},
    }
    start = time.perf_counter()
    with httpx.Client(base_url=str(get_current_settings().api.url), timeout=30.0) as http:
        while time.perf_counter() - start < timeout:
            try:
                if http.post("/task_runs/count", json=body).json() >= n:
                    return time.perf_counter() - start
            except httpx.HTTPError:  # the server is busy recording: ask again
                pass
            time.sleep(0.5)
    return None


def run_one(name: str, tasks: int, api_wait: float) -> dict[str, Any]:
    """Run the no-op flow under runner ``name`` against ``PREFECT_API_URL``; return its figures."""
    here = str(Path(__file__).resolve().parent)  # workers import prefect_noop by name
    os.environ["PYTHONPATH"] = os.pathsep.join([here, str(ROOT), os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # one line per worker event otherwise
    from prefect.context import refresh_global_settings_context

    refresh_global_settings_context()
    from prefect import flow
    from prefect_noop import noop_flow  # benchmarks/ is on sys.path as the script's directory

    body = flow(name=f"noop-{name}", task_runner=make_runner(name))(noop_flow)
    start = time.perf_counter()
    state = body(tasks, return_state=True)
    wall = time.perf_counter() - start
    assert state.is_completed(), f"{name}: {state}"
    total, submitted, first = state.result()
    assert total == tasks * (tasks - 1) // 2, f"{name}: wrong sum {total}"
    lag = recorded(state.state_details.flow_run_id, tasks, api_wait) if api_wait > 0 else None
    return {"name": name, "wall": wall, "submitted": submitted, "first": first, "lag": lag}


def dask_missing() -> str | None:
    """Why ``DaskTaskRunner`` cannot run here, or None when ``prefect-dask`` is importable."""
    try:
        import prefect_dask  # noqa: F401
    except ImportError as exc:
        return f"prefect-dask is not installed ({exc}); pip install prefect-dask to include it"
    return None


GOALS = (("process", 10.0, ">= 10x"), ("thread", 1 / 1.5, ">= 0.67x (within 1.5x)"), ("dask", 1.0, "> 1x"))
"""(runner, least throughput ratio elastic/runner, how the goal reads); Dask's is strict: ahead."""


def main() -> None:
    """Start one server, run each runner in a fresh process (``--one NAME``), print figures side by side."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--runners", default=",".join(RUNNERS))
    parser.add_argument(
        "--api-wait", type=float, default=300.0, help="seconds to wait for the API to catch up"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.tasks, args.api_wait)), flush=True)
        return
    names = args.runners.split(",")
    unknown = set(names) - set(RUNNERS)
    if unknown or args.tasks < 1 or not args.api_wait >= 0:
        parser.error(
            f"--runners: choose among {', '.join(RUNNERS)} (got {sorted(unknown)}); --tasks >= 1; "
            "--api-wait >= 0"
        )
    left_out: dict[str, str] = {}
    if "dask" in names and (why := dask_missing()) is not None:
        left_out["dask"] = why
        names.remove("dask")
    # imported here, not in the ``--one`` children: on import it sets a fresh PREFECT_HOME and telemetry off,
    # which the children inherit from this process
    from benchmarks._support import start_prefect_server, stop_prefect_server

    server, proc = start_prefect_server()
    os.environ["PREFECT_API_URL"] = server.api_url
    print(f"Prefect server {server.api_url}; {args.tasks} no-op tasks per runner", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    try:
        for name in names:
            cmd = [sys.executable, __file__, "--one", name, "--tasks", str(args.tasks)]
            cmd += ["--api-wait", str(args.api_wait)]
            out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
            rows[name] = json.loads(out.strip().splitlines()[-1])
            print(f"{name}: {rows[name]['wall']:.1f} s", flush=True)
    finally:
        stop_prefect_server(proc)  # its own process group: the server and whatever it started
    report(rows, left_out, args.tasks)


def report(rows: dict[str, dict[str, Any]], left_out: dict[str, str], tasks: int) -> None:
    """Print the runners side by side (rich table), the goals met or not, and the runners left out."""
    from rich.console import Console
    from rich.table import Table

    elastic = rows.get("elastic", {}).get("wall")
    table = Table(title=f"{tasks} no-op Prefect tasks, 2 workers each, one Prefect server")
    for head in ("runner", "wall s", "tasks/s", "ms/task", "submitted s", "first done s", "API done +s"):
        table.add_column(head, justify="left" if head == "runner" else "right")
    table.add_column("Elastic's throughput / this", justify="right")
    for name, row in rows.items():
        wall = row["wall"]
        table.add_row(
            name,
            f"{wall:.1f}",
            f"{tasks / wall:.1f}",
            f"{1000 * wall / tasks:.1f}",
            f"{row['submitted']:.1f}",
            f"{row['first']:.1f}",
            "-" if row["lag"] is None else f"{row['lag']:.1f}",
            "-" if elastic is None else f"{wall / elastic:.2f}x",
        )
    console = Console(width=150)  # the whole table, also when the output is not a terminal
    console.print(table)
    for name, why in left_out.items():
        console.print(f"{name}: left out: {why}")
    if elastic is None:
        return
    for other, least, goal in GOALS:
        if other in rows:
            ratio = rows[other]["wall"] / elastic
            met = ratio > least if other == "dask" else ratio >= least
            console.print(f"elastic vs {other}: {ratio:.2f}x (goal {goal}): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
