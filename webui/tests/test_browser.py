"""End to end in headless Chromium: `mpiscope serve` on real Himeno traces from the interposer.

What a user does: look at the lanes, legend and arrows, zoom, hide a function, hover and
click a call, jump to a message's partner, click a finding, open compare mode. Screenshots
go to test-artifacts/webui/; with MPISCOPE_UPDATE_DOCS=1 the zoomed view also becomes the
README's docs/timeline.png (a test run never changes the checkout otherwise).
"""

from __future__ import annotations

import os

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from mpiscope import numbers
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing import REPO, comparetraces
from mpiscope_testing.browser import WINDOW
from mpiscope_testing.comparetraces import LONG_NS, SHORT_NS
from mpiscope_testing.webui_page import (
    GD,
    SIZES,
    cell_resolution,
    cell_value,
    layout_problems,
    open_app,
    open_tab,
    resize,
    shot,
    status,
    tables_shown,
    wait_until,
    zoom_to,
)
from mpiscope_webui.analysis import OCCURRENCES_SHOWN
from mpiscope_webui.geometry import ARROW_POINTS, ARROW_STRIDE, ARROW_TIP

pytestmark = pytest.mark.browser

README_SHOT = REPO / "docs" / "timeline.png"  # committed, shown in README
STRIP = "document.querySelector('#panel-{p} .strip .js-plotly-plot')"  # above the timeline


def curves(driver, p: int = 0) -> dict:
    """name -> {points, visible} of the timeline as drawn (Plotly's _fullData)."""
    return driver.execute_script(
        f"const g={GD.format(p=p)}; const out={{}}; g._fullData.forEach(t => out[t.name] = "
        "{points: (t.x || t.z || []).length, visible: t.visible}); return out;")


def x_range(driver, p: int = 0) -> list[float]:
    return driver.execute_script(f"return {GD.format(p=p)}._fullLayout.xaxis.range")


def merged_below_us(text: str) -> float:
    """The status line's "shorter than 3.17 µs merged" (or ms, ns) in µs."""
    value, unit = text.split("shorter than ")[1].split(" merged")[0].split()
    return float(value) * {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6}[unit]


def click_at(driver, p: int, curve: str, point: int) -> None:
    """A real mouse click on the point `point` of curve `curve` (data -> pixels)."""
    off = driver.execute_script(f"""
        const g={GD.format(p=p)}; const t=g._fullData.find(t => t.name === {curve!r});
        const xa=g._fullLayout.xaxis, ya=g._fullLayout.yaxis;
        const r=g.getBoundingClientRect();
        return [xa._offset + xa.d2p(t.x[{point}]) - r.width / 2,
                ya._offset + ya.d2p(t.y[{point}]) - r.height / 2];""")
    el = driver.execute_script(f"return {GD.format(p=p)}")
    ActionChains(driver).move_to_element_with_offset(el, int(off[0]), int(off[1])).click() \
        .perform()


@pytest.fixture(scope="module")
def unpatched(himeno_traces):
    return reader.load(himeno_traces["unpatched"])


@pytest.fixture(scope="module")
def app_url(serve, himeno_traces):
    return serve(himeno_traces["unpatched"])


