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
from plotly.io.json import to_json_plotly
from selenium.webdriver.common.by import By
from werkzeug.http import parse_cookie
from werkzeug.serving import make_server

from mpiscope.archive import reader
from mpiscope_testing.browser import WINDOW
from mpiscope_testing.webui_page import GD, layout_problems, open_app, wait_until, zoom_to
from mpiscope_webui import bundle, firstview, ooc, pyramid
from mpiscope_webui.app import create_app

pytestmark = pytest.mark.browser

DRAWN = f"const g={GD.format(p=0)}; return g && g._fullData && g._fullData.length > 3"
KNOWN = ("const known = new Set(Object.keys(Plotly.PlotSchema.get().traces)); return "
         "[...document.querySelectorAll('.js-plotly-plot')].flatMap(g => (g.data || [])"
         ".map(t => t.type || 'scatter')).filter(t => !known.has(t))")


def fresh_page(browser, url: str, what: str) -> None:
    """The page loaded with no cookie (so no width from an earlier test), drawn."""
    browser.delete_all_cookies()
    browser.get(url)
    wait_until(browser, DRAWN, what=what)


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
    """At 1024x768 (the other tests here load the page at the browser's 1500 px): the
    layout's figure is drawn for that width, its legend's rows and all."""
    trace = reader.load(himeno_traces["unpatched"])
    browser.set_window_size(1024, 768)
    with served(himeno_app) as (url, asked), callbacks_blocked(browser):
        fresh_page(browser, url, "timeline drawn from the layout")
        problems = layout_problems(browser)
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
    assert problems == []
    browser.set_window_size(*WINDOW)


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
        fresh_page(browser, url, "out-of-core timeline drawn from the layout")
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


STILL_PIXELS = """
const c = document.querySelector('#first-view .timeline canvas');
if (!c || !c.width) return null;
const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
const seen = new Set();
for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
return [...seen].map(v => '#' + v.toString(16).padStart(6, '0'));"""


def test_still_first_view_is_painted_before_the_scripts_run(browser, himeno_app):
    """With Dash's renderer and Plotly never loaded, the page still shows the whole run:
    the still first view (firstview.py) painted from the page alone, in the timeline's
    colours, with the status line the live page has."""
    with served(himeno_app) as (url, asked):
        browser.delete_all_cookies()
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setBlockedURLs", {
            "urls": ["*dash_renderer*", "*plotly*", "*async-graph*"]})
        try:
            browser.get(url)
            colours = wait_until(browser, STILL_PIXELS, what="still timeline painted")
            text = browser.execute_script(
                "return document.getElementById('first-view').innerText")
            live = browser.execute_script("return document.querySelectorAll("
                                          "'.js-plotly-plot').length")
        finally:
            browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
            browser.execute_cdp_cmd("Network.disable", {})
    # the page alone: no callback (the layout is asked for early, firstview_early.js, but
    # nothing could draw it)
    assert all(kind == "layout" for kind, _w in asked), asked
    assert live == 0
    fig, status, _over = himeno_app.controller.first_view(0, 1400)
    # the states' colours of the figure the layout holds (MPI_Allreduce, MPI_Waitall...)
    fills = {t["fillcolor"] for t in fig["data"] if t.get("fill") == "toself"
             and t["name"] in ("MPI_Allreduce", "MPI_Waitall")}
    assert fills and fills <= set(colours)
    assert "states drawn" in text and "mpiscope" in text


def test_still_first_view_gives_way_to_the_live_graph(browser, himeno_app):
    """Once the live timeline is drawn the still picture is gone: what the user sees and
    clicks is the interactive graph; and the page logs no error."""
    with served(himeno_app) as (url, _asked):
        browser.delete_all_cookies()
        browser.get_log("browser")  # drop earlier tests' messages
        browser.get(url)
        wait_until(browser, DRAWN, what="live timeline drawn")
        wait_until(browser, "return !document.getElementById('first-view')",
                   what="still first view removed")
        on_top = browser.execute_script(
            f"const r = {GD.format(p=0)}.getBoundingClientRect(); "
            "const e = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);"
            " return !!e.closest('.js-plotly-plot');")
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert on_top
    assert not errors


