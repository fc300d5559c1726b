"""`mpiscope serve`: clear one-line errors, 127.0.0.1 by default, nothing but the traces."""

from __future__ import annotations

import http.client
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from webui_support import free_port

from mpiscope_webui import security


def serve_cmd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiscope", "serve", *args],
                          capture_output=True, text=True, timeout=60)


def test_missing_trace_is_one_line_exit_2(tmp_path):
    r = serve_cmd(str(tmp_path / "nope"), "--port", str(free_port()))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith("mpiscope: ") and "nope" in r.stderr
    assert "Traceback" not in r.stderr


def test_corrupt_trace_is_one_line_exit_2(tmp_path, himeno_traces):
    bad = tmp_path / "bad"
    shutil.copytree(himeno_traces["unpatched"], bad)
    (bad / "traces.def").write_bytes(b"\x00garbage" * 16)
    r = serve_cmd(str(bad), "--port", str(free_port()))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "bad" in r.stderr
    assert "Traceback" not in r.stderr


def test_second_trace_checked_before_serving(tmp_path, himeno_traces):
    r = serve_cmd(str(himeno_traces["unpatched"]), str(tmp_path / "missing"),
                  "--port", str(free_port()))
    assert r.returncode == 2 and "missing" in r.stderr


def test_busy_port_is_one_line_error(himeno_traces):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = serve_cmd(str(himeno_traces["unpatched"]), "--port", str(s.getsockname()[1]))
    assert r.returncode == 2 and "cannot listen" in r.stderr


def raw_get(url: str, path: str) -> tuple[int, bytes]:
    """GET with the path sent exactly as written (no client-side normalization)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("GET", path, skip_accept_encoding=True)
    conn.endheaders()
    resp = conn.getresponse()
    return resp.status, resp.read()


TRAVERSALS = [
    "/assets/../../../../etc/passwd", "/assets/..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/assets/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/_dash-component-suites/dash/../../../../../../etc/passwd",
    "/_dash-component-suites/dash/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/_dash-component-suites/dash/%252e%252e/%252e%252e/etc/passwd",
    "/../../../../etc/passwd", "/etc/passwd", "/static/../../etc/passwd",
]


def test_server_binds_localhost_and_serves_nothing_else(serve, himeno_traces):
    url = serve(himeno_traces["unpatched"])
    assert url.startswith("http://127.0.0.1:")
    status, body = raw_get(url, "/")
    assert status == 200 and b"mpiscope" in body
    status, _ = raw_get(url, "/assets/style.css")
    assert status == 200
    for path in TRAVERSALS:
        status, body = raw_get(url, path)
        assert status in (400, 403, 404), path
        assert b"root:" not in body, path
    # the trace's own files are not served either
    status, body = raw_get(url, "/" + str(Path(himeno_traces["unpatched"]) / "traces.otf2"))
    assert status == 404 and b"OTF2" not in body


def test_listens_on_loopback_only(serve, himeno_traces):
    url = serve(himeno_traces["unpatched"])
    port = int(url.rsplit(":", 1)[1])
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("ss not available")
    local = [line.split()[3] for line in out.stdout.splitlines() if line.strip()]
    assert local and all(a.startswith("127.0.0.1:") for a in local), out.stdout


@pytest.mark.parametrize("path", TRAVERSALS)
def test_guard_refuses_traversal(path):
    assert security.refused(path) is not None


@pytest.mark.parametrize("path", ["/", "/_dash-layout", "/_dash-update-component",
                                  "/assets/style.css", "/_dash-component-suites/dash/x.js"])
def test_guard_allows_the_app(path):
    assert security.refused(path) is None
