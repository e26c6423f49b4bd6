"""Read Standard Workload Format (SWF) traces into a :class:`~elastic.simulator.workload.Workload`.

The SWF (Parallel Workloads Archive, D. Feitelson et al.) has one job per line, 18 whitespace-separated
numeric fields, ``-1`` for unknown values and header lines starting with ``;``. :func:`read_swf` parses a
whole file with pandas' C tokenizer (the HPC2N trace, 202,871 jobs, loads in about 0.3 s); when that fast
path rejects the file, the file is re-scanned line by line to name the first bad line (file:line).

How SWF fields become :class:`Workload` columns:

- ``cores``: requested processors (field 8) when > 0, else allocated processors (field 5). Jobs with
  neither are dropped and counted (a warning is logged).
- ``runtime``: field 4. Jobs with an unknown runtime (``-1``) are dropped and counted (we cannot replay
  them).
- ``walltime``: requested time (field 9) when > 0 and ``use_requested``, else runtime x
  ``estimate_ratio`` (at least 1 s). The request is kept even when the job really ran longer: such a job
  ends in TIMEOUT in the simulator at its request, as it did (or would have) on the real machine.
- ``recorded_wait``: field 3 when >= 0, else NaN.
- Jobs wider than the machine (``cores`` > the trace's processors) can never start; they are dropped
  and counted (a warning is logged), like Slurm rejecting them at submit.
"""

from __future__ import annotations

import gzip
import logging
import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
import numpy.typing as npt
import pandas as pd

from elastic.errors import ConfigError, TraceError
from elastic.simulator.workload import Workload

__all__ = ["SWF_FIELDS", "SwfHeader", "read_swf", "read_swf_header"]

logger = logging.getLogger(__name__)

SWF_FIELDS: tuple[str, ...] = (
    "job_id",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)
"""Names of the 18 SWF fields, in file order (field 1 is ``SWF_FIELDS[0]``)."""

_N_FIELDS = len(SWF_FIELDS)
# 0-based column indices of the fields we use.
_JOB, _SUBMIT, _WAIT, _RUN, _ALLOC, _REQ_PROCS, _REQ_TIME, _USER = 0, 1, 2, 3, 4, 7, 8, 11
_GZIP_MAGIC = b"\x1f\x8b"
_Float2D = npt.NDArray[np.float64]  # (n, 18) raw SWF fields
_HEADER_RE = re.compile(r"^;\s*([A-Za-z][A-Za-z0-9 _-]*?)\s*:\s*(.*?)\s*$")
_LEADING_INT_RE = re.compile(r"^\s*(\d+)")
# Traces are ASCII; latin-1 decodes any byte, so a stray byte never hides the real problem.
_ENCODING = "latin-1"


@dataclass(frozen=True, slots=True)
class SwfHeader:
    """The ``;`` header block at the top of an SWF file.

    Attributes
    ----------
    lines : tuple of str
        The header lines as written, without line ends.
    fields : Mapping[str, str]
        ``; Key: value`` pairs; for a key that appears more than once (e.g. ``Queue``) the first value.
    """

    lines: tuple[str, ...]
    fields: Mapping[str, str] = field(default_factory=dict)

    def _int(self, key: str) -> int | None:
        value = self.fields.get(key)
        match = _LEADING_INT_RE.match(value) if value is not None else None
        number = int(match.group(1)) if match else 0
        return number if number > 0 else None

    @property
    def max_procs(self) -> int | None:
        """``MaxProcs`` (processors of the machine), or None when absent."""
        return self._int("MaxProcs")

    @property
    def max_nodes(self) -> int | None:
        """``MaxNodes``, or None when absent (``"338 (batch partition)"`` gives 338)."""
        return self._int("MaxNodes")

    @property
    def processors(self) -> int | None:
        """Machine size in cores: ``MaxProcs``, else ``MaxNodes``, else None."""
        return self.max_procs or self.max_nodes


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


