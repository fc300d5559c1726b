"""The out-of-core page's Functions, Breakdown, Messages and Profiles tabs follow the zoom
and the rank set, in headless Chromium at 1400×900 and 1024×768: the same trace built by
construction (mpiscope_testing.windowtrace: what each window holds is known) served out of
core (MPISCOPE_TIMELINE_OOC=1) and in memory, zoomed to the same windows; the out-of-core
tables show the window's functions (calls, times), breakdown, messages (matrix, sizes)
and profiles, as the in-memory page does. On the same out-of-core page, the timeline's
controls the in-memory page has (app.py's components, assets/navigation.js): the timeline
saved as SVG and PNG, the lane height, the ◀ ▶ history of views."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from test_browser_navigation import range_becomes
from test_browser_window import PHASE_A, PHASE_B_S, _pick_rank, rows_when, table_js

from mpiscope_testing.webui_page import (
    GD,
    check_timeline_image,
    layout_problems,
    open_app,
    open_tab,
    saved_timeline,
    shot,
    wait_until,
    zoom_to,
)
from mpiscope_testing.windowtrace import ALLREDUCES, SENDS, US, build
from mpiscope_webui import pyramid

pytestmark = pytest.mark.browser
SIZES = [(1400, 900), (1024, 768)]
OOC = {"type": "otable", "name": "functions"}
IN_MEMORY = {"type": "ftable", "panel": 0}
SHOWN = ("name", "calls", "time_s")  # what both pages show of a window
OOC_BREAKDOWN = {"type": "otable", "name": "breakdown"}
PARTS = ("rank", "host", "total_s", "compute_s", "communication_s", "synchronization_s",
         "io_s")
SOME_SENDS = 4  # a window holding the first few of the ten messages
MESSAGES_WINDOW = ((SENDS[0][0] - 10 * US) / 1e9, (SENDS[SOME_SENDS][0] - 10 * US) / 1e9)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("oocwindow") / "t")


@pytest.fixture(scope="module")
def urls(serve, trace_dir) -> dict[str, str]:
    out = {}
    for mode, env in (("ooc", "1"), ("memory", "0")):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(pyramid.ENV, env)
            out[mode] = serve(trace_dir)
    return out


def open_ooc(driver, url: str) -> None:
    driver.get(url)
    wait_until(driver, "const g = document.querySelector('#panel-0 .timeline "
               ".js-plotly-plot'); return g && g._fullData && g._fullData.length > 1",
               what="timeline drawn")


def names(rows: list[dict]) -> set[str]:
    return {r["name"] for r in rows}


def shown(rows: list[dict]) -> list[tuple[str, ...]]:
    return [tuple(r[k] for k in SHOWN) for r in rows]


def in_memory(driver, url: str, window: tuple[float, float], rank: int | None,
              ok) -> list[dict]:
    """The in-memory page's Functions table for the window (and rank), as shown."""
    open_app(driver, url)
    open_tab(driver, "Functions")
    zoom_to(driver, *window)
    if rank is not None:
        _pick_rank(driver, rank)
    return rows_when(driver, IN_MEMORY, ok, "the in-memory page's window")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_out_of_core_functions_follow_the_zoom_as_in_memory(browser, urls, size):
    browser.set_window_size(*size)
    open_ooc(browser, urls["ooc"])
    assert browser.find_element(By.ID, "scope").is_displayed()
    open_tab(browser, "Functions")
    zoom_to(browser, *PHASE_A)

    def phase_a(r):
        return names(r) == {"MPI_Send", "MPI_Recv"}

    ooc_a = rows_when(browser, OOC, phase_a, "phase A out of core: sends and receives")
    send = next(r for r in ooc_a if r["name"] == "MPI_Send")
    assert send["calls"] == str(len(SENDS))
    scope = browser.find_element(By.CSS_SELECTOR, "#ooc-tab .scope-text").text
    assert f"{PHASE_A[0]:.6f} – {PHASE_A[1]:.6f} s" in scope and "all ranks" in scope
    table = browser.find_element(By.CSS_SELECTOR, "#ooc-tab .dash-spreadsheet")
    assert table.is_displayed() and table.rect["x"] + table.rect["width"] <= size[0]
    shot(browser, f"ooc-window-phase-a-{size[0]}")

    zoom_to(browser, *PHASE_B_S)
    ooc_b = rows_when(browser, OOC, lambda r: names(r) == {"MPI_Allreduce"},
                      "phase B out of core: the allreduces only")
    assert ooc_b[0]["calls"] == str(3 * ALLREDUCES)
    _pick_rank(browser, 2)
    ooc_b2 = rows_when(browser, OOC, lambda r: r and r[0]["calls"] == str(ALLREDUCES),
                       "phase B, rank 2 alone")
    per_rank = rows_when(browser, {"type": "otable", "name": "window-per-rank"},
                         lambda r: len(r) == 1, "rank 2's row per process")
    assert (per_rank[0]["rank"], per_rank[0]["function"]) == ("2", "MPI_Allreduce")
    assert "rank 2" in browser.find_element(By.CSS_SELECTOR, "#ooc-tab .scope-text").text
    # the Breakdown of the window and rank, once the analysis has left each rank's
    # measured calls with their waiting (rank 2 enters each allreduce late: no waiting)
    open_tab(browser, "Breakdown")
    bd = wait_until(browser, f"const r = (() => {{ {table_js(OOC_BREAKDOWN)} }})(); "
                    "return r && r.length === 1 && r[0].rank === '2' && r", timeout=600,
                    what="the window's breakdown of rank 2")
    text = browser.find_element(By.CSS_SELECTOR, "#ooc-tab .scope-text").text
    assert f"{PHASE_B_S[0]:.6f} – {PHASE_B_S[1]:.6f} s" in text and "rank 2" in text
    shot(browser, f"ooc-window-breakdown-{size[0]}")
    # the Profiles of the window and rank (read from the rank's rows the same pass left):
    # rank 2's allreduces alone (the whole run's has its MPI_Init and MPI_Finalize), in
    # its user regions
    open_tab(browser, "Profiles")
    prof = rows_when(browser, {"type": "otable", "name": "per-rank"},
                     lambda r: [(x["rank"], x["function"]) for x in r]
                     == [("2", "MPI_Allreduce")], "the window's profile of rank 2")
    assert prof[0]["calls"] == str(ALLREDUCES)
    rows_when(browser, {"type": "otable", "name": "regions"},
              lambda r: {x["name"] for x in r} == {"main", "solve"}, "its user regions")
    shot(browser, f"ooc-window-profiles-{size[0]}")

    # the in-memory page, the same windows: the same rows, as shown
    assert shown(in_memory(browser, urls["memory"], PHASE_A, None, phase_a)) == shown(ooc_a)
    assert shown(in_memory(browser, urls["memory"], PHASE_B_S, 2,
                           lambda r: r and r[0]["calls"] == str(ALLREDUCES))) == shown(ooc_b2)
    open_tab(browser, "Breakdown")
    mem_bd = rows_when(browser, {"type": "wtable", "panel": 0, "name": "breakdown"},
                       lambda r: [x["rank"] for x in r] == ["2"], "in memory: rank 2")
    assert [{k: r[k] for k in PARTS} for r in bd] == [{k: r[k] for k in PARTS}
                                                      for r in mem_bd]