def test_page_and_layout_share_the_first_view(himeno_app, synth):
    """The still picture is the layout's first figure (computed once for both), in
    memory and out of core."""
    c = himeno_app.server.test_client()
    c.set_cookie(firstview.WIDTH_COOKIE, "1300")
    page = c.get("/").get_data(as_text=True)
    layout = c.get("/_dash-layout").get_data(as_text=True)
    fig, _status, over = himeno_app.controller.first_view(0, 1300)
    still = json.loads(page.split('id="first-view-data">')[1].split("</script>")[0])
    assert still == json.loads(to_json_plotly([over, fig]))
    assert to_json_plotly(fig) in layout  # the very same figure
    reader.load(synth)
    c = ooc.create_app(synth).server.test_client()
    page = c.get("/").get_data(as_text=True)
    assert 'id="first-view"' in page and "from the pyramid" in page


def test_a_zoom_survives_relayouts_that_do_not_navigate(browser, synth):
    """Plotly reports other relayouts too (e.g. {autosize: true} after a redraw); one
    right after a zoom used to make Dash keep its answer instead of the zoom's."""
    reader.load(synth)
    app = ooc.create_app(synth)
    with served(app) as (url, _asked):
        fresh_page(browser, url, "out-of-core timeline drawn")
        wait_until(browser, f"return {GD.format(p=0)}.__mpiscopeRelayout === true",
                   what="timeline listening")
        t0, t1 = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
        a, b = t0 + (t1 - t0) / 3, t0 + (t1 - t0) / 2
        browser.execute_script(
            f"const g = {GD.format(p=0)}; Plotly.relayout(g, {{'xaxis.range[0]': {a!r}, "
            f"'xaxis.range[1]': {b!r}}}); Plotly.relayout(g, {{autosize: true}});")
        text = wait_until(browser, "const s = document.querySelector('#panel-0 .status')"
                          f".textContent; return s.startsWith('{a:.6f}') && s",
                          what="the zoomed window drawn")
    assert f"{a:.6f} – {b:.6f} s" in text


def test_still_first_view_keeps_names_as_text():
    """Trace labels and function names reach the page as text, whatever they hold."""
    evil = "</script><script>alert(1)</script><!--"
    fig = {"data": [{"type": "scatter", "name": evil}], "layout": {"height": 100}}
    page = firstview.static_html(firstview.StaticView(
        [evil], [firstview.StaticPanel(evil, evil, evil, [("timeline", fig)])]))
    assert "<script>alert" not in page and "<!--" not in page
    data = page.split('id="first-view-data">')[1].split("</script>")[0]
    assert json.loads(data) == [fig]


@pytest.fixture(scope="module")
def synth_app(synth):
    reader.load(synth)
    return create_app([synth], analyze_now=True)


def test_page_runs_without_the_babel_polyfill(browser, synth_app):
    """The page leaves out Dash's Babel polyfill (bundle.py): the timeline is drawn and
    zooms, and the tabs' lazily loaded components (the functions table, its histogram)
    still load and draw, with no error in the page's log."""
    with served(synth_app) as (url, _asked):
        browser.delete_all_cookies()
        browser.get_log("browser")  # drop earlier tests' messages
        browser.get(url)
        wait_until(browser, DRAWN, what="live timeline drawn")
        wait_until(browser, f"return {GD.format(p=0)}.__mpiscopeRelayout === true",
                   what="timeline listening")
        wait_until(browser, "return document.querySelectorAll('[data-dash-is-loading="
                   "\"true\"]').length === 0", what="page settled")
        t0, t1 = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
        zoom_to(browser, t0 + (t1 - t0) / 4, t0 + (t1 - t0) / 2)
        browser.find_element(
            By.XPATH, "//div[contains(@class,'tab')][normalize-space(.)='Functions']").click()
        wait_until(browser, "return [...document.querySelectorAll('td[data-dash-column="
                   "\"name\"]')].some(c => c.textContent.trim() === 'MPI_Allreduce')",
                   what="functions table")
        loaded = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
        runtime = browser.execute_script("return typeof regeneratorRuntime.mark")
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not [u for u in loaded if "polyfill" in u], loaded
    assert any(bundle.runtime_path().name in u for u in loaded), loaded
    assert runtime == "function"
    assert not errors


