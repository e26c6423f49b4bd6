"""Fetch SWF traces from the Parallel Workloads Archive.

The archive (Hebrew University of Jerusalem, D. Feitelson et al.) keeps each log in its own folder:
``<base>/l_hpc2n/HPC2N-2002-2.2-cln.swf.gz``. :data:`KNOWN_TRACES` maps short names to those paths.
Downloads stream into a hidden temporary file beside the destination and are renamed into place only
when complete, so an interrupted download never leaves a partial trace behind.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

from elastic.errors import TraceError, UnknownNameError

__all__ = [
    "DEFAULT_BASE_URL",
    "KNOWN_TRACES",
    "KnownTrace",
    "ProgressCallback",
    "download_trace",
    "resolve_trace",
]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://www.cs.huji.ac.il/labs/parallel/workload/"
"""Root of the Parallel Workloads Archive; each log lives in a ``l_<system>/`` folder below it."""

ProgressCallback = Callable[[int, "int | None"], None]
"""Called as ``progress(bytes_so_far, total_bytes_or_None)`` while a download runs."""

_CHUNK = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class KnownTrace:
    """One cleaned log of the Parallel Workloads Archive.

    Attributes
    ----------
    name : str
        Short name, e.g. ``"hpc2n"``.
    folder : str
        Folder of the log in the archive, e.g. ``"l_hpc2n"``.
    filename : str
        File name, e.g. ``"HPC2N-2002-2.2-cln.swf.gz"``.
    system : str
        The machine the log was recorded on.
    """

    name: str
    folder: str
    filename: str
    system: str

    def url(self, base_url: str = DEFAULT_BASE_URL) -> str:
        """Return the download URL below ``base_url``."""
        return urllib.parse.urljoin(base_url.rstrip("/") + "/", f"{self.folder}/{self.filename}")


def _known(*entries: KnownTrace) -> Mapping[str, KnownTrace]:
    return MappingProxyType({entry.name: entry for entry in entries})


KNOWN_TRACES: Mapping[str, KnownTrace] = _known(
    KnownTrace(
        "ctc-sp2", "l_ctc_sp2", "CTC-SP2-1996-3.1-cln.swf.gz", "Cornell Theory Center IBM SP2, 1996-97"
    ),
    KnownTrace("kth-sp2", "l_kth_sp2", "KTH-SP2-1996-2.1-cln.swf.gz", "KTH Stockholm IBM SP2, 1996-97"),
    KnownTrace("sdsc-sp2", "l_sdsc_sp2", "SDSC-SP2-1998-4.2-cln.swf.gz", "SDSC IBM SP2, 1998-2000"),
    KnownTrace(
        "sdsc-blue", "l_sdsc_blue", "SDSC-BLUE-2000-4.2-cln.swf.gz", "SDSC Blue Horizon IBM SP, 2000-03"
    ),
    KnownTrace("hpc2n", "l_hpc2n", "HPC2N-2002-2.2-cln.swf.gz", "HPC2N Seth Linux cluster, 2002-06"),
    KnownTrace("sdsc-ds", "l_sdsc_ds", "SDSC-DS-2004-2.1-cln.swf.gz", "SDSC DataStar, 2004-05"),
    KnownTrace(
        "lpc-egee", "l_lpc", "LPC-EGEE-2004-1.2-cln.swf.gz", "LPC Clermont-Ferrand EGEE cluster, 2004-05"
    ),
    KnownTrace("llnl-atlas", "l_llnl_atlas", "LLNL-Atlas-2006-2.1-cln.swf.gz", "LLNL Atlas, 2006-07"),
    KnownTrace("llnl-thunder", "l_llnl_thunder", "LLNL-Thunder-2007-1.1-cln.swf.gz", "LLNL Thunder, 2007"),
    KnownTrace(
        "metacentrum", "l_metacentrum", "METACENTRUM-2009-2.swf.gz", "Czech national grid MetaCentrum, 2009"
    ),
    KnownTrace("ricc", "l_ricc", "RICC-2010-2.swf.gz", "RIKEN Integrated Cluster of Clusters, 2010"),
    KnownTrace("cea-curie", "l_cea_curie", "CEA-Curie-2011-2.1-cln.swf.gz", "CEA Curie, 2011-12"),
)
"""Short names ``elastic traces download`` accepts, in the archive's chronological order."""