@contextmanager
def _open_text(path: Path) -> Iterator[IO[str]]:
    """Open ``path`` as text, gunzipping it when it starts with the gzip magic bytes."""
    if _is_gzip(path):
        with gzip.open(path, "rt", encoding=_ENCODING) as fh:
            yield fh
    else:
        with path.open("r", encoding=_ENCODING) as fh:
            yield fh


def _check_file(path: Path) -> None:
    if not path.exists():
        raise TraceError(str(path), None, "no such file; give the path of an SWF trace (.swf or .swf.gz)")
    if not path.is_file():
        raise TraceError(str(path), None, "not a regular file; give the path of an SWF trace")


def read_swf_header(path: str | Path) -> SwfHeader:
    """Read the ``;`` header block at the top of an SWF trace.

    Parameters
    ----------
    path : str or Path
        SWF file, plain or gzip-compressed.

    Returns
    -------
    SwfHeader
        Header lines and their ``Key: value`` fields (empty when the file has no header).

    Raises
    ------
    TraceError
        The file does not exist or is not readable as (gzipped) text.
    """
    path = Path(path)
    _check_file(path)
    lines: list[str] = []
    fields: dict[str, str] = {}
    try:
        with _open_text(path) as fh:
            for raw in fh:
                line = raw.rstrip("\r\n")
                stripped = line.strip()
                if not stripped:
                    continue
                if not stripped.startswith(";"):
                    break
                lines.append(line)
                match = _HEADER_RE.match(stripped)
                if match:
                    fields.setdefault(match.group(1), match.group(2))
    except (OSError, EOFError) as exc:
        raise TraceError(str(path), None, f"cannot read the file: {exc}") from exc
    return SwfHeader(tuple(lines), fields)


def _first_bad_line(path: Path, fallback: str) -> TraceError:
    """Re-scan ``path`` line by line and describe its first malformed job line.

    The pandas fast path reports errors without a reliable line number (it does not count comment
    lines), so on failure we pay for one slow pass to point at the exact 1-based line.
    """
    try:
        return _scan_for_bad_line(path) or TraceError(str(path), None, fallback)
    except (OSError, EOFError) as exc:
        return TraceError(str(path), None, f"cannot read the file: {exc}")


def _scan_for_bad_line(path: Path) -> TraceError | None:
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            tokens = line.split(";", 1)[0].split()
            if not tokens:
                continue
            if len(tokens) != _N_FIELDS:
                return TraceError(
                    str(path),
                    lineno,
                    f"expected {_N_FIELDS} whitespace-separated SWF fields, found {len(tokens)}",
                )
            for index, token in enumerate(tokens):
                try:
                    value = float(token)
                except ValueError:
                    value = math.nan
                if not math.isfinite(value):
                    return TraceError(
                        str(path),
                        lineno,
                        f"field {index + 1} ({SWF_FIELDS[index]}) is not a finite number: {token!r}",
                    )
    return None


def _data_line_number(path: Path, row: int) -> int | None:
    """Return the 1-based file line of the ``row``-th (0-based) job line, skipping comments and blanks."""
    seen = -1
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.split(";", 1)[0].strip():
                seen += 1
                if seen == row:
                    return lineno
    return None


def _parse(path: Path) -> _Float2D:
    """Parse every job line of ``path`` into an (n, 18) float64 array."""
    try:
        frame = pd.read_csv(
            path,
            sep=r"\s+",
            comment=";",
            header=None,
            engine="c",
            dtype=np.float64,
            compression="gzip" if _is_gzip(path) else None,
            encoding=_ENCODING,
        )
    except pd.errors.EmptyDataError:
        return np.empty((0, _N_FIELDS), dtype=np.float64)
    except (ValueError, pd.errors.ParserError) as exc:
        raise _first_bad_line(path, f"cannot be parsed as SWF: {exc}") from exc
    except (OSError, EOFError) as exc:
        raise TraceError(str(path), None, f"cannot read the file: {exc}") from exc
    values = frame.to_numpy(dtype=np.float64)
    if values.shape[1] != _N_FIELDS or not np.isfinite(values).all():
        raise _first_bad_line(path, "has missing or non-finite fields")
    return values


