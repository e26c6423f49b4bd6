"""Pickling a task's call so that its remote traceback names the user's file and line.

:mod:`cloudpickle` pickles a function defined in ``__main__`` or in a module the agents need not import by
value, and since cloudpickle 3 it replaces each code object's file name by ``"<dynamic-code>"`` (to make
payloads deterministic), so a remote traceback read ``File "<dynamic-code>", line 9, in boom``. Here code
objects travel through :mod:`marshal` instead, which keeps every field (file name, first line, line
table, nested code): the traceback names ``myscript.py``, line 9, and shows the line where the agent sees
the file (a shared filesystem), as Parsl's HighThroughputExecutor does with dill. ``marshal`` is tied to
the Python version, as cloudpickle's own code pickling is: agents run the driver's Python.
"""

from __future__ import annotations

import io
import marshal
import types
from collections import ChainMap
from typing import Any, ClassVar

import cloudpickle

__all__ = ["dumps"]


def _reduce_code(code: types.CodeType) -> tuple[Any, tuple[bytes]]:
    return marshal.loads, (marshal.dumps(code),)


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle ships no types
    """cloudpickle's pickler, with code objects kept whole (see the module docstring)."""

    dispatch_table: ClassVar[ChainMap[Any, Any]] = ChainMap(
        {types.CodeType: _reduce_code}, cloudpickle.Pickler.dispatch_table
    )


def dumps(obj: Any) -> bytes:
    """Return ``obj`` pickled as :func:`cloudpickle.dumps` does, code objects with their file names.

    Read it back with :func:`pickle.loads` (or :func:`cloudpickle.loads`).

    Examples
    --------
    >>> import pickle
    >>> square = eval("lambda x: x * x")  # defined nowhere importable: pickled by value
    >>> pickle.loads(dumps(square)).__code__.co_filename
    '<string>'
    """
    with io.BytesIO() as buffer:
        _Pickler(buffer, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
        return buffer.getvalue()
