"""Read Standard Workload Format (SWF) traces into a :class:`~elastic.simulator.workload.Workload`.

The SWF (Parallel Workloads Archive, D. Feitelson et al.) has one job per line, 18 whitespace-separated
numeric fields, ``-1`` for unknown values and header lines starting with ``;``. Files are streamed
(:func:`~elastic.simulator.swf_io.parse_columns`: the HPC2N trace, 202,871 jobs, loads in about 0.3 s),
plain or compressed (gzip, bzip2, xz, told from the first bytes); a malformed line or a damaged
compressed stream raises :class:`~elastic.errors.TraceError` naming ``file:line`` and the field.

How SWF fields become :class:`Workload` columns, and what the reader assumes (every assumption is a
line of :attr:`SwfReading.warnings` (losses and guesses, logged as warnings and printed by every command) or
:attr:`SwfReading.notes` (harmless, logged at INFO; ``elastic traces info`` prints both):

- ``cores``: requested processors (field 8) when > 0, else allocated processors (field 5). Jobs with
  neither are dropped.
- ``runtime``: field 4. Jobs with an unknown runtime (``-1``) are dropped (we cannot replay them).
- ``submit``: field 2. ``-1`` (unknown) drops the job; any other negative value is an error.
  Files not sorted by submit time are sorted.
- ``walltime``: requested time (field 9) when > 0 and ``use_requested``, else runtime x
  ``estimate_ratio`` (at least 1 s). The request is kept even when the job really ran longer: such a job
  ends in TIMEOUT in the simulator at its request, as it did (or would have) on the real machine.
- ``recorded_wait``: field 3 when >= 0, else NaN. A trace whose every wait is ``-1`` (a model's output,
  or a log without submit times) has no recorded waits: it can be replayed, not used for fidelity.
- ``queue``: field 15 (-1 when unknown).
- The machine size is the header's ``MaxProcs``, else ``MaxNodes``, else ``processors`` as given, else
  the widest job, with a loud warning (a machine as wide as its widest job is usually far too small:
  the load and the waits come out absurd). Jobs wider than the machine are dropped, like Slurm
  rejecting them at submit.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elastic.errors import ConfigError, TraceError
from elastic.simulator.swf_io import (
    SWF_FIELDS,
    USED_FIELDS,
    SwfHeader,
    check_file,
    data_line_number,
    parse_columns,
    read_swf_header,
)
from elastic.simulator.workload import Workload

__all__ = [
    "SWF_FIELDS",
    "SwfHeader",
    "SwfReading",
    "read_swf",
    "read_swf_header",
    "read_swf_report",
    "recorded_peak",
    "require_recorded_waits",
]

logger = logging.getLogger(__name__)

_JOB, _SUBMIT, _WAIT, _RUN, _ALLOC, _REQ_PROCS, _REQ_TIME, _USER, _QUEUE = range(len(USED_FIELDS))


@dataclass(frozen=True, slots=True)
class SwfReading:
    """A trace as :func:`read_swf_report` read it: the workload, and what was assumed or dropped.

    Attributes
    ----------
    workload : Workload
        The jobs kept.
    header : SwfHeader
        The file's header block.
    job_lines : int
        Job lines in the file.
    machine : int
        Cores of the traced machine the jobs were checked against (before any scaling).
    machine_from : str
        Where ``machine`` came from: ``"MaxProcs"``, ``"MaxNodes"``, ``"processors"`` (given, because
        the header has neither) or ``"widest job"`` (a guess).
    dropped : Mapping[str, int]
        Jobs dropped, by reason (``unknown submit time``, ``unknown runtime``, ``unknown size``,
        ``wider than the machine``); only reasons that dropped a job.
    out_of_order : int
        Job lines submitted before the job line above them (the jobs were sorted).
    submit_span : tuple of (float, float) or None
        First and last submit time on the trace's own clock, before the window (None: no job).
    warnings : tuple of str
        One sentence per guess or loss that may make results wrong, most important first.
    notes : tuple of str
        One sentence per harmless assumption (e.g. processors taken from ``MaxNodes``, no recorded
        waits in a replay).
    """

    workload: Workload
    header: SwfHeader
    job_lines: int
    machine: int
    machine_from: str
    dropped: Mapping[str, int]
    out_of_order: int
    submit_span: tuple[float, float] | None
    warnings: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def recorded_waits(self) -> int:
        """Kept jobs with a recorded wait (SWF field 3 >= 0)."""
        return int(np.count_nonzero(~np.isnan(self.workload.recorded_wait)))


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
    if processors is not None and (isinstance(processors, bool) or processors < 1):
        raise ConfigError(
            f"read_swf processors must be >= 1 or None (keep the trace's size), got {processors!r}"
        )
    if not (math.isfinite(estimate_ratio) and estimate_ratio > 0):
        raise ConfigError(f"read_swf estimate_ratio must be a finite number > 0, got {estimate_ratio!r}")
    if max_jobs is not None and max_jobs < 1:
        raise ConfigError(f"read_swf max_jobs must be >= 1 or None (all jobs), got {max_jobs!r}")


def _machine(
    path: Path, header: SwfHeader, cores: np.ndarray, processors: int | None
) -> tuple[int, str, str | None]:
    """Return the traced machine's size, where it came from, and the warning an assumption deserves."""
    if header.max_procs is not None:
        return header.max_procs, "MaxProcs", None
    if header.max_nodes is not None:
        return (
            header.max_nodes,
            "MaxNodes",
            f"{path}: the header has no MaxProcs; took MaxNodes ({header.max_nodes}) as the machine's "
            "processors (SWF sizes count processors: if its nodes have several, give processors / "
            "--processors with the real count)",
        )
    if processors is not None:
        return (
            processors,
            "processors",
            f"{path}: the header has no MaxProcs or MaxNodes; the machine has {processors} cores as "
            "given (processors / --processors), jobs are not scaled",
        )
    known = cores[cores > 0]
    widest = int(known.max()) if known.size else 1
    return (
        widest,
        "widest job",
        f"{path}: the header has no MaxProcs or MaxNodes: ASSUMED the machine is as wide as its widest "
        f"job, {widest} cores. A real machine is usually much larger, and on too small a machine the "
        "load and the waits are absurd: give its size with processors / --processors N",
    )


