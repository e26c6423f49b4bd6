"""Hand-built allocation records for strategy tests."""

from __future__ import annotations

from elastic.allocations import Allocation, AllocationState

__all__ = ["Allocation", "alloc", "split"]


def alloc(
    alloc_id: str,
    stage: str,
    cores: int,
    walltime: float,
    state: AllocationState,
    submit: float,
    start: float | None = None,
    end: float | None = None,
    *,
    busy: int = 0,
    **extra: object,
) -> tuple[Allocation, int]:
    """An allocation record as run control keeps it, and the cores it has busy."""
    a = Allocation(
        alloc_id,
        cores=cores,
        walltime=walltime,
        stage=stage,
        state=state,
        submit_time=submit,
        start_time=start,
        end_time=end,
        **extra,  # type: ignore[arg-type]
    )
    return a, busy


def split(allocs: tuple[tuple[Allocation, int], ...]) -> tuple[tuple[Allocation, ...], dict[str, int]]:
    return tuple(a for a, _ in allocs), {a.alloc_id: b for a, b in allocs if b}