def resolve_trace(name: str, base_url: str = DEFAULT_BASE_URL) -> tuple[str, str]:
    """Turn a short name, a known file name or a URL into ``(url, file name)``.

    Parameters
    ----------
    name : str
        A key of :data:`KNOWN_TRACES` (case-insensitive), the file name of one of them, or a full
        ``http://``/``https://`` URL of any SWF file.
    base_url : str, default DEFAULT_BASE_URL
        Archive root the known traces are fetched from (a mirror, or a local server in tests).

    Returns
    -------
    tuple of (str, str)
        The URL to fetch and the file name to save it as.

    Raises
    ------
    UnknownNameError
        ``name`` is neither a known short name, a known file name nor a URL.
    """
    if name.startswith(("http://", "https://")):
        filename = Path(urllib.parse.urlparse(name).path).name
        if not filename:
            raise UnknownNameError("trace URL (it must end in a file name)", name, KNOWN_TRACES)
        return name, filename
    entry = KNOWN_TRACES.get(name.lower())
    if entry is None:
        entry = next((e for e in KNOWN_TRACES.values() if e.filename.lower() == name.lower()), None)
    if entry is None:
        raise UnknownNameError("trace (give a short name, its file name or a full URL)", name, KNOWN_TRACES)
    return entry.url(base_url), entry.filename


def download_trace(
    name: str,
    dest: str | Path = ".",
    *,
    base_url: str = DEFAULT_BASE_URL,
    force: bool = False,
    timeout: float = 60.0,
    progress: ProgressCallback | None = None,
) -> Path:
    """Download a trace into the folder ``dest`` and return the path of the file.

    Parameters
    ----------
    name : str
        Short name, known file name or URL, as for :func:`resolve_trace`.
    dest : str or Path, default "."
        Folder to save into (created if missing).
    base_url : str, default DEFAULT_BASE_URL
        Archive root for short names.
    force : bool, default False
        Overwrite an existing file of the same name.
    timeout : float, default 60.0
        Seconds to wait for the server to connect or send more data.
    progress : callable or None, default None
        Called with ``(bytes_so_far, total_or_None)`` after every chunk.

    Returns
    -------
    Path
        The downloaded file, complete.

    Raises
    ------
    UnknownNameError
        The name is not known.
    TraceError
        The file exists and ``force`` is False; ``dest`` cannot be created or written (raised before
        anything is fetched); the server answered with an HTTP error or could not be reached; or a
        ``.gz`` download is not gzip data (an HTML error page, for instance). No partial file is left
        behind.
    """
    url, filename = resolve_trace(name, base_url)
    folder = Path(dest)
    target = folder / filename
    if target.exists() and not force:
        raise TraceError(str(target), None, "already exists; pass --force (force=True) to overwrite it")
    if target.is_dir():
        raise TraceError(str(target), None, "is a directory; choose another --dest (dest=)")
    try:  # before the download, so a bad folder costs nothing
        folder.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(prefix=f".{filename}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise TraceError(
            str(folder),
            None,
            f"cannot write the download there ({exc.strerror or exc}); choose another --dest",
        ) from None
    logger.info("downloading %s to %s", url, target)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(handle, "wb") as out:
            _fetch(url, out, timeout, progress)
        if filename.endswith(".gz"):
            with tmp.open("rb") as fh:
                if fh.read(2) != _GZIP_MAGIC:
                    raise TraceError(
                        url, None, "the server did not send gzip data; check the URL or --base-url"
                    )
        os.chmod(tmp, _file_mode())  # mkstemp's file is 0600; a downloaded trace is an ordinary file
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def _file_mode() -> int:
    """Return the mode ``open()`` gives a new file here: 0o666 less the umask (read, not set)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644  # the usual umask 022, where /proc does not say


def _fetch(url: str, out: BinaryIO, timeout: float, progress: ProgressCallback | None) -> None:
    """Stream ``url`` into the binary file ``out``."""
    request = urllib.request.Request(url, headers={"User-Agent": "elastic-traces/1"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            done = 0
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
            if total is not None and done != total:
                raise TraceError(url, None, f"connection closed after {done} of {total} bytes; try again")
    except urllib.error.HTTPError as exc:
        raise TraceError(
            url, None, f"HTTP {exc.code} {exc.reason}; check the name (elastic traces list) or --base-url"
        ) from exc
    except urllib.error.URLError as exc:
        raise TraceError(
            url, None, f"cannot reach the server ({exc.reason}); check the network or --base-url"
        ) from exc
    except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
        raise TraceError(url, None, f"download failed ({exc}); try again") from exc
