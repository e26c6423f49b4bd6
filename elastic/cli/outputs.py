"""Output files of the ``elastic`` subcommands: checked before the work, never lost after it.

Every option that names a file to write (``--out``, ``--csv``, ``--events``, ``--convergence``) goes
through :func:`check_output` before the subcommand computes anything, so a typo in a directory or a
read-only location is refused in a second instead of after an hour of simulation. The write itself
goes through :func:`write_output`: should it still fail (the disk filled up, the directory was
removed meanwhile), the result is written to a temporary file instead and the error says where.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from elastic.errors import ConfigError

__all__ = ["check_output", "check_output_dir", "write_output"]


def check_output(path: str | None, option: str, suffixes: Sequence[str] = ()) -> Path | None:
    """Check that ``path`` can be written, without changing anything there.

    The file may exist (it is then overwritten by the subcommand) or not; its directory must exist.
    Whether the file can really be created is tried, not guessed from permission bits (they say
    nothing for root, read-only mounts or full quotas): an existing file is opened for appending and
    closed unchanged, a new one is created and removed at once.

    Parameters
    ----------
    path : str or None
        The option's value; None (option not given) is accepted and returned as None.
    option : str
        The option's name, e.g. ``"--out"``, for the message.
    suffixes : sequence of str, default ()
        Allowed file suffixes (lower case, with the dot); empty: any.

    Returns
    -------
    Path or None
        ``path`` as a :class:`~pathlib.Path`.

    Raises
    ------
    ConfigError
        The suffix is not allowed, the path is a directory, its directory does not exist, or the file
        cannot be created or written; the message names the option, the path and what to do.

    Examples
    --------
    >>> check_output(None, "--out") is None
    True
    """
    if path is None:
        return None
    out = Path(path)
    if suffixes and out.suffix.lower() not in suffixes:
        allowed = " or ".join([", ".join(suffixes[:-1]), suffixes[-1]] if len(suffixes) > 1 else suffixes)
        raise ConfigError(f"{option} must end in {allowed}, got {path!r}")
    if out.is_dir():
        raise ConfigError(f"{option} {path!r} is a directory; give a file name in it")
    parent = out.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise ConfigError(
            f"{option} {path!r}: {str(parent)!r} {what}; create the directory first or choose another path"
        )
    existed = out.exists()
    try:
        if existed:
            with open(out, "ab"):
                pass
        else:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            os.close(fd)
            out.unlink()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"{option} {path!r}: cannot write this file ({reason}); choose a path you can write to"
        ) from None
    return out


def check_output_dir(path: str | None, option: str) -> Path | None:
    """Check that files can be written in directory ``path``, leaving it as it was.

    The directory may exist (files in it are then overwritten) or not, if its parent does (it is
    created when the report is written). Whether a file can really be created there is tried: a
    missing directory is created and removed, a probe file created and removed.

    Parameters
    ----------
    path : str or None
        The option's value; None (option not given) is accepted and returned as None.
    option : str
        The option's name, e.g. ``"--out"``, for the message.

    Returns
    -------
    Path or None

    Raises
    ------
    ConfigError
        The path is a file, its parent does not exist, or nothing can be written there; the message
        names the option, the path and what to do.

    Examples
    --------
    >>> check_output_dir(None, "--out") is None
    True
    """
    if path is None:
        return None
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{option} {path!r} is a file, not a directory; give a directory (new or existing)")
    created = False
    try:
        if not out.exists():
            parent = out.parent
            if not parent.is_dir():
                what = "is not a directory" if parent.exists() else "does not exist"
                raise ConfigError(
                    f"{option} {path!r}: {str(parent)!r} {what}; create it first or choose another directory"
                )
            out.mkdir()
            created = True
        fd, probe = tempfile.mkstemp(prefix=".elastic-probe-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"{option} {path!r}: cannot write in this directory ({reason}); "
            "choose a directory you can write to"
        ) from None
    finally:
        if created:
            out.rmdir()
    return out


def write_output(path: Path, option: str, write: Callable[[Path], object]) -> Path:
    """Write a result with ``write(path)``; if that fails, write it to a temporary file and say so.

    Parameters
    ----------
    path : Path
        Where the user asked for the result (already checked by :func:`check_output`).
    option : str
        The option's name, for the message.
    write : callable
        Writes the result to the path it is given.

    Returns
    -------
    Path
        ``path``, once written.

    Raises
    ------
    ConfigError
        Writing to ``path`` failed; the message gives the reason and the temporary file that holds
        the result instead (or says that could not be written either).
    """
    try:
        write(path)
        return path
    except OSError as exc:
        reason = exc.strerror or str(exc)
        fd, name = tempfile.mkstemp(prefix="elastic-", suffix=path.suffix)
        os.close(fd)
        rescue = Path(name)
        try:
            write(rescue)
        except OSError as again:
            rescue.unlink(missing_ok=True)
            raise ConfigError(
                f"{option} {str(path)!r}: writing failed ({reason}), and so did writing to "
                f"{name} ({again.strerror or again}): the result is lost"
            ) from None
        raise ConfigError(
            f"{option} {str(path)!r}: writing failed ({reason}); the result was saved to {rescue} instead"
        ) from None
