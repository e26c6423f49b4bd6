"""The demos' inputs and checks: deterministic input, correct output, and checks that catch wrong output.

The dataflows run here on a serial submitter (tests/workflows/conftest.py) to get outputs quickly; the
front-ends and backends are tested in test_frontdoor.py, test_parsl_prefect.py and test_matrix.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from astropy.io import fits
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from elastic.errors import ConfigError, UnknownNameError
from elastic.workflows.demos import DEMOS, get_demo, prepare
from elastic.workflows.household import MEASURES, read_household
from elastic.workflows.statistics import combine, moments
from tests.workflows.conftest import SMALL, SerialSubmitter


def _run(name: str, tmp_path: Path, serial: SerialSubmitter, seed: int = 0) -> tuple[Any, Any]:
    demo, _, inputs, _ = prepare(name, size=SMALL[name], seed=seed, workdir=tmp_path)
    return inputs, demo.driver(serial, inputs)


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_each_demo_runs_its_stages_in_order_and_passes_its_checks(
    name: str, tmp_path: Path, serial: SerialSubmitter
) -> None:
    inputs, output = _run(name, tmp_path, serial)
    verification = DEMOS[name].verify(inputs, output)
    assert verification.ok, verification.failed
    assert list(dict.fromkeys(serial.calls)) == list(DEMOS[name].stages)


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_the_input_depends_only_on_the_seed(name: str, tmp_path: Path) -> None:
    folders = []
    for i, seed in enumerate((7, 7, 8)):
        (tmp_path / str(i)).mkdir()
        _, folder, _, _ = prepare(name, size=SMALL[name], seed=seed, workdir=tmp_path / str(i))
        folders.append(_digest(folder))
    assert folders[0] == folders[1] and folders[0]
    assert folders[0] != folders[2]


def test_montage_checks_catch_holes_lost_flux_and_offsets_left(
    tmp_path: Path, serial: SerialSubmitter
) -> None:
    inputs, output = _run("montage", tmp_path, serial)
    verify = DEMOS["montage"].verify
    good = fits.getdata(output.mosaic)
    header = fits.getheader(output.mosaic)

    def failed_with(image: np.ndarray) -> set[str]:
        fits.writeto(output.mosaic, image, header, overwrite=True)
        return {c.name for c in verify(inputs, output).failed}

    holed = good.copy()
    holed[good.shape[0] // 2, good.shape[1] // 2] = np.nan
    assert failed_with(holed) == {"no holes"}
    assert "star flux" in failed_with(good * 1.1)  # a flux scale error of 10 %
    stepped = good.copy()
    stepped[:, : good.shape[1] // 2] += 5.0  # one side of the mosaic 5 above the other
    assert failed_with(stepped) == {"background offsets removed"}
    assert failed_with(good[:-1]) >= {"dimensions"}
    assert failed_with(good) == set()


def test_montage_offsets_are_really_there_before_background_matching(tmp_path: Path) -> None:
    # The check would be empty if the tiles had no offsets to remove: the raw tiles' sky levels differ.
    _, folder, inputs, _ = prepare("montage", size=3, seed=0, workdir=tmp_path)
    levels = [float(np.median(fits.getdata(folder / "raw" / t))) for t in inputs.tiles]
    assert max(levels) - min(levels) > 10.0
    truth = json.loads((folder / "truth.json").read_text())
    assert len(truth["stars"]) >= 8 and len(inputs.tiles) == 9


def test_blast_checks_catch_missed_matches_wrong_identity_and_decoy_hits(
    tmp_path: Path, serial: SerialSubmitter
) -> None:
    inputs, output = _run("blast", tmp_path, serial)
    verify = DEMOS["blast"].verify
    good = pd.read_csv(output.hits, sep="\t")
    assert len(good) >= 12

    def failed_with(hits: pd.DataFrame) -> set[str]:
        hits.to_csv(output.hits, sep="\t", index=False)
        return {c.name for c in verify(inputs, output).failed}

    assert failed_with(good.iloc[1:]) >= {"planted matches found"}
    off = good.copy()
    off.loc[0, "pident"] -= 1.0
    assert failed_with(off) == {"identity"}
    shifted = good.copy()
    shifted.loc[0, ["sstart", "send"]] += 1
    assert failed_with(shifted) == {"position and strand"}
    decoy = next(
        q for q, t in json.loads(Path(inputs.folder, "truth.json").read_text()).items() if t["decoy"]
    )
    fake = good.iloc[[0]].assign(qseqid=decoy)
    assert failed_with(pd.concat([good, fake])) == {"decoys"}
    assert failed_with(good) == set()


def test_statistics_checks_catch_a_wrong_number_and_a_missing_week(
    tmp_path: Path, serial: SerialSubmitter
) -> None:
    inputs, output = _run("statistics", tmp_path, serial)
    verify = DEMOS["statistics"].verify
    week = output.periods[1]
    table = {k: dict(v) for k, v in week.table.items()}
    table["median"]["Voltage"] += 1e-6
    tampered = dataclasses.replace(week, table=table)
    changed = dataclasses.replace(output, periods=(output.periods[0], tampered, *output.periods[2:]))
    assert {c.name for c in verify(inputs, changed).failed} == {"weekly statistics and correlations"}
    dropped = dataclasses.replace(output, periods=output.periods[1:])
    assert {c.name for c in verify(inputs, dropped).failed} == {
        "weekly statistics and correlations",
        "weeks cover every row once",
    }
    overall = dataclasses.replace(output.overall, corr=(np.array(output.overall.corr) * 1.001).tolist())
    assert {c.name for c in verify(inputs, dataclasses.replace(output, overall=overall)).failed} == {
        "overall correlations"
    }


def test_the_household_data_has_the_uci_schema(tmp_path: Path) -> None:
    _, folder, _, _ = prepare("statistics", size=1, seed=3, workdir=tmp_path)
    path = folder / "household_power_consumption.txt"
    lines = path.read_text().splitlines()
    assert lines[0] == "Date;Time;" + ";".join(MEASURES)
    assert lines[1].startswith("16/12/2006;17:24:00;")
    frame = read_household(path)
    assert len(frame) == 7 * 24 * 60
    assert (frame["datetime"].diff().dropna() == pd.Timedelta(minutes=1)).all()
    missing = frame[list(MEASURES)].isna()
    assert 0.002 < missing.all(axis=1).mean() < 0.05  # minutes missing in blocks, all measures at once
    assert (missing.any(axis=1) == missing.all(axis=1)).all()
    assert any(";?;?;" in line for line in lines)
    x = frame.dropna()
    assert (
        x["Sub_metering_1"] + x["Sub_metering_2"] + x["Sub_metering_3"]
        <= x["Global_active_power"] * 1000 / 60 + 1
    ).all()
    assert x["Voltage"].min() > 200 and x["Voltage"].max() < 260


@settings(max_examples=60, deadline=None)
@given(
    data=arrays(
        np.float64, st.tuples(st.integers(2, 40), st.just(len(MEASURES))), elements=st.floats(-1e3, 1e3)
    ),
    cuts=st.lists(st.integers(1, 39), max_size=4),
)
def test_combining_partial_moments_equals_the_moments_of_the_whole(data: np.ndarray, cuts: list[int]) -> None:
    frame = pd.DataFrame(data, columns=list(MEASURES))
    frame.insert(0, "datetime", pd.date_range("2007-01-01", periods=len(frame), freq="min"))
    bounds = sorted({c for c in cuts if c < len(frame)} | {0, len(frame)})
    parts = [moments(frame.iloc[a:b]) for a, b in itertools.pairwise(bounds)]
    total = parts[0]
    for p in parts[1:]:
        total = combine(total, p)
    whole = moments(frame)
    scale = 1.0 + np.abs(data).max()
    np.testing.assert_allclose(total.mean, whole.mean, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(total.m2, whole.m2, rtol=1e-7, atol=1e-7 * scale**2)
    np.testing.assert_allclose(total.comoment, whole.comoment, rtol=1e-7, atol=1e-7 * scale**2)
    np.testing.assert_array_equal(total.low, whole.low)
    assert total.rows == len(frame) and total.first == frame["datetime"].iloc[0]


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("montage", {"size": 0}, r"montage: size must be an integer in \[2, 30\] \(tiles per side.*got 0"),
        ("montage", {"size": 1}, r"got 1"),
        ("blast", {"size": 2001}, r"blast: size must be an integer in \[1, 2000\]"),
        ("statistics", {"size": 2.5}, r"got 2.5"),
        ("blast", {"seed": -1}, r"seed must be an integer >= 0, got -1"),
    ],
)
def test_bad_sizes_and_seeds_are_refused_before_anything_is_written(
    name: str, kwargs: dict[str, Any], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=message):
        prepare(name, workdir=tmp_path, **kwargs)
    assert not list(tmp_path.iterdir())


def test_bad_workdirs_and_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        prepare("blast", workdir=tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is not a directory"):
        prepare("blast", workdir=tmp_path / "file")
    with pytest.raises(ConfigError, match="cannot be written"):
        prepare("blast", workdir="/proc")
    with pytest.raises(UnknownNameError, match="unknown demo 'cybershake'"):
        get_demo("cybershake")


def test_each_run_gets_its_own_folder(tmp_path: Path) -> None:
    first = prepare("blast", size=1, workdir=tmp_path)[1]
    second = prepare("blast", size=1, workdir=tmp_path)[1]
    assert first != second and first.parent == second.parent == tmp_path.resolve()
