"""``pip install ".[parsl]"`` (or ``[prefect]``) from a fresh clone, in a new virtualenv, runs the README.

The Parsl test does what a user does, as the issue asks: ``git clone`` of this checkout (the committed
tree), a plain ``python3 -m venv`` of the system interpreter, and ``pip install ".[parsl]"`` from the clone
with the virtualenv's own pip and pip's own configuration (the indexes the bootstrap hands to its
installer), as an unprivileged user (``nobody``, HOME in a temporary folder) when the tests run as root;
then the README's Parsl example runs verbatim, and the Prefect front-end names its missing extra.
It is offline: ``bash scripts/bootstrap.sh test`` downloads what ``.[parsl]`` needs (build requirements
included) from the indexes it installs from into a wheelhouse (``.venv/wheelhouse``; ``ELASTIC_WHEELHOUSE``
names another), and pip installs from that folder alone (``--no-index --find-links``, pip's own
configuration set aside). Without a wheelhouse (a developer's machine) it installs from pip's configured
indexes instead. pip is told not to compile the installed modules to bytecode: the install then takes
about half a minute here instead of up to three on a loaded machine, and nothing else differs for the
example. One of ``.[prefect]`` (about 110 distributions) takes minutes, too much for the CI budget
(``benchmarks/fresh_install.py`` does it on demand from a wheelhouse of its own). So the Prefect test
shares the clone and shares what is installed instead: a wheel built from a second clone is installed with
``--no-index`` into a new virtualenv that sees, through a ``.pth`` folder, only the distributions the
wheel's ``[prefect]`` requirement closure names (read from the installed packages' metadata). A module the
core imports but the wheel does not declare is missing there, and the example fails; the same virtualenv
shows that the Parsl front-end names its missing extra. The Prefect example talks to the test session's
Prefect server, as in ``tests/test_docs.py``.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.fixtures.prefect_server import PrefectServer
from tests.test_docs import EXPECTED, INSTALLED_EXAMPLES, README, python_blocks

ROOT = Path(__file__).resolve().parents[1]


def _requirements(dist_requires: list[str], extras: set[str]) -> list[Requirement]:
    """The requirements in ``dist_requires`` that apply here with ``extras`` requested."""
    out = []
    for line in dist_requires:
        req = Requirement(line)
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            out.append(req)
    return out


def _closure(roots: list[Requirement]) -> dict[str, md.Distribution]:
    """Every installed distribution the requirements ``roots`` need, transitively (name -> distribution)."""
    found: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name == "elastic-hpc" or name in found:  # `all` = elastic-hpc[...]: the wheel itself
            continue
        dist = md.distribution(req.name)  # PackageNotFoundError: this environment lacks a requirement
        found[name] = dist
        todo.extend(_requirements(dist.requires or [], set(req.extras)))
    return found


def _link_distributions(dists: dict[str, md.Distribution], into: Path) -> None:
    """Link each distribution's top-level files and folders (from its RECORD) into ``into``."""
    into.mkdir()
    for dist in dists.values():
        base = Path(str(dist.locate_file("")))
        for entry in {Path(str(f)).parts[0] for f in dist.files or []}:
            if entry in ("..", "__pycache__") or entry.endswith(".pth"):
                continue
            target = into / entry
            if not target.exists() and (base / entry).exists():
                target.symlink_to(base / entry)


