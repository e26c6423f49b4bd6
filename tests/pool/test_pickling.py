"""A task's call keeps its code's file names: remote tracebacks name the user's file and line (issue 29)."""

from __future__ import annotations

import pickle
import types
from pathlib import Path

import cloudpickle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.allocations import Allocation
from elastic.pool.pickling import dumps
from elastic.pool.pool import Pool
from elastic.pool.tasks import RemoteTraceback, Task
from tests.pool.conftest import AgentStarter, start_allocation

USER_SCRIPT = """\
def helper(y):
    return 10 / y


def boom(x):
    y = x - x
    return helper(y)  # line 7


def outer(n):
    def inner(k):
        return n * k

    return inner
"""


def user_module(path: Path) -> dict[str, object]:
    """Run a user's script as ``__main__`` would be (its functions are then pickled by value)."""
    path.write_text(USER_SCRIPT)
    namespace: dict[str, object] = {"__name__": "__user_script__"}
    exec(compile(USER_SCRIPT, str(path), "exec"), namespace)
    return namespace


def test_code_keeps_its_file_and_lines(tmp_path: Path) -> None:
    ns = user_module(tmp_path / "script.py")
    boom, outer = ns["boom"], ns["outer"]
    assert isinstance(boom, types.FunctionType) and callable(outer)
    plain = pickle.loads(cloudpickle.dumps(boom))
    assert plain.__code__.co_filename == "<dynamic-code>"  # what cloudpickle alone sends
    kept = pickle.loads(dumps(boom))
    assert kept.__code__.co_filename == str(tmp_path / "script.py")
    assert kept.__code__.co_firstlineno == 5
    assert kept.__globals__["helper"].__code__.co_filename == str(tmp_path / "script.py")
    inner = pickle.loads(dumps(outer(3)))  # a closure: nested code and its cell
    assert inner(4) == 12 and inner.__code__.co_filename == str(tmp_path / "script.py")


@settings(max_examples=50, deadline=None)
@given(
    st.recursive(st.none() | st.integers() | st.text() | st.floats(allow_nan=False), lambda c: st.lists(c))
)
def test_data_round_trips_as_with_cloudpickle(value: object) -> None:
    assert pickle.loads(dumps(value)) == pickle.loads(cloudpickle.dumps(value)) == value


def test_a_remote_traceback_names_the_users_file_and_line(
    pool: Pool, start_agent: AgentStarter, tmp_path: Path
) -> None:
    ns = user_module(tmp_path / "script.py")
    start_allocation(pool, start_agent, Allocation("a1", cores=1, walltime=600.0))
    future = pool.submit(Task.call(ns["boom"], (5,)))  # type: ignore[arg-type]
    with pytest.raises(ZeroDivisionError) as info:
        future.result(timeout=30)
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert f'File "{tmp_path / "script.py"}", line 7, in boom' in cause.tb
    assert f'File "{tmp_path / "script.py"}", line 2, in helper' in cause.tb
    assert "return 10 / y" in cause.tb  # the agent sees the file: its line is shown
    assert "<dynamic-code>" not in cause.tb