def test_lanes_legend_and_arrows_render(browser, app_url, unpatched):
    open_app(browser, app_url)
    ticks = browser.execute_script(f"return {GD.format(p=0)}.layout.yaxis.ticktext")
    assert ticks == [f"{h} · rank {r}" for r, h in zip(unpatched.ranks["rank"],
                                                       unpatched.ranks["host"], strict=True)]
    legend = browser.execute_script(
        "return Array.from(document.querySelectorAll('#panel-0 .timeline .legend .traces "
        ".legendtext')).map(e => e.textContent)")
    for name in ("MPI_Allreduce", "MPI_Waitall", "MPI_Isend", "compute", "messages"):
        assert name in legend
    c = curves(browser)
    # the whole run: 480 messages on 4 lanes would be a smear of arrows; a density of
    # them per sender instead (zoom in for the arrows)
    assert f"{len(unpatched.messages)} messages as a density per sender" in status(browser)
    assert 0 < c["messages"]["points"] < ARROW_POINTS * len(unpatched.messages)
    assert c["MPI_Allreduce"]["points"] > 0
    lanes = browser.execute_script(f"return {GD.format(p=0)}.layout.shapes.find("
                                   "s => s.name === 'compute').path")
    assert lanes.count("M") == 4  # one background per rank
    assert "states drawn" in status(browser)
    assert layout_problems(browser) == []
    shot(browser, "01-whole-run")
    # the same page at 1400x900 and 1024x768: the same lanes and legend, the legend in more
    # rows but clear of the mode bar and the critical-path checkbox, the lanes as tall
    try:
        for size in SIZES:
            resize(browser, size)
            assert browser.execute_script(f"return {GD.format(p=0)}.layout.yaxis.ticktext") \
                == ticks
            assert browser.execute_script(
                "return Array.from(document.querySelectorAll('#panel-0 .timeline .legend "
                ".traces .legendtext')).map(e => e.textContent)") == legend
            # still the whole run: the messages as a density, at this width too
            assert f"{len(unpatched.messages)} messages as a density per sender" in \
                status(browser), size
            assert layout_problems(browser) == []
            shot(browser, f"01-whole-run-{size[0]}")
    finally:
        resize(browser, WINDOW)


