"""Run control: the driver that runs a workflow under a strategy, and the executions it drives.

Modules
-------
runner
    :class:`~elastic.control.runner.Runner`, the driver loop for a declared workflow.
execution
    The :class:`~elastic.control.execution.Execution` contract between the driver and where tasks run.
sim_execution
    :class:`~elastic.control.sim_execution.SimExecution`: tasks simulated in backend time.
pool_execution
    :class:`~elastic.control.pool_execution.PoolExecution`: tasks on the real pool.
"""

from __future__ import annotations

__all__: list[str] = []
