"""The Montage demo's input (a synthetic sky cut into overlapping tiles) and the checks of its mosaic.

:func:`generate` writes, for ``size`` = n, an n x n grid of 128 x 128-pixel FITS tiles (1 arcsec pixels,
each with its own gnomonic (TAN) projection centred on the tile, rotated by up to 3 degrees and shifted
by up to 4 pixels, overlapping their neighbours by about 32 pixels), ``region.hdr`` (the mosaic's frame:
a TAN projection at the sky's centre, 12 pixels of margin) and ``truth.json`` (what was planted).

Every tile sees the same sky: stars with Gaussian profiles (sigma 1.5 pixels, total fluxes 2000-8000, at
least 24 pixels apart) on a flat sky level of 100, plus the tile's own background offset (uniform in
[-25, 25]: what Montage's background matching must remove) and Gaussian noise (sigma 1). Pixel values
are surface brightness, so a star's flux is the sum of its pixels on any frame of the same pixel scale.

:func:`verify` checks the mosaic against that truth (:class:`~elastic.workflows.dataflow.Check` each):

- **dimensions**: the mosaic has the header's size and reference pixel (``mAdd -e``);
- **no holes**: no NaN pixel inside the footprint (mosaic pixels whose centre lies at least one pixel
  inside some raw tile);
- **star flux**: every planted star fully inside the footprint, measured in a 6-pixel aperture minus the
  median of a 10-14 pixel annulus, has its planted flux within 3 % (noise, and the background
  matching's residual steps of a few tenths over the aperture's 113 pixels, make up to about 1.7 % at
  2000);
- **background offsets removed**: the mosaic's median level at the centres of the tiles (where one tile
  dominates) spreads over less than 1.0 (the noise sigma), where the planted offsets spread over tens;
- **preview**: ``mosaic.png`` is a PNG of the shrunk mosaic's size.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from elastic.workflows.dataflow import Check, Verification
from elastic.workflows.montage import MontageInput, MontageOutput

__all__ = ["FLUX_TOLERANCE", "LEVEL_TOLERANCE", "TILE", "generate", "verify"]

TILE = 128
"""Tile side, pixels."""
_STEP = 96
_MARGIN = 12
_SCALE = 1.0 / 3600.0
_CENTRE = (150.0, 2.0)
_SKY = 100.0
_NOISE = 1.0
_SIGMA = 1.5
_OFFSET = 25.0
_MIN_SEPARATION = 24.0
_APERTURE, _ANNULUS = 6.0, (10.0, 14.0)

FLUX_TOLERANCE = 0.03
"""Largest relative error of a star's measured flux."""
LEVEL_TOLERANCE = 1.0
"""Largest spread of the corrected background levels across tiles (the noise sigma)."""


def _header(size: tuple[int, int], crval: tuple[float, float], crpix: tuple[float, float], rot: float) -> Any:
    from astropy.io import fits

    h = fits.Header()
    for key, value in (
        ("SIMPLE", True),
        ("BITPIX", -64),
        ("NAXIS", 2),
        ("NAXIS1", size[0]),
        ("NAXIS2", size[1]),
        ("CTYPE1", "RA---TAN"),
        ("CTYPE2", "DEC--TAN"),
        ("EQUINOX", 2000.0),
        ("CRVAL1", crval[0]),
        ("CRVAL2", crval[1]),
        ("CRPIX1", crpix[0]),
        ("CRPIX2", crpix[1]),
        ("CDELT1", -_SCALE),
        ("CDELT2", _SCALE),
        ("CROTA2", rot),
    ):
        h[key] = value
    return h


def _stars(rng: np.random.Generator, side: int) -> npt.NDArray[np.float64]:
    """Star positions (x, y, 1-based mosaic pixels) at least ``_MIN_SEPARATION`` apart, and fluxes."""
    wanted = max(4, int(side * side / 3600))
    placed: list[tuple[float, float]] = []
    for _ in range(wanted * 50):
        if len(placed) == wanted:
            break
        x, y = rng.uniform(16, side - 16, size=2)
        if all(math.hypot(x - a, y - b) >= _MIN_SEPARATION for a, b in placed):
            placed.append((float(x), float(y)))
    flux = rng.uniform(2000.0, 8000.0, size=len(placed))
    return np.column_stack([np.array(placed), flux])


