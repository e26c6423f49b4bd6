"""A run's allocations by stage, by label and still live.

The indexes a :class:`~elastic.strategies.view.RunView` looks its allocations up in
(:class:`AllocationIndexes`), and the index run control keeps up to date one allocation at a time
(:class:`AllocationIndex`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from elastic.allocations import Allocation

__all__ = ["AllocationIndex", "AllocationIndexes"]

_K = TypeVar("_K")


@dataclass(frozen=True, slots=True)
class AllocationIndexes:
    """A run's allocations by stage, by label and still live, each in submission order (read-only).

    What a :class:`~elastic.strategies.view.RunView` looks allocations up in;
    :meth:`AllocationIndex.snapshot` keeps it up to date one allocation at a time, else a view builds it
    from its allocations.
    """

    by_stage: Mapping[str | None, tuple[Allocation, ...]]
    """Allocations requested for each stage (:attr:`Allocation.stage`)."""
    by_label: Mapping[str, tuple[Allocation, ...]]
    """Allocations kept for each label (:attr:`Allocation.labels`)."""
    live: tuple[Allocation, ...]
    """Allocations not ended."""
    allocations: tuple[Allocation, ...] = ()
    """Every allocation indexed, in submission order."""
    order: Mapping[str, int] | None = field(default=None, compare=False, repr=False)
    """Each allocation's place in submission order, where the indexer keeps one (None: found when needed)."""

    def replacing(
        self, changed: Mapping[str, Allocation], allocations: tuple[Allocation, ...]
    ) -> AllocationIndexes:
        """Return these indexes with the records of ``changed`` (by id) in place of their own.

        ``allocations``: every allocation, the changed ones replaced, in submission order.
        Only the entries of the changed allocations are remade: a planner that keeps a running allocation
        for other stages (a hold) or releases it re-reads its view so, and building the indexes of every
        allocation again for it was a tenth of a 5,000-stage DAG's run. Each must be indexed here already,
        live, with the same stage; else the indexes are built from scratch.
        """
        old = {a.alloc_id: a for a in self.live if a.alloc_id in changed}
        if len(old) != len(changed) or any(old[i].stage != a.stage for i, a in changed.items()):
            return AllocationIndexes.of(allocations)
        order = self.order
        if order is None:
            order = {a.alloc_id: i for i, a in enumerate(allocations)}
        by_stage = dict(self.by_stage)
        for stage in {a.stage for a in changed.values()}:
            by_stage[stage] = tuple([changed.get(a.alloc_id, a) for a in by_stage[stage]])
        by_label = dict(self.by_label)
        touched = {x for i, a in changed.items() for x in (*old[i].labels, *a.labels)}
        for label in touched:
            members = [changed.get(a.alloc_id, a) for a in by_label.get(label, ())]
            members = [a for a in members if label in a.labels]
            present = {a.alloc_id for a in members}
            joined = [a for a in changed.values() if label in a.labels and a.alloc_id not in present]
            if joined:
                members = sorted([*members, *joined], key=lambda a: order[a.alloc_id])
            if members:
                by_label[label] = tuple(members)
            else:
                by_label.pop(label, None)
        live = tuple([b for a in self.live if not (b := changed.get(a.alloc_id, a)).ended])
        return AllocationIndexes(by_stage, by_label, live, allocations, order)

    @staticmethod
    def of(allocations: tuple[Allocation, ...]) -> AllocationIndexes:
        """Return the indexes of ``allocations`` (in submission order), built from scratch."""
        by_stage: dict[str | None, list[Allocation]] = {}
        by_label: dict[str, list[Allocation]] = {}
        for a in allocations:
            by_stage.setdefault(a.stage, []).append(a)
            for label in dict.fromkeys(a.labels):
                by_label.setdefault(label, []).append(a)
        return AllocationIndexes(
            {k: tuple(v) for k, v in by_stage.items()},
            {k: tuple(v) for k, v in by_label.items()},
            tuple(a for a in allocations if not a.ended),
            allocations,
        )


