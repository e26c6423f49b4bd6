"""Site configuration: what an HPC centre needs in every job script, in one object read from one file.

:class:`SiteConfig` holds the batch options a centre asks for (partition, account, QOS, reservation,
memory, node features, generic resources, exclusive nodes, and any further ``#SBATCH`` directive), the job
prologue run before the agent starts (``module load``, ``conda activate``, ``source venv/bin/activate``),
environment variables, and the Python interpreter the agents use. The Slurm backend writes them into every
job script; the front-ends (:class:`elastic.Elastic`, ``ElasticExecutor``, ``ElasticTaskRunner``) take one
with ``site=``.

Without ``site=``, the Slurm backend reads the per-site file (:func:`load_site`): the TOML file named by
``$ELASTIC_SITE``, else ``$XDG_CONFIG_HOME/elastic/site.toml`` (``~/.config/elastic/site.toml``) when it
exists, so a script does not hard-code them::

    partition = "compute"
    account = "proj123"
    mem = "8G"
    directives = ["--comment=elastic", "--mail-type=NONE"]
    python = "python3"
    worker_init = '''
    module load python/3.11
    source ~/venvs/elastic/bin/activate
    '''

    [env]
    OMP_NUM_THREADS = "1"

Everything is checked when the object is built, before any job is submitted: a directive that is not a long
option (``--name`` or ``--name=value``), holds a newline or a quote, or sets what Elastic sets itself for
every allocation (``--nodes``, ``--ntasks``, ``--time``, ``--job-name``, ``--dependency``, ...) is refused
with a :class:`SiteConfigError` naming it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from elastic.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "RESERVED_OPTIONS",
    "SITE_ENV",
    "SiteConfig",
    "SiteConfigError",
    "default_site_path",
    "describe",
    "load_site",
    "parse_directive",
    "site_path",
]

SITE_ENV = "ELASTIC_SITE"
"""Environment variable naming the site file; set but empty: read no file."""

RESERVED_OPTIONS: Mapping[str, str] = {
    "job-name": "the allocation's name",
    "nodes": "the allocation's geometry",
    "ntasks": "the allocation's geometry",
    "ntasks-per-node": "the allocation's geometry",
    "cpus-per-task": "the allocation's geometry",
    "time": "the walltime the strategy chose",
    "dependency": "the order of a split allocation's jobs",
    "kill-on-invalid-dep": "the order of a split allocation's jobs",
    "begin": "when a pre-submitted allocation may start",
    "chdir": "the backend's workdir",
    "output": "the backend's workdir (slurm-%j.out)",
    "error": "the backend's workdir (slurm-%j.err)",
    "export": "--export=ALL (the agents need the driver's environment)",
    "array": "one job per allocation",
    "wrap": "the job script",
    "parsable": "reading the job id",
    "test-only": "submission itself",
    "hold": "allocation control (a held job is never released)",
    "wait": "allocation control (sbatch would block)",
}
"""``sbatch`` options Elastic sets itself for every allocation (or that would break it), with why."""

_FIELD_OPTIONS = {
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "reservation": "reservation",
    "mem": "mem",
    "constraint": "constraint",
    "gres": "gres",
    "exclusive": "exclusive",
}
"""``sbatch`` options that have their own :class:`SiteConfig` field, by option name."""

_OPTION = re.compile(r"--(?P<name>[a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?:=(?P<eq>.*)|\s+(?P<sp>\S.*))?", re.DOTALL)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MEM = re.compile(r"[0-9]+[KMGT]?", re.IGNORECASE)
_WORD = re.compile(r"[^\s\"'\\#]+")


class SiteConfigError(ConfigError):
    """A site setting that cannot work, found before any job is submitted.

    Parameters
    ----------
    key : str
        The setting, e.g. ``"directives[1]"`` or ``"mem"``.
    value : object
        The bad value (the directive's text for a directive).
    reason : str
        What is wrong and what to write instead.
    source : str, default "SiteConfig"
        Where the setting came from: ``"SiteConfig"`` or the site file's path.
    """

    def __init__(self, key: str, value: object, reason: str, source: str = "SiteConfig") -> None:
        self.key = key
        self.value = value
        self.reason = reason
        self.source = source
        where = f"{source}.{key}" if source == "SiteConfig" else f"{source}: {key}"
        super().__init__(f"{where} = {value!r}: {reason}")

    def located(self, source: str) -> SiteConfigError:
        """Return the same error, said to come from ``source`` (a site file's path)."""
        return SiteConfigError(self.key, self.value, self.reason, source)


def parse_directive(text: str, key: str = "directive") -> tuple[str, str | None]:
    """Return ``(option name, value or None)`` of one extra ``#SBATCH`` directive, checked.

    ``text`` is ``--name``, ``--name=value`` or ``--name value``, optionally after ``#SBATCH``; one pair of
    quotes around the value is dropped (the value is quoted again when written).

    Parameters
    ----------
    text : str
        The directive.
    key : str, default "directive"
        How errors name it (``"directives[2]"``).

    Returns
    -------
    tuple of (str, str or None)
        The option's name without ``--`` and its value (None for a flag such as ``--requeue``).

    Raises
    ------
    SiteConfigError
        Not a string; a newline, a double quote or a backslash in it; not a long option; an option Elastic
        sets itself (:data:`RESERVED_OPTIONS`, or an abbreviation of one, which ``sbatch`` would accept)
        or one with its own :class:`SiteConfig` field.

    Examples
    --------
    >>> parse_directive("--comment=my run")
    ('comment', 'my run')
    >>> parse_directive("#SBATCH --requeue")
    ('requeue', None)
    """
    if not isinstance(text, str):
        raise SiteConfigError(
            key, text, f"a directive is a string like '--comment=text', not {type(text).__name__}"
        )
    if any(c in text for c in "\n\r\0"):
        raise SiteConfigError(key, text, "a directive is one line: give each option as its own list item")
    line = text.strip()
    if line.startswith("#SBATCH"):
        line = line[len("#SBATCH") :].strip()
    if not line.startswith("--"):
        raise SiteConfigError(
            key,
            text,
            "a directive must be a long sbatch option starting with '--' (e.g. '--mem=4G'; "
            "short options such as '-N 2' are not accepted)",
        )
    match = _OPTION.fullmatch(line)
    if match is None:
        raise SiteConfigError(
            key,
            text,
            "not an sbatch option: expected '--name', '--name=value' or '--name value', the name in "
            "lower-case letters, digits and single hyphens",
        )
    name = match["name"]
    raw = match["eq"] if match["eq"] is not None else match["sp"]
    value = None if raw is None else raw.strip()
    if value is not None and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    if value == "":
        raise SiteConfigError(key, text, f"--{name} has no value after '='")
    if value is not None and ('"' in value or "\\" in value):
        raise SiteConfigError(key, text, "a value may not contain a double quote or a backslash")
    for reserved, why in RESERVED_OPTIONS.items():
        if reserved.startswith(name):  # sbatch takes any unambiguous abbreviation of a long option
            raise SiteConfigError(
                key, text, f"{_spelled(name, reserved)} is set by Elastic for every allocation: {why}"
            )
    for option, fld in _FIELD_OPTIONS.items():
        if option.startswith(name):
            raise SiteConfigError(
                key, text, f"{_spelled(name, option)} has its own setting: use {fld}= instead"
            )
    return name, value


def _spelled(name: str, option: str) -> str:
    return f"--{name}" if name == option else f"--{name} (an abbreviation of --{option})"


def _quote(value: str) -> str:
    return f'"{value}"'


def _check_word(key: str, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not _WORD.fullmatch(value):
        raise SiteConfigError(
            key, value, "must be a non-empty string without spaces, quotes, backslashes or '#', or None"
        )


@dataclass(frozen=True, slots=True)
class SiteConfig:
    """What a site needs in every job script (see the module docstring).

    Parameters
    ----------
    partition, account, qos, reservation : str or None, default None
        ``--partition``, ``--account``, ``--qos``, ``--reservation``; None: Slurm's default. A
        ``SlurmBackend(partition=...)`` argument or a job's own partition wins over the site's.
    mem : str or None, default None
        ``--mem`` per node: a whole number with an optional unit ``K``, ``M``, ``G`` or ``T`` (megabytes
        without one), e.g. ``"8G"``.
    constraint : str or None, default None
        ``--constraint``: node features, e.g. ``"haswell"`` or ``"intel&ib"``.
    gres : str or None, default None
        ``--gres``: generic resources per node, e.g. ``"gpu:1"``.
    exclusive : bool, default False
        ``--exclusive``: no other job on the allocation's nodes.
    directives : sequence of str, default ()
        Further ``#SBATCH`` options, one per item: ``"--comment=text"``, ``"--mail-type=END"``,
        ``"--licenses=fluent:1"`` (see :func:`parse_directive` for what is refused).
    worker_init : str, default ""
        Shell lines run in the job before the agent starts, after the environment is set:
        ``module load ...``, ``conda activate ...``, ``source venv/bin/activate``.
    env : Mapping[str, str], default {}
        Environment variables exported in the job (before ``worker_init``).
    python : str or None, default None
        The interpreter the agents run with: a path or a command found on the job's ``PATH`` (e.g.
        ``"python3"`` after ``worker_init`` activated an environment); None: the driver's own
        (``sys.executable``), which must then be visible from the compute nodes.

    Raises
    ------
    SiteConfigError
        The first bad setting, named with its value and what to write instead.

    Examples
    --------
    >>> site = SiteConfig(mem="4G", directives=["--comment=demo"], worker_init="module load python")
    >>> site.sbatch_options()
    ['--mem="4G"', '--comment="demo"']
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    mem: str | None = None
    constraint: str | None = None
    gres: str | None = None
    exclusive: bool = False
    directives: Sequence[str] = ()
    worker_init: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None

    def __post_init__(self) -> None:
        for key in ("partition", "account", "qos", "reservation", "constraint", "gres"):
            _check_word(key, getattr(self, key))
        if self.mem is not None and not (isinstance(self.mem, str) and _MEM.fullmatch(self.mem)):
            raise SiteConfigError(
                "mem",
                self.mem,
                "must be a whole number with an optional unit K, M, G or T (megabytes without one), "
                "e.g. '8G'",
            )
        if not isinstance(self.exclusive, bool):
            raise SiteConfigError("exclusive", self.exclusive, "must be true or false")
        if isinstance(self.directives, str) or not isinstance(self.directives, Sequence):
            raise SiteConfigError(
                "directives", self.directives, "must be a list of strings, e.g. ['--comment=text']"
            )
        parsed = [parse_directive(d, f"directives[{i}]") for i, d in enumerate(self.directives)]
        names = [name for name, _ in parsed]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise SiteConfigError(f"directives[{i}]", self.directives[i], f"--{name} is given twice")
            if self.mem is not None and name in ("mem-per-cpu", "mem-per-gpu"):
                raise SiteConfigError(
                    f"directives[{i}]", self.directives[i], f"--{name} conflicts with mem={self.mem!r}"
                )
        object.__setattr__(self, "directives", tuple(self.directives))
        if not isinstance(self.worker_init, str) or "\0" in self.worker_init:
            raise SiteConfigError(
                "worker_init", self.worker_init, "must be a string of shell lines (a multi-line string)"
            )
        if not isinstance(self.env, Mapping):
            raise SiteConfigError("env", self.env, "must be a mapping of variable names to strings")
        for name, value in self.env.items():
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                raise SiteConfigError(f"env[{name!r}]", value, "the name is not a shell variable name")
            if not isinstance(value, str) or "\0" in value:
                raise SiteConfigError(f"env[{name!r}]", value, "the value must be a string (quote numbers)")
        object.__setattr__(self, "env", dict(self.env))
        if self.python is not None and (
            not isinstance(self.python, str)
            or not self.python.strip()
            or any(c in self.python for c in "\n\r\0")
        ):
            raise SiteConfigError("python", self.python, "must be an interpreter's path or command, or None")

    @property
    def empty(self) -> bool:
        """True when the site sets nothing (every field at its default)."""
        return self == SiteConfig()

    def sbatch_options(self) -> list[str]:
        """Return the ``#SBATCH`` options this site adds, values quoted, without partition, account and QOS.

        Those three are the backend's defaults (a job's own win over them); see :attr:`partition`.
        """
        opts = [
            f"--{option}={_quote(value)}"
            for option, value in (
                ("reservation", self.reservation),
                ("mem", self.mem),
                ("constraint", self.constraint),
                ("gres", self.gres),
            )
            if value is not None
        ]
        if self.exclusive:
            opts.append("--exclusive")
        for i, text in enumerate(self.directives):
            name, value = parse_directive(text, f"directives[{i}]")
            opts.append(f"--{name}" if value is None else f"--{name}={_quote(value)}")
        return opts

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SiteConfig:
        """Read a site file (TOML, keys as the parameters; ``env`` a table).

        Raises
        ------
        SiteConfigError
            The file cannot be read or parsed, has an unknown key, or a bad value; the message names the
            file and the key.
        """
        where = str(Path(path).expanduser())
        try:
            data = tomllib.loads(Path(where).read_text(encoding="utf-8"))
        except OSError as exc:
            raise SiteConfigError(
                "file", where, f"cannot read the site file ({exc.strerror})", where
            ) from exc
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SiteConfigError("file", where, f"not valid TOML ({exc})", where) from exc
        known = [f.name for f in fields(cls)]
        for key in data:
            if key not in known:
                raise SiteConfigError(key, data[key], f"unknown setting; known: {', '.join(known)}", where)
        try:
            return cls(**data)
        except SiteConfigError as exc:
            raise exc.located(where) from None


def default_site_path() -> Path:
    """Return ``$XDG_CONFIG_HOME/elastic/site.toml`` (``~/.config/elastic/site.toml`` without it)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "elastic" / "site.toml"


def site_path() -> Path | None:
    """Return the site file to read: ``$ELASTIC_SITE`` if set (None if empty), else the default if present.

    Raises
    ------
    SiteConfigError
        ``$ELASTIC_SITE`` names a file that does not exist.
    """
    named = os.environ.get(SITE_ENV)
    if named is not None:
        if not named.strip():
            return None
        path = Path(named).expanduser()
        if not path.is_file():
            raise SiteConfigError(
                SITE_ENV, named, "no such file; point it at a site.toml or set it empty to read none", "env"
            )
        return path
    default = default_site_path()
    return default if default.is_file() else None


def load_site() -> SiteConfig:
    """Return the site configuration of the site file (:func:`site_path`), or an empty one without a file.

    Raises
    ------
    SiteConfigError
        The file is missing (named by ``$ELASTIC_SITE``), unreadable or holds a bad setting.
    """
    path = site_path()
    return SiteConfig() if path is None else SiteConfig.load(path)


def describe(site: SiteConfig) -> dict[str, Any]:
    """Return the settings that differ from the defaults (for logs and run records)."""
    empty = SiteConfig()
    return {
        f.name: getattr(site, f.name) for f in fields(site) if getattr(site, f.name) != getattr(empty, f.name)
    }
