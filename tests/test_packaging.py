"""``pip install "elastic-hpc[parsl]"`` from a wheel, in a fresh virtualenv, runs the README's Parsl example.

Offline and honest at once: the wheel is built from this checkout (``pip wheel --no-deps``) and installed
into a new virtualenv with ``--no-index``, so pip must find every requirement of ``elastic-hpc[parsl]``
already installed. They come from a folder holding only the distributions that requirement closure names
(read from the installed packages' metadata, starting from the wheel's own), which the virtualenv sees
through a ``.pth`` file. So a module the core imports but the wheel does not declare (matplotlib, Prefect,
astropy) is missing there, and the example fails. The same virtualenv then shows that a front-end whose
extra is missing names the extra.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.test_docs import README, python_blocks

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
    assert set(EXTRAS) == {"parsl", "prefect", "mesos", "demos", "postgres"}
    with pytest.raises(ValueError, match="unknown extra"):
        missing("gpu")


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


@pytest.mark.slow
def test_wheel_with_the_parsl_extra_runs_the_readme_example(tmp_path: Path) -> None:
    # built from a copy of what a clone holds, so no build/ or egg-info lands in (or comes from) this tree
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for name in ("elastic", "executors", "learners", "workflows"):  # elastic/executors etc. stay links
        shutil.copytree(
            ROOT / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
        )
    dist = tmp_path / "dist"
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
        str(source),
    )
    (wheel,) = dist.glob("elastic_hpc-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/")[0] for name in zf.namelist()}
    assert {"elastic", "executors", "learners", "workflows"} & tops == {"elastic"}, tops
    requires = _wheel_requires(wheel)
    core = [r for r in requires if "extra" not in r]
    assert not any(re.match(r"(parsl|prefect|matplotlib|astropy|pyarrow)\b", r) for r in core), core

    deps = tmp_path / "deps"
    _link_distributions(_closure(_requirements(requires, {"parsl"})), deps)
    assert (deps / "parsl").exists()
    assert not (deps / "prefect").exists() and not (deps / "matplotlib").exists()
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = venv / "bin" / "python"
    site = Path(_run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (site / "deps.pth").write_text(f"{deps}\n", encoding="utf-8")
    # pip from this environment, installing into the new one; --no-index: nothing is downloaded, every
    # requirement of elastic-hpc[parsl] must already be there
    _run(
        sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index", f"{wheel}[parsl]"
    )
    assert (site / "elastic" / "parsl.py").is_file()
    assert (site / "elastic" / "executors" / "parsl_executor.py").is_file()
    assert not any((site / name).exists() for name in ("executors", "learners", "workflows"))

    (block,) = [
        b
        for b in python_blocks(README.read_text(encoding="utf-8"))
        if "ElasticExecutor(" in b.code and b.not_run is None
    ]
    work = tmp_path / "work"
    work.mkdir()
    (work / "example.py").write_text(block.code, encoding="utf-8")
    env = _clean_env()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["ELASTIC_STORE_URL"] = f"sqlite:///{tmp_path / 'store.db'}"
    out = _run(str(python), "example.py", cwd=work, env=env)
    assert "140" in out.splitlines()
    where = _run(str(python), "-c", "import elastic; print(elastic.__file__)", cwd=work, env=env)
    assert where.startswith(str(site)), where  # the installed copy ran, not this checkout

    missing = subprocess.run(
        [str(python), "-c", "from elastic.prefect import ElasticTaskRunner"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode != 0
    assert 'pip install "elastic-hpc[prefect]"' in missing.stderr
    assert "MissingExtraError" in missing.stderr
