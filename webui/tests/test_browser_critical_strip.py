"""End to end in headless Chromium on real Himeno traces: the critical path on the
timeline (a checkbox draws and hides it), its profile tab, and the time-resolved strip
above the timeline (one bar per iteration of the main loop; clicking one zooms the
timeline to that iteration). What is drawn is checked against `mpiscope analyze --json`
and the analyzer's own loop detection on the same trace.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

import mpiscope
from mpiscope import numbers
from mpiscope.archive import reader
from mpiscope_testing.browser import WINDOW
from mpiscope_testing.webui_page import GD, layout_problems, open_app, resize, shot, wait_until
from mpiscope_webui import strip
from mpiscope_webui.critical import EDGES, PATH
from mpiscope_webui.geometry import RECT_POINTS, untyped

pytestmark = pytest.mark.browser

STRIP = "document.querySelector('#panel-{p} .strip .js-plotly-plot')"


def curve(driver, name: str, p: int = 0) -> dict | None:
    """A timeline curve's x and y as the page holds them (None: not drawn)."""
    return driver.execute_script(
        f"const t={GD.format(p=p)}.data.find(t => t.name === {name!r}); "
        "return t ? {x: t.x, y: t.y} : null")


def x_range(driver, p: int = 0) -> list[float]:
    return driver.execute_script(f"return {GD.format(p=p)}._fullLayout.xaxis.range")


def toggle_path(driver, p: int = 0) -> None:
    driver.find_element(By.CSS_SELECTOR, f"#panel-{p} .cp-toggle input").click()


def strip_bars(driver, p: int = 0) -> dict:
    """part -> number of bars drawn of the strip above panel p's timeline (each part is
    one polygon of rectangles, geometry.RECT_POINTS points each, strip.py), and
    strip.BARS -> the number of bars a pointer can hover and click."""
    return driver.execute_script(
        f"const g={STRIP.format(p=p)}; const out={{}}; "
        "(g && g._fullData || []).forEach(t => out[t.name] = t.name === "
        f"{strip.BARS!r} ? t.x.length : t.x.length / {RECT_POINTS}); return out;")


@pytest.fixture(scope="module")
def trace_dir(himeno_traces):
    return himeno_traces["unpatched"]


@pytest.fixture(scope="module")
def analyzed(trace_dir, tmp_path_factory) -> dict:
    """What `mpiscope analyze --json` says of the trace."""
    out = tmp_path_factory.mktemp("json") / "a.json"
    subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(trace_dir), "--json",
                    str(out)], check=True, capture_output=True, timeout=300)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def app_url(serve, trace_dir):
    return serve(trace_dir)


def test_the_checkbox_draws_and_hides_the_critical_path(browser, app_url, trace_dir,
                                                         analyzed):
    open_app(browser, app_url)
    assert curve(browser, PATH) is None  # off until asked for
    toggle_path(browser)
    wait_until(browser, f"return {GD.format(p=0)}.data.some(t => t.name === {PATH!r})",
               what="critical path drawn")
    path, edges = curve(browser, PATH), curve(browser, EDGES)
    trace = reader.load(trace_dir)
    lanes = {int(r): lane for lane, r in enumerate(trace.ranks.sort_values("rank")["rank"])}
    # the whole run is in view: every rank with time on the path has its highlight in its
    # lane (bands around the lane's centre), and the jumps between ranks are drawn
    on_path = {lanes[r["rank"]] for r in analyzed["critical_path"]["per_rank"]
               if r["time_s"] > 0}
    ys = untyped(path["y"])
    assert {round(float(y)) for y in ys if y > -1} == on_path
    assert analyzed["critical_path"]["rank_switches"] > 0
    jy = untyped(edges["y"])
    assert len(jy[jy == jy]) >= 2 and set(jy[jy == jy].astype(int)) <= on_path
    assert "critical path:" in browser.find_element(By.CSS_SELECTOR, "#panel-0 .status").text
    shot(browser, "20-critical-path")
    # at 1024x768 (the same page): still drawn, the checkbox clear of the legend
    try:
        resize(browser, (1024, 768))
        assert {round(float(y)) for y in untyped(curve(browser, PATH)["y"]) if y > -1} \
            == on_path
        assert layout_problems(browser) == []
        shot(browser, "20b-critical-path-1024")
    finally:
        resize(browser, WINDOW)
    toggle_path(browser)
    wait_until(browser, f"return !{GD.format(p=0)}.data.some(t => t.name === {PATH!r})",
               what="critical path hidden again")
    assert curve(browser, EDGES) is None
    assert "critical path:" not in browser.find_element(By.CSS_SELECTOR,
                                                        "#panel-0 .status").text


