"""The timeline's lanes as a user sets them in headless Chromium, on a trace built by
construction (mpiscope_testing.lanetrace: four ranks on two hosts, rank 1 with a worker
thread): the lane labels the page shows after choosing hosts, ranks with a lane per
thread, an order and a host's one lane, and the same lanes again from the link; at
1400×900 and, the same page made smaller, at 1024×768 (nothing overlaps, lanes keep their
height); and the same on the out-of-core page."""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By

from mpiscope_testing.lanetrace import build
from mpiscope_testing.webui_page import (
    GD,
    choose,
    layout_problems,
    resize,
    shot,
    wait_settled,
    wait_until,
)

pytestmark = pytest.mark.browser

DEFAULT = ["nodeA · rank 0", "nodeA · rank 2", "nodeB · rank 1 (2 threads)", "nodeB · rank 3"]
# the lane labels drawn (SVG text), top to bottom
LABELS = (f"const g = {GD.format(p=0)}; if (!g) return null; "
          "return Array.from(g.querySelectorAll('.ytick text')).map(t => "
          "[t.getBoundingClientRect().top, t.textContent]).sort((a, b) => a[0] - b[0])"
          ".map(x => x[1]);")
SETTLED = ("return document.querySelectorAll('[data-dash-is-loading=\"true\"]').length === 0"
           " && !document.getElementById('first-view')")


@pytest.fixture(scope="module")
def url(serve, tmp_path_factory):
    return serve(build(tmp_path_factory.mktemp("lanes") / "t"))


def lanes_become(browser, want: list[str], what: str) -> None:
    wait_until(browser, f"return JSON.stringify((function() {{ {LABELS} }})()) == "
               f"JSON.stringify({json.dumps(want)})", what=what)


def open_page(browser, url: str) -> None:
    browser.get(url)
    wait_until(browser, f"const g={GD.format(p=0)}; return g && g._fullData && "
               "g._fullData.length > 5", what="timeline drawn")
    wait_settled(browser, SETTLED)


def pick(browser, cls: str, label: str) -> None:
    """Choose an option of the panel's dropdown of class `cls`."""
    choose(browser, f"#panel-0 .{cls}", label)


PER_THREAD = ["nodeB · rank 1 · thread 0", "nodeB · rank 1 · thread 1", "nodeB · rank 3"]


def nodeb_threads(browser) -> list[str]:
    """As a user narrows the lanes: host nodeB's ranks only, then rank 1 a lane per
    thread; the lanes the page then draws."""
    pick(browser, "lane-ranks", "host nodeB")
    lanes_become(browser, ["nodeB · rank 1 (2 threads)", "nodeB · rank 3"],
                 "only nodeB's ranks drawn")
    pick(browser, "lane-threads", "rank 1 (2 threads)")
    lanes_become(browser, PER_THREAD, "a lane per thread of rank 1")
    return PER_THREAD


def test_lanes_chosen_ordered_and_per_thread(browser, url):
    browser.set_window_size(1400, 900)
    open_page(browser, url)
    assert browser.execute_script(LABELS) == DEFAULT
    assert layout_problems(browser) == []

    per_thread = nodeb_threads(browser)
    shot(browser, "lanes-threads")
    # the link holds the lanes: opened again, the page draws the same ones
    link = browser.current_url
    assert "#view=" in link
    browser.get("about:blank")
    browser.get(link)
    lanes_become(browser, per_thread, "the link's lanes")
    wait_settled(browser, SETTLED)
    # ... and the lane bar says so
    bar = browser.find_element(By.CSS_SELECTOR, "#panel-0 .lanes").text
    assert "nodeB · rank 1 (2 threads)" in bar and "nodeB · rank 3" in bar
    assert "nodeA · rank 0" not in bar
    assert "rank 1 (2 threads)" in browser.find_element(
        By.CSS_SELECTOR, "#panel-0 .lane-threads").text

    open_page(browser, url.split("#")[0])
    browser.get_log("browser")  # the page loads behind (navigations cancel requests)
    browser.find_element(By.XPATH, "//div[@id='panel-0']//label[normalize-space(.)="
                                   "'by rank']").click()
    lanes_become(browser, ["nodeA · rank 0", "nodeB · rank 1 (2 threads)", "nodeA · rank 2",
                           "nodeB · rank 3"], "lanes by rank")
    pick(browser, "lane-hosts", "nodeA")
    lanes_become(browser, ["nodeA · 2 ranks", "nodeB · rank 1 (2 threads)", "nodeB · rank 3"],
                 "nodeA's ranks as one lane")
    shot(browser, "lanes-host")
    # the same page at 1024x768: the same lanes, nothing over another, nothing cut off
    resize(browser, (1024, 768))
    lanes_become(browser, ["nodeA · 2 ranks", "nodeB · rank 1 (2 threads)", "nodeB · rank 3"],
                 "the same lanes at 1024 px")
    assert layout_problems(browser) == []
    shot(browser, "lanes-host-1024")
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors


def test_lanes_out_of_core(browser, serve, tmp_path_factory, monkeypatch):
    """The same lane bar on the out-of-core page (MPISCOPE_TIMELINE_OOC=1): the lanes the
    page draws, and the link that keeps them."""
    from mpiscope.archive import reader
    from mpiscope_webui import pyramid

    monkeypatch.setenv(pyramid.ENV, "1")
    d = build(tmp_path_factory.mktemp("ooc-lanes") / "t")
    reader.load(d)
    url = serve(d)
    browser.set_window_size(1024, 768)
    open_page(browser, url)
    assert "out-of-core" in browser.find_element(By.CSS_SELECTOR, "#panel-0").text
    assert browser.execute_script(LABELS) == DEFAULT
    assert layout_problems(browser) == []
    per_thread = nodeb_threads(browser)
    link = wait_until(browser, "return location.hash.includes('expanded') && location.href",
                      what="the lanes in the URL")
    browser.get("about:blank")
    browser.get(link)
    lanes_become(browser, per_thread, "the link's lanes")
    wait_settled(browser, SETTLED)
    browser.find_element(By.XPATH, "//div[@id='panel-0']//label[normalize-space(.)="
                                   "'most waiting first']").click()
    lanes_become(browser, ["nodeB · rank 3", "nodeB · rank 1 · thread 0",
                           "nodeB · rank 1 · thread 1"], "the most waiting rank first")
    shot(browser, "lanes-ooc")
    resize(browser, (1400, 900))
    assert layout_problems(browser) == []
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors
