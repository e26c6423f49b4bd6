"""Parsing of Slurm output, on outputs captured from a real Slurm 22.05 cluster.

``data/slurm/captured.json`` was written by ``data/slurm/capture.py`` (re-run it to refresh): each entry
is one real command with its stdout, stderr and exit code. No Slurm is needed to run these tests.
"""

from __future__ import annotations

import doctest
import json
import logging
import math
import subprocess
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.backends import _slurm_parse as parse
from elastic.backends import slurm
from elastic.backends._slurm_commands import JobcompIndex
from elastic.backends.slurm import render_job_script
from elastic.batch import Dependency, DependencyKind, JobSpec, JobState, PendingReason
from elastic.errors import BackendError, ConfigError, DependencyError, GeometryError, SubmitError

DATA = Path(__file__).parent / "data" / "slurm" / "captured.json"


@cache
def _captured() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text())
    return data


def out(label: str) -> dict[str, Any]:
    entry: dict[str, Any] = _captured()[label]
    return entry


def ids() -> dict[str, str]:
    result: dict[str, str] = json.loads(out("_ids")["stdout"])
    return result


def local(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()


def scontrol(label: str) -> parse.JobInfo:
    return parse.job_from_record(parse.parse_record(out(f"scontrol_{label}")["stdout"]), "scontrol")


def test_doctests() -> None:
    for module in (parse, slurm):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0


# ----------------------------------------------------------------------------- job records


EXPECTED = {
    # label: (state, reason, started, exit code)
    "completed": (JobState.COMPLETED, PendingReason.NONE, True, 0),
    "failed": (JobState.FAILED, PendingReason.NONE, True, 3),
    "timeout": (JobState.TIMEOUT, PendingReason.NONE, True, -15),  # ExitCode=0:15 (SIGTERM)
    "running": (JobState.RUNNING, PendingReason.NONE, True, None),
    "pending_resources": (JobState.PENDING, PendingReason.RESOURCES, False, None),
    "pending_priority": (JobState.PENDING, PendingReason.PRIORITY, False, None),
    "pending_dependency": (JobState.PENDING, PendingReason.DEPENDENCY, False, None),
    "pending_begin": (JobState.PENDING, PendingReason.BEGIN_TIME, False, None),
    "cancelled_pending": (JobState.CANCELLED, PendingReason.NONE, False, None),
    "cancelled_running": (JobState.CANCELLED, PendingReason.NONE, True, -15),  # scancel sends SIGTERM
    "never": (JobState.PENDING, PendingReason.DEPENDENCY_NEVER_SATISFIED, False, None),
}


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_scontrol_records(label: str) -> None:
    state, reason, started, exit_code = EXPECTED[label]
    info = scontrol(label)
    assert info.job_id == ids()[label]
    assert (info.state, info.reason, info.start_time is not None, info.exit_code) == (
        state,
        reason,
        started,
        exit_code,
    )
    assert (info.end_time is not None) == state.is_final
    assert info.user == "root"
    record = parse.parse_record(out(f"scontrol_{label}")["stdout"])
    assert info.submit_time == local(record["SubmitTime"])
    if started:
        assert info.start_time == local(record["StartTime"])
        assert info.wait is not None and info.wait >= 0


def test_scontrol_details() -> None:
    completed = scontrol("completed")
    assert (completed.name, completed.cores, completed.walltime) == ("my job, x=1", 2, 1800.0)
    assert scontrol("timeout").walltime == 60.0
    timeout = scontrol("timeout")
    assert timeout.start_time is not None and timeout.end_time is not None
    assert 60 <= timeout.end_time - timeout.start_time <= 100  # limits are enforced every ~30 s
    assert scontrol("pending_resources").cores == 16
    assert scontrol("running").walltime == 1200.0


def test_squeue_lines_agree_with_scontrol() -> None:
    lines = out("squeue_all")["stdout"].splitlines()
    jobs = {info.job_id: info for info in map(parse.job_from_squeue, lines)}
    assert len(jobs) == len(lines) >= len(EXPECTED)
    for label, job_id in ids().items():
        if label == "timeout":  # squeue was run before the 1-minute job timed out
            continue
        from_scontrol = scontrol(label)
        from_squeue = jobs[job_id]
        assert from_squeue.state is from_scontrol.state, label
        assert from_squeue.reason is from_scontrol.reason, label
        assert (from_squeue.cores, from_squeue.walltime, from_squeue.name) == (
            from_scontrol.cores,
            from_scontrol.walltime,
            from_scontrol.name,
        ), label
        assert from_squeue.submit_time == from_scontrol.submit_time, label
        assert (from_squeue.start_time is None) == (from_scontrol.start_time is None), label


def test_squeue_me_lists_only_active_jobs() -> None:
    states = {parse.job_from_squeue(line).state for line in out("squeue_me")["stdout"].splitlines()}
    assert states == {JobState.PENDING, JobState.RUNNING}


def test_jobcomp_lines_agree_with_scontrol() -> None:
    index = {}
    for line in out("jobcomp")["stdout"].splitlines():
        info = parse.parse_jobcomp_line(line)
        assert info is not None
        index[info.job_id] = info
    for label, job_id in ids().items():
        from_scontrol = scontrol(label)
        if not from_scontrol.state.is_final:
            assert job_id not in index
            continue
        kept = index[job_id]
        # slurmctld writes the jobcomp line before a signalled batch step reports its signal: jobcomp
        # says ExitCode=0:0 for TIMEOUT and scancel-ed jobs where scontrol later says 0:15.
        signalled = from_scontrol.exit_code is not None and from_scontrol.exit_code < 0
        assert kept.exit_code == (0 if signalled else from_scontrol.exit_code), label
        assert (kept.state, kept.name, kept.cores, kept.walltime) == (
            from_scontrol.state,
            from_scontrol.name,
            from_scontrol.cores,
            from_scontrol.walltime,
        ), label
        assert (kept.start_time, kept.end_time) == (from_scontrol.start_time, from_scontrol.end_time), label


def test_jobcomp_index_reads_only_complete_new_lines(tmp_path: Path) -> None:
    lines = out("jobcomp")["stdout"].splitlines(keepends=True)
    path = tmp_path / "jobcomp.txt"
    index = JobcompIndex(path)
    assert index.get(ids()["failed"]) is None  # no file yet
    path.write_text(lines[0] + lines[1][:40])  # second line half written
    first = parse.parse_jobcomp_line(lines[0])
    second = parse.parse_jobcomp_line(lines[1])
    assert first is not None and second is not None
    assert index.get(first.job_id) == first
    assert index.get(second.job_id) is None
    with path.open("a") as fh:
        fh.write(lines[1][40:])
    assert index.get(second.job_id) == second
    path.write_text(lines[1])  # truncated (state wiped, ids reused): read again from the start
    assert index.get(first.job_id) is None and index.get(second.job_id) == second
    with path.open("a") as fh:
        fh.write("\nthis is not a jobcomp line\n")
    assert index.get(second.job_id) == second  # unreadable lines are skipped, not fatal


# ----------------------------------------------------------------------------- errors and other outputs


@pytest.mark.parametrize(
    ("label", "kind"),
    [
        ("sbatch_error_too_many_cores", GeometryError),
        ("sbatch_error_too_many_nodes", GeometryError),
        ("sbatch_error_walltime_over_max", GeometryError),
        ("test_only_too_big", GeometryError),
        ("sbatch_error_bad_dependency", DependencyError),
        ("sbatch_error_bad_partition", SubmitError),
    ],
)
def test_submit_errors_are_classified(label: str, kind: type[SubmitError]) -> None:
    assert out(label)["returncode"] == 1
    assert parse.classify_submit_error(out(label)["stderr"]) is kind
    assert not parse.is_controller_unreachable(out(label)["stderr"])


def test_controller_unreachable() -> None:
    for label in ("sbatch_controller_down", "squeue_controller_down"):
        assert parse.is_controller_unreachable(out(label)["stderr"])
    assert not parse.is_controller_unreachable(out("scontrol_unknown")["stderr"])


def test_sbatch_outputs() -> None:
    for label, job_id in ids().items():
        assert parse.parse_sbatch_job_id(out(f"sbatch_{label}")["stdout"]) == job_id
    assert parse.parse_sbatch_job_id("") is None
    assert parse.parse_sbatch_job_id("Submitted batch job 12") is None  # not --parsable
    expected = out("test_only_ok")["stderr"].split(" to start at ")[1].split()[0]
    assert parse.parse_test_only(out("test_only_ok")["stderr"]) == local(expected)
    assert parse.parse_test_only(out("test_only_too_big")["stderr"]) is None
    assert parse.parse_test_only("sbatch: Job 3 to start at soon") is None


def test_partition_and_config() -> None:
    info = parse.parse_partition(out("scontrol_partition")["stdout"])
    assert (info.name, info.nodes, info.cores_per_node, info.max_walltime) == ("debug", 4, 4, 1800.0)
    config = parse.parse_config(out("scontrol_config")["stdout"])
    assert config["JobCompType"] == "jobcomp/filetxt"
    assert config["JobCompLoc"].endswith("jobcomp.txt")
    assert config["MinJobAge"] == "300 sec"
    with pytest.raises(BackendError, match="cannot read scontrol partition line"):
        parse.parse_partition(out("scontrol_partition_unknown")["stdout"])


def test_priority_model_from_the_site_configuration() -> None:
    # The captured local cluster runs priority/basic (Slurm 22.05 prints no PriorityFlags then).
    config = parse.parse_config(out("scontrol_config")["stdout"])
    assert config["PriorityType"] == "priority/basic" and parse.priority_model(config) == "basic"
    multifactor = {
        "PriorityType": "priority/multifactor",
        "PriorityWeightAge": "1000",
        "PriorityFlags": "",
        "AccountingStorageType": "accounting_storage/slurmdbd",
    }
    assert parse.priority_model(multifactor) == "age"
    assert parse.priority_model({**multifactor, "PriorityFlags": "SMALL_RELATIVE_TO_TIME,ACCRUE_ALWAYS"}) == (
        "accrue-always"
    )
    # age cannot order jobs: weight 0 (Slurm's default), or no accounting database to compute it
    assert parse.priority_model({**multifactor, "PriorityWeightAge": "0"}) == "basic"
    assert (
        parse.priority_model({**multifactor, "AccountingStorageType": "accounting_storage/none"}) == "basic"
    )
    assert parse.priority_model({"PriorityType": "priority/other"}) is None


# ----------------------------------------------------------------------------- tables and formats


def test_state_table_covers_long_and_short_codes(caplog: pytest.LogCaptureFixture) -> None:
    for code, state in parse.STATE_TABLE.items():
        assert parse.parse_state(code) is state
        assert parse.parse_state(code.lower()) is state
    assert parse.parse_state("CA") is JobState.CANCELLED
    assert parse.parse_state("CANCELLED by 0") is JobState.CANCELLED
    with caplog.at_level(logging.WARNING, logger=parse.__name__):
        assert parse.parse_state("WEIRD_NEW_STATE") is JobState.UNKNOWN
        assert parse.parse_state("WEIRD_NEW_STATE") is JobState.UNKNOWN
    warnings = [r for r in caplog.records if "WEIRD_NEW_STATE" in r.getMessage()]
    assert len(warnings) == 1  # once per code, not once per poll


def test_reasons() -> None:
    assert parse.parse_reason("Resources", JobState.PENDING) is PendingReason.RESOURCES
    assert parse.parse_reason("QOSMaxJobsPerUserLimit", JobState.PENDING) is PendingReason.PRIORITY
    assert parse.parse_reason("SomethingNew", JobState.PENDING) is PendingReason.NONE
    assert parse.parse_reason("Resources", JobState.CANCELLED) is PendingReason.NONE


@given(st.integers(min_value=0, max_value=400 * 86400))
def test_durations_round_trip_through_slurm_formats(seconds: int) -> None:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    forms = [
        f"{days * 24 + hours:02d}:{minutes:02d}:{secs:02d}",
        f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}",
    ]
    if seconds < 3600:
        forms.append(f"{minutes}:{secs:02d}")  # squeue %l under an hour
    for text in forms:
        assert parse.parse_duration(text) == seconds
    assert parse.parse_duration(str(seconds)) == seconds * 60  # a bare number is minutes


