"""A front door closed before any task was submitted ends its run cleanly (regression).

It raised ``ValueError: max() arg is an empty sequence`` at shutdown (no stage to take the width of): an
``elastic mesos`` stopped before any framework subscribed hit it.
"""

from __future__ import annotations

from elastic import Elastic
from elastic.backends.local import LocalBackend


def test_a_front_door_with_no_task_shuts_down_and_records_the_run() -> None:
    with LocalBackend(cores=1) as backend, Elastic(backend, "perstage", store=False) as el:
        pass
    assert el.result is not None and el.result.status == "completed"
    assert el.view().allocations == ()
