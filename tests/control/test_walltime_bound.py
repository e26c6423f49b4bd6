"""A walltime beyond :data:`~elastic.limits.MAX_WALLTIME` is asked at it; a JobSpec beyond it is refused.

A real run of a stage declared with a runtime of 1e300 s asked a walltime of 1.5e300 s: the job script's end
(nanoseconds in bash's 64-bit integers) overflowed, the pool drained the allocation at once, and the run
never ended. Stages are now refused beyond a year (``tests/test_workflow.py``); a strategy may still ask
more than 100 years from a long tail (a year's mean at ``runtime_cv`` 100 has its 99.9th percentile near
120 years), and run control asks such a request at the most allowed.
"""

from __future__ import annotations

import datetime

import pytest

from elastic.backends.mock import MockBackend
from elastic.batch import JobSpec
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.errors import ConfigError
from elastic.limits import MAX_WALLTIME
from elastic.strategies.base import Decision, RunView, Submit
from elastic.strategies.knowledge import Knowledge
from elastic.workflow import Stage, Workflow


class Centuries:
    """Asks one allocation of a thousand years for the stage, once."""

    name = "centuries"

    def __init__(self) -> None:
        self.asked = False

    def decide(self, view: RunView) -> Decision:
        if self.asked:
            return Decision(())
        self.asked = True
        return Decision((Submit("s", cores=2, walltime=1000 * 365.25 * 86400.0),))


def test_a_request_beyond_the_bound_is_asked_at_it_and_the_run_completes() -> None:
    workflow = Workflow("w", (Stage("s", tasks=2, cores=1, runtime=60.0),))
    backend = MockBackend(nodes=4)
    runner = Runner(workflow, Centuries(), backend, SimExecution(), Knowledge(workflow), max_duration=3600.0)
    result = runner.run()
    assert result.status == "completed"
    (alloc,) = runner.controller.allocations
    assert alloc.walltime == MAX_WALLTIME
    assert alloc.backend_job_id is not None
    assert backend.state(alloc.backend_job_id).walltime == MAX_WALLTIME


@pytest.mark.parametrize("walltime", [MAX_WALLTIME * 1.001, float("inf"), float("nan"), 0.0])
def test_a_jobspec_beyond_the_bound_is_refused_naming_it(walltime: float) -> None:
    with pytest.raises(ConfigError, match="at most 100 years"):
        JobSpec(cores=1, walltime=walltime)


def test_the_job_scripts_end_arithmetic_holds_the_bound_for_a_century() -> None:
    # the agent's end is epoch nanoseconds plus the walltime in nanoseconds, in bash's signed 64 bits
    in_2126 = datetime.datetime(2126, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
    assert round(in_2126 * 1e9) + round(MAX_WALLTIME * 1e9) < 2**63 - 1
