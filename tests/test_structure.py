"""The layering holds: nothing low imports something high, and no two parts import each other.

Imports are read from the source (every ``import`` statement, inside functions and ``TYPE_CHECKING``
blocks too), so a lazy import counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.source_tree import LINKED, git_files, source_modules


def _part(module: str) -> str:
    """The part a module belongs to: ``elastic.pool.state`` -> ``elastic.pool``; top-level modules stay."""
    parts = module.split(".")
    return parts[0] if parts[0] != "elastic" or len(parts) == 1 else ".".join(parts[:2])


def _imports() -> dict[str, set[str]]:
    """module -> every Elastic module it imports (``from package import module`` names the module)."""
    paths = source_modules()
    out: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in paths else node.module)
        out[name] = {m for m in found if m.split(".")[0] in ("elastic", *LINKED) and m != name}
    return out


IMPORTS = _imports()


def _part_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, targets in IMPORTS.items():
        src = _part(module)
        graph.setdefault(src, set()).update(_part(t) for t in targets if _part(t) != src)
    return graph


def test_the_source_was_read() -> None:
    assert "elastic.pool.state" in IMPORTS and "elastic.front.door" in IMPORTS
    assert "elastic.control.controller" in IMPORTS["elastic.front.door"]


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("elastic.simulator", "elastic.backends"),
        ("elastic.simulator", "elastic.control"),
        ("elastic.simulator", "elastic.pool"),
        ("elastic.simulator", "elastic.strategies"),
        ("elastic.pool", "elastic.control"),
        ("elastic.pool", "elastic.strategies"),
        ("elastic.pool", "elastic.front"),
        ("elastic.strategies", "elastic.control"),
        ("elastic.strategies", "elastic.backends"),
        ("elastic.control", "elastic.front"),
        ("elastic.batch", "elastic.backends"),
        ("elastic.learners", "elastic.strategies"),
        ("elastic.learners", "elastic.control"),
    ],
)
def test_nothing_low_imports_something_high(low: str, high: str) -> None:
    offenders = sorted(
        f"{m} imports {t}"
        for m, targets in IMPORTS.items()
        if _part(m) == low
        for t in targets
        if t == high or t.startswith(high + ".")
    )
    assert not offenders, offenders


def test_no_two_parts_import_each_other() -> None:
    graph = _part_graph()
    cycles = []
    for a, targets in graph.items():
        for b in targets:
            if a in graph.get(b, set()) and a < b:
                cycles.append((a, b))
    assert not cycles, f"parts importing each other: {cycles}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one import cycle of ``graph`` (its nodes, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle is not None:
                return cycle
    return None


def test_no_longer_import_cycle_between_parts() -> None:
    cycle = _cycle(_part_graph())
    assert cycle is None, f"import cycle between parts: {' -> '.join(cycle)}"


def test_no_import_cycle_between_modules_even_for_type_hints() -> None:
    # simulator.admission -> base -> engine -> admission was one, through TYPE_CHECKING imports
    cycle = _cycle(IMPORTS)
    assert cycle is None, f"import cycle between modules: {' -> '.join(cycle)}"


def test_the_linked_folders_are_imported_under_elastic_only() -> None:
    # `import learners` beside `import elastic.learners` would load every module twice, with two copies
    # of each class; and the bare names must not be needed, since only `elastic` is installed
    offenders = sorted(
        f"{m} imports {t}" for m, targets in IMPORTS.items() for t in targets if t.split(".")[0] in LINKED
    )
    assert not offenders, offenders


LONG_MODULE_LINES = 500
"""Above this many lines a module must say why in its docstring (the style guide asks for ~400)."""

LONG_REASON = "Over 500 lines because"
"""The phrase a long module's docstring states its reason with: ``Over 500 lines because <reason>.``"""

LONG_ALLOWED: set[str] = set()
"""Modules over the limit without a stated reason yet (each to be split or given one)."""


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def test_a_module_over_500_lines_says_why_in_its_docstring() -> None:
    paths = source_modules()
    offenders = sorted(
        f"{name} ({n} lines)"
        for name, path in paths.items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LONG_MODULE_LINES
        and name not in LONG_ALLOWED
        and LONG_REASON not in " ".join(_docstring(path).split())
    )
    assert not offenders, f"split them, or state '{LONG_REASON} ...' in the docstring: {offenders}"


def test_the_long_module_allow_list_holds_only_long_modules() -> None:
    # an entry whose module was split (or given a reason) must leave the list, so the list only shrinks
    paths = source_modules()
    stale = sorted(
        name
        for name in LONG_ALLOWED
        if name not in paths
        or len(paths[name].read_text(encoding="utf-8").splitlines()) <= LONG_MODULE_LINES
        or LONG_REASON in " ".join(_docstring(paths[name]).split())
    )
    assert not stale, f"no longer needed in LONG_ALLOWED: {stale}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports() -> list[str]:
    """Every import of a ``_name`` (a module or a module's name) from another part of the package."""
    paths = source_modules()
    found = []
    for module, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [(a.name, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [(node.module, f"{node.module}.{a.name}") for a in node.names]
                targets += [(node.module, node.module)]
            else:
                continue
            for owner, name in targets:
                if name.split(".")[0] not in ("elastic", *LINKED) or _part(owner) == _part(module):
                    continue
                inside = name.split(".")[len(_part(owner).split(".")) :]
                if any(_private(p) for p in inside):
                    found.append(f"{module} imports {name}")
    return sorted(set(found))


def test_no_module_imports_a_private_name_from_another_part() -> None:
    # elastic.backends._proctrack is the backends' own; elastic.cli reaching for it would couple the two
    offenders = _private_imports()
    assert not offenders, offenders


def test_benchmarks_import_no_private_test_helper() -> None:
    """Benchmarks reach test fixtures only through public names (no ``_name`` of ``tests``)."""
    found = []
    for path in sorted((Path(__file__).parent.parent / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
                names = [*node.module.split("."), *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [p for a in node.names if a.name.split(".")[0] == "tests" for p in a.name.split(".")]
            else:
                continue
            found += [f"{path.name}: {'.'.join(names)}" for n in names if _private(n)]
    assert found == [], found


TOP_LEVEL = {
    ".ci",
    ".gitignore",
    "CHANGELOG.md",
    "README.md",
    "pyproject.toml",
    "mkdocs.yml",
    "elastic",
    "executors",
    "learners",
    "workflows",
    "tests",
    "benchmarks",
    "docs",
    "scripts",
}


def test_the_checkout_tracks_only_the_layouts_top_level_entries() -> None:
    """Nothing a run leaves behind is committed: a test's ``slurm-<id>.out`` once was, in the root."""
    files = git_files()
    if files is None:
        pytest.skip("not a git checkout")
    top = {f.split("/")[0] for f in files if f}
    assert top - TOP_LEVEL == set(), f"tracked outside the layout: {sorted(top - TOP_LEVEL)}"
