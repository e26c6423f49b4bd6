"""Montage: a sky mosaic from overlapping FITS tiles, with the Montage modules of the ASA paper's Figure 1.

The stages, each a function of this module named after the program it runs (its stage name everywhere),
wide per-tile and per-overlap stages between narrow ones::

    mImgtbl (1) -> mProject (one per tile) -> mOverlaps (1) -> mDiff (one per overlap)
      -> mFitplane (one per difference) -> mConcatFit (1) -> mBgModel (1)
      -> mBackground (one per tile) -> mAdd (1) -> mViewer (1: mShrink, then the PNG preview)

What each runs (arguments as in the Montage manual pages; files under the run folder):

- ``mImgtbl raw images.tbl``: the raw tiles' metadata;
- ``mProject raw/T proj/T region.hdr``: each tile reprojected onto the mosaic's frame (the header
  ``region.hdr`` written with the input), with its area image;
- ``mImgtbl proj pimages.tbl`` and ``mOverlaps pimages.tbl diffs.tbl``: which projected tiles overlap;
- ``mDiff proj/A proj/B diff/D region.hdr``: the difference of one overlapping pair (a pair
  ``mOverlaps`` reported that does not really overlap is skipped, as ``mDiffExec`` does);
- ``mFitplane -s stat/D.txt diff/D``: a plane fitted to one difference;
- ``mConcatFit statfiles.tbl fits.tbl stat``: the fits gathered into one table;
- ``mBgModel pimages.tbl fits.tbl corrections.tbl``: one background correction per tile;
- ``mBackground -t T ../corr/T ../pimages.tbl ../corrections.tbl`` (in ``proj``): a tile corrected;
- ``mImgtbl corr cimages.tbl`` and ``mAdd -e -p corr cimages.tbl region.hdr mosaic.fits``: the mosaic,
  exactly the header's size;
- ``mShrink mosaic.fits mosaic_small.fits F`` and ``mViewer -ct 1 -gray mosaic_small.fits -2s max
  gaussian-log -out mosaic.png``: the preview.

The driver (:func:`mosaic`) needs the overlaps before it can submit the per-overlap stages, so it waits
for ``mOverlaps`` (as a Montage script waits for ``diffs.tbl``). The input (tiles with stars and
background offsets) and the checks are in :mod:`elastic.workflows.montage_sky`; this module imports nothing
heavy, since every worker imports it.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elastic.front.tasks import task
from elastic.workflows.dataflow import ProgramError, Submitter

__all__ = [
    "STAGES",
    "MontageInput",
    "MontageOutput",
    "Overlap",
    "mAdd",
    "mBackground",
    "mBgModel",
    "mConcatFit",
    "mDiff",
    "mFitplane",
    "mImgtbl",
    "mOverlaps",
    "mProject",
    "mViewer",
    "mosaic",
    "montage_status",
]

STAGES = (
    "mImgtbl",
    "mProject",
    "mOverlaps",
    "mDiff",
    "mFitplane",
    "mConcatFit",
    "mBgModel",
    "mBackground",
    "mAdd",
    "mViewer",
)
"""The stages in order."""


@dataclass(frozen=True, slots=True)
class MontageInput:
    """The generated input: the run folder, the raw tiles' file names (in ``raw/``), the preview's shrink."""

    folder: str
    tiles: tuple[str, ...]
    shrink: int = 2


@dataclass(frozen=True, slots=True)
class Overlap:
    """One row of ``diffs.tbl``: two overlapping projected tiles and their difference image's name."""

    cntr1: int
    cntr2: int
    plus: str
    minus: str
    diff: str


@dataclass(frozen=True, slots=True)
class MontageOutput:
    """What the workflow made: the mosaic, its preview, and how many overlaps were fitted."""

    mosaic: str
    preview: str
    overlaps: int
    fitted: int
    corrections: int


_FIELD = re.compile(r'(\w+)=(?:"([^"]*)"|([^,\]]*))')