def failing_first_layout(app):
    """The app, but the first GET /_dash-layout gets a 503 (a server busy at that moment)."""
    failed: list[bool] = []

    def wsgi(environ, start_response):
        if environ.get("PATH_INFO") == "/_dash-layout" and not failed:
            failed.append(True)
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"busy"]
        return app.server(environ, start_response)

    return type("Failing", (), {"server": staticmethod(wsgi)})


def test_layout_is_asked_for_once_before_the_scripts_run(browser, synth_app):
    """The page asks for the layout from its first inline script (firstview_early.js),
    not after Dash's scripts ran; Dash's renderer draws from that answer and does not
    ask again; and if that early answer fails, the renderer asks itself and draws."""
    with served(synth_app) as (url, asked):
        fresh_page(browser, url, "live timeline drawn")
        early = browser.execute_script("return window.mpiscopeEarlyFetch")
        width = browser.execute_script(
            "return document.getElementById('timelines').clientWidth")
        status = browser.execute_script(
            "return document.querySelector('#panel-0 .status').textContent")
    assert early == ["/_dash-layout", "/_dash-dependencies"]
    assert [w for kind, w in asked if kind == "layout"] == [str(width)]
    assert "states drawn" in status
    with served(failing_first_layout(synth_app)) as (url, asked):
        fresh_page(browser, url, "live timeline drawn after a failed early layout")
    assert [kind for kind, _w in asked if kind == "layout"] == ["layout", "layout"]


def test_page_without_the_early_requests_still_draws(browser, synth_app):
    """early_fetch and polyfill off (the page as before, for benchmarks): Dash asks for
    the layout itself and the timeline is drawn."""
    synth_app.early_fetch, synth_app.polyfill = False, True
    try:
        with served(synth_app) as (url, asked):
            fresh_page(browser, url, "live timeline drawn")
            early = browser.execute_script("return window.mpiscopeEarlyFetch || null")
            loaded = browser.execute_script(
                "return performance.getEntriesByType('resource').map(e => e.name)")
    finally:
        synth_app.early_fetch, synth_app.polyfill = True, False
    assert early is None
    assert [kind for kind, _w in asked if kind == "layout"] == ["layout"]
    assert [u for u in loaded if "polyfill" in u]


def held_layout(app, gate: threading.Event):
    """The app, but the layout is only sent once `gate` is set (a server slow to answer
    it): until then the page has its scripts and the still view, and Dash cannot draw."""
    def wsgi(environ, start_response):
        if environ.get("PATH_INFO") == "/_dash-layout":
            gate.wait(60)
        return app.server(environ, start_response)

    return type("Held", (), {"server": staticmethod(wsgi)})


EARLY = "document.querySelector('#first-view .js-plotly-plot')"


def open_early(browser, url: str) -> None:
    """A fresh page at `url`, once its early graph is drawn and Dash's is not yet."""
    browser.delete_all_cookies()
    browser.get(url)
    wait_until(browser, f"const e = {EARLY}; return e && e.querySelector('.nsewdrag')",
               what="early timeline drawn")
    assert browser.execute_script("return !document.querySelector('.dash-graph')")


