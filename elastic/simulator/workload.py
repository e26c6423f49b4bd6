"""The :class:`Workload` record: a columnar set of background jobs.

Both the SWF trace reader and the synthetic load generator produce a :class:`Workload`; the simulator
consumes it. Columns are numpy arrays of equal length, sorted by submit time, so a whole trace of
hundreds of thousands of jobs is cheap to hold, slice and scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # pandas costs ~0.5 s to import; only to_frame needs it
    import pandas as pd

__all__ = ["Workload"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Workload:
    """Background jobs, one row per job, sorted by submit time.

    Attributes
    ----------
    job_id : ndarray of int64
        Job id from the source (SWF field 1), or 1..n for synthetic load.
    submit : ndarray of float64
        Submit time in seconds since the start of the workload (the first job of a window submits
        at or after 0).
    cores : ndarray of int64
        Cores the job asks for (SWF requested processors, else allocated processors), >= 1.
    runtime : ndarray of float64
        Actual runtime in seconds (hidden from the scheduler), >= 0.
    walltime : ndarray of float64
        Requested walltime in seconds (what the scheduler sees), > 0.
    user : ndarray of int64
        User id (-1 when unknown).
    recorded_wait : ndarray of float64
        Wait the job really had in the traced system (SWF field 3), NaN when unknown or synthetic.
    processors : int
        Size of the machine the workload was recorded on (or scaled to), in cores.
    source : str
        Where it came from: a file path, or a description of the synthetic generator.
    queue : ndarray of int64 or None, default None
        Queue (class) number of each job (SWF field 15, -1 when unknown); None when the source has
        none (synthetic load).
    """

    job_id: IntArray
    submit: FloatArray
    cores: IntArray
    runtime: FloatArray
    walltime: FloatArray
    user: IntArray
    recorded_wait: FloatArray
    processors: int
    source: str
    queue: IntArray | None = None

    def __len__(self) -> int:
        return int(self.job_id.shape[0])

    def select(self, mask: npt.NDArray[np.bool_] | npt.NDArray[np.int64]) -> Workload:
        """Return the jobs where ``mask`` is True (or at the given indices), on the same machine."""
        return Workload(
            job_id=self.job_id[mask],
            submit=self.submit[mask],
            cores=self.cores[mask],
            runtime=self.runtime[mask],
            walltime=self.walltime[mask],
            user=self.user[mask],
            recorded_wait=self.recorded_wait[mask],
            processors=self.processors,
            source=self.source,
            queue=None if self.queue is None else self.queue[mask],
        )

    def to_frame(self) -> pd.DataFrame:
        """Return the jobs as a DataFrame with one column per attribute array."""
        import pandas as pd

        return pd.DataFrame(
            {
                "job_id": self.job_id,
                "submit": self.submit,
                "cores": self.cores,
                "runtime": self.runtime,
                "walltime": self.walltime,
                "user": self.user,
                "recorded_wait": self.recorded_wait,
                "queue": np.full(len(self), -1, dtype=np.int64) if self.queue is None else self.queue,
            }
        )