def _validate_options(
    window: tuple[float, float] | None,
    load: float,
    processors: int | None,
    estimate_ratio: float,
    max_jobs: int | None,
) -> None:
    if window is not None:
        start, end = window
        if not (math.isfinite(start) and start >= 0 and end > start):
            raise ConfigError(
                f"read_swf window must be (start, end) seconds since the trace start with "
                f"0 <= start < end (end may be math.inf), got {window!r}"
            )
    if not (math.isfinite(load) and load > 0):
        raise ConfigError(
            f"read_swf load must be a finite number > 0 (2 = twice the arrival rate), got {load!r}"
        )
    if processors is not None and processors < 1:
        raise ConfigError(
            f"read_swf processors must be >= 1 or None (keep the trace's size), got {processors!r}"
        )
    if not (math.isfinite(estimate_ratio) and estimate_ratio > 0):
        raise ConfigError(f"read_swf estimate_ratio must be a finite number > 0, got {estimate_ratio!r}")
    if max_jobs is not None and max_jobs < 0:
        raise ConfigError(f"read_swf max_jobs must be >= 0 or None (all jobs), got {max_jobs!r}")


def read_swf(
    path: str | Path,
    *,
    window: tuple[float, float] | None = None,
    load: float = 1.0,
    processors: int | None = None,
    estimate_ratio: float = 1.0,
    max_jobs: int | None = None,
    use_requested: bool = True,
) -> Workload:
    r"""Read an SWF trace (plain or gzip) as a :class:`Workload` of background jobs.

    Steps, in this order: parse; drop jobs that cannot be replayed (unknown runtime, unknown size, wider
    than the machine), logging a warning with the counts; keep the jobs submitted in ``window``; keep the
    first ``max_jobs``; rebase and compress submit times; scale sizes to ``processors``.

    Parameters
    ----------
    path : str or Path
        SWF file; gzip is detected from its first bytes, not its name.
    window : tuple of (float, float) or None, default None
        ``(start, end)`` in seconds on the trace's own clock (SWF submit times count from the log
        start): keep jobs with ``start <= submit < end`` and shift their submit times by ``-start``.
        ``end`` may be ``math.inf``. None keeps every job and the trace's clock unchanged.
    load : float, default 1.0
        Arrival-rate factor: submit times (after the window shift) are divided by ``load``, so 2 means
        jobs arrive twice as often. Runtimes are unchanged.
    processors : int or None, default None
        Scale the machine to this many cores: each job's cores become
        ``round(cores * processors / trace_processors)`` (half up), at least 1 and at most
        ``processors``. None keeps the trace's machine size.
    estimate_ratio : float, default 1.0
        Walltime = runtime x ``estimate_ratio`` (at least 1 s) for jobs without a requested time (or all
        jobs when ``use_requested`` is False).
    max_jobs : int or None, default None
        Keep at most this many jobs (the earliest submitted, after the window).
    use_requested : bool, default True
        Use the requested time (SWF field 9) as walltime when it is > 0. Jobs whose runtime exceeds
        their request keep the request and end in TIMEOUT in the simulator, as in reality.

    Returns
    -------
    Workload
        Jobs sorted by submit time; ``processors`` is ``processors`` if given, else the header's
        ``MaxProcs`` (else ``MaxNodes``, else the widest job).

    Raises
    ------
    TraceError
        The file is missing, unreadable, or has a malformed job line (wrong number of fields,
        non-numeric field, negative submit time); the message gives ``file:line``.
    ConfigError
        An option is out of range; the message names it.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> swf = pathlib.Path(tempfile.mkdtemp()) / "tiny.swf"
    >>> _ = swf.write_text("; MaxProcs: 8\n1 0 5 100 4 -1 -1 4 200 -1 1 3 -1 -1 -1 -1 -1 -1\n")
    >>> w = read_swf(swf)
    >>> (len(w), w.processors, int(w.cores[0]), float(w.walltime[0]))
    (1, 8, 4, 200.0)
    """
    path = Path(path)
    _validate_options(window, load, processors, estimate_ratio, max_jobs)
    _check_file(path)
    header = read_swf_header(path)
    raw = _parse(path)

    submit = raw[:, _SUBMIT]
    negative = np.flatnonzero(submit < 0)
    if negative.size:
        row = int(negative[0])
        raise TraceError(
            str(path),
            _data_line_number(path, row),
            f"negative submit time {submit[row]:g}; SWF submit times are seconds since the log start",
        )
    if not bool(np.all(submit[1:] >= submit[:-1])):
        # SWF files are meant to be sorted by submit time; tolerate ones that are not.
        logger.info("trace %s: jobs not in submit order; sorting them", path)
        raw = raw[np.argsort(submit, kind="stable")]

    cores_all = np.where(raw[:, _REQ_PROCS] > 0, raw[:, _REQ_PROCS], raw[:, _ALLOC])
    trace_processors = header.processors
    if trace_processors is None:
        known = cores_all[cores_all > 0]
        trace_processors = int(known.max()) if known.size else 1
        logger.info(
            "trace %s: no MaxProcs/MaxNodes header; using the widest job, %d cores", path, trace_processors
        )

    if window is not None:
        start, end = window
        raw_submit = raw[:, _SUBMIT]
        inside = (raw_submit >= start) & (raw_submit < end)
        raw, cores_all = raw[inside], cores_all[inside]

    no_runtime = raw[:, _RUN] < 0
    no_cores = cores_all <= 0
    too_wide = ~no_cores & (cores_all > trace_processors)
    keep = ~(no_runtime | no_cores | too_wide)
    if not bool(keep.all()):
        logger.warning(
            "trace %s: dropped %d of %d jobs: %d with unknown runtime, %d with unknown size, "
            "%d wider than the machine (%d cores)",
            path,
            int((~keep).sum()),
            keep.size,
            int(no_runtime.sum()),
            int((no_cores & ~no_runtime).sum()),
            int((too_wide & ~no_runtime).sum()),
            trace_processors,
        )
    raw, cores_all = raw[keep], cores_all[keep]
    if max_jobs is not None:
        raw, cores_all = raw[:max_jobs], cores_all[:max_jobs]

    new_submit = raw[:, _SUBMIT] - (window[0] if window is not None else 0.0)
    if load != 1.0:
        new_submit = new_submit / load

    cores = cores_all.astype(np.int64)
    size = trace_processors
    if processors is not None and processors != trace_processors:
        scaled = np.floor(cores_all * (processors / trace_processors) + 0.5)
        cores = np.clip(scaled, 1, processors).astype(np.int64)
        size = processors

    runtime = raw[:, _RUN].copy()
    requested = raw[:, _REQ_TIME]
    derived = np.maximum(runtime * estimate_ratio, 1.0)
    walltime = np.where(requested > 0, requested, derived) if use_requested else derived
    over = int((runtime > walltime).sum())
    if over:
        logger.info("trace %s: %d jobs run longer than their walltime and will TIMEOUT", path, over)
    wait = raw[:, _WAIT]

    return Workload(
        job_id=raw[:, _JOB].astype(np.int64),
        submit=np.ascontiguousarray(new_submit, dtype=np.float64),
        cores=cores,
        runtime=runtime,
        walltime=np.ascontiguousarray(walltime, dtype=np.float64),
        user=raw[:, _USER].astype(np.int64),
        recorded_wait=np.where(wait >= 0, wait, np.nan),
        processors=int(size),
        source=str(path),
    )