def recorded_peak(raw: np.ndarray) -> tuple[int, float] | None:
    """Return the most cores the recorded schedule ran at once, and when (None: nothing recorded).

    Parameters
    ----------
    raw : ndarray
        Job lines as :func:`~elastic.simulator.swf_io.parse_columns` returns them. A job counts from
        ``submit + wait`` for ``run_time`` seconds on its allocated processors (else its requested ones);
        jobs with an unknown submit time, wait, runtime or size are left out.

    Examples
    --------
    >>> import numpy as np
    >>> rows = np.zeros((3, 9))
    >>> rows[:, 1:5] = [[0, 0, 100, 4], [10, 0, 100, 4], [200, 0, 10, 6]]  # submit, wait, run, cores
    >>> recorded_peak(rows)
    (8, 10.0)
    """
    cores = np.where(raw[:, _ALLOC] > 0, raw[:, _ALLOC], raw[:, _REQ_PROCS])
    ok = (raw[:, _SUBMIT] >= 0) & (raw[:, _WAIT] >= 0) & (raw[:, _RUN] > 0) & (cores > 0)
    if not ok.any():
        return None
    start = raw[ok, _SUBMIT] + raw[ok, _WAIT]
    end = start + raw[ok, _RUN]
    times = np.concatenate([start, end])
    deltas = np.concatenate([cores[ok], -cores[ok]])
    order = np.lexsort((deltas, times))  # at a tie, ends (negative) before starts: no false overlap
    running = np.cumsum(deltas[order])
    top = int(np.argmax(running))
    return int(running[top]), float(times[order][top])


def _empty_reason(
    path: Path, job_lines: int, dropped: Mapping[str, int], window: tuple[float, float] | None, span: str
) -> TraceError:
    if job_lines == 0:
        return TraceError(
            str(path), None, "has no job lines (only header or comment lines): nothing to replay"
        )
    if window is not None:
        start, end = window
        return TraceError(
            str(path),
            None,
            f"no job is submitted in the window [{start:,.0f}, {end:,.0f}) s of the trace's clock; its jobs "
            f"are submitted {span}: choose a window inside that span",
        )
    reasons = ", ".join(f"{n:,} {why}" for why, n in dropped.items())
    return TraceError(str(path), None, f"every one of its {job_lines:,} jobs was dropped ({reasons})")


