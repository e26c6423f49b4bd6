"""Where runtimes and waits are kept: the history protocols, the in-memory history and the task label.

:class:`~elastic.strategies.knowledge.Knowledge` reads a :class:`RuntimeHistory` (the project's
:class:`~elastic.store.Store` fits it, so history persists across runs; :class:`MemoryHistory` keeps it in
memory for pure simulation) and writes observed waits to a :class:`WaitStore`. A stage's runtimes are kept
under its name, its tasks' under :func:`task_label`, the whole workflow's under
:data:`~elastic.strategies.knowledge.TOTAL`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["MemoryHistory", "RuntimeHistory", "WaitStore", "task_label"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_TASK = "*task:"


def task_label(stage: str) -> str:
    """Return the history label of ``stage``'s task runtimes (``Knowledge.task_estimate`` reads them).

    Examples
    --------
    >>> task_label("search")
    '*task:search'
    """
    return _TASK + stage


class RuntimeHistory(Protocol):
    """Where stage runtimes are kept (:class:`~elastic.store.Store` satisfies it)."""

    def add_stage_runtime(
        self,
        workflow: str,
        stage: str,
        runtime: float,
        *,
        censored: bool = False,
        cores: int | None = None,
        run_id: int | None = None,
    ) -> None:
        """Record one stage runtime (censored: only a lower bound)."""
        ...

    def stage_runtimes(self, workflow: str, stage: str) -> tuple[FloatArray, BoolArray]:
        """Return the runtimes of a stage and their censored flags, oldest first."""
        ...


class WaitStore(Protocol):
    """Where observed queue waits are kept (:class:`~elastic.store.Store` satisfies it)."""

    def add_wait(
        self,
        key: str,
        wait: float,
        *,
        cores: int | None = None,
        user: str | None = None,
        backend: str | None = None,
        submit_time: float | None = None,
    ) -> None:
        """Record one observed queue wait."""
        ...


@dataclass
class MemoryHistory:
    """In-memory :class:`RuntimeHistory` (pure simulation; shared across the runs of one comparison)."""

    _rows: dict[tuple[str, str], list[tuple[float, bool]]] = field(default_factory=dict)

    def add_stage_runtime(
        self,
        workflow: str,
        stage: str,
        runtime: float,
        *,
        censored: bool = False,
        cores: int | None = None,
        run_id: int | None = None,
    ) -> None:
        """Record one stage runtime."""
        self._rows.setdefault((workflow, stage), []).append((float(runtime), bool(censored)))

    def stage_runtimes(self, workflow: str, stage: str) -> tuple[FloatArray, BoolArray]:
        """Return the runtimes of a stage and their censored flags, oldest first."""
        rows = self._rows.get((workflow, stage), [])
        return (
            np.array([r for r, _ in rows], dtype=np.float64),
            np.array([c for _, c in rows], dtype=np.bool_),
        )
