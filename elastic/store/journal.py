"""The journal of a resilient store: the writes the store never took, kept in a file to replay later.

:class:`~elastic.store.resilient.ResilientStore` queues the writes of a run (:data:`WRITES`, and
``record_run``); those still queued when it closes are written here by :func:`write_journal`, one JSON
line each (an update function as its cloudpickle, base64), and ``elastic store replay FILE`` writes them
to the store with :func:`replay_journal`. A run recorded while the store did not answer has a
provisional (negative) id; :func:`with_run_ids` puts the store's id in its place once known, both for
the queued calls and for a journal's later calls of the same run.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import cloudpickle
import numpy as np

from elastic.errors import ElasticError
from elastic.store._store import Store

__all__ = [
    "JOURNAL_VERSION",
    "WRITES",
    "json_default",
    "replay_journal",
    "takes_run_id",
    "with_run_ids",
    "write_journal",
]

WRITES: Final = frozenset(
    {
        "add_wait",
        "add_stage_runtime",
        "add_run_params",
        "finish_run",
        "save_learner_state",
        "update_learner_state",
    }
)
"""The store's write calls a run makes (queued, never waited for)."""
JOURNAL_VERSION: Final = 1
"""The version of a journal line (``"v"``)."""

Call = tuple[str, Sequence[Any], Mapping[str, Any], int | None]
"""A queued call: method, positional and keyword arguments, provisional run id (``record_run``)."""


def takes_run_id(method: str) -> bool:
    """Tell whether ``method``'s first argument is a run id."""
    return method in ("finish_run", "add_run_params")


def with_run_ids(
    method: str, args: Sequence[Any], kwargs: Mapping[str, Any], ids: Mapping[int, int]
) -> tuple[list[Any], dict[str, Any]]:
    """Return a call's arguments with provisional run ids replaced by the store's, where known."""
    args = list(args)
    kwargs = dict(kwargs)
    if takes_run_id(method) and args and isinstance(args[0], int):
        args[0] = ids.get(args[0], args[0])
    if isinstance(kwargs.get("run_id"), int):
        kwargs["run_id"] = ids.get(kwargs["run_id"], kwargs["run_id"])
    return args, kwargs


def json_default(obj: object) -> object:
    """Return NumPy scalars and arrays as JSON values (``json.dumps``'s ``default``)."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def write_journal(path: Path, calls: Iterable[Call], ids: Mapping[int, int]) -> None:
    """Write ``calls`` to the journal file ``path``, run ids as ``ids`` knows them (see the docstring)."""
    with path.open("w", encoding="utf-8") as out:
        for method, call_args, call_kwargs, provisional in calls:
            args, kwargs = with_run_ids(method, call_args, call_kwargs, ids)
            record: dict[str, Any] = {"v": JOURNAL_VERSION, "method": method, "kwargs": kwargs}
            if provisional is not None:
                record["provisional"] = provisional
            if method == "update_learner_state":
                record["args"] = args[:2]
                record["fn"] = base64.b64encode(cloudpickle.dumps(args[2])).decode("ascii")
            else:
                record["args"] = args
            out.write(json.dumps(record, default=json_default) + "\n")


def _get(where: list[Any] | dict[str, Any], key: int | str) -> Any:
    if isinstance(where, list):
        return where[key] if isinstance(key, int) and key < len(where) else None
    return where.get(str(key))


def replay_journal(path: str | os.PathLike[str], store: Store) -> int:
    """Write the calls of a journal (:func:`write_journal`) to ``store``; return how many.

    A run recorded in the journal (its ``record_run``) gets a new id, which the journal's later calls of
    the same run use. The journal is yours (written by this user's run): its learner updates are
    unpickled, so never replay a journal from someone else.

    Raises
    ------
    ElasticError
        The file is not a journal (its line is named); nothing after that line is written.
    """
    ids: dict[int, int] = {}
    done = 0
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                if record.get("v") != JOURNAL_VERSION or not isinstance(record.get("method"), str):
                    raise ValueError("not a journal record")
                method = record["method"]
                if method not in WRITES | {"record_run"}:
                    raise ValueError(f"unknown call {method!r}")
                args = list(record["args"])
                kwargs = dict(record["kwargs"])
            except (ValueError, TypeError, KeyError) as exc:
                raise ElasticError(f"{path}:{number}: {exc}; is this a journal written by elastic?") from exc
            for where, value in ((args, 0), (kwargs, "run_id")):
                run = _get(where, value) if (where is kwargs or takes_run_id(method)) else None
                if isinstance(run, int) and run < 0:
                    if run not in ids:
                        raise ElasticError(f"{path}:{number}: run {run} was never recorded in this journal")
                    where[value] = ids[run]  # type: ignore[index]
            if method == "update_learner_state":
                args.append(cloudpickle.loads(base64.b64decode(record["fn"])))
            value = getattr(store, method)(*args, **kwargs)
            if method == "record_run" and isinstance(record.get("provisional"), int):
                ids[record["provisional"]] = int(value)
            done += 1
    return done
