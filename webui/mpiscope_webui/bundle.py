"""The page's JavaScript: a smaller Plotly, and gzip for what the server sends.

Plotly: dcc.Graph loads Dash's full plotly.js (4.8 MB, every trace type) on first use,
unless `window.Plotly` is already there. Dash puts every .js under assets/ in the page as
a plain <script> before its renderer starts, so a Plotly bundle there is `window.Plotly`
by the time a graph mounts and the full one is never fetched. The page's bundle is
plotly.js built with only the trace types the web UI draws (scatter, which is in
plotly.js's core, bar and heatmap: `TRACE_TYPES`; a test checks the figures against it),
1.18 MB where plotly.js's own "cartesian" partial bundle (bar, box, contour, heatmap,
histogram*, image, pie, scatter, scatterternary, violin, and world calendars) is 1.5 MB:
in Chromium that cut the time to the first timeline a user can zoom by 0.2-0.28 s
(best and median, load 5-6, docs/webui.md), most of it Plotly's evaluation at load.

`PLOTLIES` are the vendored bundles a page can have (`assets_ignore` leaves the others
out): "trimmed" (the page's), "cartesian" (plotly.js's partial bundle, npm
CARTESIAN_PACKAGE, kept for the benchmarks' page before the trimmed build) or "full"
(neither: Dash's). Both files are vendored (work offline, reviewed like code), the same
plotly.js version as Dash's, and checked against their SHA256 (`verify`). To update:
    python -m mpiscope_webui.bundle --build VERSION    (the trimmed one: npm and node)
    python -m mpiscope_webui.bundle --vendor VERSION   (the cartesian one: npm)
each prints the new sha256. `--build` builds plotly.js@VERSION's own sources
(lib/core, lib/bar, lib/heatmap: TRIMMED_ENTRY) with esbuild@ESBUILD_VERSION as
plotly.js's own build does (its esbuild-config.js: an IIFE named Plotly, target
es2016), minified; the npm packages are installed without running their scripts.

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

PLOTLY_VERSION = "4.1.1"
VENDOR = Path(__file__).parent / "assets" / "vendor"
TRACE_TYPES = frozenset({"scatter", "bar", "heatmap"})  # what the trimmed bundle draws
# (file name prefix, sha256) of each vendored bundle
PLOTLIES = {"trimmed": ("plotly-trimmed-",
                        "6b3d71cbadc3e1f5bba20992a5b033f609a74c787fd8beeb1c45a64e7ef5223d"),
            "cartesian": ("plotly-cartesian-",
                          "79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a")}
PLOTLY = "trimmed"  # the page's
CARTESIAN_PACKAGE = "plotly.js-cartesian-dist-min"
ESBUILD_VERSION = "0.28.2"
TRIMMED_ENTRY = """'use strict';
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap')]);
module.exports = Plotly;
"""
# plotly.js's esbuild-config.js, minified; its CSS (maplibre's, for map traces) left out
ESBUILD_JS = """require('esbuild').buildSync({
  entryPoints: ['entry.js'], outfile: 'out.min.js', bundle: true, minify: true,
  format: 'iife', globalName: 'Plotly', target: 'es2016', legalComments: 'none',
  define: {global: 'window', 'define.amd': 'false', 'process.env.NODE_DEBUG': 'false'},
  loader: {'.css': 'empty'}, banner: {js: process.argv[2]}, logLevel: 'warning'});