def _wheel_requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def _clean_env() -> dict[str, str]:
    """This process's environment without what would show the checkout to the new virtualenv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(*cmd: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    env = _clean_env() if env is None else env
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_requirement_markers_follow_the_extras() -> None:
    lines = ['parsl>=2024.1; extra == "parsl"', "numpy>=1.26", 'pyarrow; extra == "demos"']
    assert [r.name for r in _requirements(lines, {"parsl"})] == ["parsl", "numpy"]
    assert [r.name for r in _requirements(lines, set())] == ["numpy"]


def test_a_missing_extra_is_named_with_its_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from elastic.errors import MissingExtraError
    from elastic.extras import EXTRAS, missing, require

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name)
    )
    assert missing("demos", ("pyarrow",)) == ["pyarrow"]
    with pytest.raises(MissingExtraError, match=r'pip install "elastic-hpc\[demos\]"') as info:
        require("demos", "the statistics demo", ("pyarrow",))
    assert isinstance(info.value, ImportError) and info.value.extra == "demos"
    require("demos", "figures", ("matplotlib",))  # installed here: no error
    assert set(EXTRAS) == {"parsl", "prefect", "mesos", "demos", "postgres", "cp"}
    with pytest.raises(ValueError, match="unknown extra"):
        missing("gpu")


def test_the_missing_extra_message_reads_right_for_one_module_or_several() -> None:
    from elastic.errors import MissingExtraError

    assert str(MissingExtraError("demos", "the demo", ["pyarrow"])) == (
        'the demo needs pyarrow, which is not installed: pip install "elastic-hpc[demos]"'
    )
    assert str(MissingExtraError("mesos", "it", ["uvicorn", "starlette", "pymesos"])) == (
        'it needs uvicorn, starlette and pymesos, which are not installed: pip install "elastic-hpc[mesos]"'
    )


def test_extras_in_pyproject_match_the_extras_module() -> None:
    import tomllib

    from elastic.extras import EXTRAS

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRAS) | {"all", "dev"} == set(extras)
    assert extras["all"] == [f"elastic-hpc[{','.join(EXTRAS)}]"]
    core = " ".join(project["dependencies"])
    for modules in EXTRAS.values():
        for module in modules:
            assert module not in core, f"{module} is an extra's, not a core dependency"


def test_no_user_extra_needs_a_compiler_on_python_311() -> None:
    """``pip install ".[all]"`` failed on Python 3.11: the ``mesos`` extra pulled pymesos, whose http-parser
    has C code that does not build there. Elastic never imports pymesos; frameworks bring their own."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for name, deps in extras["optional-dependencies"].items():
        if name != "dev":
            assert not [d for d in deps if re.match(r"(pymesos|http-parser)\b", d)], name
    assert any(d.startswith("pymesos") for d in extras["optional-dependencies"]["dev"])


def test_the_bootstrap_script_installs_the_same_extras_a_user_does() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    script = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    # the script's `install` helper (uv, else pip) is what installs packages
    installs = re.findall(r'^\s*install -e "\.\[([\w,]+)\]"', script, flags=re.M)
    assert installs == ["all,dev"], installs  # one editable install of the project, through its extras
    assert set(installs[0].split(",")) <= set(extras["optional-dependencies"])


def test_the_installed_dependencies_are_compiled_to_bytecode() -> None:
    """Every test process imports Prefect and Parsl; where PYTHONDONTWRITEBYTECODE is set (the CI
    machine sets it) nothing compiled at import time is kept, so the install has to have compiled them.
    pip does; uv does only when told to (the suite took 29 minutes instead of 17 without it)."""
    import importlib.util

    script = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    assert re.search(r"^\s*export UV_COMPILE_BYTECODE=1$", script, flags=re.M)
    missing = []
    for name in ("prefect", "parsl", "pydantic", "sqlalchemy"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        if not Path(importlib.util.cache_from_source(spec.origin)).exists():
            missing.append(name)
    assert not missing, f"installed without bytecode: {missing}; reinstall them with bytecode compiled"


def _clone(into: Path) -> Path:
    """A ``git clone`` of this checkout's committed tree in ``into``/source (nothing uncommitted or built)."""
    _run("git", "clone", "-q", "--no-hardlinks", str(ROOT), str(into / "source"))
    return into / "source"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of a clone of this checkout, built once for the module's tests (no dependencies)."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(dist),
        str(_clone(tmp)),
    )
    (built,) = dist.glob("elastic_hpc-*.whl")
    return built


@dataclass(frozen=True)
class Venv:
    """A fresh virtualenv with the wheel and one extra installed offline, and how to run in it."""

    python: Path
    site: Path
    env: dict[str, str]


