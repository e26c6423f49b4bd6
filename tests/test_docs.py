"""The README stays a front page whose examples run, and the documentation site builds without warnings.

Conventions this file enforces (also stated at the end of README.md):

- README.md has at most ``MAX_README_LINES`` lines and nothing that looks like a commit hash or a date;
  the pages under ``docs/`` have no commit hash either.
- Every fenced ``python`` block of README.md and of the pages under ``docs/`` is run as a script, in a
  fresh empty directory, on the local backend, unless the line before its fence is
  ``<!-- not-run: REASON -->`` (a reason is required). A block preceded by ``<!-- needs-trace: FILE -->``
  runs with the real trace FILE linked into its directory (skipped only where the traces are absent). A
  ``print(...)  # -> TEXT`` line in a block
  asserts that TEXT appears in what the script printed. Blocks that import Prefect run against the test
  session's Prefect server. The store is a temporary SQLite file, never the user's own. The README's
  Parsl and Prefect examples run in ``tests/test_packaging.py`` instead, installed in a new virtualenv.
- Every block, run or not, parses and uses today's API: the ``elastic`` names it imports exist, and calls
  of them pass only keywords they take (so a Slurm-only fragment cannot rot unseen either).
- Every ``elastic ...`` line of a ``sh`` block (README.md and ``docs/``) parses with today's command
  line (not run: most take minutes; a line with a ``[...]`` placeholder is left out).
- ``mkdocs build --strict`` succeeds (warnings are errors; skipped only when MkDocs is not installed, and
  never under ``CI=true`` or ``ELASTIC_REQUIRE_DOCS=1``, which ``bash scripts/bootstrap.sh test`` sets:
  there a missing MkDocs fails the test).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 400

#: Something that looks like a commit hash: a word of 7-40 lowercase hex characters with at least one
#: digit and at least one letter (so plain numbers such as ``2301`` and words such as ``decade`` or
#: ``accede`` do not match). Not matched: hex colours (``#a1b2c3d4``, after ``#``), ``0x`` literals and
#: hex inside identifiers (a word character before or after), and the groups of UUIDs and other
#: dash-joined ids (a ``-`` before or after).
COMMIT_HASH = re.compile(r"(?<![\w#-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
#: An ISO date such as ``2026-11-24``: the README says what is, not when.
DATE = re.compile(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b")
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(?P<reason>.*?)\s*-->$")
#: A block that reads a real workload trace from its working directory: run with that file linked there
#: from the traces folder (``ELASTIC_TRACES``, else ``../shared/data/traces``), skipped where it is absent.
NEEDS_TRACE = re.compile(r"^<!--\s*needs-trace:\s*(?P<file>[\w.-]+)\s*-->$")
EXPECTED = re.compile(r"^\s*print\(.*\)\s*#\s*->\s*(?P<expected>\S.*?)\s*$")
BLOCK_TIMEOUT = 300.0


@dataclass(frozen=True)
class Block:
    """A fenced ``python`` block of a Markdown file: where it starts, its code, why it is not run."""

    source: str
    line: int
    code: str
    not_run: str | None
    trace: str | None = None


def python_blocks(text: str, source: str = "README.md") -> list[Block]:
    """Return the fenced ``python`` blocks of ``text`` with the ``not-run`` reason before each, if any."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i
            i += 1
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise ValueError(f"{source}:{start + 1}: python block never closed")
            before = lines[start - 1].strip() if start > 0 else ""
            match = NOT_RUN.match(before)
            trace = NEEDS_TRACE.match(before)
            code = "\n".join(body) + "\n"
            reason, file = match["reason"] if match else None, trace["file"] if trace else None
            blocks.append(Block(source, start + 1, code, reason, file))
        i += 1
    return blocks


def hash_like(text: str) -> list[str]:
    """Return the words of ``text`` that look like commit hashes (see ``COMMIT_HASH``)."""
    return COMMIT_HASH.findall(text)


# -- the regexes themselves ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "word", ["a1b2c3d", "0f9e8d7c", "1234abc", "0123456789abcdef0123456789abcdef01234567"]
)
def test_hash_regex_finds_short_and_full_hashes(word: str) -> None:
    assert hash_like(f"measured on {word}, twice") == [word]


