"""Offers follow an allocation interval, as the Mesos master's ``--allocation_interval``: cores a finished
task frees are offered at the next batch allocation, not at once, while a new agent's cores and a REVIVE
are served at once. The option is checked before anything starts. (Its default here is 0, every free
core offered at once: see ``DEFAULT_ALLOCATION_INTERVAL``.)"""

from __future__ import annotations

import time

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.errors import ConfigError
from elastic.front.mesos import MesosServer
from elastic.front.mesos.master import DEFAULT_ALLOCATION_INTERVAL, MESOS_ALLOCATION_INTERVAL
from tests.front.mesos.raw import RawScheduler, launch, task_info

pytestmark = pytest.mark.slow


@pytest.mark.timeout(120)
def test_freed_cores_wait_for_the_next_allocation_while_new_agents_and_revive_are_served_at_once() -> None:
    with (
        LocalBackend(cores=1) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
    ):
        for bad in (-1.0, float("inf"), float("nan")):
            with pytest.raises(ConfigError, match="allocation_interval"):
                MesosServer(el, allocation_interval=bad)
        # a batch allocation far away: only what Mesos serves between batches can come
        with MesosServer(el, heartbeat_interval=300.0, allocation_interval=3600.0) as server:
            assert MESOS_ALLOCATION_INTERVAL == 1.0 and DEFAULT_ALLOCATION_INTERVAL == 0.0
            raw = RawScheduler(server.address, None)
            offer = raw.offer()  # the new allocation's agent: offered at once
            agent = offer["agent_id"]["value"]
            ok = raw.call("ACCEPT", accept=launch(offer["id"]["value"], task_info("t", agent)))
            assert ok.status_code == 202
            raw.status("t", "TASK_FINISHED")
            mark = len(raw.events)
            time.sleep(1.5)  # the core is free (this front door used to offer it at once)
            assert not [e for e in raw.events[mark:] if e["type"] == "OFFERS"], (
                "freed core offered between batches"
            )
            assert raw.call("REVIVE").status_code == 202
            again = raw.offer(after=mark)  # a REVIVE allocates at once
            assert again["agent_id"]["value"] == agent
            raw.close()