def _venv_with(wheel: Path, extra: str, tmp_path: Path) -> Venv:
    """A new virtualenv holding ``elastic-hpc[extra]`` from ``wheel``, and nothing the extra does not need.

    The requirement closure of ``elastic-hpc[extra]`` is linked in from this environment (a ``.pth``
    folder), and pip installs the wheel with ``--no-index``: every requirement must already be there.
    """
    deps = tmp_path / "deps"
    _link_distributions(_closure(_requirements(_wheel_requires(wheel), {extra})), deps)
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = venv / "bin" / "python"
    site = Path(_run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (site / "deps.pth").write_text(f"{deps}\n", encoding="utf-8")
    # pip from this environment, installing into the new one; --no-index: nothing is downloaded
    _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "-q",
        "--no-index",
        f"{wheel}[{extra}]",
    )
    env = _clean_env()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["ELASTIC_STORE_URL"] = f"sqlite:///{tmp_path / 'store.db'}"
    return Venv(python, site, env)


def _readme_block(extra: str) -> tuple[str, list[str]]:
    """The README example of ``extra`` and what its ``print(...)  # -> TEXT`` lines expect."""
    marker = INSTALLED_EXAMPLES[extra]
    (block,) = [
        b for b in python_blocks(README.read_text(encoding="utf-8")) if marker in b.code and b.not_run is None
    ]
    expected = [m["expected"] for line in block.code.splitlines() if (m := EXPECTED.match(line))]
    assert expected, f"the README's {extra} example checks nothing it prints"
    return block.code, expected


