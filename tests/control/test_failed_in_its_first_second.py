"""A batch job that fails in the second it started is read as started, then ended: never the other way;
and jobs that keep failing as they start stop the run with the reason.

Found on the local Slurm cluster with a site's agent interpreter that does not exist: each job failed at
once, and allocation control stopped with ``illegal transition FAILED -> RUNNING``. Slurm's times are whole
seconds; a start is recorded no earlier than the job's submit time (a fraction of a second later), and the
end, read as Slurm's whole second, sorted before it.
"""

from __future__ import annotations

import dataclasses
import math

from elastic.backends.mock import MockBackend
from elastic.batch import JobInfo, JobState
from elastic.control.runner import Runner
from elastic.control.sim_execution import SimExecution
from elastic.strategies.base import make_strategy
from elastic.strategies.knowledge import Knowledge
from elastic.timeline import EventKind
from elastic.workflow import Stage, Workflow

WORKFLOW = Workflow("w", (Stage("a", tasks=2, cores=1, runtime=60.0),))


class FailsAtOnce(MockBackend):
    """The mock batch system read as Slurm reports it: whole seconds; every job fails as it starts."""

    def state(self, job_id: str) -> JobInfo:
        info = super().state(job_id)
        if info.start_time is None:
            return info
        second = float(math.floor(info.start_time))
        return dataclasses.replace(
            info, state=JobState.FAILED, start_time=second, end_time=second, exit_code=127
        )


def test_a_job_failing_in_its_first_second_is_started_then_ended() -> None:
    backend = FailsAtOnce(nodes=4, start=0.5)  # submits at a fraction of a second
    runner = Runner(
        WORKFLOW,
        make_strategy("perstage"),
        backend,
        SimExecution(),
        Knowledge(WORKFLOW),
        max_duration=600.0,
        poll_interval=1.0,
    )
    result = runner.run()
    # three jobs in a row failed at start: the run stops, saying so, rather than resubmit for ever
    assert result.status == "failed"
    assert "3 batch jobs in a row failed within 60 s of their start" in result.detail
    assert "exit code 127" in result.detail
    starts = {e.allocation: e.time for e in result.events if e.kind is EventKind.ALLOC_START}
    ends = {e.allocation: e.time for e in result.events if e.kind is EventKind.ALLOC_END}
    assert starts, "no job was seen to start"
    for alloc, at in starts.items():
        assert ends[alloc] >= at
