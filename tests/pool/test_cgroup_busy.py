"""A cgroup with no member left that the kernel still calls busy is retried, then left quietly.

Found running the README's front-door example: ``cgroups: cannot remove .../w17816-1 (Device or resource
busy); members left: []`` was printed under a correct result. A member that exited and is not reaped yet
keeps its cgroup busy for a moment; nothing runs in it, and the next agent's sweep removes it.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from elastic.pool import cgroups


def _busy_for(times: int, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    removed: list[Path] = []
    real = Path.rmdir
    left = [times]

    def rmdir(self: Path) -> None:
        if left[0] > 0:
            left[0] -= 1
            raise OSError(errno.EBUSY, "Device or resource busy")
        real(self)
        removed.append(self)

    monkeypatch.setattr(Path, "rmdir", rmdir)
    return removed


def test_an_empty_busy_cgroup_is_removed_once_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    group = tmp_path / "w1-1"
    group.mkdir()
    removed = _busy_for(3, monkeypatch)
    with caplog.at_level(logging.INFO, logger="elastic.pool.cgroups"):
        assert cgroups.end_cgroup(group) == 0
    assert removed == [group] and not group.exists()
    assert caplog.records == []


def test_an_empty_cgroup_busy_for_long_is_left_with_an_info_line_not_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    group = tmp_path / "w1-1"
    group.mkdir()
    _busy_for(10**6, monkeypatch)
    with caplog.at_level(logging.INFO, logger="elastic.pool.cgroups"):
        cgroups.end_cgroup(group)
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "empty but not released yet" in caplog.records[0].getMessage()


def test_a_cgroup_that_cannot_be_removed_for_another_reason_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    group = tmp_path / "w1-1"
    group.mkdir()

    def refuse(self: Path) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(Path, "rmdir", refuse)
    with caplog.at_level(logging.INFO, logger="elastic.pool.cgroups"):
        cgroups.end_cgroup(group)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "Permission denied" in caplog.records[0].getMessage()
