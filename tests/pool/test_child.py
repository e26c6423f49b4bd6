"""A task in a fresh child process (shell commands, isolated callables): results, errors, signals."""

from __future__ import annotations

import os
import pickle
import signal
import time
from pathlib import Path

import pytest

from elastic.errors import ConfigError
from elastic.pool.child import run_in_child
from elastic.pool.tasks import (
    RemoteTraceback,
    ShellResult,
    ShellTaskError,
    Task,
    TaskCrashedError,
    TaskLostError,
    TaskResult,
)


def run(task: Task, tmp_path: Path) -> TaskResult:
    child = run_in_child(task, tmp_path / "work")
    child.proc.wait(timeout=20)
    return child.collect()


def add(a: int, b: int, *, scale: int = 1) -> int:
    print("adding")
    return (a + b) * scale


def fails(x: int) -> None:
    raise KeyError(f"no key {x}")


def test_callable_returns_value_and_output(tmp_path: Path) -> None:
    result = run(Task.call(add, (2, 3), {"scale": 10}), tmp_path)
    assert result.ok and result.returncode == 0
    assert result.outcome() == 50
    assert result.stdout == "adding\n"
    assert result.started <= result.ended


def test_closure_is_shipped_by_value(tmp_path: Path) -> None:
    offset = 7
    assert run(Task.call(lambda x: x + offset, (1,)), tmp_path).outcome() == 8


def test_exception_comes_back_with_remote_traceback(tmp_path: Path) -> None:
    result = run(Task.call(fails, (3,)), tmp_path)
    assert not result.ok and result.error_type == "KeyError"
    with pytest.raises(KeyError, match="no key 3") as info:
        result.outcome()
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "in fails" in cause.tb and 'raise KeyError(f"no key {x}")' in cause.tb


def test_shell_keeps_stdout_stderr_and_env(tmp_path: Path) -> None:
    task = Task.shell('echo "out $ELASTIC_TASK_CORES"; echo err >&2', cores=3)
    value = run(task, tmp_path).outcome()
    assert value == ShellResult(0, "out 3\n", "err\n")


def test_checked_shell_failure_raises_with_output(tmp_path: Path) -> None:
    with pytest.raises(ShellTaskError, match="exited with code 3: oops") as info:
        run(Task.shell("echo partial; echo oops >&2; exit 3", task_id="t/1"), tmp_path).outcome()
    assert (info.value.returncode, info.value.stdout, info.value.task_id) == (3, "partial\n", "t/1")
    unchecked = run(Task.shell("exit 4", check=False), tmp_path).outcome()
    assert unchecked.returncode == 4


def test_process_death_is_a_crash(tmp_path: Path) -> None:
    result = run(Task.call(os._exit, (9,)), tmp_path)
    with pytest.raises(TaskCrashedError, match="exited with code 9 and left no result"):
        result.outcome()


def test_closing_stdin_kills_the_whole_task_tree(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    child = run_in_child(Task.shell(f"(sleep 0.8; touch {marker}) & wait"), tmp_path / "w")
    time.sleep(0.3)
    child.stop()
    assert child.proc.wait(timeout=5) != 0
    time.sleep(1.0)
    assert not marker.exists(), "a grandchild of the task survived its stop"


def test_task_validation() -> None:
    with pytest.raises(ConfigError, match="cores must be >= 1, got 0"):
        Task.shell("true", cores=0)
    with pytest.raises(ConfigError, match="estimate must be >= 0"):
        Task.shell("true", estimate=-1.0)
    with pytest.raises(ConfigError, match="needs a callable"):
        Task.call(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a shell command"):
        _ = Task.call(print).command


def test_errors_survive_pickling() -> None:
    err = TaskLostError("t1", "s1", (("a1", "died"), ("a2", "ended TIMEOUT")), 1)
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.losses == err.losses
    assert "attempt 2 on allocation 'a2': ended TIMEOUT" in str(err)


def kill_self(sig: int) -> None:
    os.kill(os.getpid(), sig)


@pytest.mark.parametrize(
    ("task", "signum", "message"),
    [
        (Task.call(kill_self, (signal.SIGKILL,)), signal.SIGKILL, "the task's process was killed by SIGKILL"),
        (Task.shell("kill -TERM $$"), signal.SIGTERM, "was killed by SIGTERM"),
        (Task.shell("kill -INT $$", check=False), signal.SIGINT, None),
    ],
    ids=["callable", "checked-shell", "unchecked-shell"],
)
def test_death_by_signal_is_recorded(tmp_path: Path, task: Task, signum: int, message: str | None) -> None:
    result = run(task, tmp_path)
    assert (result.signal, result.signal_name) == (signum, signum.name)
    if message is None:  # unchecked: the result says how the command ended
        assert result.ok and result.outcome().returncode == -signum
    else:
        assert not result.ok and message in result.error_message


def test_a_shell_reporting_its_program_killed_by_a_stop_signal_records_the_signal(tmp_path: Path) -> None:
    # Regression (CI, test_scancel_mid_task_requeues_the_task_elsewhere): scancel's SIGTERM killed the
    # task's `sleep`, and its shell exited 143 before its own SIGTERM arrived; recorded as no signal, the
    # task failed instead of being re-queued.
    killed = run(Task.shell("sleep 30 & kill -TERM $!; wait $!", check=False), tmp_path)
    assert killed.outcome().returncode == 128 + signal.SIGTERM
    assert killed.signal == signal.SIGTERM
    assert run(Task.shell("exit 137"), tmp_path).signal == signal.SIGKILL


def test_ordinary_endings_record_no_signal(tmp_path: Path) -> None:
    assert run(Task.shell("exit 3", check=False), tmp_path).signal is None
    assert run(Task.shell("exit 139", check=False), tmp_path).signal is None  # SIGSEGV: not a stop signal
    assert run(Task.call(fails, (1,)), tmp_path).signal is None
    assert run(Task.call(os._exit, (9,)), tmp_path).signal is None


def test_child_killed_before_reading_its_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal to the agent's process group can kill the child before it leaves the group (before setsid).

    Regression (H12): the agent crashed with BrokenPipeError writing the task, and said no goodbye.
    """
    dies = tmp_path / "dies"
    dies.write_text("#!/bin/sh\nkill -TERM $$\n")
    dies.chmod(0o755)
    monkeypatch.setattr("sys.executable", str(dies))  # run_in_child starts this instead of Python
    big = Task.call(len, ("x" * 2**20,))  # more than a pipe holds: the write must meet the dead reader
    result = run(big, tmp_path)
    assert (result.ok, result.signal, result.returncode) == (False, signal.SIGTERM, -signal.SIGTERM)
    assert "the task's process was killed by SIGTERM and left no result" in result.error_message


@pytest.mark.parametrize(
    "task",
    [Task.shell("cat; read x; echo done"), Task.call(lambda: __import__("sys").stdin.read() + "done")],
    ids=["shell", "callable"],
)
def test_a_task_reading_stdin_gets_eof_not_a_hang(tmp_path: Path, task: Task) -> None:
    """Regression (issue 10): the task's stdin was the agent's control pipe, so reading it never ended."""
    child = run_in_child(task, tmp_path / "w")
    child.proc.wait(timeout=10)  # times out (the test fails) if the task blocks on stdin
    result = child.collect()
    assert result.ok, result.error_message
    value = result.outcome()
    assert (value.stdout if isinstance(value, ShellResult) else value).strip() == "done"