def test_zoom_on_the_early_timeline_is_kept(browser, synth_app):
    """Before Dash has drawn anything, the still view's timeline is already a Plotly
    graph a user can drag-zoom (firstview_paint.js); that zoom is not lost: once Dash's
    timeline is drawn it shows the same window, with the server's detail for it."""
    from selenium.webdriver.common.action_chains import ActionChains

    gate = threading.Event()
    try:
        with served(held_layout(synth_app, gate)) as (url, asked):
            open_early(browser, url)
            full = browser.execute_script(f"return {EARLY}._fullLayout.xaxis.range")
            box = browser.find_element(By.CSS_SELECTOR, "#first-view .nsewdrag")
            w = box.size["width"]
            # drag across the middle third of the plot, as a user zooms in
            ActionChains(browser).move_to_element_with_offset(box, -w // 6, 0) \
                .click_and_hold().move_by_offset(w // 6, 2).move_by_offset(w // 6, 0) \
                .release().perform()
            zoomed = wait_until(
                browser, f"const r = {EARLY}._fullLayout.xaxis.range; return "
                f"(r[0] > {full[0]!r} && r[1] < {full[1]!r}) && r", what="early graph zoomed")
            gate.set()
            wait_until(browser, "return !document.getElementById('first-view')", timeout=60,
                       what="still view gave way to Dash's timeline")
            text = wait_until(browser, "const s = document.querySelector('#panel-0 .status')"
                              f".textContent; return s.startsWith('{zoomed[0]:.6f}') && s",
                              what="the zoomed window drawn by the server")
            shown = browser.execute_script(
                f"return {GD.format(p=0)}._fullLayout.xaxis.range")
    finally:
        gate.set()
    assert shown == pytest.approx(zoomed, abs=1e-6)
    assert f"{zoomed[0]:.6f} – {zoomed[1]:.6f} s" in text
    # the server was asked for that window: a timeline callback after the layout
    assert [o for kind, o in asked if kind == "callback" and timeline_figure(o)]


def test_click_on_the_early_timeline_shows_its_details(browser, synth_app, synth):
    """A click on a state of the early graph (before Dash has drawn anything) is not
    lost: once Dash's timeline is drawn, the details panel shows that call, as a click on
    Dash's graph does."""
    from selenium.webdriver.common.action_chains import ActionChains

    trace = reader.load(synth)
    gate = threading.Event()
    try:
        with served(held_layout(synth_app, gate)) as (url, _asked):
            open_early(browser, url)
            # a state drawn on its own (its undrawn hover point carries the call), clicked
            # with the mouse where it is drawn
            call, off = browser.execute_script(f"""
                const g = {EARLY}; const t = g._fullData.find(t => t.name === 'hover');
                const xa = g._fullLayout.xaxis, ya = g._fullLayout.yaxis;
                const r = g.getBoundingClientRect();
                const i = Math.floor(t.x.length / 2);
                return [t.customdata[i], [xa._offset + xa.d2p(t.x[i]) - r.width / 2,
                                          ya._offset + ya.d2p(t.y[i]) - r.height / 2]];""")
            el = browser.execute_script(f"return {EARLY}")
            ActionChains(browser).move_to_element_with_offset(el, int(off[0]), int(off[1])) \
                .click().perform()
            assert browser.execute_script(
                "return !document.querySelector('#panel-0 .details')")  # no Dash page yet
            gate.set()
            wait_until(browser, "return !document.getElementById('first-view')", timeout=60,
                       what="still view gave way to Dash's timeline")
            details = wait_until(browser, "const d = document.querySelector('#panel-0 "
                                 ".details'); return d && d.innerText.includes('function') "
                                 "&& d.innerText", what="the clicked call's details")
    finally:
        gate.set()
    row = trace.calls.iloc[int(call)]
    text = " ".join(details.split())
    assert "Call" in text
    assert f"function {row['function']}" in text and f"rank {int(row['rank'])}" in text
    # every line of that call's table (its start and duration too)
    for k, v in synth_app.controller.call_lines(0, int(call)):
        assert f"{k} {v}" in text
