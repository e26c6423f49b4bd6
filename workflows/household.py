"""A generated household power-consumption dataset with the schema of the UCI data set the ASA paper used.

The UCI "Individual household electric power consumption" data set (Hebrail and Berard, 2012): one row per
minute, ``;``-separated, missing measurements written ``?``::

    Date;Time;Global_active_power;Global_reactive_power;Voltage;Global_intensity;Sub_metering_1;Sub_metering_2;Sub_metering_3
    16/12/2006;17:24:00;4.216;0.418;234.840;18.400;0.000;1.000;17.000

Active and reactive power in kilowatts (minute averages), voltage in volts, intensity in amperes, the three
sub-meterings in watt-hours of active energy in the minute (1: kitchen, 2: laundry room, 3: water heater
and air conditioner). :func:`write_household` makes ``weeks`` weeks of such minutes, starting where the
real data starts (16/12/2006 17:24), deterministic for a seed: a base load with morning and evening
peaks, appliance runs on each sub-metering, voltage sagging with load, intensity from power and voltage,
and about 1.25 % of the minutes missing in blocks (as in the real data). :func:`read_household` reads
such a file (or the real one) into a frame with a ``datetime`` column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.signal import lfilter

__all__ = ["MEASURES", "MINUTES_PER_WEEK", "START", "read_household", "write_household"]

MEASURES = (
    "Global_active_power",
    "Global_reactive_power",
    "Voltage",
    "Global_intensity",
    "Sub_metering_1",
    "Sub_metering_2",
    "Sub_metering_3",
)
"""The measured columns, in the file's order (after ``Date`` and ``Time``)."""

START = pd.Timestamp("2006-12-16 17:24:00")
"""First minute of the real data set."""
MINUTES_PER_WEEK = 7 * 24 * 60


def _runs(rng: np.random.Generator, n: int, per_day: float, length: tuple[int, int]) -> np.ndarray:
    """Return ``n`` minutes of 0/1: runs of ``length`` minutes, starting ``per_day`` times a day."""
    on = np.zeros(n + length[1], dtype=np.float64)
    starts = np.flatnonzero(rng.random(n) < per_day / 1440.0)
    for s, d in zip(starts, rng.integers(length[0], length[1] + 1, size=len(starts)), strict=True):
        on[s : s + d] = 1.0
    return on[:n]


def write_household(path: Path, weeks: int, seed: int) -> int:
    """Write ``weeks`` weeks of one-minute rows to ``path`` (UCI format); return the number of rows."""
    rng = np.random.default_rng(seed)
    n = weeks * MINUTES_PER_WEEK
    when = pd.date_range(START, periods=n, freq="min")
    hour = when.hour.to_numpy() + when.minute.to_numpy() / 60.0
    weekend = when.day_of_week.to_numpy() >= 5
    daily = 0.35 * np.exp(-((hour - 7.5) ** 2) / 2.0) + 0.9 * np.exp(-((hour - 20.0) ** 2) / 4.0)
    noise = lfilter([1.0], [1.0, -0.98], rng.normal(0.0, 0.04, size=n))  # AR(1) wander of the base load
    base = np.clip(0.25 + daily * np.where(weekend, 1.3, 1.0) + noise, 0.08, None)
    kitchen = _runs(rng, n, 1.2, (20, 60)) * rng.uniform(30.0, 38.0, size=n) * (hour > 6)
    laundry = _runs(rng, n, 0.5, (40, 120)) * rng.uniform(60.0, 72.0, size=n)
    laundry += (np.sin(when.minute.to_numpy() * np.pi / 15.0) > 0) * 1.0  # the fridge cycling
    heater = _runs(rng, n, 4.0, (30, 90)) * rng.uniform(16.0, 19.0, size=n)
    sub = np.round(np.column_stack([kitchen, laundry, heater]))
    active = base + sub.sum(axis=1) * 60.0 / 1000.0
    reactive = np.clip(0.08 + 0.06 * active + rng.normal(0.0, 0.04, size=n), 0.0, None)
    voltage = 241.0 + 1.5 * np.sin(hour / 24.0 * 2 * np.pi) - 1.1 * active + rng.normal(0.0, 0.8, size=n)
    intensity = np.round(np.hypot(active, reactive) * 1000.0 / voltage / 0.2) * 0.2
    values = np.column_stack([active, reactive, voltage, intensity, sub])
    missing = _runs(rng, n, 0.3, (5, 120)).astype(bool)  # about 1.25 % of the minutes, in blocks
    frame = pd.DataFrame(values, columns=list(MEASURES))
    frame[missing] = np.nan
    day = when.day.astype(str) + "/" + when.month.astype(str) + "/" + when.year.astype(str)
    frame.insert(0, "Time", when.strftime("%H:%M:%S"))
    frame.insert(0, "Date", day)
    frame.to_csv(path, sep=";", index=False, float_format="%.3f", na_rep="?")
    return n


def read_household(path: Path | str) -> pd.DataFrame:
    """Read a UCI-format file: a ``datetime`` column, then the measures as floats (``?`` as NaN)."""
    raw = pd.read_csv(path, sep=";", na_values="?", dtype={"Date": str, "Time": str}, low_memory=False)
    when = pd.to_datetime(raw["Date"] + " " + raw["Time"], format="%d/%m/%Y %H:%M:%S")
    frame = raw[list(MEASURES)].astype(np.float64)
    frame.insert(0, "datetime", when)
    return frame