@pytest.mark.parametrize(
    "text",
    [
        "2,301 lines and 1234567 jobs",  # numbers
        "a decade ago, accede, defaced",  # words of hex letters only
        "colour #a1b2c3d4 and #ff00ff",  # hex colours
        "0x1f2e3d4c",  # a hex literal
        "run e6dc069d-144f-42d4-aa37-1d91109535f1",  # a UUID
        "sha256_ab12cd34ef and ab12cd34ef_x",  # hex inside identifiers
        "ABCDEF1234",  # upper case is not how git prints a hash
    ],
)
def test_hash_regex_ignores_numbers_words_colours_and_ids(text: str) -> None:
    assert hash_like(text) == []


def test_blocks_parse_with_their_not_run_reason() -> None:
    text = (
        "x\n```python\nprint(1)  # -> 1\n```\n<!-- not-run: needs Slurm -->\n```python\nimport slurm\n```\n"
        "<!-- needs-trace: HPC2N-2002-2.2-cln.swf.gz -->\n```python\nread()\n```\n"
    )
    assert python_blocks(text, "a.md") == [
        Block("a.md", 2, "print(1)  # -> 1\n", None),
        Block("a.md", 6, "import slurm\n", "needs Slurm"),
        Block("a.md", 10, "read()\n", None, "HPC2N-2002-2.2-cln.swf.gz"),
    ]
    assert EXPECTED.match("print(x)  # -> 140")["expected"] == "140"
    assert EXPECTED.match("print(x)  # seconds") is None  # a plain comment asserts nothing


# -- README.md as a front page -------------------------------------------------------------------------


def test_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines, at most {MAX_README_LINES}: move detail into docs/"
    )


def test_readme_has_no_commit_hash_or_date() -> None:
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        assert not hash_like(line), f"README.md:{number}: looks like a commit hash: {hash_like(line)}"
        assert not DATE.search(line), f"README.md:{number}: a date: {line.strip()!r}"