def montage_status(output: str) -> dict[str, str]:
    """Parse the ``[struct stat="OK", key=value, ...]`` line a Montage module prints (the last one).

    Examples
    --------
    >>> montage_status('[struct stat="OK", module="mOverlaps", count=20]')
    {'stat': 'OK', 'module': 'mOverlaps', 'count': '20'}
    """
    lines = [ln for ln in output.splitlines() if ln.startswith("[struct")]
    if not lines:
        return {}
    return {k: (q if q else v).strip() for k, q, v in _FIELD.findall(lines[-1])}


def _montage(command: Sequence[str], cwd: str | Path, *, tolerate: Sequence[str] = ()) -> dict[str, str]:
    """Run a Montage module; return its status, or raise :class:`ProgramError` unless it said OK.

    ``tolerate``: error messages that are an expected outcome (returned, not raised).
    """
    done = subprocess.run(
        list(command), cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    status = montage_status(done.stdout)
    if status.get("stat") == "OK":
        return status
    if status.get("stat") == "ERROR" and status.get("msg") in tolerate:
        return status
    raise ProgramError(command, done.returncode, done.stdout + done.stderr)


def _folder(inp: MontageInput, *parts: str) -> Path:
    path = Path(inp.folder, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- stages --------------------------------------------------------------------------------------


@task
def mImgtbl(inp: MontageInput) -> int:
    """Narrow: the raw tiles' metadata table (``images.tbl``); returns how many tiles it lists."""
    status = _montage(["mImgtbl", "raw", "images.tbl"], inp.folder)
    return int(status["count"])


@task
def mProject(inp: MontageInput, tile: str, _listed: int) -> str:
    """Wide, one per tile: reproject ``raw/tile`` onto the mosaic's frame; returns the tile's name."""
    _folder(inp, "proj")
    _montage(["mProject", f"raw/{tile}", f"proj/{tile}", "region.hdr"], inp.folder)
    return tile


@task
def mOverlaps(inp: MontageInput, *projected: str) -> list[Overlap]:
    """Narrow: table the projected tiles and find the overlapping pairs (``diffs.tbl``)."""
    _montage(["mImgtbl", "proj", "pimages.tbl"], inp.folder)
    _montage(["mOverlaps", "pimages.tbl", "diffs.tbl"], inp.folder)
    rows = []
    for line in Path(inp.folder, "diffs.tbl").read_text().splitlines():
        if line.startswith(("|", "\\")) or not line.strip():
            continue
        c1, c2, plus, minus, diff = line.split()
        rows.append(Overlap(int(c1), int(c2), plus, minus, diff))
    return rows


@task
def mDiff(inp: MontageInput, overlap: Overlap) -> Overlap | None:
    """Wide, one per overlap: the difference image of the pair; None when they do not really overlap."""
    _folder(inp, "diff")
    status = _montage(
        ["mDiff", f"proj/{overlap.plus}", f"proj/{overlap.minus}", f"diff/{overlap.diff}", "region.hdr"],
        inp.folder,
        tolerate=("Images don't overlap", "All pixels are blank"),
    )
    return overlap if status["stat"] == "OK" else None


@task
def mFitplane(inp: MontageInput, diffed: Overlap | None) -> tuple[Overlap, str] | None:
    """Wide, one per difference: fit a plane to it (status file ``stat/<diff>.txt``); None if skipped."""
    if diffed is None:
        return None
    _folder(inp, "stat")
    statfile = f"{diffed.diff}.txt"
    command = ["mFitplane", "-s", f"stat/{statfile}", f"diff/{diffed.diff}"]
    done = subprocess.run(command, cwd=inp.folder, capture_output=True, text=True, check=False)
    written = Path(inp.folder, "stat", statfile)
    status = montage_status(written.read_text() if written.exists() else done.stdout)
    if status.get("stat") not in ("OK", "WARNING"):  # a warning (too few pixels): mConcatFit skips it
        raise ProgramError(command, done.returncode, done.stdout + done.stderr + str(status))
    return diffed, statfile


@task
def mConcatFit(inp: MontageInput, *fits: tuple[Overlap, str] | None) -> int:
    """Narrow: gather the plane fits into ``fits.tbl``; returns how many were usable."""
    rows = [f for f in fits if f is not None]
    width = max([len(s) for _, s in rows] + [4])
    lines = [f"| cntr1 | cntr2 | {'stat':<{width}} |"]
    lines += [f"  {o.cntr1:>5}   {o.cntr2:>5}   {s:<{width}}  " for o, s in rows]
    Path(inp.folder, "statfiles.tbl").write_text("\n".join(lines) + "\n")
    status = _montage(["mConcatFit", "statfiles.tbl", "fits.tbl", "stat"], inp.folder)
    return int(status["count"]) - int(status["failed"]) - int(status["missing"]) - int(status["warning"])


@task
def mBgModel(inp: MontageInput, fitted: int) -> int:
    """Narrow: the background correction of each tile (``corrections.tbl``); returns how many."""
    _montage(["mBgModel", "pimages.tbl", "fits.tbl", "corrections.tbl"], inp.folder)
    text = Path(inp.folder, "corrections.tbl").read_text().splitlines()
    return sum(1 for line in text if line.strip() and not line.startswith(("|", "\\")))


@task
def mBackground(inp: MontageInput, tile: str, _corrections: int) -> str:
    """Wide, one per tile: subtract the tile's background correction (into ``corr/``)."""
    _folder(inp, "corr")
    _montage(
        ["mBackground", "-t", tile, f"../corr/{tile}", "../pimages.tbl", "../corrections.tbl"],
        Path(inp.folder, "proj"),
    )
    return tile


@task
def mAdd(inp: MontageInput, *corrected: str) -> str:
    """Narrow: co-add the corrected tiles into ``mosaic.fits`` (the header's exact size)."""
    _montage(["mImgtbl", "corr", "cimages.tbl"], inp.folder)
    _montage(["mAdd", "-e", "-p", "corr", "cimages.tbl", "region.hdr", "mosaic.fits"], inp.folder)
    return str(Path(inp.folder, "mosaic.fits"))


@task
def mViewer(inp: MontageInput, mosaic_file: str) -> str:
    """Narrow: shrink the mosaic (``mShrink``) and render the preview ``mosaic.png``."""
    _montage(["mShrink", mosaic_file, "mosaic_small.fits", str(inp.shrink)], inp.folder)
    command = ["mViewer", "-ct", "1", "-gray", "mosaic_small.fits", "-2s", "max", "gaussian-log"]
    _montage([*command, "-out", "mosaic.png"], inp.folder)
    return str(Path(inp.folder, "mosaic.png"))


# --- the dataflow --------------------------------------------------------------------------------


def mosaic(submit: Submitter, inp: MontageInput) -> MontageOutput:
    """Run the Montage dataflow (written once; see :mod:`elastic.workflows.dataflow` for ``submit``)."""
    listed = submit.submit(mImgtbl, inp)
    projected = [submit.submit(mProject, inp, tile, listed) for tile in inp.tiles]
    overlaps = submit.submit(mOverlaps, inp, *projected).result()
    diffs = [submit.submit(mDiff, inp, o) for o in overlaps]
    fits = [submit.submit(mFitplane, inp, d) for d in diffs]
    fitted = submit.submit(mConcatFit, inp, *fits)
    model = submit.submit(mBgModel, inp, fitted)
    corrected = [submit.submit(mBackground, inp, tile, model) for tile in inp.tiles]
    added = submit.submit(mAdd, inp, *corrected)
    preview = submit.submit(mViewer, inp, added)
    return MontageOutput(
        mosaic=added.result(),
        preview=preview.result(),
        overlaps=len(overlaps),
        fitted=fitted.result(),
        corrections=model.result(),
    )
