"""A decision that cancels running and pending jobs of the run cancels the pending ones first.

A running job cancelled frees cores that the scheduler gives at once to the first pending job that fits,
and that may be a job of this run the same decision cancels next: it starts, runs nothing, and is cancelled.
``asa`` in jobs of one task released a request whole when some of its jobs started early (CyberShake 56 on
the synthetic queue: 26 of ``SeismogramSynthesis``'s 56 jobs running), and each running job's core started
a pending one before that one's cancel came. Those starts were also read as waits of a few seconds by the
wait calibration. Run control now carries out a decision's cancels of pending jobs before its other cancels.
"""

from __future__ import annotations

import pytest

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.strategies.actions import Cancel, Decision, Submit
from elastic.strategies.base import RunView
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow

WORKFLOW = Workflow(
    "w",
    (
        Stage("a", tasks=1, cores=1, runtime=600.0),
        Stage("b", tasks=4, cores=1, runtime=300.0, depends_on=("a",)),
    ),
)


class ReleasesAHalfStartedRequest:
    """Asks ``b`` ahead as four one-core jobs; once two idle and two wait, cancels all four, then asks again.

    ``order`` lists the four in the cancel decision: ``"submitted"`` (the running ones come first, as a
    strategy releasing a request in submission order lists them) or ``"reversed"``.
    """

    name = "releases-half-started"

    def __init__(self, order: str) -> None:
        self.order = order
        self.released: tuple[str, ...] = ()

    def decide(self, view: RunView) -> Decision:
        if not view.allocations:
            asks = (Submit("a", 1, 3600.0), Submit("b", 4, 3600.0, pieces=4))
            return Decision(asks, wake_at=view.now + 1.0)
        if not self.released:
            jobs = list(view.allocations_for("b"))
            if sum(a.running for a in jobs) == 2 and sum(a.pending for a in jobs) == 2:
                if self.order == "reversed":
                    jobs.reverse()
                self.released = tuple(a.alloc_id for a in jobs)
                return Decision(
                    tuple(Cancel(a.alloc_id, "started early") for a in jobs), wake_at=view.now + 1.0
                )
            return Decision(wake_at=view.now + 1.0)
        if view.stage("a").complete and len(view.allocations_for("b")) == 4:
            return Decision((Submit("b", 4, 3600.0),), wake_at=view.now + 1.0)
        return Decision(wake_at=view.now + 1.0)


@pytest.mark.parametrize("order", ["submitted", "reversed"])
def test_the_pending_jobs_a_decision_cancels_never_start(order: str) -> None:
    strategy = ReleasesAHalfStartedRequest(order)
    backend = MockBackend(nodes=4)  # four one-core nodes, one of them another user's for 1,000 s
    backend.submit(JobSpec(cores=1, walltime=1000.0, user="other"))
    runner = Runner(
        WORKFLOW,
        strategy,
        backend,
        SimExecution(),
        Knowledge(WORKFLOW),
        max_duration=4 * 3600.0,
        poll_interval=1.0,
    )
    result = runner.run()
    assert result.status == "completed"
    released = {a.alloc_id: a for a in runner.controller.allocations if a.alloc_id in strategy.released}
    assert len(released) == 4
    started = [a for a in released.values() if a.start_time is not None]
    # the two that ran when the decision was made, and no other: the freed cores went to no job of the run
    # that the same decision cancelled
    assert len(started) == 2
    assert all(a.ended for a in released.values())
    # the run asked again and ran b's four tasks on the new job
    assert len(runner.controller.allocations) == 6
