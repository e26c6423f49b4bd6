"""``elastic traces`` and the downloader, against a real HTTP server on 127.0.0.1 (never the network)."""

from __future__ import annotations

import gzip
import http.server
import os
import stat
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from elastic.cli import main
from elastic.errors import TraceError, UnknownNameError
from elastic.simulator.download import DEFAULT_BASE_URL, KNOWN_TRACES, download_trace, resolve_trace
from elastic.simulator.trace import read_swf

JOBS = 300
SWF_TEXT = "; Computer: loopback test machine\n; MaxProcs: 64\n" + "".join(
    f"{i} {i * 60} {i % 7} {100 + i} 4 -1 -1 {1 + i % 64} 600 -1 1 {i % 5} -1 -1 -1 -1 -1 -1\n"
    for i in range(1, JOBS + 1)
)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the folder; ``/truncated/...`` promises more bytes than it sends."""

    def do_GET(self) -> None:
        if self.path.startswith("/truncated/"):
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"\x1f\x8b" + b"x" * 100)
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local mirror of the archive layout serving a small generated HPC2N-named trace."""
    root = tmp_path_factory.mktemp("archive")
    (root / "l_hpc2n").mkdir(parents=True)
    (root / "l_hpc2n" / "HPC2N-2002-2.2-cln.swf.gz").write_bytes(gzip.compress(SWF_TEXT.encode()))
    (root / "l_sdsc_blue").mkdir()
    (root / "l_sdsc_blue" / "SDSC-BLUE-2000-4.2-cln.swf.gz").write_text("<html>not found</html>")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# ---------------------------------------------------------------- library


def test_resolve_names() -> None:
    url, name = resolve_trace("hpc2n")
    assert url == DEFAULT_BASE_URL + "l_hpc2n/HPC2N-2002-2.2-cln.swf.gz"
    assert name == "HPC2N-2002-2.2-cln.swf.gz"
    assert resolve_trace("HPC2N-2002-2.2-cln.swf.gz", "http://mirror/x")[0] == (
        "http://mirror/x/l_hpc2n/HPC2N-2002-2.2-cln.swf.gz"
    )
    assert resolve_trace("SDSC-Blue")[1] == "SDSC-BLUE-2000-4.2-cln.swf.gz"
    assert resolve_trace("https://example.org/logs/My.swf.gz") == (
        "https://example.org/logs/My.swf.gz",
        "My.swf.gz",
    )
    with pytest.raises(UnknownNameError, match=r"unknown trace .* 'nosuch'; choose one of: .*hpc2n"):
        resolve_trace("nosuch")
    assert {"hpc2n", "sdsc-blue", "ctc-sp2"} <= set(KNOWN_TRACES)


def test_download_streams_with_progress(archive: str, tmp_path: Path) -> None:
    calls: list[tuple[int, int | None]] = []
    dest = tmp_path / "new" / "folder"
    path = download_trace(
        "hpc2n", dest, base_url=archive, progress=lambda done, total: calls.append((done, total))
    )
    assert path == dest / "HPC2N-2002-2.2-cln.swf.gz"
    assert leftovers(dest) == ["HPC2N-2002-2.2-cln.swf.gz"]
    size = path.stat().st_size
    assert calls and calls[-1] == (size, size)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    workload = read_swf(path)
    assert len(workload) == JOBS and workload.processors == 64


def test_a_downloaded_trace_has_an_ordinary_files_mode(archive: str, tmp_path: Path) -> None:
    """It was 0600, the temporary file's mode, renamed into place."""
    old = os.umask(0o022)
    try:
        path = download_trace("hpc2n", tmp_path, base_url=archive)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_download_by_url(archive: str, tmp_path: Path) -> None:
    path = download_trace(archive + "l_hpc2n/HPC2N-2002-2.2-cln.swf.gz", tmp_path)
    assert len(read_swf(path)) == JOBS


