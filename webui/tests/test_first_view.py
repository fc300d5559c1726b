"""The first view needs no callback round trip (mpiscope_webui.firstview, issue 17): the
page draws the whole run's timeline from the layout alone, for the width the page
measures, so with every callback request blocked the user still sees it, and with them
allowed the page never asks for the timeline again. Out of core too."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from werkzeug.http import parse_cookie
from werkzeug.serving import make_server

from mpiscope.archive import reader
from mpiscope_testing.webui_page import GD, open_app, wait_until, zoom_to
from mpiscope_webui import bundle, firstview, ooc, pyramid
from mpiscope_webui.app import create_app

pytestmark = pytest.mark.browser

DRAWN = f"const g={GD.format(p=0)}; return g && g._fullData && g._fullData.length > 3"
KNOWN = ("const known = new Set(Object.keys(Plotly.PlotSchema.get().traces)); return "
         "[...document.querySelectorAll('.js-plotly-plot')].flatMap(g => (g.data || [])"
         ".map(t => t.type || 'scatter')).filter(t => !known.has(t))")


@contextmanager
def served(app) -> Iterator[tuple[str, list]]:
    """The app on a free port, with what the page asked for: ("layout", width cookie) and
    ("callback", outputs) in order."""
    asked: list = []

    def recording(environ, start_response):
        path = environ.get("PATH_INFO")
        if path == "/_dash-layout":
            asked.append(("layout", parse_cookie(environ).get(firstview.WIDTH_COOKIE)))
        elif path == "/_dash-update-component":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            asked.append(("callback", json.loads(body).get("output")))
        return app.server(environ, start_response)

    srv = make_server("127.0.0.1", 0, recording, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}/", asked
    finally:
        srv.shutdown()


@contextmanager
def callbacks_blocked(driver) -> Iterator[None]:
    """Every POST /_dash-update-component fails in the browser, as if the server never
    answered one."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*_dash-update-component*"]})
    try:
        yield
    finally:
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        driver.execute_cdp_cmd("Network.disable", {})


@pytest.fixture(scope="module")
def himeno_app(himeno_traces):
    return create_app([himeno_traces["unpatched"]], analyze_now=True)


def test_first_view_is_drawn_with_every_callback_blocked(browser, himeno_app, himeno_traces):
    trace = reader.load(himeno_traces["unpatched"])
    with served(himeno_app) as (url, asked), callbacks_blocked(browser):
        browser.delete_all_cookies()
        browser.get(url)
        wait_until(browser, DRAWN, what="timeline drawn from the layout")
        drawn = browser.execute_script(
            f"const g={GD.format(p=0)}; return [g._fullLayout.xaxis.range, g.layout.yaxis."
            "ticktext, g._fullData.filter(t => t.visible === true).map(t => t.name)]")
        status = browser.execute_script(
            "return document.querySelector('#panel-0 .status').textContent")
        overview = browser.execute_script(
            "return document.querySelector('#panel-0 .overview .js-plotly-plot')"
            "._fullData.map(t => t.type)")
    # every request the page made for a callback failed: the server saw none
    assert not [kind for kind, _ in asked if kind == "callback"]
    # the whole run, every rank, its functions, and the status line
    lo, hi = drawn[0]
    assert lo == pytest.approx(trace.calls["start"].min() / 1e9, abs=1e-6)
    assert hi == pytest.approx(trace.calls["end"].max() / 1e9, abs=1e-3)
    assert drawn[1] == [f"{h} · rank {r}" for r, h in zip(trace.ranks["rank"],
                                                         trace.ranks["host"], strict=True)]
    assert {"MPI_Allreduce", "MPI_Waitall", "compute"} <= set(drawn[2])
    assert "states drawn" in status
    assert overview == ["heatmap"]


def test_page_never_asks_for_the_timeline_it_was_given(browser, himeno_app):
    with served(himeno_app) as (url, asked):
        browser.delete_all_cookies()
        open_app(browser, url)
        width = browser.execute_script(
            "return document.getElementById('timelines').clientWidth")
        unknown = browser.execute_script(KNOWN)
        loaded = list(asked)
        # a zoom still asks the server for its view
        t0, t1 = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
        zoom_to(browser, t0 + (t1 - t0) / 4, t0 + (t1 - t0) / 2)
    # the layout was asked for with the width the page has (a fresh browser: its first visit)
    assert [w for kind, w in loaded if kind == "layout"] == [str(width)]
    assert [o for kind, o in loaded if kind == "callback"]  # the tabs, the strip…
    assert not [o for kind, o in loaded if kind == "callback" and timeline_figure(o)]
    assert [o for kind, o in asked[len(loaded):] if kind == "callback" and timeline_figure(o)]
    assert unknown == []  # every graph's trace types are in the small bundle


def timeline_figure(output: object) -> bool:
    """Whether a callback's outputs (Dash's "..id.prop...id.prop.." string) draw a
    timeline."""
    return isinstance(output, str) and any(
        '"type":"timeline"' in part and part.endswith(".figure") for part in output.split(".."))


def test_out_of_core_first_view_is_drawn_with_every_callback_blocked(browser, synth):
    reader.load(synth)
    app = ooc.create_app(synth)
    with served(app) as (url, asked), callbacks_blocked(browser):
        browser.delete_all_cookies()
        browser.get(url)
        wait_until(browser, DRAWN, what="out-of-core timeline drawn from the layout")
        drawn = browser.execute_script(
            f"return {GD.format(p=0)}._fullData.map(t => [t.type, t.name])")
        status = browser.execute_script(
            "return document.querySelector('#panel-0 .status').textContent")
        width = browser.execute_script(
            "return document.getElementById('timelines').clientWidth")
        unknown = browser.execute_script(KNOWN)
    assert drawn[0] == ["heatmap", "summary"]
    assert "from the pyramid" in status and "0 calls read" in status
    assert [w for kind, w in asked if kind == "layout"] == [str(width)]
    assert not [o for kind, o in asked if kind == "callback"]
    assert unknown == []
    assert isinstance(app.pyramid, pyramid.Pyramid)


def test_assets_are_kept_by_the_browser_and_the_graph_chunk_preloaded(himeno_app):
    """The assets' URLs carry their version (Dash's ?m=): a browser may keep them for good;
    the graph's chunk is fetched with the page's scripts, not after the layout."""
    c = himeno_app.server.test_client()
    page = c.get("/").get_data(as_text=True)
    src = next(s.split('"')[0] for s in page.split('src="')[1:]
               if bundle.bundle_url() in s.split('"')[0])
    r = c.get(src, headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip"
    assert r.headers["Cache-Control"] == bundle.IMMUTABLE
    assert firstview.PRELOAD[0] in page  # the graph's chunk comes with the scripts
