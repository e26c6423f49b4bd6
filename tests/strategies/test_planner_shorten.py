"""``asa`` lowers a merged request that still waits once its first stage is ready to that stage alone.

Where the scheduler's estimate starts the shorter request sooner (a backfill hole the merged walltime does
not fit), the request is kept for its ready stage only and the stages after it are planned anew. Found on
HPC2N replay, Montage and Statistics at 112 cores, run 2 (``docs/results/simulator.md``); here on a small
queue on the mock backend's virtual clock.
"""

from __future__ import annotations

import pytest

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.control.execution import RunResult
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.learners.asa import ASAEstimator
from elastic.metrics import EventKind
from elastic.strategies import Knowledge, make_strategy
from elastic.strategies.planner_waits import HEADROOM_SLACK, QueueWaits
from elastic.workflow import Stage, Workflow

#: Two stages of four 1-core tasks of 600 s: ``asa`` merges them (equal widths) into one request of two
#: 2-core pieces, each asking two waves of both stages' walltime (960 s each).
TWO = Workflow("two", (Stage("first", 4, 1, 600.0), Stage("second", 4, 1, 600.0)))

HOLE = 1900.0
"""8 cores: 4 are busy until ``HOLE`` and an 8-core job waits for them, then runs 20,000 s. A 4-core job
fits before it only if it ends by ``HOLE``: one stage's 960 s does, both stages' 1920 s no longer do once
the first poll has passed."""


def _run(strategy: str) -> RunResult:
    backend = MockBackend(nodes=8)
    backend.submit(JobSpec(cores=4, walltime=HOLE, runtime=HOLE))
    backend.submit(JobSpec(cores=8, walltime=20_000.0, runtime=20_000.0))
    knowledge = Knowledge(TWO, waits=ASAEstimator(grid=[0.0, 100_000.0], policy="greedy"))
    return Runner(TWO, make_strategy(strategy), backend, SimExecution(), knowledge, seed=1).run()


def test_a_merged_request_waiting_past_a_hole_its_first_stage_fits_is_lowered_to_that_stage() -> None:
    result = _run("asa")
    assert result.status == "completed"
    submits = [e for e in result.events if e.kind is EventKind.ALLOC_SUBMIT]
    first = [e.allocation for e in submits if e.stage == "first"]
    assert len(first) == 2  # one request, two pieces
    starts = {e.allocation: e.time for e in result.events if e.kind is EventKind.ALLOC_START}
    # kept as asked (3840 s, both stages), the pieces would wait for the 8-core job's end (21,900 s) and the
    # run end at 23,100 s; lowered to ``first`` alone they start in the hole, and so does ``second``
    assert all(starts[a] < HOLE for a in first)
    assert any(e.stage == "second" for e in submits)  # planned anew once the first request gave it up
    assert result.metrics.makespan < HOLE
    # within a poll of Per-Stage, which asks each stage on its own at its need
    assert result.metrics.makespan <= _run("perstage").metrics.makespan + 2 * 30.0
    assert result.metrics.core_seconds_charged == pytest.approx(_run("perstage").metrics.core_seconds_charged)


class _View:
    """The one part of a run view :meth:`QueueWaits.soonest` reads: the scheduler's estimate."""

    def __init__(self, waits: dict[float, float | None] | None) -> None:
        self.estimate = None if waits is None else (lambda cores, walltime, releasing=(): waits[walltime])


@pytest.mark.parametrize(
    ("waits", "chosen"),
    [
        ({960.0: 0.0, 1920.0: 20_000.0, 3840.0: 20_000.0}, 0),  # only the first stage alone fits the hole
        ({960.0: 0.0, 1920.0: HEADROOM_SLACK, 3840.0: 20_000.0}, 1),  # two stages start as soon
        ({960.0: 500.0, 1920.0: 500.0, 3840.0: 500.0}, 2),  # the whole request starts as soon: kept
        ({960.0: None, 1920.0: 0.0, 3840.0: 20_000.0}, 2),  # no estimate: nothing is given up
        (None, 2),
    ],
)
def test_soonest_keeps_the_longest_request_that_starts_as_soon_as_the_shortest(
    waits: dict[float, float | None] | None, chosen: int
) -> None:
    view = _View(waits)
    assert QueueWaits().soonest(view, 4, [960.0, 1920.0, 3840.0]) == chosen  # type: ignore[arg-type]
    assert QueueWaits(estimates=False).soonest(view, 4, [960.0, 1920.0, 3840.0]) == 2  # type: ignore[arg-type]