class AllocationIndex:
    """:class:`AllocationIndexes` kept up to date as allocations are added and change, one at a time.

    Run control owns the allocation records and tells this index of every record it adds or replaces
    (:meth:`put`); :meth:`snapshot` then gives the indexes a :class:`~elastic.strategies.view.RunView`
    reads, remaking only the entries that changed. A run of a long declared workflow has thousands of
    allocations, nearly all ended, and a view every step: rebuilding the indexes of every allocation
    each time cost a third of a 1,000-stage Per-Stage run.
    """

    def __init__(self) -> None:
        self._allocs: dict[str, Allocation] = {}
        self._order: dict[str, int] = {}
        self._stage_ids: dict[str | None, list[str]] = {}
        self._label_ids: dict[str, list[str]] = {}
        self._live_ids: dict[str, None] = {}  # insertion order is submission order: none comes back
        self._dirty_stages: set[str | None] = set()
        self._dirty_labels: set[str] = set()
        self._dirty_live = False
        self._snapshot = AllocationIndexes({}, {}, ())

    def __len__(self) -> int:
        return len(self._allocs)

    def put(self, a: Allocation) -> None:
        """Add allocation ``a``, or replace the record of the same id (a later state, labels, walltime)."""
        old = self._allocs.get(a.alloc_id)
        if old is None:
            self._order[a.alloc_id] = len(self._order)
            self._stage_ids.setdefault(a.stage, []).append(a.alloc_id)
            old_labels: dict[str, None] = {}
        else:
            if old.stage != a.stage:
                self._stage_ids[old.stage].remove(a.alloc_id)
                self._insert(self._stage_ids.setdefault(a.stage, []), a.alloc_id)
                self._dirty_stages.add(old.stage)
            old_labels = dict.fromkeys(old.labels)
        self._allocs[a.alloc_id] = a
        new_labels = dict.fromkeys(a.labels)
        for label in old_labels:
            if label not in new_labels:
                self._label_ids[label].remove(a.alloc_id)
                self._dirty_labels.add(label)
        for label in new_labels:
            if label not in old_labels:
                self._insert(self._label_ids.setdefault(label, []), a.alloc_id)
            self._dirty_labels.add(label)
        self._dirty_stages.add(a.stage)
        if not a.ended:
            self._live_ids[a.alloc_id] = None
            self._dirty_live = True
        elif a.alloc_id in self._live_ids:
            del self._live_ids[a.alloc_id]
            self._dirty_live = True

    def _insert(self, ids: list[str], alloc_id: str) -> None:
        """Insert ``alloc_id`` into ``ids`` (ascending submission order) at its place."""
        order = self._order
        at = bisect.bisect_left([order[i] for i in ids], order[alloc_id])
        ids.insert(at, alloc_id)

    def snapshot(self) -> AllocationIndexes:
        """Return the indexes as of now (the same object as last time when nothing changed since)."""
        if not (self._dirty_stages or self._dirty_labels or self._dirty_live):
            return self._snapshot
        allocs = self._allocs
        by_stage = _remade(self._snapshot.by_stage, self._dirty_stages, self._stage_ids, allocs)
        by_label = _remade(self._snapshot.by_label, self._dirty_labels, self._label_ids, allocs)
        live = tuple(allocs[i] for i in self._live_ids) if self._dirty_live else self._snapshot.live
        self._dirty_stages.clear()
        self._dirty_labels.clear()
        self._dirty_live = False
        self._snapshot = AllocationIndexes(by_stage, by_label, live, tuple(allocs.values()), self._order)
        return self._snapshot


def _remade(
    index: Mapping[_K, tuple[Allocation, ...]],
    keys: Iterable[_K],
    ids_of: Mapping[_K, list[str]],
    allocs: Mapping[str, Allocation],
) -> dict[_K, tuple[Allocation, ...]]:
    """Return ``index`` with the entries of ``keys`` remade from their ids (a key left with none dropped)."""
    out = dict(index)
    for key in keys:
        ids = ids_of.get(key)
        if ids:
            out[key] = tuple(allocs[i] for i in ids)
        else:
            out.pop(key, None)
    return out
