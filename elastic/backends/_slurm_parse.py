"""Parsing of Slurm command output, apart from running the commands (:mod:`elastic.backends.slurm`).

Pure functions from strings to Elastic records, tested on outputs captured from a real Slurm 22.05
cluster (``tests/backends/data/slurm/``). Slurm's state codes and reasons go through one table each
(:data:`STATE_TABLE`, :data:`REASON_TABLE`); nothing else in Elastic sees Slurm strings.

Times printed by Slurm (``2026-11-21T13:26:34``) are in the local time zone of the machine running the
command, and are converted to epoch seconds here.

Over 500 lines because it is the one place Slurm's strings are read: every command's output and every
state and reason table, so that nothing else in Elastic parses them.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from elastic.batch import JobInfo, JobState, PartitionInfo, PendingReason
from elastic.errors import BackendError, DependencyError, GeometryError, SubmitError

__all__ = [
    "REASON_TABLE",
    "SQUEUE_FORMAT",
    "STATE_TABLE",
    "classify_submit_error",
    "format_time",
    "is_controller_unreachable",
    "job_from_record",
    "job_from_squeue",
    "parse_config",
    "parse_duration",
    "parse_exit_code",
    "parse_jobcomp_line",
    "parse_partition",
    "parse_reason",
    "parse_record",
    "parse_sbatch_job_id",
    "parse_state",
    "priority_model",
    "parse_test_only",
    "parse_time",
    "walltime_minutes",
]

logger = logging.getLogger(__name__)

STATE_TABLE: Mapping[str, JobState] = {
    # waiting (requeued jobs wait again)
    "PENDING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    # holding cores; COMPLETING still holds them while the epilog runs, SUSPENDED/STOPPED keep them
    "RUNNING": JobState.RUNNING,
    "CONFIGURING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    # final
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "TIMEOUT": JobState.TIMEOUT,
    "DEADLINE": JobState.TIMEOUT,
    "CANCELLED": JobState.CANCELLED,
    "PREEMPTED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
}
"""Slurm job state (long name, as printed by ``squeue %T``, ``scontrol`` and jobcomp) -> :class:`JobState`."""

_SHORT_CODES = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CF": "CONFIGURING",
    "CG": "COMPLETING",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "CD": "COMPLETED",
    "F": "FAILED",
    "NF": "NODE_FAIL",
    "BF": "BOOT_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "SE": "SPECIAL_EXIT",
    "TO": "TIMEOUT",
    "DL": "DEADLINE",
    "CA": "CANCELLED",
    "PR": "PREEMPTED",
    "RV": "REVOKED",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "RF": "REQUEUE_FED",
    "RS": "RESIZING",
    "SI": "SIGNALING",
    "SO": "STAGE_OUT",
}

REASON_TABLE: Mapping[str, PendingReason] = {
    "None": PendingReason.NONE,
    "Priority": PendingReason.PRIORITY,
    "Resources": PendingReason.RESOURCES,
    "Dependency": PendingReason.DEPENDENCY,
    "DependencyNeverSatisfied": PendingReason.DEPENDENCY_NEVER_SATISFIED,
    "BeginTime": PendingReason.BEGIN_TIME,
    # waiting for nodes that are down, drained, reserved or still booting: a lack of resources
    "ReqNodeNotAvail": PendingReason.RESOURCES,
    "NodeDown": PendingReason.RESOURCES,
    "Reservation": PendingReason.RESOURCES,
    "Licenses": PendingReason.RESOURCES,
    "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_partitions": (
        PendingReason.RESOURCES
    ),
    # limits and holds: other jobs (of the user, account or QOS) come first
    "JobHeldUser": PendingReason.PRIORITY,
    "JobHeldAdmin": PendingReason.PRIORITY,
    "PartitionDown": PendingReason.PRIORITY,
    "PartitionInactive": PendingReason.PRIORITY,
}
"""Slurm pending reason -> :class:`PendingReason`. Reasons starting with ``Assoc``/``QOS``/``MaxJobs``
(accounting limits) count as PRIORITY; any other reason of a pending job becomes NONE (logged at debug)."""

_LIMIT_PREFIXES = ("Assoc", "QOS", "MaxJobs", "MaxCpu", "MaxNode", "MaxSubmit")

_warned_states: set[str] = set()
"""Unknown state codes already warned about (one warning per code and process, not one per poll)."""

_NO_VALUE = frozenset({"", "N/A", "Unknown", "unknown", "None", "(null)", "NONE"})
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


def parse_state(code: str) -> JobState:
    """Translate a Slurm job state (``RUNNING``, ``R``, ``CANCELLED by 0``...) to :class:`JobState`.

    Unknown codes give :attr:`JobState.UNKNOWN` and a warning (once per code).

    >>> parse_state("CANCELLED by 1000"), parse_state("CD")
    (<JobState.CANCELLED: 'CANCELLED'>, <JobState.COMPLETED: 'COMPLETED'>)
    """
    word = code.strip().split(" ", 1)[0].split("+", 1)[0].upper()
    word = _SHORT_CODES.get(word, word)
    state = STATE_TABLE.get(word)
    if state is None:
        if word not in _warned_states:
            _warned_states.add(word)
            logger.warning("slurm: unknown job state %r; treating it as UNKNOWN", code)
        return JobState.UNKNOWN
    return state


def parse_reason(reason: str, state: JobState) -> PendingReason:
    """Translate a Slurm reason to :class:`PendingReason`; jobs that are not pending have NONE.

    >>> parse_reason("BeginTime", JobState.PENDING), parse_reason("NonZeroExitCode", JobState.FAILED)
    (<PendingReason.BEGIN_TIME: 'BeginTime'>, <PendingReason.NONE: 'None'>)
    """
    if state is not JobState.PENDING:
        return PendingReason.NONE
    reason = reason.strip()
    found = REASON_TABLE.get(reason)
    if found is not None:
        return found
    if reason.startswith(_LIMIT_PREFIXES):
        return PendingReason.PRIORITY
    logger.debug("slurm: pending reason %r has no PendingReason; using NONE", reason)
    return PendingReason.NONE


def parse_time(value: str) -> float | None:
    """Parse a Slurm timestamp (local time) to epoch seconds; ``N/A``, ``Unknown``... give None.

    Raises
    ------
    BackendError
        The value is neither a timestamp nor one of Slurm's "no value" words.
    """
    value = value.strip()
    if value in _NO_VALUE:
        return None
    try:
        return datetime.strptime(value, _TIME_FORMAT).timestamp()
    except ValueError:
        raise BackendError(
            f"cannot read Slurm time {value!r}; expected YYYY-MM-DDTHH:MM:SS or N/A/Unknown"
        ) from None


def format_time(epoch: float) -> str:
    """Format epoch seconds as a Slurm local timestamp, rounded up to the next whole second.

    >>> parse_time(format_time(1_800_000_000.2)) == 1_800_000_001
    True
    """
    return datetime.fromtimestamp(math.ceil(epoch)).strftime(_TIME_FORMAT)


def parse_duration(value: str) -> float:
    """Parse a Slurm time limit to seconds; ``UNLIMITED``/``INFINITE``/``Partition_Limit`` give ``inf``.

    Accepts Slurm's output forms ``D-HH:MM:SS``, ``HH:MM:SS``, ``MM:SS`` (as ``squeue %l`` prints limits
    under an hour) and a bare number of minutes (jobcomp ``TimeLimit=30``).

    >>> parse_duration("1-02:03:04"), parse_duration("30:00"), parse_duration("5")
    (93784.0, 1800.0, 300.0)

    Raises
    ------
    BackendError
        The value is not a Slurm duration.
    """
    text = value.strip()
    if text.upper() in {"UNLIMITED", "INFINITE", "PARTITION_LIMIT", "NONE"}:
        return math.inf
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if match is None:
        raise BackendError(f"cannot read Slurm duration {value!r}; expected [D-]HH:MM:SS, MM:SS or minutes")
    days, a, b, c = (int(g) if g is not None else None for g in match.groups())
    assert a is not None  # the regex requires it
    if c is not None:  # [D-]HH:MM:SS
        seconds = a * 3600 + (b or 0) * 60 + c
    elif b is not None:  # D-HH:MM or MM:SS
        seconds = a * 3600 + b * 60 if days is not None else a * 60 + b
    else:  # D-HH or minutes
        seconds = a * 3600 if days is not None else a * 60
    return float(seconds + (days or 0) * 86400)


def walltime_minutes(seconds: float) -> int:
    """Slurm ``--time`` in whole minutes for a walltime in seconds: rounded up, at least 1.

    Slurm only knows whole minutes, so a 61 s request becomes 2 minutes (the job may run up to 120 s).

    >>> walltime_minutes(5), walltime_minutes(60), walltime_minutes(61)
    (1, 1, 2)
    """
    return max(1, math.ceil(seconds / 60.0 - 1e-9))


def parse_exit_code(value: str) -> int | None:
    """Parse ``ExitCode=CODE:SIGNAL``: the exit code, or ``-SIGNAL`` when a signal ended the job.

    The negative-signal convention is Python's :attr:`subprocess.Popen.returncode`.

    >>> parse_exit_code("3:0"), parse_exit_code("0:15"), parse_exit_code("")
    (3, -15, None)
    """
    match = re.fullmatch(r"(\d+):(\d+)", value.strip())
    if match is None:
        return None
    code, sig = int(match.group(1)), int(match.group(2))
    return -sig if sig and not code else code


_KEY = re.compile(r"(?:^|(?<= ))([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_record(line: str) -> dict[str, str]:
    """Split one ``scontrol show ... -o`` or jobcomp line into ``{key: value}``.

    Values may contain ``=`` (``TRES=cpu=2,node=1``) and spaces (job names, paths): a key is a word
    followed by ``=`` at the start of the line or after a space. Job names are taken between their
    known neighbours (``JobName=... UserId=``, ``Name=... JobState=``), so a name may hold ``x=y``.
    """
    line = line.rstrip("\n")
    matches = list(_KEY.finditer(line))
    record: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        record.setdefault(m.group(1), line[m.end() : end].rstrip(" "))
    for key, nxt in (("JobName", "UserId"), ("Name", "JobState")):
        named = re.search(rf"(?:^| ){key}=(.*?) {nxt}=", line)
        if named is not None:
            record[key] = named.group(1)
    return record


def _user(value: str) -> str | None:
    name = value.split("(", 1)[0].strip()
    return name or None


def _cores(record: Mapping[str, str]) -> int:
    for key in ("NumCPUs", "ProcCnt"):
        text = record.get(key, "")
        if text.isdigit() and int(text) > 0:
            return int(text)
    tres = re.search(r"(?:^|,)cpu=(\d+)", record.get("TRES", record.get("Tres", "")))
    if tres is not None:
        return int(tres.group(1))
    raise BackendError(f"Slurm job record of job {record.get('JobId')!r} has no CPU count: {dict(record)}")


def job_from_record(record: Mapping[str, str], source: Literal["scontrol", "jobcomp"]) -> JobInfo:
    """Build a :class:`JobInfo` from a parsed ``scontrol show job -o`` or jobcomp record.

    The start time is kept only for jobs that got nodes (a job cancelled while pending has Slurm's
    cancel time as ``StartTime``, and no nodes); the end time and exit code only for finished jobs.
    """
    try:
        job_id = record["JobId"]
        state = parse_state(record["JobState"])
        submit = parse_time(record["SubmitTime"])
    except KeyError as exc:
        raise BackendError(f"Slurm {source} record lacks {exc.args[0]}: {dict(record)}") from None
    if submit is None:
        raise BackendError(f"Slurm {source} record of job {job_id} has no SubmitTime")
    walltime = parse_duration(record.get("TimeLimit", "UNLIMITED"))  # jobcomp: minutes, scontrol: H:MM:SS
    nodes = record.get("NodeList", "")
    started = nodes not in _NO_VALUE and record.get("NodeCnt", "1") != "0"
    start = parse_time(record.get("StartTime", "")) if started and state is not JobState.PENDING else None
    end = parse_time(record.get("EndTime", "")) if state.is_final else None
    return JobInfo(
        job_id=job_id,
        name=record.get("JobName", record.get("Name", "")),
        state=state,
        reason=parse_reason(record.get("Reason", "None"), state),
        cores=_cores(record),
        walltime=walltime,
        submit_time=submit,
        start_time=start,
        end_time=end,
        exit_code=parse_exit_code(record.get("ExitCode", "")) if state.is_final and started else None,
        user=_user(record.get("UserId", "")),
    )


def parse_jobcomp_line(line: str) -> JobInfo | None:
    """Parse one line of a ``jobcomp/filetxt`` file; blank or unreadable lines give None (logged)."""
    if not line.strip():
        return None
    try:
        return job_from_record(parse_record(line), "jobcomp")
    except BackendError as exc:
        logger.warning("slurm: skipping unreadable jobcomp line: %s", exc)
        return None


SQUEUE_FORMAT = "%i|%T|%r|%C|%l|%V|%S|%e|%u|%N|%j"
"""``squeue -o`` format read by :func:`job_from_squeue`; the job name comes last as it may hold ``|``."""


def job_from_squeue(line: str) -> JobInfo:
    """Build a :class:`JobInfo` from one ``squeue -h -o SQUEUE_FORMAT`` line.

    Raises
    ------
    BackendError
        The line does not have the expected fields.
    """
    fields = line.rstrip("\n").split("|", 10)
    if len(fields) != 11:
        raise BackendError(f"cannot read squeue line {line!r}; expected format {SQUEUE_FORMAT!r}")
    job_id, code, reason, cpus, limit, submit, start, end, user, nodes, name = fields
    record = {
        "JobId": job_id,
        "JobName": name,
        "JobState": code,
        "Reason": reason,
        "NumCPUs": cpus,
        "TimeLimit": limit,
        "SubmitTime": submit,
        "StartTime": start,
        "EndTime": end,
        "UserId": user,
        "NodeList": nodes,
    }
    return job_from_record(record, "scontrol")


def parse_sbatch_job_id(stdout: str) -> str | None:
    """Return the job id in ``sbatch --parsable`` output (``ID`` or ``ID;CLUSTER``), or None.

    >>> parse_sbatch_job_id("42;cluster")
    '42'
    """
    match = re.search(r"^(\d+)(?:;\S*)?\s*$", stdout.strip(), flags=re.MULTILINE)
    return match.group(1) if match else None


def parse_test_only(stderr: str) -> float | None:
    """Return the expected start (epoch) in ``sbatch --test-only`` output; None when it does not say.

    >>> parse_test_only("sbatch: Job 11 to start at 2026-11-21T14:48:33 using 4 processors") is not None
    True
    """
    match = re.search(r"Job \d+ to start at (\S+)", stderr)
    if match is None:
        return None
    try:
        return parse_time(match.group(1))
    except BackendError:
        return None


_GEOMETRY_MESSAGES = (
    "Requested node configuration is not available",
    "More processors requested than permitted",
    "Node count specification invalid",
    "Requested time limit is invalid",
    "Too many CPUs requested",
    "Memory required by task is not available",
    "Requested partition configuration not available now",
)


def is_controller_unreachable(stderr: str) -> bool:
    """Whether a command failed because slurmctld did not answer."""
    return any(
        text in stderr
        for text in (
            "Unable to contact slurm controller",
            "Socket timed out on send/recv",
            "Communication connection failure",
            "Unable to establish controller machine",
        )
    )


def classify_submit_error(stderr: str) -> type[SubmitError]:
    """Which :class:`SubmitError` a failed ``sbatch`` deserves, from its stderr.

    :class:`GeometryError` when the request can never be satisfied by the partition (with
    ``EnforcePartLimits``), :class:`DependencyError` for a bad ``--dependency``, else :class:`SubmitError`.
    """
    if any(text in stderr for text in _GEOMETRY_MESSAGES):
        return GeometryError
    if "Job dependency problem" in stderr or "invalid dependency" in stderr.lower():
        return DependencyError
    return SubmitError


def parse_partition(line: str) -> PartitionInfo:
    """Build a :class:`PartitionInfo` from one ``scontrol show partition -o`` line.

    Cores per node is ``TotalCPUs // TotalNodes`` (exact on homogeneous partitions).

    Raises
    ------
    BackendError
        A needed field is missing or the partition has no nodes.
    """
    record = parse_record(line)
    try:
        name, nodes, cpus = record["PartitionName"], int(record["TotalNodes"]), int(record["TotalCPUs"])
    except (KeyError, ValueError) as exc:
        raise BackendError(f"cannot read scontrol partition line {line!r}: {exc}") from None
    if nodes < 1:
        raise BackendError(f"Slurm partition {name!r} has no nodes")
    limit = parse_duration(record.get("MaxTime", "UNLIMITED"))
    return PartitionInfo(
        name=name,
        nodes=nodes,
        cores_per_node=cpus // nodes,
        max_walltime=None if math.isinf(limit) else limit,
    )


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` output as ``{key: value}`` (lines ``Key = value``)."""
    config: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def priority_model(config: Mapping[str, str]) -> str | None:
    """Name the mock backend's priority model that a Slurm configuration stands for.

    Parameters
    ----------
    config : Mapping[str, str]
        ``scontrol show config`` output parsed by :func:`parse_config`.

    Returns
    -------
    str or None
        ``"basic"`` for ``PriorityType=priority/basic``. For ``priority/multifactor``:
        ``"accrue-always"`` when ``PriorityFlags`` has ``ACCRUE_ALWAYS``; ``"basic"`` when age cannot
        order jobs, i.e. ``PriorityWeightAge`` is 0 (Slurm's default weight) or the accounting
        database the age factor needs is not configured (``AccountingStorageType`` other than
        ``accounting_storage/slurmdbd``; slurm.conf(5), PriorityWeightAge: "Requires
        AccountingStorageType=accounting_storage/slurmdbd"), since equal priorities go by submit time;
        else ``"age"``. None for another plugin. See :mod:`elastic.simulator.priority`.

    Examples
    --------
    >>> priority_model({"PriorityType": "priority/multifactor", "PriorityWeightAge": "1000"})
    'age'
    """
    kind = config.get("PriorityType", "")
    if kind == "priority/basic":
        return "basic"
    if kind != "priority/multifactor":
        return None
    flags = {f.strip().upper() for f in config.get("PriorityFlags", "").split(",")}
    if "ACCRUE_ALWAYS" in flags:
        return "accrue-always"
    weight = config.get("PriorityWeightAge", "").split()
    if weight and weight[0].isdigit() and int(weight[0]) == 0:
        return "basic"
    storage = config.get("AccountingStorageType")
    if storage is not None and storage != "accounting_storage/slurmdbd":
        return "basic"
    return "age"
