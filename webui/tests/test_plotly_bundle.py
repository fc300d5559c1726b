"""The page runs on the smaller Plotly (mpiscope_webui.bundle): the vendored trimmed
bundle is what the browser loads, Dash's full plotly.js is never fetched, and every figure
the web UI draws (timeline, overview, breakdown, duration histogram, comm matrix, message
sizes, the strip, the critical path's overlay and its tab) is drawn with it. Static files
and callback answers go out gzipped."""

from __future__ import annotations

import gzip
import hashlib

import pytest
from selenium.webdriver.common.by import By

from mpiscope_testing.webui_page import open_app, wait_until
from mpiscope_webui import bundle, timeline, views
from mpiscope_webui.app import create_app
from mpiscope_webui.model import TraceModel

# every graph on the page as Plotly drew it: its trace types, and whether Plotly knew them
DRAWN = """
const known = new Set(Object.keys(Plotly.PlotSchema.get().traces));
return [...document.querySelectorAll('.js-plotly-plot')].filter(g => g._fullData).map(g => ({
  id: g.parentElement.id || g.closest('[id]').id,
  types: g._fullData.map(t => t.type),
  unknown: g.data.map(t => t.type || 'scatter').filter(t => !known.has(t)),
  drawn: g.querySelectorAll('.main-svg').length > 0 && !!g._fullLayout._size}));"""


def test_vendored_bundle_is_the_pinned_one():
    assert bundle.verify() is None
    text = bundle.bundle_path().read_bytes()[:200].decode()
    assert f"plotly.js v{bundle.PLOTLY_VERSION} " in text and "bar + heatmap" in text
    text = bundle.bundle_path("cartesian").read_bytes()[:200].decode()
    assert f"plotly.js (cartesian - minified) v{bundle.PLOTLY_VERSION}" in text
    assert (bundle.VENDOR / "LICENSE-plotly.js.txt").read_text().startswith("MIT License")


def test_figures_use_only_trace_types_in_the_bundle(himeno_traces):
    from mpiscope.archive import reader

    m = TraceModel.build(reader.load(himeno_traces["unpatched"]))
    a = m.analysis()
    v = timeline.View(m.index.origin / 1e9, (m.index.origin + m.duration) / 1e9)
    figures = [timeline.render(m, v, 1400).figure, timeline.overview(m, v),
               views.breakdown_figure(a).to_plotly_json(),
               views.duration_histogram(m, "MPI_Allreduce").to_plotly_json(),
               views.comm_matrix_figure(a, m.trace.num_ranks).to_plotly_json(),
               views.message_size_figure(a).to_plotly_json()]
    types = {t.get("type", "scatter") for f in figures for t in f["data"]}
    assert types >= {"scatter", "heatmap", "bar"}
    assert types <= bundle.TRACE_TYPES


def test_server_gzips_scripts_and_callback_answers(himeno_traces):
    app = create_app([himeno_traces["unpatched"]], analyze_now=True)
    c = app.server.test_client()
    url = bundle.bundle_url()
    plain = c.get(url)
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    # the vendored file as pinned, after V8's compile hint (bundle.py)
    assert plain.data.startswith(bundle.COMPILE_HINT)
    assert hashlib.sha256(plain.data[len(bundle.COMPILE_HINT):]).hexdigest() == \
        bundle.PLOTLIES[bundle.PLOTLY][1]
    assert int(plain.headers["Content-Length"]) == len(plain.data)
    zipped = c.get(url, headers={"Accept-Encoding": "gzip, deflate, br"})
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert len(zipped.data) < len(plain.data) / 2
    assert gzip.decompress(zipped.data) == plain.data
    assert "Accept-Encoding" in zipped.headers["Vary"]
    # Dash's own scripts too
    page = c.get("/").get_data(as_text=True)
    dcc = next(s.split('"')[0] for s in page.split('src="')[1:]
               if "dash_core_components." in s.split('"')[0])
    z = c.get(dcc, headers={"Accept-Encoding": "gzip"})
    assert z.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(z.data) == c.get(dcc).data
    assert not c.get(dcc).data.startswith(bundle.COMPILE_HINT)  # Plotly's script only


def test_compile_hint_is_a_switch(himeno_traces):
    """Without the hint (the benchmarks' page before it) the vendored file goes out as it
    is, with its own ETag: the hinted and the plain script are not taken for each other."""
    app = create_app([himeno_traces["unpatched"]], analyze_now=True)
    c = app.server.test_client()
    hinted = c.get(bundle.bundle_url(), headers={"Accept-Encoding": "gzip"})
    app.compile_hints = False
    plain = c.get(bundle.bundle_url(), headers={"Accept-Encoding": "gzip"})
    assert gzip.decompress(plain.data) == bundle.bundle_path().read_bytes()
    assert gzip.decompress(hinted.data) == bundle.COMPILE_HINT + gzip.decompress(plain.data)
    assert hinted.headers["ETag"] != plain.headers["ETag"]