def test_duration_words_and_errors() -> None:
    for word in ("UNLIMITED", "INFINITE", "Partition_Limit"):
        assert math.isinf(parse.parse_duration(word))
    with pytest.raises(BackendError, match="cannot read Slurm duration '1h'"):
        parse.parse_duration("1h")


@given(st.floats(min_value=0.001, max_value=1e7, allow_nan=False))
def test_walltime_minutes_cover_the_request(seconds: float) -> None:
    minutes = parse.walltime_minutes(seconds)
    assert minutes >= 1
    assert minutes * 60 >= seconds - 1e-6  # never shorter than asked
    assert minutes == 1 or (minutes - 1) * 60 < seconds  # and the smallest such whole minute


@given(st.floats(min_value=1e9, max_value=4e9, allow_nan=False))
def test_times_round_trip_rounded_up(epoch: float) -> None:
    back = parse.parse_time(parse.format_time(epoch))
    assert back is not None and 0 <= back - epoch < 1


def test_time_words() -> None:
    for word in ("N/A", "Unknown", "None", "(null)", ""):
        assert parse.parse_time(word) is None
    with pytest.raises(BackendError, match="cannot read Slurm time 'tomorrow'"):
        parse.parse_time("tomorrow")


_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\n"),
    min_size=1,
    max_size=30,
).filter(lambda s: s == s.strip() and " UserId=" not in s and " JobState=" not in s)


