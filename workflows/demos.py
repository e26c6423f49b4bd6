"""The demo workflows by name, and one call that generates a demo's input, runs it and checks it.

>>> sorted(DEMOS)
['blast', 'montage', 'statistics']
>>> DEMOS["montage"].stages[:3]
('mImgtbl', 'mProject', 'mOverlaps')
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic.errors import UnknownNameError
from elastic.workflows import blast, montage, montage_sky, statistics
from elastic.workflows.dataflow import Demo, Submitter, Verification, check_size, new_run_folder

__all__ = ["DEMOS", "DemoRun", "get_demo", "prepare", "run_demo"]

DEMOS: dict[str, Demo] = {
    "montage": Demo(
        name="montage",
        summary="a sky mosaic of overlapping FITS tiles with the Montage modules of the ASA paper's Figure 1",
        size_meaning="tiles per side of the mosaic: size x size tiles",
        default_size=3,
        min_size=2,
        max_size=30,
        generate=montage_sky.generate,
        driver=montage.mosaic,
        verify=montage_sky.verify,
        stages=montage.STAGES,
    ),
    "blast": Demo(
        name="blast",
        summary="nucleotide queries with planted matches searched with blastn against a generated database",
        size_meaning="chunks of 7 queries, one blastn task each",
        default_size=8,
        min_size=1,
        max_size=2000,
        generate=blast.generate,
        driver=blast.search,
        verify=blast.verify,
        stages=blast.STAGES,
    ),
    "statistics": Demo(
        name="statistics",
        summary="statistics and correlations of a household's one-minute power measurements (pandas)",
        size_meaning="weeks of one-minute data, one chunk each",
        default_size=8,
        min_size=1,
        max_size=520,
        generate=statistics.generate,
        driver=statistics.statistics,
        verify=statistics.verify,
        stages=statistics.STAGES,
    ),
}
"""Every demo, by name."""


def get_demo(name: str) -> Demo:
    """Return the demo called ``name``.

    Raises
    ------
    UnknownNameError
        No such demo (the message lists them).
    """
    try:
        return DEMOS[name]
    except KeyError:
        raise UnknownNameError("demo", name, sorted(DEMOS)) from None


@dataclass(frozen=True, slots=True)
class DemoRun:
    """One run of a demo: where it ran, what it made, how its checks went, how long each part took."""

    demo: str
    folder: Path
    inputs: Any
    output: Any
    verification: Verification
    generate_seconds: float
    run_seconds: float


def prepare(
    name: str, *, size: int | None = None, seed: int = 0, workdir: str | os.PathLike[str] | None = None
) -> tuple[Demo, Path, Any, float]:
    """Check the arguments, create the run's folder and generate the input; nothing runs yet.

    Returns ``(demo, folder, inputs, seconds it took)``.

    Raises
    ------
    UnknownNameError, ConfigError
        An unknown demo, a size out of range, a negative seed, an unusable ``workdir`` (before anything is
        written).
    """
    from elastic.errors import ConfigError

    demo = get_demo(name)
    size = check_size(demo, demo.default_size if size is None else size)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}")
    folder = new_run_folder(workdir, demo.name)
    began = time.perf_counter()
    inputs = demo.generate(folder, size, seed)
    return demo, folder, inputs, time.perf_counter() - began


def run_demo(
    name: str,
    run: Callable[[Callable[[Submitter, Any], Any], Any], Any],
    *,
    size: int | None = None,
    seed: int = 0,
    workdir: str | os.PathLike[str] | None = None,
) -> DemoRun:
    """Generate a demo's input, run its driver with ``run(driver, inputs)``, and check the output.

    ``run`` picks the front-end, e.g. ``lambda d, i: run_elastic(d, i, el)`` or
    ``lambda d, i: run_parsl(d, i, config)`` (:mod:`elastic.workflows.frontends`).
    """
    demo, folder, inputs, generated = prepare(name, size=size, seed=seed, workdir=workdir)
    began = time.perf_counter()
    output = run(demo.driver, inputs)
    ran = time.perf_counter() - began
    return DemoRun(demo.name, folder, inputs, output, demo.verify(inputs, output), generated, ran)
