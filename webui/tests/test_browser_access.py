"""In headless Chromium: the token URL that `mpiscope serve` prints off loopback opens a
working page (the cookie it sets carries the page's own requests), and a drag off the end
of the trace leaves the page working."""

from __future__ import annotations

import pytest

from mpiscope_testing.webui_page import GD, open_app, status, wait_until, zoom_to
from mpiscope_testing.webui_server import Server, printed_url

pytestmark = pytest.mark.browser


def test_the_printed_token_url_opens_a_working_page(browser, himeno_traces, lan_address):
    srv = Server(str(himeno_traces["unpatched"]), "--host", lan_address, wait_host=lan_address)
    try:
        url = printed_url(srv)
        # without the token: the one-line refusal, not the page
        browser.delete_all_cookies()
        browser.get(url.split("?", 1)[0])
        assert "token" in browser.find_element("tag name", "body").text
        # the page, then its scripts, layout and callbacks: all through the cookie
        open_app(browser, url)
        assert "states drawn" in status(browser)
        # the page's callbacks (XHRs, no token in their URL) still get through: a zoom
        t0, t1 = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
        zoom_to(browser, t0 + (t1 - t0) / 4, t0 + (t1 - t0) / 2)
        # and a pan past the end of the trace (the render callback failed there)
        span = t1 - t0
        browser.execute_script(f"Plotly.relayout({GD.format(p=0)}, {{'xaxis.range[0]': "
                               f"{t1 + 2 * span!r}, 'xaxis.range[1]': {t1 + 3 * span!r}}})")
        wait_until(browser, "return document.querySelector('#panel-0 .status').textContent"
                            ".includes(' 0 states drawn')", 30, "the empty window drawn")
        zoom_to(browser, t0 + (t1 - t0) / 4, t0 + (t1 - t0) / 2)  # and back
        log = srv.log()
        assert "Traceback" not in log and "callback error" not in log
    finally:
        srv.stop()
