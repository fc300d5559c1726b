"""`mpiscope serve`: clear one-line errors, 127.0.0.1 by default, nothing but the traces."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpiscope_testing.webui_server import Server, free_port, printed_url
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
    conn = http.client.HTTPConnection(host, int(port), timeout=60)  # a busy machine
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


# -- who may ask: Host header (DNS rebinding) and token (non-loopback addresses) ------------

def request(port: int, path: str = "/", *, host: str | None = None, addr: str = "127.0.0.1",
            headers: dict | None = None, method: str = "GET",
            body: bytes | None = None) -> tuple[int, dict, bytes]:
    """One request with exactly these headers (Host included: what a rebound page sends)."""
    conn = http.client.HTTPConnection(addr, port, timeout=30)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    if host is not None:
        conn.putheader("Host", host)
    for k, v in (headers or {}).items():
        conn.putheader(k, v)
    if body is not None:
        conn.putheader("Content-Length", str(len(body)))
        conn.putheader("Content-Type", "application/json")
    conn.endheaders(body)
    resp = conn.getresponse()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()


def wait_states_request(panel: int = 0) -> bytes:
    """A callback request as the page's XHRs send it (the wait-state poll)."""
    ident = {"panel": panel, "type": "wait-poll"}
    return json.dumps({
        "output": '..{"panel":["MATCH"],"type":"waits"}.data...'
                  '{"panel":["MATCH"],"type":"wait-poll"}.disabled..',
        "outputs": [{"id": {"panel": panel, "type": "waits"}, "property": "data"},
                    {"id": ident, "property": "disabled"}],
        "inputs": [{"id": ident, "property": "n_intervals", "value": 1}], "state": [],
        "changedPropIds": ['{"panel":0,"type":"wait-poll"}.n_intervals']}).encode()


@pytest.fixture(scope="module")
def loopback_server(himeno_traces):
    srv = Server(str(himeno_traces["unpatched"]))
    yield srv
    srv.stop()


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example",
                                  "localhost.evil.example:{port}", "0.0.0.0:{port}",
                                  "192.0.2.99:{port}", "", "[::1", "localhost:x", None])
def test_other_hosts_are_refused(loopback_server, host):
    port = loopback_server.port
    h = None if host is None else host.format(port=port)
    for path, method, body in (("/", "GET", None), ("/_dash-layout", "GET", None),
                               ("/_dash-update-component", "POST", wait_states_request())):
        status, _, text = request(port, path, host=h, method=method, body=body)
        assert status == 403, (h, path, status)
        assert text.count(b"\n") == 1 and b"mpiscope" not in text.lower()


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}",
                                  "127.0.0.1", "localhost", "LOCALHOST:{port}"])
def test_loopback_names_are_served_without_a_token(loopback_server, host):
    port = loopback_server.port
    h = host.format(port=port)
    status, _, text = request(port, "/", host=h)
    assert status == 200 and b"mpiscope" in text
    status, _, _ = request(port, "/_dash-update-component", host=h, method="POST",
                           body=wait_states_request())
    assert status in (200, 204)
    log = loopback_server.log()
    assert "warning" not in log and "token" not in log and "Traceback" not in log


def test_non_loopback_address_warns_and_needs_the_printed_token(himeno_traces, lan_address):
    srv = Server(str(himeno_traces["unpatched"]), "--host", lan_address, wait_host=lan_address)
    try:
        log = srv.log()
        assert "mpiscope: warning: serving on " + lan_address in log
        url = printed_url(srv)
        assert url.startswith(f"http://{lan_address}:{srv.port}/?token=")
        token = url.split("?token=", 1)[1]
        assert len(token) >= 24
        host = f"{lan_address}:{srv.port}"

        def ask(path="/", **kw):
            return request(srv.port, path, host=host, addr=lan_address, **kw)

        # without it, or with a wrong one: refused, whatever the route
        for path in ("/", "/_dash-layout", "/_dash-dependencies", "/assets/style.css"):
            assert ask(path)[0] == 403, path
        wrong = token[:-1] + ("y" if token.endswith("x") else "x")  # one character off
        assert ask("/?token=" + wrong)[0] == 403
        assert ask(headers={"Authorization": "token wrong"})[0] == 403
        assert ask(headers={"Cookie": f"mpiscope-token-{srv.port}=wrong"})[0] == 403
        assert ask("/_dash-update-component", method="POST", body=wait_states_request())[0] \
            == 403
        # the printed URL: the page, and a cookie for what the page asks next
        status, headers, body = ask("/?token=" + token)
        assert status == 200 and b"mpiscope" in body
        cookie = headers["set-cookie"]
        assert cookie.startswith(f"mpiscope-token-{srv.port}={token};")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        jar = {"Cookie": cookie.split(";", 1)[0]}
        assert ask("/_dash-layout", headers=jar)[0] == 200
        assert ask("/_dash-update-component", method="POST", body=wait_states_request(),
                   headers=jar)[0] in (200, 204)
        # or the header, as Jupyter takes it
        assert ask("/_dash-dependencies", headers={"Authorization": f"token {token}"})[0] == 200
        # the token does not make another Host acceptable
        assert request(srv.port, "/?token=" + token, host="evil.example",
                       addr=lan_address)[0] == 403
        assert "Traceback" not in srv.log()
    finally:
        srv.stop()


