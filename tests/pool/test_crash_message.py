"""A task whose exception could not be brought back says why, not ``exit code None``."""

from __future__ import annotations

import pickle

from elastic.pool.failures import TaskCrashedError


def test_the_message_says_why_the_exception_itself_is_missing() -> None:
    lost = TaskCrashedError("t1", "TwoArg", "1-2", None)
    assert "exit code None" not in str(lost)
    assert "TwoArg: 1-2 (the exception itself could not be brought back" in str(lost)
    died = TaskCrashedError("t2", "SIGKILL", "killed", -9)
    assert str(died).endswith("(exit code -9)")
    assert str(pickle.loads(pickle.dumps(lost))) == str(lost)