def messages_of(driver, ident: dict, sent: int, what: str) -> dict[str, list[dict]]:
    """The Messages tab's matrix (once it counts `sent` messages from rank 0 to 1, its
    only pair) and sizes tables (theirs: as many messages), as shown."""
    matrix = rows_when(driver, {**ident, "name": "matrix"},
                       lambda r: len(r) == 1 and r[0]["messages"] == str(sent), what)
    sizes = rows_when(driver, {**ident, "name": "message-sizes"},
                      lambda r: sum(int(x["messages"]) for x in r) == sent, what + ": sizes")
    return {"matrix": matrix, "sizes": sizes}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_out_of_core_messages_follow_the_zoom_as_in_memory(browser, urls, size):
    """The Messages tab shows the whole run's ten messages, then, zoomed to a window
    holding the first four, those four (their bytes, their sizes' buckets), as the
    in-memory page shows them for the same window."""
    browser.set_window_size(*size)
    open_ooc(browser, urls["ooc"])
    open_tab(browser, "Messages")
    ooc = {"type": "otable"}
    whole = messages_of(browser, ooc, len(SENDS), "the whole run's messages out of core")
    assert whole["matrix"][0]["bytes"] == f"{sum(1000 * (i + 1) for i in range(10)):,}"
    zoom_to(browser, *MESSAGES_WINDOW)
    # the analysis' per-rank pass is done once the tab shows the window's (a slow machine
    # takes a while: no time asserted)
    wait_until(browser, "const t = document.querySelector('#ooc-tab .scope-text'); "
               f"return t && t.textContent.includes('{MESSAGES_WINDOW[0]:.6f} – ')",
               timeout=600, what="the window's messages")
    ooc_w = messages_of(browser, ooc, SOME_SENDS, "the window's messages out of core")
    assert ooc_w["matrix"][0]["bytes"] == f"{sum(1000 * (i + 1) for i in range(4)):,}"
    assert len(ooc_w["sizes"]) == 3  # 1000 B; 2000 B; 3000 and 4000 B
    assert len(browser.find_elements(By.CSS_SELECTOR, "#ooc-tab .js-plotly-plot")) == 2
    shot(browser, f"ooc-window-messages-{size[0]}")

    open_app(browser, urls["memory"])
    open_tab(browser, "Messages")
    zoom_to(browser, *MESSAGES_WINDOW)
    mem = messages_of(browser, {"type": "wtable", "panel": 0}, SOME_SENDS,
                      "the in-memory page's window")
    assert mem == ooc_w


