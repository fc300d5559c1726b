"""Timeline navigation in headless Chromium at 1400×900 and 1024×768, on traces built by
construction (mpiscope_testing.windowtrace, tagtrace): a click shows a call's details, a
partner jump selects and marks the partner and says which way the message went; search by
function, call site, tag and communicator with n / p; zoom and pan keys. These run on both
pages (the `page` fixture): in memory and out of core (MPISCOPE_TIMELINE_OOC=1), whose
navigation is the in-memory page's code (navsearch, app.search_bar, assets/navigation.js)
on the cache's rows (oocnav). In memory only: the view in the URL and the zoom history,
the timeline saved as an image, the lane height, and in compare mode the keys moving the
panel last clicked (test_browser_ooc_navigation: the out-of-core page's keys' help)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from mpiscope.archive import reader
from mpiscope_testing import tagtrace
from mpiscope_testing.webui_page import (
    GD,
    check_timeline_image,
    choose,
    layout_problems,
    open_app,
    saved_timeline,
    shot,
    wait_until,
    zoom_to,
)
from mpiscope_testing.webui_server import ARTIFACTS
from mpiscope_testing.windowtrace import SENDS, build
from mpiscope_webui import pyramid

pytestmark = pytest.mark.browser
SIZES = [(1400, 900), (1024, 768)]


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("nav") / "t")


@pytest.fixture(scope="module")
def trace(trace_dir):
    return reader.load(trace_dir)


@pytest.fixture(scope="module")
def url(serve, trace_dir):
    return serve(trace_dir)


# -- the two pages the shared tests run on ----------------------------------------------
def serve_ooc(serve, trace_dir) -> str:
    """The trace served on the out-of-core page."""
    with pytest.MonkeyPatch.context() as mp:  # the server's environment, not ours
        mp.setenv(pyramid.ENV, "1")
        return serve(trace_dir)


def open_ooc(driver, url: str) -> None:
    """The out-of-core page, its timeline drawn and its search bar (dcc's dropdown comes
    in a chunk of its own, after the timeline; search-poll, a dcc.Interval, draws no
    element). The call sites and tags come a moment after the page (oocnav counts them in
    the background): `choose` waits for the option it picks."""
    driver.get(url)
    wait_until(driver, f"const g = {GD.format(p=0)}; return g && g._fullData && "
               "g._fullData.length > 1", what="timeline drawn")
    wait_until(driver, "return document.querySelector('#panel-0 .search-what') !== null",
               what="the search bar")
    assert "out-of-core timeline" in driver.find_element(By.CSS_SELECTOR,
                                                         "#panel-0 .panel-head").text


def memory_run(driver) -> list[float]:
    """The run's extent in memory: the overview's range."""
    return driver.execute_script("return document.querySelector('#panel-0 .overview "
                                 ".js-plotly-plot')._fullLayout.xaxis.range")


def ooc_run(driver) -> list[float]:
    """The run's extent out of core: the timeline's data-run (the keys' limit)."""
    return wait_until(driver, "const w = document.querySelector('#panel-0 [data-run]');"
                      " return w && JSON.parse(w.dataset.run)", what="the run's extent")


@dataclass(frozen=True)
class Page:
    """A timeline page: how to open it, its screenshots' prefix, where it keeps the run's
    extent, and the fixtures serving the two traces to it."""
    name: str
    open: Callable[..., None]
    shots: str
    run: Callable[..., list[float]]
    url: str  # the fixture serving windowtrace
    tag_url: str  # the fixture serving tagtrace


PAGES = [Page("memory", open_app, "nav", memory_run, "url", "tag_url"),
         Page("ooc", open_ooc, "ooc-nav", ooc_run, "ooc_url", "ooc_tag_url")]


@pytest.fixture(scope="module", params=PAGES, ids=lambda p: p.name)
def page(request) -> Page:
    return request.param


@pytest.fixture(scope="module")
def ooc_url(serve, trace_dir):
    return serve_ooc(serve, trace_dir)


@pytest.fixture(scope="module")
def page_url(request, page) -> str:
    """windowtrace served on `page`."""
    return request.getfixturevalue(page.url)


@pytest.fixture(scope="module")
def page_tag_url(request, page) -> str:
    """tagtrace served on `page`."""
    return request.getfixturevalue(page.tag_url)


def click_call(driver, call: int) -> None:
    """A real mouse click on a call drawn as a state (its hover point)."""
    i = wait_until(driver, f"const t={GD.format(p=0)}._fullData.find(t => t.name === 'hover');"
                   f"const i=Array.from(t.customdata).indexOf({call}); return i >= 0 && [i]",
                   what="the call drawn as a state")[0]
    # the whole graph in view: Selenium's offsets count from the centre of the element's
    # visible part, the one computed here from its whole box
    driver.execute_script(f"{GD.format(p=0)}.scrollIntoView({{block: 'center'}})")
    off = driver.execute_script(f"""
        const g={GD.format(p=0)}; const t=g._fullData.find(t => t.name === 'hover');
        const xa=g._fullLayout.xaxis, ya=g._fullLayout.yaxis;
        const r=g.getBoundingClientRect();
        return [xa._offset + xa.d2p(t.x[{i}]) - r.width / 2,
                ya._offset + ya.d2p(t.y[{i}]) - r.height / 2];""")
    el = driver.execute_script(f"return {GD.format(p=0)}")
    ActionChains(driver).move_to_element_with_offset(el, int(off[0]), int(off[1])).click() \
        .perform()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_partner_jump_selects_and_marks_the_partner(browser, page, page_url, trace, size):
    browser.set_window_size(*size)
    page.open(browser, page_url)
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
    details = browser.find_element(By.CSS_SELECTOR, "#panel-0 .details").text
    assert "a.c:10" in details  # the send's call site: its details, not the receive's
    # and from the send, the way back says it was sent
    back = browser.find_element(By.CSS_SELECTOR, "#panel-0 .details button.jump").text
    assert back.startswith(f"sent {nbytes:,} B to rank 1 (tag 5)")
    mark = wait_until(browser, f"const s=({GD.format(p=0)}.layout.shapes || []).find("
                      "s => s.name === 'partner'); return s && [s.x0, s.x1, s.y0, s.y1]",
                      what="the partner marked")
    lane = int(browser.execute_script(
        f"return {GD.format(p=0)}.layout.yaxis.ticktext.findIndex(t => t.endsWith('rank 0'))"))
    assert mark == pytest.approx([send["start"] / 1e9, send["end"] / 1e9, lane - 0.5,
                                  lane + 0.5], abs=1e-12)
    # the partner is inside the window shown
    lo, hi = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
    assert lo <= send["start"] / 1e9 and send["end"] / 1e9 <= hi
    # both calls outlined (the selection), the partner drawn as a state where it is marked
    outlined = browser.execute_script(f"const t={GD.format(p=0)}._fullData.find(t => "
                                      "t.name === 'selected'); return t ? t.x.length : 0")
    assert outlined > 0
    assert layout_problems(browser) == []
    shot(browser, f"{page.shots}-partner-{size[0]}")


def x_range(driver) -> list[float]:
    return driver.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")


def range_becomes(driver, a: float, b: float, what: str) -> None:
    wait_until(driver, f"const r={GD.format(p=0)}._fullLayout.xaxis.range; return "
               f"Math.abs(r[0] - {a!r}) < 1e-9 && Math.abs(r[1] - {b!r}) < 1e-9", what=what)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_view_in_the_url_and_zoom_history(browser, url, size):
    browser.set_window_size(*size)
    open_app(browser, url)
    a = (100e-6, 400e-6)
    b = (150e-6, 200e-6)
    zoom_to(browser, *a)
    zoom_to(browser, *b)
    link = wait_until(browser, "return location.hash.startsWith('#view=') && location.href",
                      what="the view in the URL")
    browser.find_element(By.CSS_SELECTOR, "button.hist-back").click()
    range_becomes(browser, *a, "back to the previous view")
    browser.find_element(By.TAG_NAME, "body").send_keys("]")
    range_becomes(browser, *b, "forward again with ]")
    browser.find_element(By.TAG_NAME, "body").send_keys("[")
    range_becomes(browser, *a, "back with [")
    # the link opens the view it was copied at, in a page loaded afresh
    browser.get("about:blank")
    browser.get(link)
    open_app(browser, link)
    range_becomes(browser, *b, "the linked view")
    status = browser.find_element(By.CSS_SELECTOR, "#panel-0 .status").text
    assert status.startswith(f"{b[0]:.6f} – {b[1]:.6f} s")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_timeline_saved_as_image(browser, url, tmp_path, fmt, size):
    browser.set_window_size(*size)
    open_app(browser, url)
    zoom_to(browser, 100e-6, 400e-6)
    data, shown = saved_timeline(browser, tmp_path, fmt)
    # what the user saw: the lanes' labels, the legend and the zoomed time axis
    check_timeline_image(data, fmt, shown,
                         ("rank 0", "rank 1", "rank 2", "MPI_Send", "MPI_Recv", "time (s)"))


def marked(driver) -> list[float]:
    return driver.execute_script(f"const s=({GD.format(p=0)}.layout.shapes || []).find("
                                 "s => s.name === 'partner'); return s && [s.x0, s.x1]")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_search_next_and_previous_call_with_keys(browser, page, page_url, trace, size):
    browser.set_window_size(*size)
    page.open(browser, page_url)
    c = trace.calls
    recvs = c[c["function"] == "MPI_Recv"].sort_values("start")
    choose(browser, "#panel-0 .search-what", "MPI_Recv at a.c:20")
    browser.find_element(By.CSS_SELECTOR, "#panel-0 button.search-next").click()

    def found(k: int) -> None:
        r = recvs.iloc[k]
        wait_until(browser, f"const s=({GD.format(p=0)}.layout.shapes || []).find("
                   f"x => x.name === 'partner'); return s && Math.abs(s.x0 - "
                   f"{float(r['start']) / 1e9!r}) < 1e-12", what=f"receive {k} found")
        assert marked(browser) == pytest.approx([r["start"] / 1e9, r["end"] / 1e9], abs=1e-12)
        lo, hi = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
        assert lo <= r["start"] / 1e9 and r["end"] / 1e9 <= hi
        details = browser.find_element(By.CSS_SELECTOR, "#panel-0 .details").text
        assert "MPI_Recv" in details and "a.c:20" in details

    found(0)
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("n")
    found(1)
    body.send_keys("n")
    found(2)
    body.send_keys("p")
    found(1)
    assert layout_problems(browser) == []
    shot(browser, f"{page.shots}-search-{size[0]}")
    # before the first there is none: said, and the view stays
    body.send_keys("p")
    found(0)
    body.send_keys("p")
    wait_until(browser, "return document.querySelector('#panel-0 .search').textContent"
               ".includes('no earlier call')", what="nothing earlier")
    found(0)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_lane_height_can_be_chosen(browser, url, size):
    browser.set_window_size(*size)
    open_app(browser, url)
    spacing = (f"const g={GD.format(p=0)}; const y=g._fullLayout.yaxis; "
               "return Math.abs(y.l2p(1) - y.l2p(0));")
    seen = {}
    for label, px in (("S", 12), ("L", 40)):
        browser.find_element(By.XPATH, "//div[contains(@class,'lane-px')]//label["
                                       f"normalize-space(.)='{label}']").click()
        # a lane is that tall, give or take the plot's 20 px of padding shared by 3 lanes
        seen[label] = wait_until(browser, f"const s=(() => {{ {spacing} }})(); "
                                 f"return s >= {px} - 0.5 && s <= {px} + 7.5 && s",
                                 what=f"{px}-pixel lanes")
    assert seen["L"] > 3 * seen["S"] / 2
    assert layout_problems(browser) == []  # the tall lanes: nothing over the legend
    # the lanes' labels stay one per lane
    ticks = browser.execute_script(f"return {GD.format(p=0)}.layout.yaxis.ticktext")
    assert [t.split(" · ")[1] for t in ticks] == ["rank 0", "rank 1", "rank 2"]


# -- search by tag and communicator, keys (mpiscope_testing.tagtrace) -----------------------
US = tagtrace.US


@pytest.fixture(scope="module")
def tag_dir(tmp_path_factory):
    return tagtrace.build(tmp_path_factory.mktemp("tags") / "t")


@pytest.fixture(scope="module")
def tag_calls(tag_dir):
    return reader.load(tag_dir).calls


@pytest.fixture(scope="module")
def tag_url(serve, tag_dir):
    return serve(tag_dir)


@pytest.fixture(scope="module")
def ooc_tag_url(serve, tag_dir):
    return serve_ooc(serve, tag_dir)


def call_at(calls, function: str, start: int):
    """The call of `function` starting at `start` (ns): one, by construction."""
    hit = calls[(calls["function"] == function) & (calls["start"] == start)]
    assert len(hit) == 1, (function, start)
    return hit.iloc[0]


def marked_at(driver, call, p: int = 0, tag: int = 5) -> None:
    """Panel p has found `call`: marked at its times exactly, in view, its details (a
    message with the tag) shown."""
    wait_until(driver, f"const s=({GD.format(p=p)}.layout.shapes || []).find("
               f"x => x.name === 'partner'); return s && Math.abs(s.x0 - "
               f"{float(call['start']) / 1e9!r}) < 1e-12", what=f"call {call['call']} found")
    got = driver.execute_script(f"const s=({GD.format(p=p)}.layout.shapes || []).find("
                                "s => s.name === 'partner'); return s && [s.x0, s.x1]")
    assert got == pytest.approx([call["start"] / 1e9, call["end"] / 1e9], abs=1e-12)
    lo, hi = driver.execute_script(f"return {GD.format(p=p)}._fullLayout.xaxis.range")
    assert lo <= call["start"] / 1e9 and call["end"] / 1e9 <= hi
    details = wait_until(driver, f"const d=document.querySelector('#panel-{p} .details')"
                         f".textContent; return d.includes('{call['function']}') && d",
                         what="the call's details")
    assert f"(tag {tag})" in details


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_search_receives_by_tag_with_keys(browser, page, page_tag_url, tag_calls, size):
    """n / p step through rank 1's receives of tag 5, exactly: the blocking MPI_Recv of
    rank 0's messages and the MPI_Wait completing each Irecv of "pair", in time order,
    none of tag 7 or of another rank."""
    browser.set_window_size(*size)
    page.open(browser, page_tag_url)
    recvs = sorted([call_at(tag_calls, "MPI_Recv", t - 2 * US)
                    for t, tag in tagtrace.WORLD_SENDS if tag == 5]
                   + [call_at(tag_calls, "MPI_Wait", t - 5 * US) for t in tagtrace.PAIR_SENDS],
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
    shot(browser, f"{page.shots}-search-tag-{size[0]}")
    body.send_keys("n")  # after the last: said, and the view stays
    wait_until(browser, "return document.querySelector('#panel-0 .search').textContent"
               ".includes('no later receive')", what="nothing later")
    marked_at(browser, recvs[-1])
    for call in recvs[-2::-1]:
        body.send_keys("p")
        marked_at(browser, call)
    # by communicator: the sends on "pair" are rank 2's (the rank set chose rank 1: none)
    choose(browser, "#panel-0 .search-what", "send on communicator pair")
    browser.find_element(By.CSS_SELECTOR, "#panel-0 button.search-next").click()
    wait_until(browser, "return document.querySelector('#panel-0 .search').textContent"
               ".includes('no later send')", what="no send of rank 1 on pair")


def shown_window(driver, a: float, b: float, p: int = 0) -> None:
    """Panel p shows [a, b]: the graph's range and the server's status line (drawn)."""
    wait_until(driver, f"const r={GD.format(p=p)}._fullLayout.xaxis.range; return "
               f"Math.abs(r[0] - {a!r}) < 1e-12 && Math.abs(r[1] - {b!r}) < 1e-12",
               what=f"window {a}..{b}")
    # the status line's window, to its 6 decimals
    wait_until(driver, f"const w=document.querySelector('#panel-{p} .status').textContent"
               ".split(' s · ')[0].split(' – ').map(Number); return w.length === 2 && "
               f"Math.abs(w[0] - {a!r}) < 1.01e-6 && Math.abs(w[1] - {b!r}) < 1.01e-6",
               what=f"window {a}..{b} drawn")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_zoom_and_pan_keys(browser, page, page_tag_url, size):
    """+ halves the window around its middle, - doubles it (never past the whole run),
    → and ← move it a quarter of its width; typed into a text field they do nothing."""
    browser.set_window_size(*size)
    page.open(browser, page_tag_url)
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
    # "+" typed into the search field is text: the "-" after it zooms out from [a, b]
    browser.find_element(By.CSS_SELECTOR, "#panel-0 .search-what").click()
    box = wait_until(browser, "return document.querySelector('input.dash-dropdown-search')",
                     what="the dropdown's search box")
    box.send_keys("+")
    body.send_keys(Keys.ESCAPE)
    body.send_keys("-")
    shown_window(browser, 120e-6, 440e-6)
    assert layout_problems(browser) == []
    # zoomed out as far as the whole run: the whole run, and no further
    run = page.run(browser)
    body.send_keys("-")
    shown_window(browser, *run)
    body.send_keys("-")  # past the whole run: nothing
    # at the run's end → moves nothing: the "+" after it halves the whole run
    body.send_keys(Keys.ARROW_RIGHT)
    body.send_keys("+")
    m, q = (run[0] + run[1]) / 2, (run[1] - run[0]) / 4
    shown_window(browser, m - q, m + q)


@pytest.fixture(scope="module")
def compare_url(serve, tag_dir, tmp_path_factory):
    return serve(tag_dir, tagtrace.build(tmp_path_factory.mktemp("tags-b") / "t"))


def click_head(driver, p: int) -> None:
    """A click on panel p's status line: the panel is the one the keys act on."""
    driver.find_element(By.CSS_SELECTOR, f"#panel-{p} .status").click()
    wait_until(driver, f"return document.getElementById('panel-{p}').classList"
               ".contains('key-focus')", what=f"panel {p} marked")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_mode_keys_move_the_panel_last_clicked(browser, compare_url, tag_calls,
                                                        size):
    browser.set_window_size(*size)
    open_app(browser, compare_url, panels=2)
    # the keys' help in the header, over the page, lists them
    browser.find_element(By.CSS_SELECTOR, ".keys-help summary").click()
    help_text = wait_until(browser, "const l=document.querySelector('.keys-help .keys-list');"
                           " return l && l.offsetHeight && l.textContent",
                           what="the keys listed")
    for key in ("n / p", "+ / -", "← / →", "[ / ]", "panel last clicked"):
        assert key in help_text
    assert layout_problems(browser, root=".header") == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"nav-keys-help-{size[0]}.png"))
    browser.find_element(By.CSS_SELECTOR, ".keys-help summary").click()
    assert browser.execute_script("return document.getElementById('panel-0').classList"
                                  ".contains('key-focus')")  # A at first
    choose(browser, "#panel-0 .search-what", "receive with tag 5")
    choose(browser, "#panel-1 .search-what", "send with tag 5")
    body = browser.find_element(By.TAG_NAME, "body")
    click_head(browser, 1)
    body.send_keys("n")
    first_send = call_at(tag_calls, "MPI_Send", tagtrace.WORLD_SENDS[0][0])
    marked_at(browser, first_send, p=1)
    assert browser.execute_script(f"return ({GD.format(p=0)}.layout.shapes || [])"
                                  ".some(s => s.name === 'partner')") is False
    a1, b1 = browser.execute_script(f"return {GD.format(p=1)}._fullLayout.xaxis.range")
    click_head(browser, 0)
    assert not browser.execute_script("return document.getElementById('panel-1').classList"
                                      ".contains('key-focus')")
    body.send_keys("n")  # every rank: rank 1's first receive of tag 5 is the first
    marked_at(browser, call_at(tag_calls, "MPI_Recv", tagtrace.WORLD_SENDS[0][0] - 2 * US))
    a0, b0 = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
    body.send_keys("+")
    m, q = (a0 + b0) / 2, (b0 - a0) / 4
    shown_window(browser, m - q, m + q)
    assert browser.execute_script(f"return {GD.format(p=1)}._fullLayout.xaxis.range") == \
        pytest.approx([a1, b1], abs=1e-15)
    for p in (0, 1):
        assert layout_problems(browser, p) == [], p
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"nav-compare-keys-{size[0]}.png"))