@given(_names)
def test_any_job_name_survives_the_record_parser(name: str) -> None:
    line = out("scontrol_completed")["stdout"].replace("JobName=my job, x=1 ", f"JobName={name} ")
    assert scontrol_name(line) == name
    comp = next(line for line in out("jobcomp")["stdout"].splitlines() if "Name=my job, x=1 " in line)
    info = parse.parse_jobcomp_line(comp.replace("Name=my job, x=1 ", f"Name={name} "))
    assert info is not None and info.name == name


def scontrol_name(line: str) -> str:
    return parse.job_from_record(parse.parse_record(line), "scontrol").name


def test_exit_codes() -> None:
    assert [parse.parse_exit_code(v) for v in ("0:0", "3:0", "0:9", "1:15", "junk")] == [0, 3, -9, 1, None]


# ----------------------------------------------------------------------------- the job script


def test_job_script_options(tmp_path: Path) -> None:
    spec = JobSpec(
        cores=6,
        walltime=61,
        name="stage 2",
        dependencies=(Dependency(DependencyKind.AFTEROK, "7"), Dependency(DependencyKind.AFTER, "8")),
        begin=local("2030-01-02T03:04:05") - 0.5,
        partition="big",
        script="echo hi",
    )
    text = render_job_script(spec, workdir=tmp_path, partition="debug", account="acct", qos=None)
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    sbatch = [line.removeprefix("#SBATCH ") for line in lines if line.startswith("#SBATCH ")]
    assert sbatch == [
        '--job-name="stage 2"',
        "--ntasks=6",
        "--cpus-per-task=1",
        "--time=2",  # 61 s -> 2 whole minutes
        "--dependency=afterok:7,after:8",
        "--kill-on-invalid-dep=yes",
        "--begin=2030-01-02T03:04:05",
        '--partition="big"',  # the spec wins over the backend's default
        '--account="acct"',
        f'--chdir="{tmp_path}"',
        f'--output="{tmp_path}/slurm-%j.out"',
        f'--error="{tmp_path}/slurm-%j.err"',
        "--export=ALL",
    ]
    assert lines[-1] == "echo hi"
    nodes = render_job_script(JobSpec(cores=8, nodes=2, walltime=60), workdir=tmp_path)
    assert "#SBATCH --nodes=2\n#SBATCH --exclusive\n#SBATCH --ntasks=8\n" in nodes
    assert nodes.endswith("exec sleep infinity\n")
    assert render_job_script(JobSpec(cores=1, walltime=60, runtime=2.5), workdir=tmp_path).endswith(
        "sleep 2.5\n"
    )