def test_docs_have_no_commit_hash() -> None:
    pages = [*ROOT.joinpath("docs").rglob("*.md"), ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"]
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            assert not hash_like(line), f"{page.relative_to(ROOT)}:{number}: looks like a commit hash"


def test_readme_keeps_the_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "On a fresh Debian 12 machine, as root" in text
    assert "bash scripts/bootstrap.sh demo" in text
    assert "bash scripts/bootstrap.sh test" in text


def test_the_prefect_example_says_how_to_outwait_a_slow_temporary_server() -> None:
    # Without PREFECT_API_URL, Prefect starts a temporary server and gives it 20 s: on a busy machine
    # it took longer than that and the README's example failed ("Timed out while attempting to connect to
    # ephemeral Prefect API server"). The README and the Prefect guide say how to give it longer.
    guide = ROOT.joinpath("docs", "guide", "prefect.md").read_text(encoding="utf-8")
    for text in (README.read_text(encoding="utf-8"), guide):
        assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" in text
        assert "prefect server start" in text


README_BLOCKS = python_blocks(README.read_text(encoding="utf-8"))
DOCS_BLOCKS = [
    block
    for page in sorted(ROOT.joinpath("docs").rglob("*.md"))
    for block in python_blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
]


def test_readme_blocks_are_run_or_say_why_not() -> None:
    assert any(b.not_run is None for b in README_BLOCKS), "no README block is run"
    for block in README_BLOCKS + DOCS_BLOCKS:
        assert block.not_run != "", f"{block.source}:{block.line}: not-run needs a reason"
    assert any("ElasticExecutor(" in b.code and b.not_run is None for b in README_BLOCKS)
    assert any("ElasticTaskRunner(" in b.code and b.not_run is None for b in README_BLOCKS)


#: README blocks that ``tests/test_packaging.py`` runs from the installed wheel, each in a virtualenv holding
#: only its extra (by extra: a string only that block holds). That is this file's check and more, so they
#: are not run a second time here against the checkout.
INSTALLED_EXAMPLES = {"parsl": "ElasticExecutor(", "prefect": "ElasticTaskRunner("}


def installed_example(block: Block) -> bool:
    """Whether ``tests/test_packaging.py`` runs ``block`` (see ``INSTALLED_EXAMPLES``)."""
    return (
        block.source == "README.md"
        and block.not_run is None
        and any(marker in block.code for marker in INSTALLED_EXAMPLES.values())
    )


def test_each_installed_example_is_one_readme_block() -> None:
    for extra, marker in INSTALLED_EXAMPLES.items():
        run = [b for b in README_BLOCKS if b.not_run is None and marker in b.code]
        assert len(run) == 1, f"the {extra} example: {len(run)} README blocks hold {marker!r}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "block",
    [b for b in README_BLOCKS + DOCS_BLOCKS if b.not_run is None and not installed_example(b)],
    ids=lambda b: f"{b.source}:{b.line}",
)
def test_example_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Run the block as a user would: a script in an empty directory, the repository importable."""
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    if block.trace is not None:
        trace = request.getfixturevalue("traces_dir") / block.trace
        if not trace.exists():
            pytest.skip(f"{trace} not found")
        (tmp_path / block.trace).symlink_to(trace)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "ELASTIC_STORE_URL": f"sqlite:///{tmp_path / 'store.db'}",
    }
    if "prefect" in block.code:
        server = request.getfixturevalue("prefect_server")
        env["PREFECT_API_URL"] = server.api_url
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.source}:{block.line}: still running after {BLOCK_TIMEOUT} s\n{exc.stderr}")
    assert done.returncode == 0, f"{block.source}:{block.line} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    printed = done.stdout.splitlines()
    for line in block.code.splitlines():
        match = EXPECTED.match(line)
        if match:
            assert any(match["expected"] in out for out in printed), (
                f"{block.source}:{block.line}: expected {match['expected']!r} in the output, got {printed}"
            )


def _imported(blocks: list[Block]) -> dict[str, object]:
    """Every name the blocks import from ``elastic`` (``from elastic.x import y``), resolved."""
    import importlib

    names: dict[str, object] = {}
    for block in blocks:
        try:
            tree = ast.parse(block.code)
        except SyntaxError:
            continue  # reported by api_problems
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "elastic":
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), (
                        f"{block.source}:{block.line}: {node.module} has no {alias.name}"
                    )
                    names[alias.asname or alias.name] = getattr(module, alias.name)
    return names


def _keywords(obj: object) -> set[str] | None:
    """The keyword arguments ``obj`` takes when called (None: any, it takes ``**kwargs``)."""
    try:
        params = inspect.signature(obj).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    named = {p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        if "settings" not in named:
            return None
        # the front-ends take the fields of elastic.front.settings.Settings as keywords
        import dataclasses

        from elastic.front.settings import Settings

        named |= {f.name for f in dataclasses.fields(Settings)}
    return named


def api_problems(blocks: list[Block]) -> list[str]:
    """What in the blocks of one page no longer matches the API (see the test below); [] when nothing."""
    problems: list[str] = []
    trees = []
    for block in blocks:
        try:
            trees.append(ast.parse(block.code))
        except SyntaxError as exc:
            problems.append(f"{block.source}:{block.line + (exc.lineno or 0)}: does not parse: {exc.msg}")
            trees.append(ast.Module(body=[], type_ignores=[]))
    page = _imported(blocks)
    for block, tree in zip(blocks, trees, strict=True):
        own = {  # names this block imports itself (from anywhere) shadow the page's
            alias.asname or alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        names = {**{k: v for k, v in page.items() if k not in own}, **_imported([block])}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            takes = _keywords(names[node.func.id]) if node.func.id in names else None
            problems += [
                f"{block.source}:{block.line + node.lineno}: {node.func.id}() takes no {kw.arg}="
                for kw in node.keywords
                if takes is not None and kw.arg is not None and kw.arg not in takes
            ]
        for path in re.findall(r"tests/[\w/]+(?:\.py|/)", block.not_run or ""):
            if not (ROOT / path).exists():
                problems.append(f"{block.source}:{block.line}: the not-run reason names {path}: missing")
    return problems


def test_a_fragment_that_rotted_is_found() -> None:
    page = (
        "```python\nfrom elastic.parsl import ElasticExecutor\n```\n"
        "<!-- not-run: needs Slurm; tests/executors/test_gone.py runs it -->\n"
        '```python\nexecutor = ElasticExecutor(backend="slurm", stratgy="asa")\n```\n'
        "<!-- not-run: a fragment -->\n```python\nif x:\n```\n"
    )
    assert api_problems(python_blocks(page, "p.md")) == [
        "p.md:10: does not parse: expected an indented block after 'if' statement on line 1",
        "p.md:6: ElasticExecutor() takes no stratgy=",
        "p.md:5: the not-run reason names tests/executors/test_gone.py: missing",
    ]
    with pytest.raises(AssertionError, match=r"elastic\.parsl has no Executor"):
        _imported(python_blocks("```python\nfrom elastic.parsl import Executor\n```\n", "q.md"))


@pytest.mark.parametrize("source", sorted({b.source for b in README_BLOCKS + DOCS_BLOCKS}))
def test_every_block_still_matches_the_api(source: str) -> None:
    """Blocks that are not run (a cluster, a trace file, a fragment) still parse and use today's API.

    Each block parses; every ``from elastic... import`` name exists; every call of a name imported so
    (in any block of the same page: a fragment may use one imported above it) passes only keywords the
    callable takes; a test file the not-run reason names exists.
    """
    assert api_problems([b for b in README_BLOCKS + DOCS_BLOCKS if b.source == source]) == []


def elastic_commands(text: str, source: str) -> list[tuple[str, list[str]]]:
    """The ``elastic ...`` command lines of the ``sh`` blocks of ``text`` (``source:line``, arguments).

    A line continued with ``\\`` is joined to the next; a ``#`` comment is dropped; a line with a
    ``[...]`` placeholder (optional arguments shown in brackets) is left out.
    """
    out: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    in_sh = False
    i = 0
    while i < len(lines):
        line, start = lines[i], i + 1
        if line.strip().startswith("```"):
            in_sh = line.strip() == "```sh" and not in_sh
        elif in_sh:
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i]
            words = shlex.split(line, comments=True)
            if words and words[0] in ("elastic", ".venv/bin/elastic") and "[" not in line:
                out.append((f"{source}:{start}", words[1:]))
        i += 1
    return out


def cli_problem(argv: list[str]) -> str | None:
    """What the ``elastic`` parser says of ``argv`` (None: it parses); nothing is run."""
    from elastic.cli import _parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            _parser(argv).parse_args(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1]
    return None


def test_a_shell_example_that_rotted_is_found() -> None:
    page = "```sh\nelastic run montage --strategy asa  # ok\nelastic run montage --stratgy asa\n```\n"
    commands = elastic_commands(page, "p.md")
    assert [where for where, _ in commands] == ["p.md:2", "p.md:3"]
    assert cli_problem(commands[0][1]) is None
    assert "error: the following arguments are required: --strategy" in (cli_problem(commands[1][1]) or "")
    assert "unrecognized arguments: --fast" in (cli_problem(["doctor", "--fast"]) or "")


def test_every_elastic_command_in_the_readme_and_docs_parses() -> None:
    """The ``elastic`` commands of the ``sh`` blocks are not run (most take minutes), but each still
    parses with today's command line, so a renamed option cannot rot unseen in them."""
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    commands = [c for page in pages for c in elastic_commands(page.read_text(encoding="utf-8"), page.name)]
    assert len(commands) > 20, commands
    problems = [(where, argv, cli_problem(argv)) for where, argv in commands]
    assert [f"{where}: elastic {' '.join(argv)}: {p}" for where, argv, p in problems if p] == []