def test_no_token_is_an_explicit_choice_and_still_warns(himeno_traces, lan_address):
    srv = Server(str(himeno_traces["unpatched"]), "--host", lan_address, "--no-token",
                 wait_host=lan_address)
    try:
        assert "--no-token" in srv.log() and "mpiscope: warning: serving on" in srv.log()
        assert "?token=" not in printed_url(srv)
        status, _, body = request(srv.port, "/", host=f"{lan_address}:{srv.port}",
                                  addr=lan_address)
        assert status == 200 and b"mpiscope" in body
        # still only for the names it serves
        assert request(srv.port, "/", host="evil.example", addr=lan_address)[0] == 403
    finally:
        srv.stop()


def test_all_interfaces_take_this_machines_addresses_with_the_token(himeno_traces,
                                                                    lan_address):
    srv = Server(str(himeno_traces["unpatched"]), "--host", "0.0.0.0", "--token", "s3cret-T")
    try:
        assert "mpiscope: warning: serving on 0.0.0.0" in srv.log()
        assert printed_url(srv).endswith(f":{srv.port}/?token=s3cret-T")
        for host in (f"{lan_address}:{srv.port}", f"127.0.0.1:{srv.port}"):
            assert request(srv.port, "/", host=host)[0] == 403, host
            assert request(srv.port, "/?token=s3cret-T", host=host)[0] == 200, host
        assert request(srv.port, "/?token=s3cret-T", host="evil.example")[0] == 403
    finally:
        srv.stop()


def test_token_on_loopback_when_asked_for(himeno_traces):
    srv = Server(str(himeno_traces["unpatched"]), "--token", "abc")
    try:
        assert "warning" not in srv.log()
        assert printed_url(srv) == f"http://127.0.0.1:{srv.port}/?token=abc"
        host = f"127.0.0.1:{srv.port}"
        assert request(srv.port, "/", host=host)[0] == 403
        assert request(srv.port, "/", host=host, headers={"Authorization": "token abc"})[0] \
            == 200
    finally:
        srv.stop()


def test_token_and_no_token_exclude_each_other(himeno_traces):
    r = serve_cmd(str(himeno_traces["unpatched"]), "--token", "a", "--no-token",
                  "--port", str(free_port()))
    assert r.returncode == 2 and "Traceback" not in r.stderr


# -- a trace with ranks cut short: serve warns as analyze does ------------------------------

def test_ranks_cut_short_warned_as_analyze_does(tmp_path, himeno_traces):
    cut = tmp_path / "cut"
    shutil.copytree(himeno_traces["unpatched"], cut,
                    ignore=shutil.ignore_patterns(".mpiscope-cache"))
    evt = cut / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[: evt.stat().st_size // 2])  # rank 1 cut short
    analyzed = subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(cut)],
                              capture_output=True, text=True, timeout=300)
    want = [x for x in analyzed.stderr.splitlines() if "ranks cut short" in x]
    assert want == [f"mpiscope: warning: {cut}: ranks cut short (no MPI_Finalize or "
                    f"truncated events): 1; analyzed as far as their events go"], \
        analyzed.stderr
    srv = Server(str(cut))
    try:
        got = [x for x in srv.log().splitlines() if "ranks cut short" in x]
        assert got == want
        assert request(srv.port, "/", host=f"127.0.0.1:{srv.port}")[0] == 200
    finally:
        srv.stop()
