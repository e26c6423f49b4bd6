"""The installed module name of every source file (``learners/asa.py`` is ``elastic.learners.asa``).

``executors/``, ``learners/`` and ``workflows/`` are top-level folders of the source tree but install
under the ``elastic`` namespace (``elastic/executors`` etc. are links to them), so the tree is read
through the real folders and each file named as it is imported.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: real source folder -> the package it installs as
FOLDERS = {
    "elastic": "elastic",
    "learners": "elastic.learners",
    "executors": "elastic.executors",
    "workflows": "elastic.workflows",
}
LINKED = frozenset(f for f in FOLDERS if f != "elastic")


def source_modules() -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file of the installed packages (each file once)."""
    out: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("").parts
            if folder == "elastic" and rel[0] in LINKED:
                continue  # the linked folder, read under its own name
            name = ".".join((package, *rel)).removesuffix(".__init__")
            out[name] = path
    return out


def git_files(*options: str) -> list[str] | None:
    """``git ls-files OPTIONS`` of the checkout; None where it is not a git checkout or git is missing."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    done = subprocess.run(["git", "ls-files", *options], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.splitlines() if done.returncode == 0 else None