# -- the documentation site ------------------------------------------------------------------------------


@pytest.mark.slow
def test_docs_build_strict(tmp_path: Path) -> None:
    import importlib.util

    for tool in ("mkdocs", "mkdocstrings"):
        if importlib.util.find_spec(tool) is None:
            reason = f"{tool} is not installed (pip install -e '.[dev]')"
            ci = os.environ.get("CI", "").lower() == "true"
            # CI builds the docs (scripts/bootstrap.sh test sets ELASTIC_REQUIRE_DOCS): a missing tool fails
            if ci or os.environ.get("ELASTIC_REQUIRE_DOCS") == "1":
                pytest.fail(f"the documentation build: {reason} (required here, so this fails, not skips)")
            pytest.skip(reason)
    site, config = tmp_path / "site", ROOT / "mkdocs.yml"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr[-6000:]}"
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "elastic traces download" in cli and "--peak-cores" in cli  # generated from the parsers
    api = (site / "reference" / "api" / "parsl" / "index.html").read_text(encoding="utf-8")
    assert "ElasticExecutor" in api and "plan_interval" in api  # generated from the docstrings
    assert ":class:" not in api and ":meth:" not in api  # Sphinx roles rewritten (scripts/docs_griffe.py)
    assert (site / "figures" / "strategies_timeline.png").is_file()
