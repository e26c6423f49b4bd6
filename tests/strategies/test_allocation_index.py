"""The allocation index run control keeps up to date says what indexing every allocation again would.

:class:`~elastic.strategies.view.AllocationIndex` remakes only the entries an allocation's new record
touches (its stage, its old and new labels, the live list); a view built from it must look exactly like
one built from the allocations (:meth:`AllocationIndexes.of`), in submission order, whatever sequence of
requests, state changes, re-labellings and cancellations came before.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from elastic.allocations import LEGAL_TRANSITIONS, Allocation, AllocationState
from elastic.strategies.allocation_index import AllocationIndex, AllocationIndexes

STAGES = ("a", "b", "c", None)
LABELS = st.lists(st.sampled_from(["a", "b", "c", "*"]), max_size=3).map(tuple)

# an operation: ("new", stage, serves) | ("state", which, to) | ("serves", which, serves) | ("cancel", which)
OPS = st.one_of(
    st.tuples(st.just("new"), st.sampled_from(STAGES), LABELS),
    st.tuples(st.just("state"), st.integers(0, 30), st.sampled_from(list(AllocationState))),
    st.tuples(st.just("serves"), st.integers(0, 30), LABELS),
    st.tuples(st.just("cancel"), st.integers(0, 30)),
)


def _same(got: AllocationIndexes, want: AllocationIndexes) -> None:
    assert dict(got.by_stage) == dict(want.by_stage)
    assert dict(got.by_label) == dict(want.by_label)
    assert got.live == want.live
    assert got.allocations == want.allocations


@given(st.lists(OPS, max_size=40))
def test_the_kept_index_equals_the_index_built_from_scratch_after_every_change(ops: list[tuple]) -> None:
    index = AllocationIndex()
    records: dict[str, Allocation] = {}
    for step, op in enumerate(ops):
        if op[0] == "new":
            a = Allocation(f"x{len(records)}", cores=2, walltime=60.0, stage=op[1], serves=op[2])
        elif not records:
            continue
        else:
            old = list(records.values())[op[1] % len(records)]
            if op[0] == "state":
                if op[2] not in LEGAL_TRANSITIONS[old.state]:
                    continue
                a = old.transition(op[2], float(step))
            elif op[0] == "serves":
                a = dataclasses.replace(old, serves=op[2])
            else:
                a = dataclasses.replace(old, cancelled=True)
        records[a.alloc_id] = a
        index.put(a)
        _same(index.snapshot(), AllocationIndexes.of(tuple(records.values())))


def test_a_snapshot_is_not_changed_by_later_puts_and_is_reused_while_nothing_changes() -> None:
    index = AllocationIndex()
    first = Allocation("x1", cores=1, walltime=60.0, stage="a")
    index.put(first)
    before = index.snapshot()
    assert index.snapshot() is before  # nothing changed: the same object, no work
    index.put(first.transition(AllocationState.RUNNING, 1.0))
    index.put(Allocation("x2", cores=1, walltime=60.0, stage="b", serves=("a", "b")))
    assert before.by_stage == {"a": (first,)} and before.live == (first,)  # a view keeps what it saw
    after = index.snapshot()
    assert [a.alloc_id for a in after.by_label["a"]] == ["x1", "x2"]
    assert after.by_stage["a"][0].running