# -- the timeline's controls out of core (the in-memory page's, test_browser_navigation) ----
TIMELINE_LABELS = ("rank 0", "rank 1", "rank 2", "MPI_Send", "MPI_Recv", "time (s)")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_out_of_core_timeline_saved_as_image(browser, urls, tmp_path, fmt, size):
    browser.set_window_size(*size)
    open_ooc(browser, urls["ooc"])
    zoom_to(browser, *PHASE_A)
    data, shown = saved_timeline(browser, tmp_path, fmt)
    check_timeline_image(data, fmt, shown, TIMELINE_LABELS)


def lane_spacing(driver) -> float:
    return driver.execute_script(f"const y={GD.format(p=0)}._fullLayout.yaxis; "
                                 "return Math.abs(y.l2p(1) - y.l2p(0))")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_out_of_core_lane_height_can_be_chosen(browser, urls, size):
    browser.set_window_size(*size)
    open_ooc(browser, urls["ooc"])
    zoom_to(browser, *PHASE_A)
    ticks = browser.execute_script(f"return {GD.format(p=0)}.layout.yaxis.ticktext")
    seen = {}
    for label, px in (("S", 12), ("L", 40)):
        browser.find_element(By.XPATH, "//div[@id='panel-0']//div[contains(@class,'lane-px')]"
                                       f"//label[normalize-space(.)='{label}']").click()
        # a lane is that tall, give or take the plot's 20 px of padding shared by 3 lanes
        seen[label] = wait_until(browser, f"const y={GD.format(p=0)}._fullLayout.yaxis; "
                                 "const s=Math.abs(y.l2p(1) - y.l2p(0)); "
                                 f"return s >= {px} - 0.5 && s <= {px} + 7.5 && s",
                                 what=f"{px}-pixel lanes")
        # the same window and lanes, taller or thinner
        assert browser.execute_script(f"return {GD.format(p=0)}.layout.yaxis.ticktext") \
            == ticks
        assert browser.find_element(By.CSS_SELECTOR, "#panel-0 .status").text.startswith(
            f"{PHASE_A[0]:.6f} – {PHASE_A[1]:.6f} s")
    assert seen["L"] > 3 * seen["S"] / 2
    assert layout_problems(browser) == []  # the tall lanes: nothing over the legend
    shot(browser, f"ooc-lane-height-{size[0]}")
    # "auto": the lanes' height from their number again
    browser.find_element(By.XPATH, "//div[@id='panel-0']//div[contains(@class,'lane-px')]"
                                   "//label[normalize-space(.)='auto']").click()
    wait_until(browser, f"const y={GD.format(p=0)}._fullLayout.yaxis; "
               f"return Math.abs(Math.abs(y.l2p(1) - y.l2p(0)) - {seen['L']}) > 1",
               what="the lanes' own height")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_out_of_core_zoom_history(browser, urls, size):
    browser.set_window_size(*size)
    open_ooc(browser, urls["ooc"])
    zoom_to(browser, *PHASE_A)
    zoom_to(browser, *PHASE_B_S)
    wait_until(browser, "return location.hash.startsWith('#view=')", what="the view in the URL")
    back = browser.find_element(By.CSS_SELECTOR, "button.hist-back")
    assert back.is_displayed()
    back.click()
    range_becomes(browser, *PHASE_A, "back to the previous view")
    wait_until(browser, "return document.querySelector('#panel-0 .status').textContent"
               f".startsWith('{PHASE_A[0]:.6f} – {PHASE_A[1]:.6f} s')",
               what="the previous window drawn by the server")
    browser.find_element(By.CSS_SELECTOR, "button.hist-forward").click()
    range_becomes(browser, *PHASE_B_S, "forward again")
    wait_until(browser, "return document.querySelector('#panel-0 .status').textContent"
               f".startsWith('{PHASE_B_S[0]:.6f} – {PHASE_B_S[1]:.6f} s')",
               what="the next window drawn by the server")
    assert layout_problems(browser) == []
    shot(browser, f"ooc-history-{size[0]}")
