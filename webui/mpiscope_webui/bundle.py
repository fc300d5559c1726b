"""The page's JavaScript: a smaller Plotly, and gzip for what the server sends.

Plotly: dcc.Graph loads Dash's full plotly.js (4.8 MB, every trace type) on first use,
unless `window.Plotly` is already there. The assets folder holds plotly.js's "cartesian"
partial bundle (1.5 MB: bar, box, contour, heatmap, histogram*, image, pie, scatter,
scatterternary, violin), the same plotly.js version as Dash's; Dash puts every .js under
assets/ in the page as a plain <script> before its renderer starts, so that bundle is
`window.Plotly` by the time a graph mounts and the full one is never fetched. Every trace
type the web UI draws (scatter, heatmap, bar) is in it; `TRACE_TYPES` lists them and a
test checks the figures against it.

The file is vendored (works offline, reviewed like code), from the npm package
NPM_PACKAGE@PLOTLY_VERSION, checked against SHA256. To update it:
    python -m mpiscope_webui.bundle --vendor VERSION   (needs npm; prints the new sha256)

The Babel polyfill: Dash puts @babel/polyfill 7 (core-js 2 and regenerator-runtime,
90 KB) first in every page. Modern browsers need none of core-js, which replaces some
built-ins (String.prototype.trim, which Plotly calls often) with slower versions: in a
CPU profile of a page load here (load ~3) it took 0.33–0.39 s, 0.11–0.16 s of that in
its trim (docs/webui.md). Dash's renderer and its component bundles need
only the global `regeneratorRuntime` (their lazy-loading helper is compiled to it). So
the page (firstview.Page) leaves the polyfill out and assets/vendor holds
regenerator-runtime's own runtime.js (RUNTIME_PACKAGE@RUNTIME_VERSION, the version
@babel/polyfill 7.12 pins, 25 KB), which Dash loads with the other assets before its
renderer.

Compression: scripts, styles and callback answers go out gzipped to a browser that asks
for it. Static files are compressed once (level 9) and kept; callback answers at level 1
(a few ms per MB, and they shrink several times: base64 arrays of small integers).
`warm` compresses the page's scripts and styles when the server starts (level 9 of the
1.5 MB Plotly alone is ~0.2 s, which the first page load would otherwise wait for).

Caching: the assets' URLs carry their modification time (Dash's ?m=), so a browser may
keep them for good (`immutable`); Dash's own scripts have versioned URLs already.

Compile hints: Plotly's script is sent with V8's explicit compile hint
(`//# allFunctionsCalledOnLoad`, COMPILE_HINT, prepended as it is served; the vendored file
is unchanged): Chromium then compiles every function of the script while it streams in, on
a background thread, instead of each on the main thread when first called. Evaluating
Plotly and its first draw are most of the main thread's work before the first timeline a
user can zoom (docs/webui.md); other browsers ignore the comment.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import flask

NPM_PACKAGE = "plotly.js-cartesian-dist-min"
PLOTLY_VERSION = "4.1.1"
SHA256 = "79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a"
VENDOR = Path(__file__).parent / "assets" / "vendor"
IGNORE_SMALL = r"^plotly-cartesian-"  # Dash's assets_ignore that leaves it out of the page
TRACE_TYPES = frozenset({"bar", "box", "contour", "heatmap", "histogram", "histogram2d",
                         "histogram2dcontour", "image", "pie", "scatter", "scatterternary",
                         "violin"})

RUNTIME_PACKAGE = "regenerator-runtime"
RUNTIME_VERSION = "0.13.11"
RUNTIME_SHA256 = "e4fa2bcc7507e23fb226bad104bd3c526149ebc9891afbc4bb3a4a0c88afded3"
POLYFILL = r'<script src="[^"]*/deps/polyfill@[^"]*"></script>\s*'  # Dash's, left out

COMPRESSIBLE = ("application/javascript", "text/javascript", "text/css", "application/json",
                "text/html")
MIN_BYTES = 1024  # below this gzip's header costs more than it saves
STATIC = ("/assets/", "/_dash-component-suites/")
IMMUTABLE = "public, max-age=31536000, immutable"
COMPILE_HINT = b"//# allFunctionsCalledOnLoad\n"


def bundle_path(version: str = PLOTLY_VERSION) -> Path:
    return VENDOR / f"plotly-cartesian-{version}.min.js"


def bundle_url(version: str = PLOTLY_VERSION) -> str:
    """Where the page loads it from (without Dash's ?m= cache buster)."""
    return f"/assets/vendor/{bundle_path(version).name}"


def runtime_path() -> Path:
    return VENDOR / f"regenerator-runtime-{RUNTIME_VERSION}.js"


def verify() -> str | None:
    """Why a vendored file is not the one pinned here, or None if both are."""
    for p, want in ((bundle_path(), SHA256), (runtime_path(), RUNTIME_SHA256)):
        if not p.is_file():
            return f"{p} is missing"
        got = hashlib.sha256(p.read_bytes()).hexdigest()
        if got != want:
            return f"{p.name}: sha256 {got}, expected {want}"
    return None


class _Cache:
    """Gzipped static files by (path, ETag or length): each is compressed once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str], bytes] = {}

    def get(self, key: tuple[str, str], raw: bytes) -> bytes:
        with self._lock:
            hit = self._data.get(key)
        if hit is None:
            hit = gzip.compress(raw, compresslevel=9, mtime=0)
            with self._lock:
                self._data[key] = hit
        return hit


def install_compression(server: flask.Flask) -> None:
    cache = _Cache()

    @server.after_request
    def _gzip(resp: flask.Response) -> flask.Response:
        req = flask.request
        if req.path.startswith("/assets/") and "m" in req.args and resp.status_code in (
                200, 304):
            resp.headers["Cache-Control"] = IMMUTABLE
        if ("gzip" not in req.headers.get("Accept-Encoding", "").lower()
                or resp.status_code != 200 or "Content-Encoding" in resp.headers
                or resp.mimetype not in COMPRESSIBLE or req.method == "HEAD"):
            return resp
        resp.direct_passthrough = False  # send_file streams; we need the bytes
        raw = resp.get_data()
        if len(raw) < MIN_BYTES:
            return resp
        static = req.path.startswith(STATIC)
        if static:
            etag, _weak = resp.get_etag()
            body = cache.get((req.path, etag or str(len(raw))), raw)
            if etag:  # another representation, another tag
                resp.set_etag(etag + "-gz")
        else:
            body = gzip.compress(raw, compresslevel=1, mtime=0)
        resp.set_data(body)
        resp.headers["Content-Encoding"] = "gzip"
        resp.headers["Content-Length"] = str(len(body))
        resp.vary.add("Accept-Encoding")
        resp.headers.pop("Accept-Ranges", None)  # byte ranges of the plain file only
        return resp


def install_compile_hints(server: flask.Flask, enabled: Callable[[], bool]) -> None:
    """Plotly's script with COMPILE_HINT first (while `enabled()`; a switch for
    benchmarks). Install after install_compression: Flask runs the later hook first, so
    the hinted script is what gets gzipped (and cached by its own ETag)."""
    url = bundle_url()

    @server.after_request
    def _hint(resp: flask.Response) -> flask.Response:
        if flask.request.path != url or not enabled():
            return resp
        resp.headers.pop("Accept-Ranges", None)  # the file's byte ranges are not this
        if resp.status_code != 200:
            return resp
        resp.direct_passthrough = False
        resp.set_data(COMPILE_HINT + resp.get_data())
        etag, _weak = resp.get_etag()
        if etag:  # another representation, another tag
            resp.set_etag(etag + "-hint")
        return resp


def warm(server: flask.Flask, token: str | None = None) -> threading.Thread:
    """Ask for the page, then (on a thread, returned started) for each script and style
    it loads, as a browser would (Host localhost, gzip accepted), so that each is
    compressed before a browser asks.

    The page itself is asked for at once: the first request sets Dash up (its assets
    found, the layout checked), and Dash marks that done before it is, so a page asked for
    by a browser meanwhile came without the assets (no Plotly bundle, no timeline.js)."""
    c = server.test_client()
    headers = {"Host": "localhost"}
    if token:
        headers["Authorization"] = f"token {token}"
    page = c.get("/", headers=headers).get_data(as_text=True)

    def scripts() -> None:
        for url in re.findall(r'(?:src|href)="(/(?:assets|_dash-component-suites)/[^"]+)"',
                              page):
            c.get(url, headers={**headers, "Accept-Encoding": "gzip"}).close()

    t = threading.Thread(target=scripts, daemon=True)
    t.start()
    return t


def vendor(version: str) -> str:
    """Fetch NPM_PACKAGE@version with npm into assets/vendor (replacing the old file);
    returns its sha256, to pin in SHA256."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", f"{NPM_PACKAGE}@{version}"], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        tgz = next(Path(tmp).glob("*.tgz"))
        shutil.unpack_archive(tgz, tmp)
        pkg = Path(tmp) / "package"
        for old in VENDOR.glob("plotly-cartesian-*.min.js"):
            old.unlink()
        VENDOR.mkdir(parents=True, exist_ok=True)
        shutil.copy(pkg / "plotly-cartesian.min.js", bundle_path(version))
        shutil.copy(pkg / "LICENSE", VENDOR / "LICENSE-plotly.js.txt")
    return hashlib.sha256(bundle_path(version).read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vendor", metavar="VERSION", help="fetch this version with npm")
    args = ap.parse_args(argv)
    if args.vendor:
        print(f"{bundle_path(args.vendor).name} sha256 {vendor(args.vendor)}: set "
              f"PLOTLY_VERSION and SHA256 in {__file__}")
        return 0
    why = verify()
    print(why or f"{bundle_path().name}: ok")
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())
