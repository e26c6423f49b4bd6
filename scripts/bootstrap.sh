#!/usr/bin/env bash
# Set up everything Elastic needs on a Debian 12 machine (as root, Python >= 3.10) and run a job.
#
#   bash scripts/bootstrap.sh demo   # set up, then run the main job (the demo on the mock backend)
#   bash scripts/bootstrap.sh test   # set up, then run ruff, mypy and the whole test suite
#
# Idempotent: Debian packages are installed only when missing, the virtualenv is reused, and
# Python packages are reinstalled only when pyproject.toml changed. Extra arguments after the mode
# are passed to pytest (test) or to `elastic` (demo).
set -euo pipefail

mode="${1:-}"
shift || true
case "$mode" in
  demo|test) ;;
  *) echo "usage: bash scripts/bootstrap.sh demo|test [args...]" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="${ELASTIC_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
log() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*" >&2; }

# --- Debian packages -------------------------------------------------------------------------
apt_pkgs=(ca-certificates)
# The demo workflows' scientific programs (workflows/): Montage (mProject, mAdd, ...; mConcatFit is in
# montage-gridtools) and NCBI BLAST+ (makeblastdb, blastn).
apt_pkgs+=(montage montage-gridtools ncbi-blast+)
"$python" -c 'import ensurepip, venv' 2>/dev/null || apt_pkgs+=(python3-venv)
command -v gcc >/dev/null 2>&1 || apt_pkgs+=(gcc)
"$python" - <<'PY' 2>/dev/null || apt_pkgs+=(python3-dev)
import os, sysconfig, sys
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
PY
if [ "$mode" = test ]; then
  # Real parts the tests start on localhost: Slurm (slurmctld, slurmd, munged) and PostgreSQL; and the
  # real browser the HTML report is checked in (headless chromium).
  apt_pkgs+=(slurmctld slurmd slurm-client munge postgresql chromium)
fi
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: missing Debian packages: ${missing[*]}; run as root or install them first" >&2
    exit 1
  fi
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The packages ship init scripts; we start our own daemons on private paths, never the system ones.
fi

# --- virtualenv and Python packages ----------------------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
  log "creating virtualenv $venv"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
# Installs go through uv when it can be had: the same packages as pip (pip's own configuration, its
# indexes, links and constraints, is handed over, and uv is told to pick the best match across indexes as
# pip does), in seconds instead of the two minutes pip takes for the extras on a 2-core machine. pip stays
# the route whenever uv cannot be installed or fails.
uv=""
if "${pip[@]}" install uv >/dev/null 2>&1 && [ -x "$venv/bin/uv" ]; then
  uv="$venv/bin/uv"
  # pip's settings (files and PIP_* variables), as uv's variables; space-separated lists stay lists
  eval "$("$venv/bin/python" - <<'PY'
import shlex, subprocess, sys
out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
cfg = {}
for line in out.splitlines():
    key, _, value = line.partition("=")
    name = key.rsplit(".", 1)[-1]
    cfg.setdefault(name, []).extend(shlex.split(value.strip().strip("'\"")))
for pip_name, uv_name in [("index-url", "UV_DEFAULT_INDEX"), ("extra-index-url", "UV_INDEX"),
                          ("find-links", "UV_FIND_LINKS"), ("constraint", "UV_CONSTRAINT")]:
    if cfg.get(pip_name):
        print(f"export {uv_name}={shlex.quote(' '.join(dict.fromkeys(cfg[pip_name])))}")
print("export UV_INDEX_STRATEGY=unsafe-best-match")
PY
)"
  # pip compiles every installed module to bytecode; uv does not by default. Where the environment sets
  # PYTHONDONTWRITEBYTECODE (this CI machine does), nothing is ever cached afterwards either, and every
  # test process compiles Prefect, Parsl and their dependencies from source again: the whole suite took
  # 29 minutes instead of 17. Compile at install time, as pip does.
  export UV_COMPILE_BYTECODE=1