def generate(folder: Path, size: int, seed: int) -> MontageInput:
    """Write the tiles, the mosaic header and the truth under ``folder``; ``size`` tiles per side."""
    from astropy.io import fits
    from astropy.wcs import WCS

    rng = np.random.default_rng(seed)
    side = (size - 1) * _STEP + TILE + 2 * _MARGIN
    region = _header((side, side), _CENTRE, (side / 2 + 0.5, side / 2 + 0.5), 0.0)
    cards = [str(card).rstrip() for card in region.cards]
    (folder / "region.hdr").write_text("\n".join([*cards, "END"]) + "\n")
    frame = WCS(region)
    stars = _stars(rng, side)
    ra, dec = frame.pixel_to_world_values(stars[:, 0] - 1, stars[:, 1] - 1)
    raw = folder / "raw"
    raw.mkdir()
    yy, xx = np.mgrid[0:TILE, 0:TILE].astype(np.float64)
    tiles, offsets, centres = [], {}, {}
    for i in range(size):
        for j in range(size):
            cx = side / 2 + 0.5 + (i - (size - 1) / 2) * _STEP + rng.uniform(-4, 4)
            cy = side / 2 + 0.5 + (j - (size - 1) / 2) * _STEP + rng.uniform(-4, 4)
            cra, cdec = frame.pixel_to_world_values(cx - 1, cy - 1)
            header = _header(
                (TILE, TILE), (float(cra), float(cdec)), (TILE / 2 + 0.5,) * 2, rng.uniform(-3, 3)
            )
            px, py = WCS(header).world_to_pixel_values(ra, dec)
            image = np.zeros((TILE, TILE))
            for x0, y0, f in zip(px, py, stars[:, 2], strict=True):
                if -12 < x0 < TILE + 12 and -12 < y0 < TILE + 12:
                    r2 = (xx - x0) ** 2 + (yy - y0) ** 2
                    image += f / (2 * np.pi * _SIGMA**2) * np.exp(-r2 / (2 * _SIGMA**2))
            name = f"tile_{i:02d}_{j:02d}.fits"
            offsets[name] = float(rng.uniform(-_OFFSET, _OFFSET))
            centres[name] = (float(cra), float(cdec))
            image += _SKY + offsets[name] + rng.normal(0.0, _NOISE, size=image.shape)
            fits.writeto(raw / name, image, header)
            tiles.append(name)
    truth = {
        "stars": [[float(a), float(d), float(f)] for a, d, f in zip(ra, dec, stars[:, 2], strict=True)],
        "offsets": offsets,
        "centres": centres,
        "side": side,
    }
    (folder / "truth.json").write_text(json.dumps(truth))
    shrink = max(2, math.ceil(side / 512))
    return MontageInput(str(folder), tuple(tiles), shrink)


def verify(inp: MontageInput, out: MontageOutput) -> Verification:
    """Check the mosaic against what :func:`generate` planted (see the module docstring)."""
    from astropy.io import fits
    from astropy.wcs import WCS
    from matplotlib.image import imread

    folder = Path(inp.folder)
    truth = json.loads((folder / "truth.json").read_text())
    with fits.open(out.mosaic) as hdul:
        image = np.asarray(hdul[0].data, dtype=np.float64)
        header = hdul[0].header
    side = int(truth["side"])
    checks = [
        Check(
            "dimensions",
            image.shape == (side, side) and float(header["CRPIX1"]) == side / 2 + 0.5,
            f"mosaic {image.shape[1]} x {image.shape[0]}, header {side} x {side}",
        )
    ]
    frame = WCS(header)
    yy, xx = np.mgrid[0 : image.shape[0], 0 : image.shape[1]]
    ra, dec = frame.pixel_to_world_values(xx, yy)
    inside = np.zeros(image.shape, dtype=bool)
    for tile in inp.tiles:
        px, py = WCS(fits.getheader(folder / "raw" / tile)).world_to_pixel_values(ra, dec)
        inside |= (px >= 1) & (px <= TILE - 2) & (py >= 1) & (py <= TILE - 2)
    holes = int(np.isnan(image[inside]).sum())
    checks.append(Check("no holes", holes == 0, f"{holes} NaN of {int(inside.sum())} footprint pixels"))
    checks.append(_flux_check(image, inside, frame, truth["stars"], xx, yy))
    checks.append(_level_check(image, frame, truth))
    with fits.open(folder / "mosaic_small.fits") as small:
        want = small[0].data.shape
    png = imread(out.preview) if Path(out.preview).exists() else np.zeros((0, 0))
    checks.append(
        Check(
            "preview",
            png.shape[:2] == want,
            f"PNG {png.shape[1]} x {png.shape[0]}, shrunk mosaic {want[1]} x {want[0]}",
        )
    )
    return Verification("montage", tuple(checks))


def _flux_check(
    image: npt.NDArray[np.float64],
    inside: npt.NDArray[np.bool_],
    frame: Any,
    stars: list[list[float]],
    xx: npt.NDArray[np.int_],
    yy: npt.NDArray[np.int_],
) -> Check:
    planted = np.array(stars)
    sx, sy = frame.world_to_pixel_values(planted[:, 0], planted[:, 1])
    ratios = []
    for x0, y0, flux in zip(sx, sy, planted[:, 2], strict=True):
        r2 = (xx - x0) ** 2 + (yy - y0) ** 2
        disc = r2 <= _ANNULUS[1] ** 2
        if not inside[disc].all():
            continue  # near the footprint's edge: part of the star was never observed
        ring = (r2 > _ANNULUS[0] ** 2) & disc
        local = float(np.median(image[ring]))
        ratios.append(float(np.sum(image[r2 <= _APERTURE**2] - local) / flux))
    if not ratios:
        return Check("star flux", False, "no planted star lies fully inside the footprint")
    worst = max(abs(r - 1.0) for r in ratios)
    return Check(
        "star flux",
        worst <= FLUX_TOLERANCE,
        f"{len(ratios)} stars, measured/planted {min(ratios):.4f}-{max(ratios):.4f} "
        f"(allowed 1 ± {FLUX_TOLERANCE:g})",
    )


def _level_check(image: npt.NDArray[np.float64], frame: Any, truth: dict[str, Any]) -> Check:
    levels = []
    half = TILE // 6
    for ra, dec in truth["centres"].values():
        x, y = (round(float(v)) for v in frame.world_to_pixel_values(ra, dec))
        levels.append(float(np.nanmedian(image[y - half : y + half, x - half : x + half])))
    planted = list(truth["offsets"].values())
    spread = max(levels) - min(levels)
    return Check(
        "background offsets removed",
        spread <= LEVEL_TOLERANCE,
        f"levels at tile centres spread {spread:.3f} (allowed {LEVEL_TOLERANCE:g}); "
        f"planted offsets spread {max(planted) - min(planted):.1f}",
    )
