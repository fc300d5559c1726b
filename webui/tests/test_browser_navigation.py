"""Timeline navigation in headless Chromium at 1400×900 and 1024×768, on a trace built by
construction (mpiscope_testing.windowtrace): a partner jump selects and marks the partner
and says which way the message went."""

from __future__ import annotations

import time

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from mpiscope.archive import reader
from mpiscope_testing.webui_page import (
    GD,
    choose,
    layout_problems,
    open_app,
    wait_until,
    zoom_to,
)
from mpiscope_testing.webui_server import ARTIFACTS
from mpiscope_testing.windowtrace import SENDS, build

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
def test_partner_jump_selects_and_marks_the_partner(browser, url, trace, size):
    browser.set_window_size(*size)
    open_app(browser, url)
    c, m = trace.calls, trace.messages
    k = 4
    s, d = SENDS[k]
    recv = c[(c["function"] == "MPI_Recv") & (c["start"] == s - 2000)].iloc[0]
    send = c[(c["function"] == "MPI_Send") & (c["start"] == s)].iloc[0]
    nbytes = int(m[m["recv_call"] == recv["call"]]["bytes"].iloc[0])
    zoom_to(browser, (s - 5000) / 1e9, (s + d + 5000) / 1e9)
    click_call(browser, int(recv["call"]))
    jump = wait_until(browser, "return document.querySelector('#panel-0 .details button.jump')",
                      what="the partner button")
    assert jump.text == (f"received {nbytes:,} B from rank 0 (tag 5) → jump to the send")
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
    assert layout_problems(browser) == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"nav-partner-{size[0]}.png"))


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
    browser.execute_cdp_cmd("Browser.setDownloadBehavior",
                            {"behavior": "allow", "downloadPath": str(tmp_path)})
    open_app(browser, url)
    zoom_to(browser, 100e-6, 400e-6)
    browser.find_element(By.CSS_SELECTOR, f"#panel-0 button.export-image[data-format='{fmt}']"
                         ).click()
    path = tmp_path / f"mpiscope-timeline-0.{fmt}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (path.is_file() and path.stat().st_size > 0):
        time.sleep(0.2)
    assert path.is_file(), list(tmp_path.iterdir())
    data = path.read_bytes()
    if fmt == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        size = browser.execute_script(f"const l={GD.format(p=0)}._fullLayout; "
                                      "return [l.width, l.height]")
        assert [w, h] == size
    else:
        text = data.decode()
        # what the user saw: the lanes' labels, the legend and the zoomed time axis
        for label in ("rank 0", "rank 1", "rank 2", "MPI_Send", "MPI_Recv", "time (s)"):
            assert label in text, label


def marked(driver) -> list[float]:
    return driver.execute_script(f"const s=({GD.format(p=0)}.layout.shapes || []).find("
                                 "s => s.name === 'partner'); return s && [s.x0, s.x1]")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_search_next_and_previous_call_with_keys(browser, url, trace, size):
    browser.set_window_size(*size)
    open_app(browser, url)
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
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"nav-search-{size[0]}.png"))
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
