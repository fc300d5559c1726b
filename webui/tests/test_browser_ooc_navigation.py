"""Timeline navigation on the out-of-core page (MPISCOPE_TIMELINE_OOC=1), in headless
Chromium at 1400×900 and 1024×768, as test_browser_navigation drives it in memory and on
the same traces built by construction (mpiscope_testing.windowtrace, tagtrace): a click
on a call shows its details, a partner jump selects and marks the partner and says which
way the message went; search by call site and by tag with n / p; the keys' help. The
page's code is the in-memory page's (navsearch, app.search_bar, app.keys_help) on the
cache's rows (oocnav)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from test_browser_navigation import call_at, click_call, marked_at, shown_window

from mpiscope.archive import reader
from mpiscope_testing import tagtrace
from mpiscope_testing.webui_page import (
    GD,
    choose,
    layout_problems,
    shot,
    wait_until,
    zoom_to,
)
from mpiscope_testing.windowtrace import SENDS, build
from mpiscope_webui import app, pyramid

pytestmark = pytest.mark.browser
SIZES = [(1400, 900), (1024, 768)]
US = tagtrace.US


def serve_ooc(serve, trace_dir) -> str:
    with pytest.MonkeyPatch.context() as mp:  # the server's environment, not ours
        mp.setenv(pyramid.ENV, "1")
        return serve(trace_dir)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("oocnav") / "t")


@pytest.fixture(scope="module")
def trace(trace_dir):
    return reader.load(trace_dir)


@pytest.fixture(scope="module")
def url(serve, trace_dir):
    return serve_ooc(serve, trace_dir)


def open_ooc(driver, url: str) -> None:
    """The out-of-core page, its timeline drawn, and the search's choices counted (the
    call sites come a moment after the page: oocnav counts them in the background)."""
    driver.get(url)
    wait_until(driver, f"const g = {GD.format(p=0)}; return g && g._fullData && "
               "g._fullData.length > 1", what="timeline drawn")
    wait_until(driver, "return document.getElementById('search-poll') === null || "
               "document.querySelector('#panel-0 .search-what') !== null",
               what="the search bar")
    assert "out-of-core timeline" in driver.find_element(By.CSS_SELECTOR,
                                                         "#panel-0 .panel-head").text


def marked(driver) -> list[float] | None:
    return driver.execute_script(f"const s=({GD.format(p=0)}.layout.shapes || []).find("
                                 "s => s.name === 'partner'); return s && [s.x0, s.x1]")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ooc_partner_jump_selects_and_marks_the_partner(browser, url, trace, size):
    browser.set_window_size(*size)
    open_ooc(browser, url)
    c, m = trace.calls, trace.messages
    s, d = SENDS[4]
    recv = c[(c["function"] == "MPI_Recv") & (c["start"] == s - 2000)].iloc[0]
    send = c[(c["function"] == "MPI_Send") & (c["start"] == s)].iloc[0]
    nbytes = int(m[m["recv_call"] == recv["call"]]["bytes"].iloc[0])
    zoom_to(browser, (s - 5000) / 1e9, (s + d + 5000) / 1e9)  # single calls: the detail
    click_call(browser, int(recv["call"]))
    jump = wait_until(browser, "return document.querySelector('#panel-0 .details button.jump')",
                      what="the partner button")
    assert jump.text == f"received {nbytes:,} B from rank 0 (tag 5) → jump to the send"
    details = browser.find_element(By.CSS_SELECTOR, "#panel-0 .details").text
    assert "MPI_Recv" in details and "a.c:20" in details and "rank 0" in details
    jump.click()
    head = wait_until(browser, "const h=document.querySelector('#panel-0 .details "
                      ".partner-head'); return h && h.textContent", what="partner selected")
    assert head.startswith("Partner selected: rank 0, MPI_Send")
    assert "a.c:10" in browser.find_element(By.CSS_SELECTOR, "#panel-0 .details").text
    back = browser.find_element(By.CSS_SELECTOR, "#panel-0 .details button.jump").text
    assert back.startswith(f"sent {nbytes:,} B to rank 1 (tag 5)")
    mark = wait_until(browser, f"const s=({GD.format(p=0)}.layout.shapes || []).find("
                      "s => s.name === 'partner'); return s && [s.x0, s.x1, s.y0, s.y1]",
                      what="the partner marked")
    lane = int(browser.execute_script(
        f"return {GD.format(p=0)}.layout.yaxis.ticktext.findIndex(t => t.endsWith('rank 0'))"))
    assert mark == pytest.approx([send["start"] / 1e9, send["end"] / 1e9, lane - 0.5,
                                  lane + 0.5], abs=1e-12)
    lo, hi = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
    assert lo <= send["start"] / 1e9 and send["end"] / 1e9 <= hi
    # both calls outlined (the selection), the partner drawn as a state where it is marked
    outlined = browser.execute_script(f"const t={GD.format(p=0)}._fullData.find(t => "
                                      "t.name === 'selected'); return t ? t.x.length : 0")
    assert outlined > 0
    assert layout_problems(browser) == []
    shot(browser, f"ooc-nav-partner-{size[0]}")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ooc_search_next_and_previous_call_with_keys(browser, url, trace, size):
    browser.set_window_size(*size)
    open_ooc(browser, url)
    c = trace.calls
    recvs = c[c["function"] == "MPI_Recv"].sort_values("start")
    choose(browser, "#panel-0 .search-what", "MPI_Recv at a.c:20")
    browser.find_element(By.CSS_SELECTOR, "#panel-0 button.search-next").click()

    def found(k: int) -> None:
        r = recvs.iloc[k]
        wait_until(browser, f"const s=({GD.format(p=0)}.layout.shapes || []).find("
                   f"x => x.name === 'partner'); return s && Math.abs(s.x0 - "
                   f"{float(r['start']) / 1e9!r}) < 1e-12", what=f"receive {k} found")
        assert marked(browser) == pytest.approx([r["start"] / 1e9, r["end"] / 1e9],
                                                abs=1e-12)
        lo, hi = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
        assert lo <= r["start"] / 1e9 and r["end"] / 1e9 <= hi
        wait_until(browser, "const d=document.querySelector('#panel-0 .details').textContent;"
                   " return d.includes('MPI_Recv') && d.includes('a.c:20')",
                   what=f"receive {k}'s details")

    found(0)
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("n")
    found(1)
    body.send_keys("n")
    found(2)
    body.send_keys("p")
    found(1)
    assert layout_problems(browser) == []
    shot(browser, f"ooc-nav-search-{size[0]}")
    body.send_keys("p")
    found(0)
    body.send_keys("p")  # before the first there is none: said, and the view stays
    wait_until(browser, "return document.querySelector('#panel-0 .search').textContent"
               ".includes('no earlier call')", what="nothing earlier")
    found(0)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ooc_keys_help_lists_the_keys(browser, url, size):
    browser.set_window_size(*size)
    open_ooc(browser, url)
    browser.find_element(By.CSS_SELECTOR, ".keys-help summary").click()
    rows = wait_until(browser, "const l=document.querySelector('.keys-help .keys-list');"
                      " return l && l.offsetHeight && Array.from(l.querySelectorAll('tr'))"
                      ".map(r => [r.querySelector('th').textContent, "
                      "r.querySelector('td').textContent])", what="the keys listed")
    assert [tuple(r) for r in rows] == list(app.KEYS)  # the in-memory page's list
    assert layout_problems(browser, root=".header") == []
    shot(browser, f"ooc-nav-keys-help-{size[0]}")


@pytest.fixture(scope="module")
def tag_dir(tmp_path_factory):
    return tagtrace.build(tmp_path_factory.mktemp("ooctags") / "t")


@pytest.fixture(scope="module")
def tag_url(serve, tag_dir):
    return serve_ooc(serve, tag_dir)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ooc_search_receives_by_tag_with_keys(browser, tag_url, tag_dir, size):
    """n / p step through rank 1's receives of tag 5 out of core, as in memory: the
    blocking MPI_Recv of rank 0's messages and the MPI_Wait completing each Irecv of
    "pair", in time order, none of tag 7 or of another rank."""
    calls = reader.load(tag_dir).calls
    browser.set_window_size(*size)
    open_ooc(browser, tag_url)
    recvs = sorted([call_at(calls, "MPI_Recv", t - 2 * US)
                    for t, tag in tagtrace.WORLD_SENDS if tag == 5]
                   + [call_at(calls, "MPI_Wait", t - 5 * US) for t in tagtrace.PAIR_SENDS],
                   key=lambda c: c["start"])
    assert len(recvs) == 7
    choose(browser, "#rankset", "rank 1")
    choose(browser, "#panel-0 .search-what", "receive with tag 5")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("n")
    for k, call in enumerate(recvs):
        if k:
            body.send_keys("n")
        marked_at(browser, call)
    assert layout_problems(browser) == []
    shot(browser, f"ooc-nav-search-tag-{size[0]}")
    body.send_keys("n")  # after the last: said, and the view stays
    wait_until(browser, "return document.querySelector('#panel-0 .search').textContent"
               ".includes('no later receive')", what="nothing later")
    marked_at(browser, recvs[-1])
    for call in recvs[-2::-1]:
        body.send_keys("p")
        marked_at(browser, call)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ooc_zoom_and_pan_keys(browser, tag_url, size):
    """The keys the help lists move the out-of-core timeline as in memory: + halves the
    window around its middle, - doubles it, → and ← move it a quarter of its width."""
    browser.set_window_size(*size)
    open_ooc(browser, tag_url)
    a, b = 200e-6, 360e-6  # middle 280 µs, a quarter 40 µs
    zoom_to(browser, a, b)
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("+")
    shown_window(browser, 240e-6, 320e-6)
    body.send_keys("-")
    shown_window(browser, a, b)
    body.send_keys(Keys.ARROW_RIGHT)
    shown_window(browser, 240e-6, 400e-6)
    body.send_keys(Keys.ARROW_LEFT)
    shown_window(browser, a, b)
    assert layout_problems(browser) == []
    # zoomed out as far as the whole run: the whole run, and no further
    run = wait_until(browser, "const w = document.querySelector('#panel-0 [data-run]');"
                     " return w && JSON.parse(w.dataset.run)", what="the run's extent")
    for _ in range(3):
        body.send_keys("-")
    shown_window(browser, *run)
    body.send_keys("-")
    body.send_keys(Keys.ARROW_RIGHT)  # at the run's end: moves nothing
    body.send_keys("+")
    m, q = (run[0] + run[1]) / 2, (run[1] - run[0]) / 4
    shown_window(browser, m - q, m + q)

