"""An offer left unanswered is rescinded after the offer timeout (the Mesos master's ``--offer_timeout``),
and its cores are offered again; the timeout is on by default."""

from __future__ import annotations

import pytest

from elastic import Elastic
from elastic.backends.local import LocalBackend
from elastic.errors import ConfigError
from elastic.front.mesos import MesosServer
from elastic.front.mesos.master import DEFAULT_OFFER_TIMEOUT
from tests.front.mesos.raw import RawScheduler, launch, task_info

pytestmark = pytest.mark.slow


def cpus(offer: dict) -> float:
    return float(sum(r["scalar"]["value"] for r in offer["resources"] if r["name"] == "cpus"))


@pytest.mark.timeout(120)
def test_an_unanswered_offer_is_rescinded_after_the_timeout_and_offered_again() -> None:
    with (
        LocalBackend(cores=2) as backend,
        Elastic(backend, "perstage", store=False, poll_interval=0.5, idle_timeout=1.0) as el,
    ):
        with MesosServer(el) as default:
            assert default.master._book.offer_timeout == DEFAULT_OFFER_TIMEOUT > 0
        with pytest.raises(ConfigError, match="offer_timeout"):
            MesosServer(el, offer_timeout=-1)
        with MesosServer(el, heartbeat_interval=0.5, offer_timeout=1.0) as server:
            raw = RawScheduler(server.address, None)
            offer = raw.offer()  # never answered
            mark = len(raw.events)
            raw.wait_for(
                lambda e: e["type"] == "RESCIND" and e["rescind"]["offer_id"] == offer["id"], after=mark
            )
            again = raw.offer(after=mark)
            assert again["id"] != offer["id"]
            assert again["agent_id"] == offer["agent_id"] and cpus(again) == cpus(offer)
            # the new offer is as good as the first: a launch on it runs
            ok = raw.call(
                "ACCEPT", accept=launch(again["id"]["value"], task_info("t", again["agent_id"]["value"]))
            )
            assert ok.status_code == 202
            assert raw.status("t", "TASK_FINISHED")["state"] == "TASK_FINISHED"
            raw.close()