def _missing_extra(venv: Venv, cwd: Path, statement: str, extra: str) -> None:
    """``statement`` fails in ``venv`` with a MissingExtraError naming ``extra``'s install command."""
    missing = subprocess.run(
        [str(venv.python), "-c", statement], cwd=cwd, env=venv.env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode != 0
    assert f'pip install "elastic-hpc[{extra}]"' in missing.stderr
    assert "MissingExtraError" in missing.stderr


@pytest.fixture
def user_tmp() -> Iterator[tuple[Path, list[str]]]:
    """A temporary folder an unprivileged user owns, and the command prefix that runs as that user.

    Under root the user is ``nobody`` (``runuser``, HOME in the folder); otherwise the tests already run
    unprivileged.
    """
    tmp = Path(tempfile.mkdtemp(prefix="elastic-first-hour-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot install as an unprivileged user")
        # runuser sets HOME to nobody's (none); the test's own HOME is handed over
        prefix = ["runuser", "-u", "nobody", "--", "env", f"HOME={tmp / 'home'}"]
    try:
        yield tmp, prefix
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def wheelhouse() -> Path | None:
    """The bootstrap's wheelhouse of the ``parsl`` extra (``ELASTIC_WHEELHOUSE``, else beside this
    environment), or None where there is none."""
    where = Path(os.environ.get("ELASTIC_WHEELHOUSE") or Path(sys.prefix) / "wheelhouse")
    return where if any(where.glob("parsl-*.whl")) else None


def pip_install_args(extra: str, source: str, house: Path | None) -> tuple[list[str], dict[str, str]]:
    """``pip install`` arguments for ``source[extra]``, and environment changes: offline from ``house``
    (pip's configuration files and variables set aside) when there is one, else from pip's own indexes."""
    args = ["install", "-q", "--no-compile", f"{source}[{extra}]"]
    if house is None:
        return args, {}
    return [*args, "--no-index", "--find-links", str(house)], {"PIP_CONFIG_FILE": os.devnull}


def test_an_offline_install_reads_the_wheelhouse_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELASTIC_WHEELHOUSE", str(tmp_path))
    assert wheelhouse() is None  # empty: the test falls back to the indexes
    (tmp_path / "parsl-2026.1.5-py3-none-any.whl").touch()
    assert wheelhouse() == tmp_path
    args, env = pip_install_args("parsl", ".", tmp_path)
    assert args[args.index("--find-links") + 1] == str(tmp_path) and "--no-index" in args
    assert env == {"PIP_CONFIG_FILE": os.devnull}
    assert "--no-index" not in pip_install_args("parsl", ".", None)[0]
    script = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    # the bootstrap fills the folder the test reads, with the same extra
    assert re.search(r'^\s*wheelhouse="\$venv/wheelhouse"$', script, flags=re.M)
    assert re.search(r'download -d "\$wheelhouse" .*"\.\[parsl\]"', script)


@pytest.mark.slow
def test_a_fresh_clone_installs_with_the_parsl_extra_and_runs_the_readme_example(
    user_tmp: tuple[Path, list[str]],
) -> None:
    tmp, as_user = user_tmp
    clone = _clone(tmp)
    system_python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable
    work = tmp / "work"
    work.mkdir()
    code, expected = _readme_block("parsl")
    (work / "example.py").write_text(code, encoding="utf-8")
    if as_user:
        _run("chown", "-R", "nobody:", str(tmp))
    env = _clean_env()
    env.update(HOME=str(tmp / "home"), ELASTIC_STORE_URL=f"sqlite:///{tmp / 'store.db'}")
    env.pop("PIP_USER", None)
    house = wheelhouse()
    install, pip_env = pip_install_args("parsl", ".", house)
    if house is not None:
        for name in [k for k in env if k.startswith("PIP_")]:
            del env[name]

    venv = tmp / "venv"
    _run(*as_user, system_python, "-m", "venv", str(venv), env=env)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    _run(*as_user, str(venv / "bin" / "pip"), *install, cwd=clone, env={**env, **pip_env})

    python = str(venv / "bin" / "python")
    out = _run(*as_user, python, "example.py", cwd=work, env=env)
    assert expected == ["140"] and all(any(e in line for line in out.splitlines()) for e in expected), out
    where = _run(*as_user, python, "-c", "import elastic; print(elastic.__file__)", cwd=work, env=env)
    assert where.startswith(str(venv)), where  # the installed copy ran, not the clone or this checkout
    site = Path(where).parents[1]
    assert (site / "elastic" / "executors" / "parsl_executor.py").is_file()
    assert not any((site / name).exists() for name in ("executors", "learners", "workflows", "prefect"))
    assert (site / "parsl").is_dir() and not (site / "matplotlib").exists()
    statement = "from elastic.prefect import ElasticTaskRunner"
    missing = subprocess.run(
        [*as_user, python, "-c", statement], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode != 0 and "MissingExtraError" in missing.stderr, missing.stderr
    assert 'pip install "elastic-hpc[prefect]"' in missing.stderr


@pytest.mark.slow
def test_wheel_with_the_prefect_extra_runs_the_readme_example(
    wheel: Path, tmp_path: Path, prefect_server: PrefectServer
) -> None:
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/")[0] for name in zf.namelist()}
    assert {"elastic", "executors", "learners", "workflows"} & tops == {"elastic"}, tops
    core = [r for r in _wheel_requires(wheel) if "extra" not in r]
    assert not any(re.match(r"(parsl|prefect|matplotlib|astropy|pyarrow)\b", r) for r in core), core

    venv = _venv_with(wheel, "prefect", tmp_path)
    deps = tmp_path / "deps"
    assert (deps / "prefect").exists()
    assert not (deps / "parsl").exists() and not (deps / "matplotlib").exists()
    assert (venv.site / "elastic" / "prefect.py").is_file()

    work = tmp_path / "work"
    work.mkdir()
    code, expected = _readme_block("prefect")
    (work / "example.py").write_text(code, encoding="utf-8")
    env = {**venv.env, "PREFECT_API_URL": prefect_server.api_url}  # as test_docs runs Prefect blocks
    out = _run(str(venv.python), "example.py", cwd=work, env=env)
    assert expected == ["ACGTTA"] and all(any(e in line for line in out.splitlines()) for e in expected), out
    where = _run(str(venv.python), "-c", "import elastic; print(elastic.__file__)", cwd=work, env=env)
    assert where.startswith(str(venv.site)), where
    _missing_extra(venv, work, "from elastic.parsl import ElasticExecutor", "parsl")