def test_zoom_changes_the_window_and_the_detail(browser, app_url, unpatched):
    open_app(browser, app_url)
    before = curves(browser)
    merged_before = merged_below_us(status(browser))
    allreduce = unpatched.calls[unpatched.calls["function"] == "MPI_Allreduce"]
    a = allreduce["start"].iloc[len(allreduce) // 2] / 1e9
    b = a + 0.004
    zoom_to(browser, a, b)
    lo, hi = x_range(browser)
    assert lo == pytest.approx(a, abs=1e-9) and hi == pytest.approx(b, abs=1e-9)
    after = curves(browser)
    # zoomed in, the arrows shown are only those of the window, and states are exact
    in_window = ((unpatched.messages["send_time"] <= b * 1e9)
                 & (unpatched.messages["recv_time"] >= a * 1e9)).sum()
    assert after["messages"]["points"] == ARROW_POINTS * in_window
    assert before["messages"]["points"] < ARROW_POINTS * len(unpatched.messages)  # density
    assert f"{in_window} of {in_window} messages" in status(browser)
    # states down to one pixel of the new window are drawn one by one now (how much
    # shorter that is than before depends on how long the run took)
    plot_px = browser.execute_script(f"return {GD.format(p=0)}._fullLayout._size.w")
    merged_after = merged_below_us(status(browser))
    assert merged_after == pytest.approx((b - a) * 1e6 / plot_px, rel=0.01)
    assert merged_after < merged_before
    # the overview strip marks the window
    mark = browser.execute_script(
        "const g=document.querySelector('#panel-0 .overview .js-plotly-plot');"
        "return [g.layout.shapes[0].x0, g.layout.shapes[0].x1]")
    assert mark == pytest.approx([a, b])
    shot(browser, "02-zoomed")
    if os.environ.get("MPISCOPE_UPDATE_DOCS") == "1":
        browser.save_screenshot(str(README_SHOT))


def test_level_of_detail_follows_window_resizes(browser, app_url):
    open_app(browser, app_url)
    script = (f"const g={GD.format(p=0)}; "
              "const o=document.querySelector('#panel-0 .overview .js-plotly-plot'); "
              "return [g._fullData[1].z[0].length, Math.round(g._fullLayout._size.w), "
              "o._fullData[0].z[0].length]")
    bins, plot_px, overview_bins = browser.execute_script(script)
    assert abs(bins - plot_px) <= 2, "one summary bin per pixel of the plot"
    assert overview_bins == bins, "the overview strip too"
    try:
        browser.set_window_size(1000, 1300)
        narrow = wait_until(browser, f"const r=(() => {{ {script} }})(); "
                            f"return r[0] < {bins} - 200 && r", what="redrawn for the new width")
        assert abs(narrow[0] - narrow[1]) <= 2 and narrow[1] < plot_px - 200
        wait_until(browser, f"const r=(() => {{ {script} }})(); return r[2] === r[0]",
                   what="overview redrawn for the new width")
        shot(browser, "02b-narrow-window")
    finally:
        browser.set_window_size(1500, 1300)
    wait_until(browser, f"const r=(() => {{ {script} }})(); return r[0] === {bins} && r",
               what="back to the first width")


def test_waiting_shading_appears_as_soon_as_the_wait_states_are_known(
        browser, himeno_traces, monkeypatch):
    import threading

    from werkzeug.serving import make_server

    from mpiscope.analysis import waitstates
    from mpiscope_webui.app import create_app, load_models

    gate = threading.Event()
    compute = waitstates.compute

    def held_back(trace):  # the wait states take their time, as on a big trace
        gate.wait(60)
        return compute(trace)

    monkeypatch.setattr(waitstates, "compute", held_back)
    app = create_app(models=load_models([himeno_traces["unpatched"]]))
    srv = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    waiting = (f"const t={GD.format(p=0)}._fullData.find(t => t.name === 'waiting'); "
               "return t && t.x.length")
    try:
        browser.get(f"http://127.0.0.1:{srv.server_port}")
        assert wait_until(browser, waiting, what="timeline drawn") == 1  # legend entry only
        gate.set()
        # no user action: the page learns that the wait states are in and redraws
        assert wait_until(browser, f"const n=(() => {{ {waiting} }})(); return n > 1 && n",
                          what="waiting parts shaded") > 1
    finally:
        gate.set()
        srv.shutdown()


def test_hover_and_click_a_call_then_jump_to_its_partner(browser, app_url, unpatched):
    open_app(browser, app_url)
    waitall = unpatched.calls[unpatched.calls["function"] == "MPI_Waitall"].iloc[40]
    a, b = waitall["start"] / 1e9 - 2e-4, waitall["end"] / 1e9 + 2e-4
    zoom_to(browser, a, b)
    # the figure is drawn a moment after the status it comes with
    point = wait_until(
        browser, f"const t={GD.format(p=0)}._fullData.find(t => t.name === 'hover');"
        f"const i=Array.from(t.customdata).indexOf({int(waitall['call'])}); return i >= 0 && [i]",
        what="the Waitall drawn as a state")[0]
    click_at(browser, 0, "hover", point)
    wait_until(browser, "return document.querySelector('#panel-0 .details').textContent"
                        ".includes('call site')", what="details panel")
    details = " ".join(browser.find_element(By.CSS_SELECTOR, "#panel-0 .details").text.split())
    assert "MPI_Waitall" in details and "himeno.c:" in details
    assert f"rank {int(waitall['rank'])}" in details
    hover_tip = wait_until(browser, "const t=document.querySelector('.dcc-tooltip-bounding-box"
                           "');return t && t.textContent", what="tooltip")
    assert "duration" in hover_tip and "call site" in hover_tip
    shot(browser, "03-details")
    jump = browser.find_element(By.CSS_SELECTOR, "#panel-0 .details button.jump")
    partner_rank = int(jump.text.split("rank ")[1].split()[0])
    jump.click()
    wait_until(browser, f"const t={GD.format(p=0)}._fullData.find(t => t.name === "
                        "'selected'); return t.x.length >= 12", what="partner outlined")
    lo, hi = x_range(browser)
    m = unpatched.messages
    mine = m[(m["recv_complete_call"] == waitall["call"]) | (m["send_complete_call"]
                                                              == waitall["call"])]
    assert partner_rank in set(mine["send_rank"]) | set(mine["recv_rank"])
    assert lo <= waitall["start"] / 1e9 and hi >= waitall["end"] / 1e9
    shot(browser, "04-partner")


def test_click_a_message_arrow(browser, app_url, unpatched):
    open_app(browser, app_url)
    m = unpatched.messages
    sent, received = m["send_time"].iloc[100] / 1e9, m["recv_time"].iloc[100] / 1e9
    zoom_to(browser, min(sent, received) - 1e-4, max(sent, received) + 1e-4)
    # the tip (receive end) of an arrow that ends inside the window (once the zoomed
    # figure is drawn: it comes with the status)
    tip, row = wait_until(
        browser,
        f"const g={GD.format(p=0)}; const t=g._fullData.find(t => t.name === 'messages'); "
        f"const r=g._fullLayout.xaxis.range; for (let i = {ARROW_TIP}; "
        f"i < t.x.length - t.x.length / {ARROW_POINTS}; i += {ARROW_STRIDE}) "
        "if (t.x[i] > r[0] && t.x[i] < r[1]) return [i, t.customdata[i]];",
        what="an arrow ending in the window")
    click_at(browser, 0, "messages", tip)
    wait_until(browser, "return document.querySelector('#panel-0 .details').textContent"
                        ".includes('in flight')", what="message details")
    details = " ".join(browser.find_element(By.CSS_SELECTOR, "#panel-0 .details").text.split())
    # Plotly picks the nearest point under the mouse: where another arrow's tip lies on
    # this one (halo exchanges of several pairs end at once), that message is the one
    # shown. So: the message of the clicked tip, or of a point drawn within a few pixels.
    near = browser.execute_script(f"""
        const g={GD.format(p=0)}; const t=g._fullData.find(t => t.name === 'messages');
        const xa=g._fullLayout.xaxis, ya=g._fullLayout.yaxis, rows=[];
        const x0=xa.d2p(t.x[{tip}]), y0=ya.d2p(t.y[{tip}]);
        for (let i = 0; i < t.x.length; i++)
          if (t.x[i] !== null && Math.hypot(xa.d2p(t.x[i]) - x0, ya.d2p(t.y[i]) - y0) <= 4)
            rows.push(t.customdata[i]);
        return rows;""")
    assert int(row) in near
    shown = {f"rank {int(m.iloc[int(r)]['send_rank'])} → rank {int(m.iloc[int(r)]['recv_rank'])}"
             for r in near if r is not None}
    assert any(text in details for text in shown), (details, shown)
    assert "the receive" in details


def test_legend_toggles_a_function(browser, app_url):
    open_app(browser, app_url)
    assert curves(browser)["MPI_Allreduce"]["points"] > 0
    items = browser.find_elements(By.CSS_SELECTOR, "#panel-0 .timeline .legend .traces")
    item = next(i for i in items if i.text == "MPI_Allreduce")
    item.find_element(By.CSS_SELECTOR, ".legendtoggle").click()
    wait_until(browser, "const t=" + GD.format(p=0) + "._fullData.find(t => t.name === "
               "'MPI_Allreduce'); return t.visible === 'legendonly' && t.x.length <= 1",
               what="redrawn by the server without MPI_Allreduce")
    # no Plotly notice ("double-click on legend ...") over the critical-path checkbox
    assert layout_problems(browser) == []
    # the server redraws without it: no Allreduce in the summary cells either
    code = browser.execute_script(
        f"const g={GD.format(p=0)}; return g._fullData.filter(t => t.name.startsWith('MPI_'))"
        ".map(t => t.name).indexOf('MPI_Allreduce')")
    zs, levels = browser.execute_script(
        f"const t={GD.format(p=0)}._fullData[1]; "
        "return [t.z.map(r => Array.from(r)), t.meta.levels]")
    assert all((v - 1) // levels != code for row in zs for v in row if v)
    shot(browser, "05-allreduce-hidden")
    item = next(i for i in browser.find_elements(
        By.CSS_SELECTOR, "#panel-0 .timeline .legend .traces") if i.text == "MPI_Allreduce")
    item.find_element(By.CSS_SELECTOR, ".legendtoggle").click()
    wait_until(browser, "const t=" + GD.format(p=0) + "._fullData.find(t => t.name === "
               "'MPI_Allreduce'); return t.visible === true && t.x.length > 0")


def test_clicking_a_finding_zooms_to_its_occurrences(browser, app_url, unpatched):
    open_app(browser, app_url)
    open_tab(browser, "Findings")
    # a finding at a call site (not one of the whole run: descheduled, where this run's
    # scheduling gives one)
    button = wait_until(browser, "return Array.from(document.querySelectorAll("
                        "'button.finding')).find(b => b.textContent.includes(' at '))",
                        what="findings listed")
    # it may be below the noise floor on this run (the folded list): unfold it
    browser.execute_script("const d = arguments[0].closest('details'); if (d) d.open = true;",
                           button)
    kind_fn, site = button.get_attribute("textContent").rsplit(" at ", 1)
    function = kind_fn.split(": ")[1]
    full = x_range(browser)
    button.click()
    wait_until(browser, f"const t={GD.format(p=0)}._fullData.find(t => t.name === "
                        "'selected'); return t.x.length > 0", what="occurrences outlined")
    lo, hi = x_range(browser)
    c = unpatched.calls
    occ = c[(c["function"] == function) & (c["callsite"] == site)].sort_values("start")
    # the window shows the first few occurrences (on every rank) with a little margin,
    # however long the whole run took
    shown = occ.iloc[:OCCURRENCES_SHOWN * occ["rank"].nunique()]
    first_ns, last_ns = shown["start"].min(), shown["end"].max()
    assert lo <= first_ns / 1e9 and last_ns / 1e9 <= hi
    assert hi - lo <= 1.25 * (last_ns - first_ns) / 1e9 + 2e-6
    assert hi - lo < full[1] - full[0]
    assert browser.execute_script("return window.scrollY") == 0
    shot(browser, "06-finding")


def test_analysis_tabs(browser, app_url):
    open_app(browser, app_url)
    tabs = (("Breakdown", "synchronization"), ("Functions", "MPI_Allreduce"),
            ("Messages", "bandwidth"))
    for tab, probe in tabs:
        open_tab(browser, tab)
        wait_until(browser, "return document.querySelector('.tab-parent').textContent"
                   f".includes('{probe}')", what=f"{tab} tab")
        shot(browser, f"07-{tab.lower()}")
    # the same page at 1024x768: each tab's tables and charts all there, none cut off at
    # the right edge or scrolled sideways
    try:
        resize(browser, (1024, 768))
        for tab, probe in tabs:
            open_tab(browser, tab)
            wait_until(browser, "return document.querySelector('.tab-parent').textContent"
                       f".includes('{probe}')", what=f"{tab} tab at 1024 px")
            assert layout_problems(browser, root=".tab-parent") == [], tab
            shot(browser, f"07-{tab.lower()}-1024")
    finally:
        resize(browser, WINDOW)


def test_compare_mode(browser, serve, himeno_traces):
    url = serve(himeno_traces["unpatched"], himeno_traces["patched"])
    open_app(browser, url, panels=2)
    # both timelines draw their Allreduces; how many cells they take depends on how short
    # the calls were (the level of detail merges short ones), so the counts are checked
    # in the Differences table below
    assert curves(browser, 0)["MPI_Allreduce"]["points"] > 0
    assert curves(browser, 1)["MPI_Allreduce"]["points"] > 0
    browser.find_element(By.CSS_SELECTOR, "#shared input").click()
    wait_until(browser, f"const a={GD.format(p=0)}._fullLayout.xaxis.range, "
                        f"b={GD.format(p=1)}._fullLayout.xaxis.range; "
                        "return a[0] === b[0] && a[1] === b[1]", what="one time scale")
    # the second run at the first's window: here the whole of the first run
    traces = {v: reader.load(himeno_traces[v]) for v in ("unpatched", "patched")}
    a = x_range(browser, 0)
    first = traces["unpatched"].calls
    assert a == pytest.approx([first["start"].min() / 1e9, first["end"].max() / 1e9],
                              abs=1e-9)
    browser.execute_script(f"Plotly.relayout({GD.format(p=0)}, {{'xaxis.range[0]': "
                           f"{a[0] + 0.45 * (a[1] - a[0])}, 'xaxis.range[1]': {a[1]}}})")
    wait_until(browser, f"const a={GD.format(p=0)}._fullLayout.xaxis.range, "
                        f"b={GD.format(p=1)}._fullLayout.xaxis.range; "
                        f"return a[0] > {a[0]} && a[0] === b[0] && a[1] === b[1]",
               what="zoom applied to both")
    open_tab(browser, "Differences")
    text = wait_until(browser, "const d=document.getElementById('diff-functions'); "
                      "return d && d.textContent", what="differences table")
    assert "MPI_Allreduce" in text and "Δ B − A" in text
    # patched reduces once, not every iteration: the calls of each run, as in its trace
    calls = {v: int((t.calls["function"] == "MPI_Allreduce").sum()) for v, t in traces.items()}
    assert calls["unpatched"] > calls["patched"] > 0
    row = browser.execute_script(
        "const rows = document.querySelectorAll('#diff-functions tr'); for (const r of rows) {"
        " const c = k => r.querySelector(`td[data-dash-column=\"${k}\"]`);"
        " if (c('name') && c('name').textContent.trim() === 'MPI_Allreduce')"
        " return [c('calls_A').textContent, c('calls_B').textContent]; } return null;")
    assert row is not None and [float(x) for x in row] == [calls["unpatched"],
                                                          calls["patched"]]
    shot(browser, "08-compare")
    # side by side at 1024x768 (the same page): each panel's legend clear of its mode bar
    # and checkbox, its lanes as tall as asked, nothing cut off
    try:
        resize(browser, (1024, 768), panels=2)
        for p in (0, 1):
            assert layout_problems(browser, p) == [], p
        shot(browser, "08-compare-1024")
    finally:
        resize(browser, WINDOW, panels=2)


def test_compare_mode_runs_of_different_lengths(browser, serve, tmp_path_factory):
    """One time scale for a run and one a fifth as long (a run traced on a busy machine
    can last several times as long as the other): both timelines and the strips above
    them show the same window, the longer run's end included, and so does a zoom past
    the shorter run's end made in either panel. (The shorter run's panel used to slide
    the window back near its own run, and test_compare_mode failed on such Himeno runs.)"""
    base = tmp_path_factory.mktemp("uneven")
    url = serve(comparetraces.build(base / "long", LONG_NS),
                comparetraces.build(base / "short", SHORT_NS))
    open_app(browser, url, panels=2)

    def shown(window: tuple[float, float], what: str) -> None:
        graphs = ", ".join(g.format(p=p) for p in (0, 1) for g in (GD, STRIP))
        wait_until(browser, f"const w={list(window)!r}; return [{graphs}].every(g => g && "
                   "g._fullLayout && g._fullLayout.xaxis.range.every((x, i) => "
                   "Math.abs(x - w[i]) < 1e-12))", what=what)

    browser.find_element(By.CSS_SELECTOR, "#shared input").click()
    shown((0.0, LONG_NS / 1e9), "both runs at one time scale")
    for p, window in ((0, (0.6, 0.9)), (1, (0.3, 0.5))):  # all of it after the short run
        t0, t1 = (x * LONG_NS / 1e9 for x in window)
        browser.execute_script(f"Plotly.relayout({GD.format(p=p)}, "
                               f"{{'xaxis.range[0]': {t0!r}, 'xaxis.range[1]': {t1!r}}})")
        shown((t0, t1), f"panel {p}'s zoom in both")
    shot(browser, "08-compare-uneven")


def test_compare_aligned_by_iteration(browser, serve, himeno_traces):
    """With "align by iteration", a zoom of the first run to its iterations i..j shows
    iterations i..j of the second run, at its own times (each run's main loop, as the
    analysis finds it: the mean start over its ranks). At 1400x900 and 1024x768, both
    panels clear of overlaps and cut-offs."""
    starts = []
    for v in ("unpatched", "patched"):
        loop = Analysis(reader.load(himeno_traces[v])).loop
        starts.append(loop.starts.astype(float).mean(axis=0) / 1e9)
    url = serve(himeno_traces["unpatched"], himeno_traces["patched"])
    a, b = ([float(x) for x in s] for s in starts)
    i, j = 1, min(len(a), len(b)) - 2
    try:
        for size in SIZES:
            browser.set_window_size(*size)
            open_app(browser, url, panels=2)  # a fresh page: the box unticked
            browser.find_element(By.XPATH,
                                 "//label[normalize-space(.)='align by iteration']").click()
            browser.execute_script(f"Plotly.relayout({GD.format(p=0)}, {{'xaxis.range[0]': "
                                   f"{a[i]!r}, 'xaxis.range[1]': {a[j]!r}}})")
            got = wait_until(browser, f"const r={GD.format(p=1)}._fullLayout.xaxis.range; "
                             f"return Math.abs(r[0] - {b[i]!r}) < 1e-9 && r",
                             what=f"B follows A at {size[0]}x{size[1]}")
            assert got == pytest.approx([b[i], b[j]], abs=1e-9), size
            for p in (0, 1):
                assert layout_problems(browser, p) == [], (size, p)
            shot(browser, f"08-compare-iterations-{size[0]}")
    finally:
        browser.set_window_size(*WINDOW)


DIFF_BARS = ["#diff-bars-a .js-plotly-plot", "#diff-bars-b .js-plotly-plot"]
STRIPS = [f"#panel-{p} .strip .js-plotly-plot" for p in (0, 1)]
# the Breakdown tab's charts (pattern-matching ids are JSON, keys sorted)
BREAKDOWNS = [f"[id='{{\"panel\":{p},\"type\":\"bgraph\"}}'] .js-plotly-plot"
              for p in (0, 1)]


def one_y_range(driver, graphs: list[str], what: str) -> list[float]:
    """Wait until every graph (CSS selectors) is drawn with one y-range; that range."""
    return wait_until(driver, f"const r = {graphs!r}.map(q => {{ const g = document."
                      "querySelector(q); return g && g._fullLayout && g._fullLayout.yaxis"
                      ".range; }); return r.every(x => x && x[0] === r[0][0] && x[1] === "
                      "r[0][1]) && r[0]", what=what)


def tallest_bar(driver, graph: str) -> float:
    """The tallest stacked bar of a graph as drawn (its bars' heights summed per x)."""
    return driver.execute_script(
        f"const g = document.querySelector({graph!r}); const sum = {{}}; "
        "g._fullData.filter(t => t.type === 'bar').forEach(t => Array.from(t.x).forEach("
        "(x, i) => sum[x] = (sum[x] || 0) + t.y[i])); "
        "return Math.max(0, ...Object.values(sum));")


@pytest.fixture(scope="module")
def halo(tmp_path_factory):
    """A halo exchange with and without an Allreduce, built by construction, and
    `mpiscope compare --json` of the two (comparetraces.halo_pair): its verdict is that
    the run gained less than predicted, the Allreduce's time moved to a Waitall."""
    tmp = tmp_path_factory.mktemp("halo")
    before, after = comparetraces.halo_pair(tmp)
    return before, after, comparetraces.compare_json(before, after, tmp)[1]


def test_compare_predicted_vs_measured_and_shared_scales(browser, serve, halo):
    """Compare mode shows `mpiscope compare`'s verdict, gains and per-finding rows as the
    CLI's JSON has them; both runs' breakdowns and strips share one y-range; ticking "one
    time scale" after a zoom of the first panel shows its window in both. At 1400x900 and
    1024x768, nothing overlapping or cut off."""
    before, after, doc = halo
    url = serve(before, after)
    expected = [doc["verdict"], numbers.seconds(doc["predicted_gain_s"]),
                numbers.seconds(doc["measured_gain_s"])]
    assert doc["findings"] and doc["beyond_noise"]  # a verdict with something to say
    try:
        for size in SIZES:
            browser.set_window_size(*size)
            open_app(browser, url, panels=2)
            open_tab(browser, "Differences")
            shown = wait_until(browser, "const t = id => (document.getElementById(id) || {})"
                               ".textContent; const v = [t('explain-verdict'), "
                               "t('explain-predicted'), t('explain-measured')]; "
                               "return v.every(x => x) && v", what="the verdict")
            assert shown == expected
            # the table draws its rows once its script has loaded: wait for them
            rows = wait_until(
                browser,
                "const r = Array.from(document.querySelectorAll('#diff-predicted tbody tr'))"
                ".filter(r => r.querySelector('td')).map(r => Object.fromEntries(Array.from("
                "r.querySelectorAll('td')).map(c => [c.dataset.dashColumn, c.textContent])));"
                " return r.length && r", what="the findings' rows")
            assert [(r["kind"], r["function"], r["callsite"], r["outcome"]) for r in rows] == [
                (f["kind"], f["function"], f["callsite"],
                 "resolved" if f["resolved"] else "still there") for f in doc["findings"]]
            # the times in the unit the headers name, to the column's last place
            [table] = [t for t in tables_shown(browser) if t["id"] == "diff-predicted"]
            for key in ("predicted_s", "measured_s", "site_a_s", "site_b_s"):
                head, texts = table["headers"][key], table["cells"][key]
                step = cell_resolution(texts, head)
                for text, f in zip(texts, doc["findings"], strict=True):
                    assert abs(cell_value(text, head) - f[key]) <= 1.001 * step, (key, text)
            assert browser.find_element(By.CSS_SELECTOR, "#diff-predicted .export")
            top = one_y_range(browser, DIFF_BARS, "the breakdowns at one scale")[1]
            assert top >= max(tallest_bar(browser, g) for g in DIFF_BARS) > 0
            browser.execute_script("document.getElementById('differences').scrollIntoView()")
            shot(browser, f"08-compare-predicted-{size[0]}")
            assert layout_problems(browser, root="#differences") == []
            top = one_y_range(browser, STRIPS, "the strips at one scale")[1]
            assert top > 0
            open_tab(browser, "Breakdown")
            top = one_y_range(browser, BREAKDOWNS, "the Breakdown tab's charts at one scale")[1]
            assert top >= max(tallest_bar(browser, g) for g in BREAKDOWNS) > 0
            browser.execute_script("document.querySelector('.tab-parent').scrollIntoView()")
            shot(browser, f"08-compare-breakdowns-{size[0]}")
            # the charts (each run's per-rank table fits its half: test_browser_readable)
            assert layout_problems(browser, root="[id*='bgraph']") == []
            # a zoom of the first run, then one time scale: both at that window
            t0, t1 = x_range(browser, 0)
            a, b = t0 + 0.2 * (t1 - t0), t0 + 0.4 * (t1 - t0)
            zoom_to(browser, a, b)
            browser.find_element(By.CSS_SELECTOR, "#shared input").click()
            wait_until(browser, f"const a={GD.format(p=0)}._fullLayout.xaxis.range, "
                       f"b={GD.format(p=1)}._fullLayout.xaxis.range; "
                       "return a[0] === b[0] && a[1] === b[1]", what="one time scale")
            for p in (0, 1):
                assert x_range(browser, p) == pytest.approx([a, b], abs=1e-9), p
                assert layout_problems(browser, p) == [], p
    finally:
        browser.set_window_size(*WINDOW)