fi
install() {
  if [ -n "$uv" ] && "$uv" pip install -q --python "$venv/bin/python" "$@"; then
    return 0
  fi
  [ -n "$uv" ] && log "uv could not install $*; pip will"
  "${pip[@]}" install "$@"
}
# pymesos (in `dev`: the tests run pymesos frameworks) needs http-parser, whose bundled C code does not
# build on Python >= 3.11: regenerate it with Cython < 3 from the sdist first, so that installing the extras finds it installed
# (see docs/guide/mesos.md, "Installing pymesos").
if ! "$venv/bin/python" -c 'import http_parser.parser' 2>/dev/null; then
  log "building http-parser with Cython < 3 (for pymesos)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  install --upgrade pip wheel setuptools "cython<3"
  "${pip[@]}" download --no-deps --no-binary :all: -d "$tmp" "http-parser==0.9.0"
  tar -xzf "$tmp"/http-parser-0.9.0.tar.gz -C "$tmp"
  src="$tmp/http-parser-0.9.0"
  rm -f "$src"/http_parser/*.so
  (cd "$src/http_parser" && "$venv/bin/cython" parser.pyx -o parser.c)
  "${pip[@]}" install --no-build-isolation "$src"
fi
# The same extras a user installs (pyproject.toml): `all` is Parsl, Prefect, Mesos, the demos and
# PostgreSQL and OR-Tools; `dev` the test and documentation tools.
stamp="$venv/.elastic-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "installing Python packages (this takes a few minutes the first time)"
  install --upgrade pip wheel setuptools
  install -e ".[all,dev]"
  echo "$want" > "$stamp"
fi

# Toil (its Mesos batch system and CWL runner), for tests/front/mesos/test_toil.py only: not a dependency
# of Elastic. 9.6.0 keeps the Mesos batch system; its `mesos` extra adds nothing on Python >= 3.11 (the
# pymesos above is what it uses). It only adds packages (about 25 s).
if [ "$mode" = test ] && ! "$venv/bin/python" -c 'import toil.batchSystems.mesos.batchSystem' 2>/dev/null; then
  log "installing Toil for the Toil-on-Mesos test"
  install "toil[cwl,mesos]==9.6.0"
fi

# A local wheelhouse of everything `pip install ".[parsl]"` needs from a fresh clone (the build
# requirements, the core dependencies and Parsl's closure), downloaded from the same indexes as the
# installs above: tests/test_packaging.py installs a clone into a new virtualenv from it alone
# (`--no-index --find-links`), as a user without network would. About 20 s, again only when pyproject.toml
# changed; if it cannot be filled, that test installs from the indexes instead.
if [ "$mode" = test ]; then
  wheelhouse="$venv/wheelhouse"
  if [ ! -f "$wheelhouse/.elastic-filled" ] || [ "$(cat "$wheelhouse/.elastic-filled")" != "$want" ]; then
    log "filling the wheelhouse $wheelhouse (the parsl extra, for the offline install test)"
    rm -rf "$wheelhouse"
    if "${pip[@]}" download -d "$wheelhouse" "setuptools>=77" wheel ".[parsl]"; then
      echo "$want" > "$wheelhouse/.elastic-filled"
    else
      log "could not fill the wheelhouse; the offline install test will use the indexes"
      rm -rf "$wheelhouse"
    fi
  fi
fi

export PATH="$venv/bin:$PATH"

# --- the job ---------------------------------------------------------------------------------
if [ "$mode" = demo ]; then
  if [ "$#" -gt 0 ]; then
    exec elastic "$@"
  fi
  # The main job: the three demo workflows for real (Montage, BLAST+, pandas; small inputs, checked
  # outputs) under ASA on the mock queue, then Big-Job and Per-Stage (one job per allocation, and split
  # into half-width jobs) and ASA on the Montage-shaped workflow, 30 runs each, in pure simulation (a
  # busy synthetic 64-core queue; no trace or cluster needed), written as an HTML report.
  for demo in montage blast statistics; do
    log "running the demo: elastic run $demo --strategy asa"
    elastic run "$demo" --strategy asa
  done
  report="$root/out/report"
  mkdir -p "$report"
  log "running the comparison: elastic compare --workflow montage --runs 30 --processors 64 --seed 1 --out $report"
  elastic compare --workflow montage --runs 30 --processors 64 --seed 1 --out "$report"
  log "the report: $report/report.html"
  exit 0
fi

log "ruff"
ruff check .
ruff format --check .
# mypy (a minute on a fresh clone, one core) runs beside the tests; its verdict is read after them.
log "mypy (beside pytest; its result follows the tests)"
mypy_out="$(mktemp)"
mypy >"$mypy_out" 2>&1 &
mypy_pid=$!
log "pytest"
# The browser tests skip where chromium is missing (a developer's machine); here it was installed above,
# so a missing browser is a failure, not a skip.
export ELASTIC_REQUIRE_BROWSER=1
# Likewise the documentation build (mkdocs build --strict, in tests/test_docs.py): the dev extra installed
# MkDocs above, so a missing one fails the docs test instead of skipping it.
export ELASTIC_REQUIRE_DOCS=1
set +e
# Three test processes (pytest-xdist) on two cores: many tests wait on daemons, agents, batch jobs, a
# package index and sleeps rather than on the CPU (a Slurm job waits out its one-minute time limit, the
# fresh-clone install waits on the index). Each process starts its own Slurm cluster, PostgreSQL and
# Prefect server on free ports. A later -n in "$@" overrides this one (-n 0: one process).
python -m pytest -n 3 --durations=20 "$@"
rc=$?
wait "$mypy_pid"
mypy_rc=$?
set -e
log "mypy"
cat "$mypy_out"
rm -f "$mypy_out"
if [ "$rc" -eq 5 ]; then
  echo "bootstrap: pytest collected no tests; that is a failure, not a pass" >&2
  exit 1
fi
if [ "$mypy_rc" -ne 0 ]; then
  echo "bootstrap: mypy failed (above)" >&2
  [ "$rc" -ne 0 ] || rc="$mypy_rc"
fi
exit "$rc"
