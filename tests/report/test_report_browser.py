"""The report's HTML page in a real headless browser (Debian's ``chromium``): tables and images render."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from tests.report.report_case import STRATEGIES, WORKFLOWS

CHROMIUM = shutil.which("chromium")
if CHROMIUM is None and os.environ.get("ELASTIC_REQUIRE_BROWSER"):  # the README's test command installs it
    raise RuntimeError("chromium is not on PATH, though the test command installs it (package chromium)")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed"),
]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless chromium offline, with its own profile (``--no-sandbox``: tests may run as root)."""
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--proxy-server=127.0.0.1:9",  # offline: any request for a remote resource would fail
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


def test_the_browser_sees_the_tables_and_loads_every_image(report_dir: Path, tmp_path: Path) -> None:
    page = (report_dir / "report.html").as_uri()
    dom = chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", page).stdout
    assert dom.count('<table class="table1">') == 1
    header = re.search(r"<thead>(.*?)</thead>", dom, re.S)
    assert header is not None
    for s in STRATEGIES:
        assert f">{s}</th>" in header.group(1)
    for w in WORKFLOWS:
        assert f">{w}</th>" in dom
    images = re.findall(r'<img src="data:image/png;base64,', dom)
    assert len(images) == len(list(report_dir.glob("*.png")))


def test_the_screenshot_is_not_blank(report_dir: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    page = (report_dir / "report.html").as_uri()
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", "--hide-scrollbars", page)
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    # the page's top has the heading and Table 1: many non-white pixels, and more than two colours
    top = pixels[:1000]
    assert (top.min(axis=2) < 0.9).mean() > 0.02
    assert len(np.unique((top * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 16
    # the figures below it are drawn (images decoded, not broken-image icons): colourful bars
    bars = np.abs(pixels[..., 0] - pixels[..., 2]) > 0.3
    assert bars.mean() > 0.005
