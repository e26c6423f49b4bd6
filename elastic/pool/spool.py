"""Large payloads through files: the spool directory that a pool and its agents share.

Messages stay small (:data:`elastic.pool.protocol.MAX_MESSAGE`): whatever could make them large goes
through files in the pool run's *spool directory*, next to its secret file (which every agent reads
already, so it is where agents can see: a shared filesystem on Slurm, ``Pool(secret_dir=...)``).

- A task's pickled call (function and arguments) larger than :data:`INLINE_LIMIT`: the pool writes it when
  the task is submitted, the message names the file, the worker reads it; it is removed once the task is
  resolved.
- A task's pickled value larger than :data:`INLINE_LIMIT`: the worker writes it, the message names it, the
  pool reads and removes it when it resolves the future.
- Standard output or error of a task run in a child (shell commands, isolated calls) beyond
  :data:`OUTPUT_LIMIT` bytes: the result carries the last :data:`OUTPUT_LIMIT` bytes after a line naming
  the file that keeps all of it, under ``output/`` (left in place when the pool closes: it is the user's).
- Each agent's working directory (its children's output and result files), under
  ``agents/<allocation>/``: the agent removes its own when it leaves, and the pool removes the allocation's
  when the allocation ends (an agent killed by SIGKILL cannot clean up after itself).

Layout::

    elastic-pool-1a2b3c4d.secret
    elastic-pool-1a2b3c4d.spool/            mode 0700
        9f...e1.call   4c...07.value        pickled calls and values
        agents/<allocation>/<agent>/        agents' working directories
        output/7d...aa.stdout               whole outputs that were cut in results

File names in messages are plain names inside the spool directory (:func:`path` refuses anything else).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from pathlib import Path

from elastic.errors import PoolError

__all__ = [
    "INLINE_LIMIT",
    "OUTPUT_LIMIT",
    "agent_dir",
    "allocation_dir",
    "clean",
    "create",
    "path",
    "read_output",
    "remove",
    "spool_dir",
    "take",
    "write",
]

INLINE_LIMIT = 2**20
"""Bytes of a pickled call or value that travel inside a message; larger ones go through a file."""

OUTPUT_LIMIT = 2**20
"""Bytes of a task's standard output (and of its standard error) kept in its result; the rest in a file."""

_OUTPUT = "output"
_AGENTS = "agents"


def spool_dir(secret_file: Path) -> Path:
    """Return the spool directory of the pool run whose secret is ``secret_file`` (next to it)."""
    return secret_file.with_name(secret_file.stem + ".spool")


def create(secret_file: Path) -> Path:
    """Create the spool directory of ``secret_file`` (mode 0700) and return it."""
    directory = spool_dir(secret_file)
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory


def path(spool: Path, name: str) -> Path:
    """Return the file ``name`` of the spool (a plain file name: no directory, no ``..``)."""
    if not name or name != os.path.basename(name) or name in (".", "..") or "\0" in name:
        raise PoolError(f"{name!r} is not a file name of the spool directory {spool}")
    return spool / name


def write(spool: Path, data: bytes, suffix: str) -> str:
    """Write ``data`` to a new file of the spool (complete or not at all); return its name.

    Raises
    ------
    OSError
        The file could not be written (no space, no spool directory).
    """
    name = uuid.uuid4().hex + suffix
    tmp = spool / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        tmp.replace(spool / name)  # atomic: a reader never sees half a file
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return name


def take(spool: Path, name: str) -> bytes:
    """Read the spool file ``name`` and remove it."""
    file = path(spool, name)
    data = file.read_bytes()
    file.unlink(missing_ok=True)
    return data


def remove(spool: Path, name: str) -> None:
    """Remove the spool file ``name`` if it is there."""
    path(spool, name).unlink(missing_ok=True)


def _safe(name: str) -> str:
    """Return a directory name for any string: readable, and unique by a hash of the whole."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40].lstrip(".")
    digest = hashlib.sha256(name.encode(errors="surrogatepass")).hexdigest()[:10]
    return f"{readable}-{digest}"


def allocation_dir(spool: Path, alloc_id: str) -> Path:
    """Return the directory holding the working directories of ``alloc_id``'s agents."""
    return spool / _AGENTS / _safe(alloc_id)


def agent_dir(spool: Path, alloc_id: str, agent: str) -> Path:
    """Return the working directory of one agent (named ``agent``) of allocation ``alloc_id``."""
    return allocation_dir(spool, alloc_id) / _safe(agent)


def read_output(file: Path, spool: Path | None, stream: str) -> tuple[str, str | None]:
    """Return a task's captured ``stream`` ("stdout"/"stderr") from ``file``, cut to :data:`OUTPUT_LIMIT`.

    Returns ``(text, kept)``. Output that fits is read whole, ``file`` is removed and ``kept`` is None.
    Longer output (with a spool) is kept whole in the spool's ``output/`` directory, ``kept`` is that
    file's path, and ``text`` is a line naming it followed by the last :data:`OUTPUT_LIMIT` bytes. Without
    a spool the output is read whole.
    """
    try:
        size = file.stat().st_size
    except FileNotFoundError:  # its allocation ended and the pool removed its directory
        return "", None
    if spool is None or size <= OUTPUT_LIMIT:
        text = file.read_text(errors="replace")
        file.unlink(missing_ok=True)
        return text, None
    with file.open("rb") as fh:
        fh.seek(size - OUTPUT_LIMIT)
        tail = fh.read().decode(errors="replace")
    (spool / _OUTPUT).mkdir(mode=0o700, exist_ok=True)
    kept = spool / _OUTPUT / f"{uuid.uuid4().hex}.{stream}"
    file.replace(kept)  # the working directory is in the spool: a rename, not a copy
    note = f"[elastic: {stream} of {size:,} bytes cut to its last {OUTPUT_LIMIT:,}; all of it is in {kept}]"
    return f"{note}\n{tail}", str(kept)


def clean(spool: Path) -> int:
    """Remove everything of the spool but the kept outputs (and the spool if none); return outputs kept."""
    if not spool.is_dir():
        return 0
    for entry in spool.iterdir():
        if entry.name == _OUTPUT:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    output = spool / _OUTPUT
    kept = sum(1 for _ in output.iterdir()) if output.is_dir() else 0
    if not kept:
        shutil.rmtree(spool, ignore_errors=True)
    return kept
