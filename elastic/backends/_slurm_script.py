"""The batch script the Slurm backend submits: ``#SBATCH`` options, the environment, then the body.

:func:`render_job_script` is a pure function of a :class:`~elastic.batch.JobSpec`, the backend's defaults
and the site's options (:mod:`elastic.site`); :class:`~elastic.backends.slurm.SlurmBackend` pipes its text
to ``sbatch`` (and to ``sbatch --test-only`` for the site check and Slurm's own start estimate).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from elastic.backends import _slurm_parse as parse
from elastic.batch import JobSpec
from elastic.errors import ConfigError
from elastic.site import SiteConfig

__all__ = ["render_job_script"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _quote(value: str) -> str:
    """Quote an ``#SBATCH`` option value (Slurm honours double quotes there)."""
    if '"' in value or "\n" in value:
        raise ConfigError(f"Slurm option value {value!r} may not contain '\"' or a newline")
    return f'"{value}"'


def render_job_script(
    spec: JobSpec,
    *,
    workdir: Path,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    site: SiteConfig | None = None,
) -> str:
    """Return the batch script for ``spec``: ``#SBATCH`` options, then the environment, then the body.

    Parameters
    ----------
    spec : JobSpec
        What to submit. ``spec.partition``/``account``/``qos`` win over the backend's defaults.
    workdir : Path
        Working directory of the job, where ``slurm-<id>.out`` and ``slurm-<id>.err`` are written.
    partition, account, qos : str or None
        The backend's defaults, passed through unchanged.
    site : SiteConfig or None, default None
        The site's further options (:meth:`SiteConfig.sbatch_options`, after Elastic's own), its
        environment (exported before ``spec.env``, which wins) and its ``worker_init`` lines (run after
        the environment, before the body). Its partition, account and QOS are not read here: the backend
        passes them as its defaults.

    Returns
    -------
    str
        A bash script. The body is ``spec.script``; with no script it is ``sleep <runtime>`` when
        ``spec.runtime`` is set, else ``sleep infinity`` (the job holds its cores until cancelled or its
        walltime). ``ELASTIC_JOB_ID`` and ``ELASTIC_JOB_CORES`` are exported, as on the mock backend.

    Raises
    ------
    ConfigError
        An environment variable name is not a shell identifier, or a value cannot be passed to Slurm.
    """
    opts: list[str] = [f"--job-name={_quote(spec.name)}"]
    if spec.nodes is not None:
        opts += [f"--nodes={spec.nodes}", "--exclusive"]
        if spec.cores >= spec.nodes:
            opts.append(f"--ntasks={spec.cores}")
    else:
        opts.append(f"--ntasks={spec.cores}")
    opts += ["--cpus-per-task=1", f"--time={parse.walltime_minutes(spec.walltime)}"]
    if spec.dependencies:
        opts.append("--dependency=" + ",".join(str(dep) for dep in spec.dependencies))
        opts.append("--kill-on-invalid-dep=yes")
    if spec.begin is not None:
        opts.append(f"--begin={parse.format_time(spec.begin)}")
    for option, value in (
        ("partition", spec.partition or partition),
        ("account", spec.account or account),
        ("qos", spec.qos or qos),
    ):
        if value:
            opts.append(f"--{option}={_quote(value)}")
    if site is not None:
        opts += [o for o in site.sbatch_options() if o not in opts]  # --exclusive may be there already
    opts += [
        f"--chdir={_quote(str(workdir))}",
        f"--output={_quote(str(workdir / 'slurm-%j.out'))}",
        f"--error={_quote(str(workdir / 'slurm-%j.err'))}",
        "--export=ALL",
    ]
    lines = ["#!/bin/bash", *(f"#SBATCH {opt}" for opt in opts), ""]
    lines += ['export ELASTIC_JOB_ID="$SLURM_JOB_ID"', f"export ELASTIC_JOB_CORES={spec.cores}"]
    if site is not None:
        lines += [f"export {key}={shlex.quote(value)}" for key, value in site.env.items()]
    for key, value in spec.env.items():
        if not _ENV_NAME.fullmatch(key):
            raise ConfigError(f"JobSpec.env key {key!r} is not a valid environment variable name")
        lines.append(f"export {key}={shlex.quote(value)}")
    if site is not None and site.worker_init.strip():
        lines += ["", "# worker_init (site configuration)", *site.worker_init.strip("\n").splitlines()]
    lines.append("")
    if spec.script is not None:
        lines.append(spec.script)
    elif spec.runtime is not None:
        lines.append(f"sleep {spec.runtime:g}")
    else:
        lines.append("exec sleep infinity")
    return "\n".join(lines) + "\n"
