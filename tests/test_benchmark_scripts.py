"""Every benchmark runs as the docs show it: ``python benchmarks/NAME.py`` from a fresh clone.

Run that way, only ``benchmarks/`` is on ``sys.path``. A script that reaches the ``tests`` or
``benchmarks`` packages (directly, or through a ``_`` helper module beside it) must put the project's
root on ``sys.path`` before that import, or it stops with ``ModuleNotFoundError`` before doing anything
(``slurm_oracle.py``, ``slurm_node_plan.py`` and ``slurm_queue.py`` did). Checked on the source rather
than by running each script, which would cost a Python start-up and the imports per script.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
NEEDS_ROOT = ("tests", "benchmarks")


def _imported(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def _inserts_root(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) == "sys.path.insert"
    )


def _needs_root(module: str, seen: frozenset[str] = frozenset()) -> bool:
    top = module.split(".")[0]
    if top in NEEDS_ROOT:
        return True
    helper = BENCHMARKS / f"{top}.py"
    if not top.startswith("_") or not helper.exists() or top in seen:
        return False
    tree = ast.parse(helper.read_text())
    return any(_needs_root(name, seen | {top}) for node in tree.body for name in _imported(node))


def _first_violation(script: Path) -> str | None:
    """The first module-level import that needs the root before the root is on the path."""
    inserted = False
    for node in ast.parse(script.read_text()).body:
        if _inserts_root(node):
            inserted = True
        for name in _imported(node):
            if not inserted and _needs_root(name):
                return name
    return None


SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_puts_the_root_on_the_path_before_importing_the_project_s_test_code(
    script: Path,
) -> None:
    assert _first_violation(script) is None, (
        f"{script.name} imports {_first_violation(script)!r} before "
        "sys.path.insert(0, <project root>): `python benchmarks/" + script.name + "` fails"
    )


def test_the_check_finds_a_script_that_imports_test_code_first(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nfrom tests.fixtures import processes\n")
    assert _first_violation(bad) == "tests.fixtures"
    good = tmp_path / "good.py"
    good.write_text("import sys\nsys.path.insert(0, '..')\nfrom tests.fixtures import processes\n")
    assert _first_violation(good) is None


def test_the_oracle_runs_as_documented_from_another_directory(tmp_path: Path) -> None:
    """One real run of the path rule: the oracle's ``--help`` from a directory that is not the root."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "slurm_oracle.py"), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert "--strategies" in done.stdout
