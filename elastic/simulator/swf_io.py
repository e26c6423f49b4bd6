"""Low-level reading of Standard Workload Format (SWF) files: open, stream-parse, and locate errors.

:func:`parse_columns` streams a (plain, gzip, bzip2 or xz) SWF file through pandas' C tokenizer in
chunks of :data:`CHUNK_LINES` job lines and keeps only the fields the simulator uses, so memory grows
with the job count times :data:`USED_FIELDS`, not with the file (a 1.2-million-job trace holds about
90 MB of columns). When a chunk is malformed the file is re-scanned line by line to name the first bad
line (``file:line`` and the field); when the compressed stream itself is damaged (a flipped byte, a
truncated download) the error says so instead of blaming whatever garbage it decoded to.

:class:`~elastic.simulator.trace` builds on these: it turns the columns into a workload and decides
what to do with unknown values.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import re
import zlib
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from elastic.errors import TraceError
from elastic.limits import MAX_PROCESSORS, MAX_TRACE_SECONDS

__all__ = [
    "CHUNK_LINES",
    "STREAM_ERRORS",
    "SWF_FIELDS",
    "SwfHeader",
    "USED_FIELDS",
    "check_file",
    "compression",
    "damaged",
    "data_line_number",
    "open_text",
    "parse_columns",
    "read_swf_header",
]

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

USED_FIELDS: tuple[str, ...] = (
    "job_id",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "requested_processors",
    "requested_time",
    "user_id",
    "queue",
)
"""The fields :func:`parse_columns` keeps, in this column order."""

CHUNK_LINES = 100_000
"""Job lines parsed at a time (about 14 MB of float64 per chunk)."""

_N_FIELDS = len(SWF_FIELDS)
_USED_INDEX = [SWF_FIELDS.index(name) for name in USED_FIELDS]
# Traces are ASCII; latin-1 decodes any byte, so a stray byte never hides the real problem.
_ENCODING = "latin-1"
Compression = Literal["gzip", "bz2", "xz"]
# Magic bytes -> pandas compression name. SWF archives ship gzip; bzip2 and xz cost nothing extra.
_MAGIC: tuple[tuple[bytes, Compression], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
)
STREAM_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, lzma.LZMAError)
"""What reading a file or a damaged compressed stream raises: ``zlib.error`` (bad deflate data),
``gzip.BadGzipFile`` (an OSError: CRC or length mismatch), ``EOFError`` (truncated),
``lzma.LZMAError``, ``OSError`` (bzip2, permissions)."""

Float2D = npt.NDArray[np.float64]
_HEADER_RE = re.compile(r"^;\s*([A-Za-z][A-Za-z0-9 _-]*?)\s*:\s*(.*?)\s*$")
_LEADING_INT_RE = re.compile(r"^\s*(\d+)")


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


def read_swf_header(path: str | Path) -> SwfHeader:
    """Read the ``;`` header block at the top of an SWF trace.

    Parameters
    ----------
    path : str or Path
        SWF file, plain or compressed.

    Returns
    -------
    SwfHeader
        Header lines and their ``Key: value`` fields (empty when the file has no header).

    Raises
    ------
    TraceError
        The file does not exist, is not readable, or its compressed data is damaged.
    """
    path = Path(path)
    check_file(path)
    lines: list[str] = []
    fields: dict[str, str] = {}
    try:
        with open_text(path) as fh:
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
    except STREAM_ERRORS as exc:
        raise damaged(path, exc) from exc
    return SwfHeader(tuple(lines), fields)


def check_file(path: Path) -> None:
    """Raise :class:`TraceError` unless ``path`` is an existing regular file."""
    if not path.exists():
        raise TraceError(str(path), None, "no such file; give the path of an SWF trace (.swf or .swf.gz)")
    if not path.is_file():
        raise TraceError(str(path), None, "not a regular file; give the path of an SWF trace")


def compression(path: Path) -> Compression | None:
    """Return ``"gzip"``, ``"bz2"`` or ``"xz"`` from the file's first bytes (not its name), else None."""
    try:
        with path.open("rb") as fh:
            head = fh.read(6)
    except OSError as exc:
        raise TraceError(str(path), None, f"cannot read the file: {exc}") from exc
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


@contextmanager
def open_text(path: Path) -> Iterator[IO[str]]:
    """Open ``path`` as text, decompressing it when its first bytes say it is compressed."""
    kind = compression(path)
    with ExitStack() as stack:
        if kind == "gzip":
            yield stack.enter_context(gzip.open(path, "rt", encoding=_ENCODING))
        elif kind == "bz2":
            yield stack.enter_context(bz2.open(path, "rt", encoding=_ENCODING))
        elif kind == "xz":
            yield stack.enter_context(lzma.open(path, "rt", encoding=_ENCODING))
        else:
            yield stack.enter_context(path.open("r", encoding=_ENCODING))


