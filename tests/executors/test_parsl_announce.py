"""ElasticExecutor.announce_waiting takes the front door's per-stage counts, not a total of its own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from parsl.dataflow.states import States

from elastic.executors.parsl_executor import ElasticExecutor


class _Front:
    """The front door as announce_waiting sees it: one task of "s" comes in while the records are read."""

    def __init__(self) -> None:
        self.reads = 0
        self.announced: dict[str, int] = {}

    def taken(self) -> dict[str, int]:
        self.reads += 1
        return {"s": 4 if self.reads == 1 else 5}

    def expect(self, stage: str, tasks: int, **_: Any) -> None:
        self.announced[stage] = tasks


def test_tasks_taken_while_the_records_are_read_are_not_announced_again() -> None:
    ex = ElasticExecutor(backend="mock", strategy="perstage", store=False)
    front = _Front()
    record = {"executor": ex.label, "status": States.pending, "resource_specification": {"stage": "s"}}
    ex._elastic = front  # type: ignore[assignment]
    ex._dfk = SimpleNamespace(tasks={i: dict(record, id=i) for i in range(3)})  # type: ignore[assignment]
    assert ex.announce_waiting({"gone"}) == {"s"}
    assert front.announced == {"s": 2, "gone": 0}  # 3 pending, one of them taken meanwhile
