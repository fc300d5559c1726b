"""The out-of-core page's keys' help (MPISCOPE_TIMELINE_OOC=1), in headless Chromium at
1400×900 and 1024×768: it lists the in-memory page's keys (app.KEYS). The rest of the
page's navigation, the in-memory page's code (navsearch, app.search_bar, app.keys_help) on
the cache's rows (oocnav), is tested on both pages by test_browser_navigation (its `page`
fixture): a click on a call shows its details, a partner jump selects and marks the
partner and says which way the message went; search by call site, tag and communicator
with n / p; the zoom and pan keys."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from test_browser_navigation import open_ooc, serve_ooc

from mpiscope_testing.webui_page import layout_problems, shot, wait_until
from mpiscope_testing.windowtrace import build
from mpiscope_webui import app

pytestmark = pytest.mark.browser
SIZES = [(1400, 900), (1024, 768)]


@pytest.fixture(scope="module")
def url(serve, tmp_path_factory):
    """windowtrace served on the out-of-core page."""
    return serve_ooc(serve, build(tmp_path_factory.mktemp("oocnav") / "t"))


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