def damaged(path: Path, exc: BaseException) -> TraceError:
    """Return the error for a file whose bytes cannot be read or decompressed."""
    kind = compression(path)
    if kind is not None and not isinstance(exc, PermissionError):
        return TraceError(
            str(path),
            None,
            f"the {kind} data is damaged or truncated ({_name(exc)}: {exc}); the file is corrupt: "
            "download or copy it again",
        )
    return TraceError(str(path), None, f"cannot read the file: {exc}")


def _name(exc: BaseException) -> str:
    kind = type(exc)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _stream_intact(path: Path) -> BaseException | None:
    """Decompress the whole file once; return the error a damaged stream raises, else None."""
    try:
        with open_text(path) as fh:
            while fh.read(1 << 20):
                pass
    except STREAM_ERRORS as exc:
        return exc
    return None


def parse_columns(path: Path) -> Float2D:
    """Parse every job line of ``path`` into an (n, len(USED_FIELDS)) float64 array, in file order.

    Raises
    ------
    TraceError
        The file cannot be read, its compressed data is damaged, or a job line is malformed (wrong
        number of fields, a field that is not a finite number): the message names ``file:line``.
    """
    kind = compression(path)
    parts: list[Float2D] = []
    try:
        reader = pd.read_csv(
            path,
            sep=r"\s+",
            comment=";",
            header=None,
            engine="c",
            dtype=np.float64,
            compression=kind,
            encoding=_ENCODING,
            chunksize=CHUNK_LINES,
        )
        with reader:
            rows = 0
            for chunk in reader:
                values = chunk.to_numpy(dtype=np.float64)
                if values.shape[1] != _N_FIELDS or not np.isfinite(values).all():
                    raise _first_bad_line(path, "has missing or non-finite fields")
                used = np.ascontiguousarray(values[:, _USED_INDEX])
                _check_magnitudes(path, used, rows)
                parts.append(used)
                rows += len(used)
    except pd.errors.EmptyDataError:
        return np.empty((0, len(USED_FIELDS)), dtype=np.float64)
    except TraceError:
        raise
    except (ValueError, pd.errors.ParserError) as exc:
        raise _first_bad_line(path, f"cannot be parsed as SWF: {exc}") from exc
    except STREAM_ERRORS as exc:
        raise damaged(path, exc) from exc
    if not parts:
        return np.empty((0, len(USED_FIELDS)), dtype=np.float64)
    return np.concatenate(parts)


_TIME_COLUMNS = [USED_FIELDS.index(n) for n in ("submit_time", "wait_time", "run_time", "requested_time")]
_PROCS_COLUMNS = [USED_FIELDS.index(n) for n in ("allocated_processors", "requested_processors")]


def _check_magnitudes(path: Path, used: Float2D, rows_before: int) -> None:
    """Refuse a time beyond :data:`~elastic.limits.MAX_TRACE_SECONDS` or a size beyond ``MAX_PROCESSORS``.

    Such a value is a unit or typing error in the file; taken as it is, it turns every figure derived
    from the trace into nonsense (a mean wait of millions of hours) or overflows. The message names the
    line, the field and the limit.
    """
    for columns, limit, unit, why in (
        (_TIME_COLUMNS, MAX_TRACE_SECONDS, "s", "100 years"),
        (_PROCS_COLUMNS, MAX_PROCESSORS, "processors", f"{MAX_PROCESSORS:,} processors"),
    ):
        block = used[:, columns]
        over = block > limit
        if not over.any():
            continue
        row, col = (int(i) for i in np.argwhere(over)[0])
        name = USED_FIELDS[columns[col]]
        raise TraceError(
            str(path),
            data_line_number(path, rows_before + row),
            f"field {SWF_FIELDS.index(name) + 1} ({name}) is {block[row, col]:g} {unit}, more than {why}: "
            "a unit or typing error in the trace; fix or remove the line (limits in elastic.limits)",
        )


def _first_bad_line(path: Path, fallback: str) -> TraceError:
    """Re-scan ``path`` line by line and describe its first malformed job line.

    The pandas fast path reports errors without a reliable line number (it does not count comment
    lines), so on failure we pay for one slow pass to point at the exact 1-based line. A compressed
    file is first checked whole: a damaged stream decodes to garbage lines, which are not the problem.
    """
    if compression(path) is not None:
        broken = _stream_intact(path)
        if broken is not None:
            return damaged(path, broken)
    try:
        return _scan_for_bad_line(path) or TraceError(str(path), None, fallback)
    except STREAM_ERRORS as exc:
        return damaged(path, exc)


def _scan_for_bad_line(path: Path) -> TraceError | None:
    with open_text(path) as fh:
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


def data_line_number(path: Path, row: int) -> int | None:
    """Return the 1-based file line of the ``row``-th (0-based) job line, skipping comments and blanks."""
    seen = -1
    try:
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, start=1):
                if line.split(";", 1)[0].strip():
                    seen += 1
                    if seen == row:
                        return lineno
    except STREAM_ERRORS:
        return None
    return None