def test_the_profile_tab_lists_what_lies_on_the_path(browser, app_url, analyzed):
    open_app(browser, app_url)
    browser.find_element(By.XPATH, "//div[contains(@class,'tab')][normalize-space(.)="
                                   "'Critical path']").click()
    rows = wait_until(browser, """
        const rows = document.querySelectorAll('[id*="cp-table"] tr');
        const out = [];
        rows.forEach(r => {
          const c = k => r.querySelector(`td[data-dash-column="${k}"]`);
          if (c('name')) out.push([c('name').textContent.trim(), c('callsite').textContent.trim()]);
        });
        return out.length ? out : null;""", what="profile table")
    expected = [(f["name"], f["callsite"]) for f in analyzed["critical_path"]["functions"]]
    assert sorted(map(tuple, rows)) == sorted(expected)
    text = browser.find_element(By.CSS_SELECTOR, ".cp-summary").text
    assert numbers.seconds(analyzed["critical_path"]["length_s"], digits=4) in text
    shot(browser, "21-critical-path-profile")


def test_the_strip_has_a_bar_per_iteration_and_a_click_zooms_to_it(browser, app_url,
                                                                    trace_dir, analyzed):
    open_app(browser, app_url)
    bars = wait_until(browser, f"const g={STRIP.format(p=0)}; return g && g._fullData && "
                      "g._fullData.length && g._fullData.filter(t => t.showlegend !== false)"
                      ".map(t => t.name)", what="strip drawn")
    assert bars == ["compute", "communication", "synchronization", "I/O"]
    per_part = strip_bars(browser)
    assert analyzed["main_loop"] is not None
    assert set(per_part.values()) == {len(analyzed["iterations"])}
    # the strip shows the timeline's window
    assert browser.execute_script(f"return {STRIP.format(p=0)}._fullLayout.xaxis.range") \
        == pytest.approx(x_range(browser))
    # the rest at 1024x768 (the same page): the same bars, the strip's legend clear of its
    # title, and a click zooms as at the larger size
    resize(browser, (1024, 768))
    wait_until(browser, f"const g={STRIP.format(p=0)}; return Math.abs(g._fullLayout.width"
               " - g.getBoundingClientRect().width) <= 1", what="strip drawn for 1024 px")
    assert strip_bars(browser) == per_part
    legend, title = browser.execute_script(
        f"const g={STRIP.format(p=0)}; const b = e => {{ const r = e.getBoundingClientRect();"
        " return [r.left, r.top, r.right, r.bottom]; }; return [b(g.querySelector('.legend')),"
        " b(g.querySelector('.gtitle'))];")
    assert legend[0] >= title[2] or legend[3] <= title[1] or title[3] <= legend[1], \
        (legend, title)
    assert layout_problems(browser) == []
    # click a bar with the mouse: the one farthest from its neighbours' hover points (the
    # click goes to the closest point; where a run's ranks drifted apart, iterations'
    # spans overlap and their centres can fall within a pixel of each other)
    pts = browser.execute_script(f"""
        const g={STRIP.format(p=0)};
        const t=g._fullData.find(t => t.name === {strip.BARS!r});
        const xa=g._fullLayout.xaxis, ya=g._fullLayout.yaxis, r=g.getBoundingClientRect();
        return Array.from(t.x, (x, i) => [xa._offset + xa.d2p(x) - r.width / 2,
                                          ya._offset + ya.d2p(t.y[i]) - r.height / 2]);""")
    assert len(pts) == len(analyzed["iterations"])

    def room(i: int) -> float:
        return min((math.dist(pts[i], q) for j, q in enumerate(pts) if j != i),
                   default=math.inf)

    k = max(range(len(pts)), key=room)
    assert room(k) >= 4, "no bar stands apart from the others by a few pixels"
    off = [round(v) for v in pts[k]]
    el = browser.execute_script(f"return {STRIP.format(p=0)}")
    ActionChains(browser).move_to_element_with_offset(el, off[0], off[1]).click() \
        .perform()
    # the iteration's span over all ranks, from the analyzer's loop detection
    loop = mpiscope.analyze(reader.load(trace_dir)).loop
    it = loop.bounds[loop.bounds["iteration"] == analyzed["iterations"][k]["iteration"]]
    lo, hi = it["start"].min() / 1e9, it["end"].max() / 1e9
    wait_until(browser, f"const r={GD.format(p=0)}._fullLayout.xaxis.range; "
                        f"return Math.abs(r[0] - {lo}) < 1e-9 && Math.abs(r[1] - {hi}) < 1e-9",
               what=f"timeline zoomed to iteration {k}: {lo}..{hi}")
    wait_until(browser, f"const r={STRIP.format(p=0)}._fullLayout.xaxis.range; "
                        f"return Math.abs(r[0] - {lo}) < 1e-9 && Math.abs(r[1] - {hi}) < 1e-9",
               what="strip follows the zoom")
    shot(browser, "22-strip-iteration-1024")
    resize(browser, WINDOW)


def test_compare_mode_shows_both_runs_strips(browser, serve, himeno_traces):
    url = serve(himeno_traces["unpatched"], himeno_traces["patched"])
    open_app(browser, url, panels=2)
    for p, variant in enumerate(("unpatched", "patched")):
        wait_until(browser, f"const g={STRIP.format(p=p)}; return g && g._fullData && "
                   "g._fullData.length", what=f"strip {p} drawn")
        per = mpiscope.analyze(reader.load(himeno_traces[variant])).per_iteration
        assert set(strip_bars(browser, p).values()) == {len(per)}
    shot(browser, "23-compare-strips")
