"""A fresh clone installed offline with an extra, then the README's example for it: what a user does.

For each extra (``parsl``, ``prefect``): a ``git clone`` of this checkout's committed tree, a wheelhouse
filled from pip's configured indexes (``pip download`` of the build requirements and ``.[EXTRA]``, as
``bash scripts/bootstrap.sh test`` does for ``parsl``; or ``--wheelhouse DIR``, already filled), a new
virtualenv of this interpreter, ``pip install ".[EXTRA]" --no-index --find-links WHEELHOUSE`` (pip's
configuration set aside, bytecode compiled as pip does by default), then the README's example for the
extra run from an empty folder, its ``print(...)  # -> TEXT`` lines checked. Prints each step's seconds.

The CI test (``tests/test_packaging.py``) does this for ``parsl`` only, without bytecode compilation: a
fresh install of ``.[prefect]`` (about 110 distributions) takes minutes, too much for the suite. The Prefect
example starts Prefect's temporary server unless ``PREFECT_API_URL`` is set (``--prefect-server`` starts
one of the test fixtures' for the run).

    .venv/bin/python benchmarks/fresh_install.py --extras parsl,prefect --prefect-server
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_docs import EXPECTED, INSTALLED_EXAMPLES, README, python_blocks  # noqa: E402


def run(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[float, str]:
    """Run ``cmd``; return its seconds and standard output, or exit with what it printed."""
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - start, done.stdout


def readme_example(extra: str) -> tuple[str, list[str]]:
    """The README's example for ``extra`` and the texts its ``# ->`` lines expect."""
    marker = INSTALLED_EXAMPLES[extra]
    (block,) = [
        b for b in python_blocks(README.read_text(encoding="utf-8")) if marker in b.code and b.not_run is None
    ]
    return block.code, [m["expected"] for line in block.code.splitlines() if (m := EXPECTED.match(line))]


def clean_env() -> dict[str, str]:
    """This environment without the checkout on the path or pip's own settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {k: v for k, v in env.items() if not k.startswith("PIP_")}


def one(extra: str, tmp: Path, clone: Path, wheelhouse: Path | None) -> None:
    """Fill the wheelhouse (unless given), install ``.[extra]`` from it alone, run the example."""
    where = tmp / extra
    where.mkdir()
    house = wheelhouse or where / "wheelhouse"
    if wheelhouse is None:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "-d", str(house), "setuptools>=77", "wheel"]
        seconds, _ = run([*cmd, f".[{extra}]"], cwd=clone)
        print(f"{extra}: wheelhouse filled in {seconds:.1f} s ({len(list(house.glob('*.whl')))} wheels)")
    venv = where / "venv"
    seconds, _ = run([sys.executable, "-m", "venv", str(venv)])
    print(f"{extra}: virtualenv in {seconds:.1f} s")
    env = {**clean_env(), "PIP_CONFIG_FILE": os.devnull}
    pip = [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(house)]
    seconds, _ = run([*pip, f".[{extra}]"], cwd=clone, env=env)
    print(f"{extra}: pip install offline in {seconds:.1f} s")
    code, expected = readme_example(extra)
    work = where / "work"
    work.mkdir()
    (work / "example.py").write_text(code, encoding="utf-8")
    env = {**clean_env(), "ELASTIC_STORE_URL": f"sqlite:///{where / 'store.db'}"}
    seconds, out = run([str(venv / "bin" / "python"), "example.py"], cwd=work, env=env)
    missing = [e for e in expected if not any(e in line for line in out.splitlines())]
    if missing:
        sys.exit(f"{extra}: the README example did not print {missing}:\n{out}")
    print(f"{extra}: README example in {seconds:.1f} s, printed {expected}")


def main() -> None:
    """Parse the options and install each extra in turn."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--extras", default="parsl,prefect", help="comma-separated: parsl, prefect")
    parser.add_argument("--wheelhouse", type=Path, help="a filled wheelhouse (default: fill one per extra)")
    parser.add_argument("--prefect-server", action="store_true", help="start a Prefect server for the run")
    args = parser.parse_args()
    extras = [e for e in args.extras.split(",") if e]
    unknown = sorted(set(extras) - set(INSTALLED_EXAMPLES))
    if unknown:
        parser.error(f"unknown extras {unknown}; choose from {sorted(INSTALLED_EXAMPLES)}")
    if args.wheelhouse is not None and not any(args.wheelhouse.glob("*.whl")):
        parser.error(f"--wheelhouse {args.wheelhouse} holds no wheel")
    server = None
    if args.prefect_server and "prefect" in extras:
        from benchmarks._support import start_prefect_server

        found, server = start_prefect_server()
        os.environ["PREFECT_API_URL"] = found.api_url
    try:
        with tempfile.TemporaryDirectory(prefix="elastic-fresh-install-") as name:
            tmp = Path(name)
            run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(tmp / "source")])
            for extra in extras:
                one(extra, tmp, tmp / "source", args.wheelhouse)
    finally:
        if server is not None:
            from benchmarks._support import stop_prefect_server

            stop_prefect_server(server)


if __name__ == "__main__":
    main()