def test_download_http_404_leaves_nothing(archive: str, tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"HTTP 404 .*elastic traces list") as info:
        download_trace("ctc-sp2", tmp_path / "d", base_url=archive)
    assert info.value.path == archive + "l_ctc_sp2/CTC-SP2-1996-3.1-cln.swf.gz"
    assert leftovers(tmp_path / "d") == []


def test_download_not_gzip_leaves_nothing(archive: str, tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="did not send gzip data"):
        download_trace("sdsc-blue", tmp_path, base_url=archive)
    assert leftovers(tmp_path) == []


def test_download_truncated_leaves_nothing(archive: str, tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="try again"):
        download_trace(archive + "truncated/x.swf.gz", tmp_path, timeout=5)
    assert leftovers(tmp_path) == []


def test_download_unreachable(tmp_path: Path) -> None:
    # port 9 on loopback (discard) is closed here: connection refused, no network involved
    with pytest.raises(TraceError, match="cannot reach the server"):
        download_trace("hpc2n", tmp_path, base_url="http://127.0.0.1:9/", timeout=5)
    assert leftovers(tmp_path) == []


def test_download_refuses_to_overwrite(archive: str, tmp_path: Path) -> None:
    existing = tmp_path / "HPC2N-2002-2.2-cln.swf.gz"
    existing.write_text("keep me")
    with pytest.raises(TraceError, match="already exists; pass --force"):
        download_trace("hpc2n", tmp_path, base_url=archive)
    assert existing.read_text() == "keep me"
    download_trace("hpc2n", tmp_path, base_url=archive, force=True)
    assert len(read_swf(existing)) == JOBS
    assert leftovers(tmp_path) == ["HPC2N-2002-2.2-cln.swf.gz"]


# ---------------------------------------------------------------- command line


def test_cli_download(archive: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["traces", "download", "hpc2n", "--dest", str(tmp_path), "--base-url", archive])
    out = capsys.readouterr().out
    assert code == 0
    assert out.strip() == str(tmp_path / "HPC2N-2002-2.2-cln.swf.gz")
    # a second time: refused, with the reason on stderr
    code = main(["traces", "download", "hpc2n", "--dest", str(tmp_path), "--base-url", archive])
    err = capsys.readouterr().err
    assert code == 2
    assert "already exists; pass --force" in err
    code = main(["traces", "download", "hpc2n", "--dest", str(tmp_path), "--base-url", archive, "--force"])
    assert code == 0


def test_cli_download_errors(archive: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "download", "nosuch", "--dest", str(tmp_path)]) == 2
    assert "unknown trace" in capsys.readouterr().err
    assert main(["traces", "download", "kth-sp2", "--dest", str(tmp_path), "--base-url", archive]) == 2
    assert "HTTP 404" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


def test_cli_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "list", "--base-url", "http://mirror.example/pwa/"]) == 0
    out = capsys.readouterr().out
    for entry in KNOWN_TRACES.values():
        assert entry.name in out
    assert "http://mirror.example/pwa/l_hpc2n/HPC2N-2002-2.2-cln.swf.gz" in out


def test_cli_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF_TEXT)
    assert main(["traces", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "jobs" in out and f"{JOBS}" in out
    assert "processors" in out and "64" in out
    # submits every 60 s from 60 to 18,000: span 17,940 s = 4:59:00
    assert "17,940 s (4:59:00)" in out
    assert "; Computer: loopback test machine" in out
    assert (
        main(["traces", "info", str(path), "--window", "0", "600", "--processors", "32", "--no-header"]) == 0
    )
    out = capsys.readouterr().out
    assert "; Computer" not in out
    assert "32" in out and "jobs" in out and " 9 " in out  # submits 60..540


def test_cli_info_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.swf"
    path.write_text(SWF_TEXT + "1 2 3\n")
    assert main(["traces", "info", str(path)]) == 2
    assert f"{path}:{JOBS + 3}: expected 18" in capsys.readouterr().err


def test_cli_info_real_trace(hpc2n_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "info", str(hpc2n_trace), "--no-header"]) == 0
    out = capsys.readouterr().out
    assert "202,871" in out and "240" in out
    assert "0:26:39" in out  # median recorded wait, 1,599 s
