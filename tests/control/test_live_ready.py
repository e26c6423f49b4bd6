"""Announced tasks that wait only for cores make their stage ready (`LiveDemand.expect(..., ready=True)`)."""

from __future__ import annotations

from elastic.control.live import LiveDemand
from elastic.metrics import Event, EventKind


def demand(events: list[Event]) -> LiveDemand:
    return LiveDemand("w", record=events.append, clock=lambda: 0.0, idle_timeout=100.0)


def test_tasks_announced_ready_make_the_stage_ready_and_keep_it_open() -> None:
    events: list[Event] = []
    d = demand(events)
    d.expect("waits-for-inputs", 4)
    d.expect("waits-for-cores", 2, cores=2, ready=True)
    d.update(10.0)
    ready = {s.name: s.ready_time for s in d.stages()}
    assert ready == {"waits-for-inputs": None, "waits-for-cores": 10.0}
    assert [s.width for s in d.stages()] == [4, 4]
    d.update(500.0)  # announced work is outstanding: never idle, never complete
    assert all(s.end_time is None for s in d.stages())
    d.expect("waits-for-cores", 0, ready=True)  # nothing wanted any more: idle, then complete
    d.update(600.0)
    d.update(700.0)
    assert [e.stage for e in events if e.kind is EventKind.STAGE_END] == ["waits-for-cores"]
