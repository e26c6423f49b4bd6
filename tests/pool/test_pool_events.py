"""Event delivery: subscribers run without the pool's lock, in the order the events were recorded."""

from __future__ import annotations

import threading
import time

from elastic.allocations import Allocation
from elastic.pool.events import PoolEvent
from elastic.pool.pool import Pool
from elastic.pool.tasks import Task, TaskEvent, TaskState
from tests.pool.conftest import AgentStarter, start_allocation


def test_subscribers_never_run_under_the_pool_lock(pool: Pool, start_agent: AgentStarter) -> None:
    """A subscriber whose work needs the pool from another thread (a backend clock, a driver) never waits.

    Probed once from each thread that delivers (the caller of the API, the pool's I/O thread).
    """
    stuck: dict[str, bool] = {}

    def probe(event: PoolEvent) -> None:
        name = threading.current_thread().name
        if name in stuck:
            return
        other = threading.Thread(target=pool.free_cores, daemon=True)
        other.start()
        other.join(1.0)
        stuck[name] = other.is_alive()

    pool.subscribe(probe)
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    assert pool.submit(Task.shell("true", task_id="t")).result(timeout=20).returncode == 0
    assert "elastic-pool" in stuck and not any(stuck.values()), stuck


def test_events_reach_each_subscriber_once_in_recorded_order() -> None:
    """Two threads submit at once, and a subscriber submits from inside its callback: nothing reordered."""
    seen: list[PoolEvent] = []
    with Pool(heartbeat_interval=0.2, heartbeat_timeout=2.5) as pool:

        def on_event(event: PoolEvent) -> None:
            seen.append(event)
            if isinstance(event, TaskEvent) and event.task_id.endswith("-0"):  # re-entrant: x-0, y-0
                pool.submit(Task.shell("true", task_id=f"{event.task_id}-again"))

        pool.subscribe(on_event)
        pool.add_allocation(Allocation("a1", cores=1, walltime=600.0))

        def submit_many(prefix: str) -> None:
            for i in range(150):
                pool.submit(Task.shell("true", task_id=f"{prefix}-{i}"))

        threads = [threading.Thread(target=submit_many, args=(p,)) for p in ("x", "y")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.monotonic() + 10
        while len(seen) < len(pool.events) and time.monotonic() < deadline:
            time.sleep(0.01)  # the last events may be delivered by the pool's thread
        assert seen == list(pool.events)
        queued = [e for e in seen if isinstance(e, TaskEvent) and e.state is TaskState.QUEUED]
        assert len(queued) == 302 and {"x-0-again", "y-0-again"} <= {e.task_id for e in queued}