def test_job_script_refuses_what_it_cannot_pass(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env key 'BAD-NAME'"):
        render_job_script(JobSpec(cores=1, walltime=60, env={"BAD-NAME": "x"}), workdir=tmp_path)
    with pytest.raises(ConfigError, match="may not contain"):
        render_job_script(JobSpec(cores=1, walltime=60, name='a"b'), workdir=tmp_path)


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40))
def test_env_values_reach_the_script_unchanged(tmp_path_factory: pytest.TempPathFactory, value: str) -> None:
    # The #SBATCH lines are comments to bash, so the script runs as is: the value must come out intact.
    spec = JobSpec(cores=1, walltime=60, env={"V": value}, script='printf "%s" "$V"')
    script = render_job_script(spec, workdir=tmp_path_factory.getbasetemp())
    done = subprocess.run(["bash", "-c", script], capture_output=True, check=True, env={"SLURM_JOB_ID": "5"})
    assert done.stdout.decode("utf-8", "surrogateescape") == value


def test_queue_skips_an_unreadable_squeue_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A stand-in `squeue` printing captured real lines around a garbled one.
    real = out("squeue_me")["stdout"]
    (tmp_path / "squeue").write_text(f"#!/bin/sh\ncat <<'END'\n{real}garbled|line\nEND\n")
    (tmp_path / "squeue").chmod(0o755)
    backend = slurm.SlurmBackend(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, workdir=tmp_path)
    with caplog.at_level(logging.WARNING, logger=slurm.__name__):
        jobs = backend.queue()
    assert [job.job_id for job in jobs] == [line.split("|")[0] for line in real.splitlines()]
    assert any("garbled|line" in record.getMessage() for record in caplog.records)