"""

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


def bundle_path(which: str = PLOTLY, version: str = PLOTLY_VERSION) -> Path:
    return VENDOR / f"{PLOTLIES[which][0]}{version}.min.js"


def bundle_url(which: str = PLOTLY, version: str = PLOTLY_VERSION) -> str:
    """Where the page loads it from (without Dash's ?m= cache buster)."""
    return f"/assets/vendor/{bundle_path(which, version).name}"


def assets_ignore(which: str = PLOTLY) -> str:
    """Dash's assets_ignore for a page with the vendored bundle `which` (or "full": none
    of them, dcc.Graph fetches Dash's): every other one left out."""
    return "|".join(f"^{re.escape(prefix)}" for name, (prefix, _sha) in PLOTLIES.items()
                    if name != which)


def runtime_path() -> Path:
    return VENDOR / f"regenerator-runtime-{RUNTIME_VERSION}.js"


def verify() -> str | None:
    """Why a vendored file is not the one pinned here, or None if both are."""
    pinned = [(bundle_path(name), sha) for name, (_prefix, sha) in PLOTLIES.items()]
    for p, want in (*pinned, (runtime_path(), RUNTIME_SHA256)):
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
    """Plotly's script (each vendored bundle) with COMPILE_HINT first (while `enabled()`;
    a switch for benchmarks). Install after install_compression: Flask runs the later
    hook first, so the hinted script is what gets gzipped (and cached by its own ETag)."""
    urls = {bundle_url(name) for name in PLOTLIES}

    @server.after_request
    def _hint(resp: flask.Response) -> flask.Response:
        if flask.request.path not in urls or not enabled():
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


def _install(which: str, version: str, js: Path, licence: Path) -> str:
    """`js` as the vendored bundle `which` of `version` (replacing the old one), with
    plotly.js's licence; returns its sha256, to pin in PLOTLIES."""
    for old in VENDOR.glob(f"{PLOTLIES[which][0]}*.min.js"):
        old.unlink()
    VENDOR.mkdir(parents=True, exist_ok=True)
    shutil.copy(js, bundle_path(which, version))
    shutil.copy(licence, VENDOR / "LICENSE-plotly.js.txt")
    return hashlib.sha256(bundle_path(which, version).read_bytes()).hexdigest()


def vendor(version: str) -> str:
    """Fetch CARTESIAN_PACKAGE@version with npm into assets/vendor (replacing the old
    file); returns its sha256, to pin in PLOTLIES."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", f"{CARTESIAN_PACKAGE}@{version}"], cwd=tmp,
                       check=True, stdout=subprocess.DEVNULL)
        tgz = next(Path(tmp).glob("*.tgz"))
        shutil.unpack_archive(tgz, tmp)
        pkg = Path(tmp) / "package"
        return _install("cartesian", version, pkg / "plotly-cartesian.min.js",
                        pkg / "LICENSE")


def build(version: str) -> str:
    """Build the trimmed bundle of plotly.js@version into assets/vendor (replacing the old
    file): npm installs plotly.js and esbuild (no install scripts run), node builds
    TRIMMED_ENTRY; returns its sha256, to pin in PLOTLIES."""
    banner = (f"/*! plotly.js v{version} (MIT License, Plotly, Inc.): core (scatter) + bar + "
              f"heatmap, built by mpiscope_webui.bundle with esbuild {ESBUILD_VERSION} */")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "package.json").write_text('{"name": "trimmed", "private": true}')
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund",
                        f"plotly.js@{version}", f"esbuild@{ESBUILD_VERSION}"], cwd=tmp,
                       check=True, stdout=subprocess.DEVNULL)
        (Path(tmp) / "entry.js").write_text(TRIMMED_ENTRY)
        (Path(tmp) / "build.js").write_text(ESBUILD_JS)
        subprocess.run(["node", "build.js", banner], cwd=tmp, check=True)
        return _install("trimmed", version, Path(tmp) / "out.min.js",
                        Path(tmp) / "node_modules" / "plotly.js" / "LICENSE")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", metavar="VERSION",
                    help="build the trimmed bundle of this version (npm, node)")
    ap.add_argument("--vendor", metavar="VERSION",
                    help="fetch plotly.js's cartesian bundle of this version with npm")
    args = ap.parse_args(argv)
    for which, version, make in (("trimmed", args.build, build),
                                 ("cartesian", args.vendor, vendor)):
        if version:
            print(f"{bundle_path(which, version).name} sha256 {make(version)}: set "
                  f"PLOTLY_VERSION and PLOTLIES in {__file__}")
    if args.build or args.vendor:
        return 0
    why = verify()
    print(why or "vendored bundles: ok")
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())
