"""The figures of one run: :class:`RunMetrics`, with its :class:`StageMetrics` and :class:`PredictionOutcome`.

:mod:`elastic.metrics` computes them from a run's timeline (definitions there); the store keeps them and the
reports print them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["IDLE_PARTS", "IdleParts", "PredictionOutcome", "RunMetrics", "StageMetrics"]


@dataclass(frozen=True, slots=True)
class StageMetrics:
    """Per-stage figures (seconds); ``nan`` when the stage never ran."""

    name: str
    execution_time: float
    queue_wait: float
    perceived_wait: float


@dataclass(frozen=True, slots=True)
class PredictionOutcome:
    """Counts of wait predictions that were hits, over-predictions (misses) and under-predictions."""

    hits: int = 0
    over: int = 0
    under: int = 0


IDLE_PARTS = ("early", "between", "after", "unused")
""":class:`IdleParts`' fields, in order (:meth:`RunMetrics.summary`: ``idle_<part>_core_hours``)."""


@dataclass(frozen=True, slots=True)
class IdleParts:
    """Where a run's idle core-seconds went, read per allocation from its own tasks (core-seconds).

    An allocation's idle cores are in one of four parts: ``early``, before its first task started (it
    started before its stage needed it: a request asked ahead that came early); ``between``, from its
    first task's start to its last task's end, the cores none of its tasks used (a stage narrower than
    it, kept across stages, or beside a stage's last tasks running elsewhere); ``after``, from its last
    task's end until it ended (kept for work that did not come, until released or out of walltime); and
    ``unused``, the whole of an allocation that ran no task. The four add up to the run's idle
    core-seconds (charged - used) when every task ran on an allocation of the run.
    """

    early: float = 0.0
    between: float = 0.0
    after: float = 0.0
    unused: float = 0.0

    @property
    def total(self) -> float:
        """Idle core-seconds in all four parts."""
        return self.early + self.between + self.after + self.unused


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """All metrics of one run (seconds and core-seconds; core-hours as properties)."""

    makespan: float
    queue_wait: float
    perceived_wait: float
    core_seconds_charged: float
    core_seconds_used: float
    resubmissions: int
    allocations: int
    lost_tasks: int
    predictions: PredictionOutcome
    stages: tuple[StageMetrics, ...]
    idle: IdleParts = IdleParts()
    """Where the idle core-seconds went (:class:`IdleParts`)."""
    unused_jobs: int = 0
    """Batch jobs that started and ran no task (their cores are :attr:`IdleParts.unused`): a job asked
    ahead that came early and was released, a piece that started after its stage's tasks were all placed."""

    @property
    def overhead_core_seconds(self) -> float:
        """Idle core-seconds: charged - used."""
        return self.core_seconds_charged - self.core_seconds_used

    @property
    def core_hours_charged(self) -> float:
        """Charged core-hours."""
        return self.core_seconds_charged / 3600.0

    @property
    def core_hours_used(self) -> float:
        """Used core-hours."""
        return self.core_seconds_used / 3600.0

    @property
    def overhead_core_hours(self) -> float:
        """Idle core-hours."""
        return self.overhead_core_seconds / 3600.0

    def summary(self) -> dict[str, float]:
        """Flat ``name -> number`` view (for tables and the store)."""
        out: dict[str, float] = {
            "makespan": self.makespan,
            "queue_wait": self.queue_wait,
            "perceived_wait": self.perceived_wait,
            "core_hours_charged": self.core_hours_charged,
            "core_hours_used": self.core_hours_used,
            "overhead_core_hours": self.overhead_core_hours,
            "resubmissions": float(self.resubmissions),
            "allocations": float(self.allocations),
            "unused_jobs": float(self.unused_jobs),
            "lost_tasks": float(self.lost_tasks),
            "prediction_hits": float(self.predictions.hits),
            "prediction_misses": float(self.predictions.over),
            "prediction_under": float(self.predictions.under),
        }
        for part in IDLE_PARTS:
            out[f"idle_{part}_core_hours"] = getattr(self.idle, part) / 3600.0
        for s in self.stages:
            for key, value in asdict(s).items():
                if key != "name":
                    out[f"{s.name}.{key}"] = value
        return out