def read_swf_report(
    path: str | Path,
    *,
    window: tuple[float, float] | None = None,
    load: float = 1.0,
    processors: int | None = None,
    estimate_ratio: float = 1.0,
    max_jobs: int | None = None,
    use_requested: bool = True,
) -> SwfReading:
    """Read an SWF trace like :func:`read_swf`, and report what was assumed and dropped (nothing logged).

    Parameters are those of :func:`read_swf`.

    Returns
    -------
    SwfReading
        The workload and the reading's assumptions, counts and warnings.

    Raises
    ------
    TraceError
        As :func:`read_swf`.
    ConfigError
        An option is out of range; the message names it.
    """
    path = Path(path)
    _validate_options(window, load, processors, estimate_ratio, max_jobs)
    check_file(path)
    header = read_swf_header(path)
    raw = parse_columns(path)
    job_lines = len(raw)
    warnings: list[str] = []
    notes: list[str] = []

    submit = raw[:, _SUBMIT]
    unknown_submit = submit == -1
    bad = np.flatnonzero((submit < 0) & ~unknown_submit)
    if bad.size:
        row = int(bad[0])
        raise TraceError(
            str(path),
            data_line_number(path, row),
            f"field 2 (submit_time) is {submit[row]:g}; SWF submit times are seconds since the log "
            "start, >= 0 (-1: unknown)",
        )
    known_submit = submit[~unknown_submit]
    span = (float(known_submit.min()), float(known_submit.max())) if known_submit.size else None
    out_of_order = int(np.count_nonzero(known_submit[1:] < known_submit[:-1]))
    unknown_rows = np.flatnonzero(unknown_submit)
    first_unknown = int(unknown_rows[0]) if unknown_rows.size else None
    if out_of_order:
        first = int(np.flatnonzero(~unknown_submit)[1 + int(np.argmax(known_submit[1:] < known_submit[:-1]))])
        warnings.append(
            f"{path}: {out_of_order:,} job lines are submitted before the line above them (first at line "
            f"{data_line_number(path, first)}); SWF files are sorted by submit time: sorted them"
        )
        raw = raw[np.argsort(submit, kind="stable")]
        unknown_submit = raw[:, _SUBMIT] == -1

    cores_all = np.where(raw[:, _REQ_PROCS] > 0, raw[:, _REQ_PROCS], raw[:, _ALLOC])
    machine, machine_from, assumed = _machine(path, header, cores_all, processors)
    if machine_from in ("widest job", "processors"):  # no size in the header: does the schedule fit?
        peak = recorded_peak(raw)
        if peak is not None and peak[0] > machine:
            warnings.append(
                f"{path}: its recorded schedule runs up to {peak[0]:,} cores at once (at {peak[1]:,.0f} s "
                f"on the trace's clock), {peak[0] / machine:.1f}x the {machine:,} cores "
                + ("assumed from its widest job" if machine_from == "widest job" else "given")
                + f": the machine has at least {peak[0]:,} cores; give --processors {peak[0]} (or its real "
                "size)"
            )
    if assumed is not None:
        # Nodes counted as processors only matters when jobs wider than that are dropped.
        loud = machine_from != "MaxNodes" or bool(np.any(cores_all > machine))
        if loud:
            warnings.insert(0, assumed)
        else:
            notes.append(assumed)

    no_runtime = raw[:, _RUN] < 0
    no_cores = cores_all <= 0
    too_wide = cores_all > machine
    reasons = {
        "unknown submit time": unknown_submit,
        "unknown runtime": no_runtime & ~unknown_submit,
        "unknown size": no_cores & ~no_runtime & ~unknown_submit,
        "wider than the machine": too_wide & ~no_runtime & ~unknown_submit,
    }
    dropped = {why: int(mask.sum()) for why, mask in reasons.items() if mask.any()}
    keep = ~(unknown_submit | no_runtime | no_cores | too_wide)
    if dropped:
        where = ""
        if first_unknown is not None:
            where = (
                f"; the first job without a submit time is at line {data_line_number(path, first_unknown)}"
            )
        warnings.append(
            f"{path}: dropped {int((~keep).sum()):,} of {job_lines:,} jobs: "
            + ", ".join(
                f"{n:,} with {why}" if why.startswith("unknown") else f"{n:,} {why} ({machine} cores)"
                for why, n in dropped.items()
            )
            + where
        )
    if window is not None:
        keep &= (raw[:, _SUBMIT] >= window[0]) & (raw[:, _SUBMIT] < window[1])
    raw, cores_all = raw[keep], cores_all[keep]
    if max_jobs is not None:
        raw, cores_all = raw[:max_jobs], cores_all[:max_jobs]
    if len(raw) == 0:
        text = "-" if span is None else f"from {span[0]:,.0f} s to {span[1]:,.0f} s"
        raise _empty_reason(path, job_lines, dropped, window, text)

    new_submit = raw[:, _SUBMIT] - (window[0] if window is not None else 0.0)
    if load != 1.0:
        new_submit = new_submit / load

    cores = cores_all.astype(np.int64)
    size = machine
    if processors is not None and processors != machine:
        scaled = np.floor(cores_all * (processors / machine) + 0.5)
        cores = np.clip(scaled, 1, processors).astype(np.int64)
        size = processors

    runtime = raw[:, _RUN].copy()
    requested = raw[:, _REQ_TIME]
    derived = np.maximum(runtime * estimate_ratio, 1.0)
    walltime = np.where(requested > 0, requested, derived) if use_requested else derived
    wait = raw[:, _WAIT]
    recorded = np.where(wait >= 0, wait, np.nan)
    if np.isnan(recorded).all():
        notes.append(
            f"{path}: no recorded waits (SWF field 3, wait_time, is -1 on every job kept): the trace can "
            "be replayed (elastic simulate), not compared with what really happened (fidelity, waits)"
        )
    workload = Workload(
        job_id=raw[:, _JOB].astype(np.int64),
        submit=np.ascontiguousarray(new_submit, dtype=np.float64),
        cores=cores,
        runtime=runtime,
        walltime=np.ascontiguousarray(walltime, dtype=np.float64),
        user=raw[:, _USER].astype(np.int64),
        recorded_wait=recorded,
        processors=int(size),
        source=str(path),
        queue=raw[:, _QUEUE].astype(np.int64),
    )
    return SwfReading(
        workload,
        header,
        job_lines,
        machine,
        machine_from,
        dropped,
        out_of_order,
        span,
        tuple(warnings),
        tuple(notes),
    )


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
    r"""Read an SWF trace (plain or compressed) as a :class:`Workload` of background jobs.

    Steps, in this order: parse; drop jobs that cannot be replayed (unknown submit time, runtime or
    size, wider than the machine); keep the jobs submitted in ``window``; keep the first ``max_jobs``;
    rebase and compress submit times; scale sizes to ``processors``. Every assumption and loss is
    logged as a warning (:func:`read_swf_report` returns them instead).

    Parameters
    ----------
    path : str or Path
        SWF file; gzip, bzip2 and xz are detected from its first bytes, not its name.
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
        ``processors``. When the header gives no machine size, this *is* the machine's size (jobs are
        not scaled). None keeps the trace's machine size.
    estimate_ratio : float, default 1.0
        Walltime = runtime x ``estimate_ratio`` (at least 1 s) for jobs without a requested time (or all
        jobs when ``use_requested`` is False).
    max_jobs : int or None, default None
        Keep at most this many jobs (>= 1; the earliest submitted, after the window).
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
        The file is missing, unreadable, damaged (compressed data), has a malformed job line (wrong
        number of fields, non-numeric field, negative submit time other than -1; the message gives
        ``file:line`` and the field), or no job is left (no job lines, all dropped, empty window).
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
    reading = read_swf_report(
        path,
        window=window,
        load=load,
        processors=processors,
        estimate_ratio=estimate_ratio,
        max_jobs=max_jobs,
        use_requested=use_requested,
    )
    for message in reading.warnings:
        logger.warning("%s", message)
    for message in reading.notes:
        logger.info("%s", message)
    w = reading.workload
    over = int((w.runtime > w.walltime).sum())
    if over:
        logger.info("trace %s: %d jobs run longer than their walltime and will TIMEOUT", path, over)
    return w


def require_recorded_waits(workload: Workload, purpose: str) -> None:
    """Raise :class:`TraceError` when no job of ``workload`` has a recorded wait.

    Parameters
    ----------
    workload : Workload
        Jobs read from a trace.
    purpose : str
        What needs the waits, for the message (e.g. ``"elastic fidelity compares simulated with
        recorded waits"``).
    """
    if len(workload) and not np.isnan(workload.recorded_wait).all():
        return
    raise TraceError(
        workload.source,
        None,
        f"has no recorded waits (SWF field 3, wait_time, is -1 on every job): {purpose}, so there is "
        "nothing to compare with; the trace can still be replayed (elastic simulate --trace)",
    )