@pytest.mark.browser
def test_page_loads_the_small_bundle_and_draws_every_figure(browser, serve, himeno_traces):
    url = serve(himeno_traces["unpatched"])
    open_app(browser, url)
    assert browser.execute_script("return Plotly.version") == bundle.PLOTLY_VERSION
    loaded = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    assert any(bundle.bundle_url() in u for u in loaded), loaded
    assert not any("plotly.min.js" in u for u in loaded), loaded
    assert not any(bundle.bundle_url("cartesian") in u for u in loaded), loaded
    # the browser asked for gzip and got it: fewer bytes over the wire than the file has
    sizes = browser.execute_script(
        "const e = performance.getEntriesByType('resource').find(e => e.name.includes("
        f"{bundle.bundle_url()!r})); return [e.encodedBodySize, e.decodedBodySize]")
    # the vendored file after V8's compile hint (bundle.py), and Plotly ran from it
    assert sizes[1] == len(bundle.COMPILE_HINT) + bundle.bundle_path().stat().st_size
    assert 0 < sizes[0] < sizes[1] / 2

    # the critical path drawn over the timeline
    browser.find_element(By.CSS_SELECTOR, "#panel-0 .cp-toggle input").click()
    wait_until(browser, "return document.querySelector('#panel-0 .status').textContent"
               ".includes('critical path:')", what="critical path overlay")
    drawn = {f"{g['id']} {i}": g for i, g in enumerate(browser.execute_script(DRAWN))}
    # a tab's graphs are on the page only while it is open, and drawn when first opened
    for tab, column in (("Breakdown", "tab-breakdown"), ("Functions", "tab-functions"),
                        ("Messages", "tab-messages"), ("Critical path", "tab-critical")):
        browser.find_element(
            By.XPATH, f"//div[contains(@class,'tab')][normalize-space(.)='{tab}']").click()
        ident = f'{{"panel":0,"type":"{column}"}}'  # the column's id, as Dash writes it
        wait_until(browser, f"const c = document.getElementById({ident!r}); return c && "
                   "(c.querySelector('.dash-table-container') || ((gs) => gs.length && "
                   "gs.every(g => g._fullData && g._fullData.length))([...c.querySelectorAll("
                   "'.js-plotly-plot')]))",
                   what=f"{tab} tab")
        if tab == "Functions":  # the duration histogram: pick the Allreduce row
            browser.execute_script(
                "for (const r of document.querySelectorAll('tr')) { const c = r.querySelector("
                "'td[data-dash-column=\"name\"]'); if (c && c.textContent.trim() === "
                "'MPI_Allreduce') { r.querySelector('input').click(); break; } }")
            wait_until(browser, "const g = document.querySelector('[id*=fhist] .js-plotly-plot');"
                       " return g && g._fullData && g._fullData.length > 0",
                       what="duration histogram")
        drawn |= {f"{g['id']} {i}": g for i, g in enumerate(browser.execute_script(DRAWN))}
    drawn = list({repr(g): g for g in drawn.values()}.values())
    types = {t for g in drawn for t in g["types"]}
    assert types >= {"scatter", "heatmap", "bar"}, drawn
    assert all(not g["unknown"] and g["drawn"] for g in drawn), drawn
    # timeline (with the critical path), overview, strip, breakdown, histogram, comm
    # matrix, message sizes, critical path per rank
    ids = [g["id"].split('"type":"')[-1].split('"')[0] for g in drawn]
    assert sorted(ids) == sorted(["timeline", "overview", "strip", "tab-breakdown", "fhist",
                                  "tab-messages", "tab-messages", "cp-ranks"]), drawn


def test_page_asked_for_at_once_has_its_scripts(himeno_traces):
    """A page asked for the moment the app exists (a browser opening the URL as the
    server starts) loads the small Plotly first and the web UI's own scripts; the
    server's warm-up used to race it and could hand out a page without them."""
    from mpiscope.archive import reader

    models = [TraceModel.build(reader.load(himeno_traces["unpatched"]))]
    for _ in range(3):
        app = create_app(models=models, analyze_now=True)
        page = app.server.test_client().get("/").get_data(as_text=True)
        assert bundle.bundle_url() in page and "/assets/timeline.js" in page
        assert "mpiscopeEarlyLive()" in page


def test_a_page_has_one_plotly(himeno_traces, synth):
    """Each page loads exactly one Plotly: the trimmed bundle (in memory and out of core),
    or for the benchmarks the cartesian one, or none of the vendored ones (Dash's)."""
    from mpiscope.archive import reader
    from mpiscope_webui import ooc

    models = [TraceModel.build(reader.load(himeno_traces["unpatched"]))]
    urls = {name: bundle.bundle_url(name) for name in bundle.PLOTLIES}
    for which in ("trimmed", "cartesian", "full"):
        page = create_app(models=models, analyze_now=True, plotly=which).server \
            .test_client().get("/").get_data(as_text=True)
        assert {name for name, u in urls.items() if u in page} == (
            set() if which == "full" else {which})
    reader.load(synth)
    page = ooc.create_app(synth).server.test_client().get("/").get_data(as_text=True)
    assert {name for name, u in urls.items() if u in page} == {"trimmed"}
