"""In headless Chromium: `mpiscope serve` on a trace whose names are HTML, scripts and
terminal escapes (mpiscope_testing/hostile.py) shows them as text — lane labels, the
legend, the findings — and nothing in them runs or renders as markup."""

from __future__ import annotations

import pytest

from mpiscope_testing.hostile import HOSTILE, hostile_example
from mpiscope_testing.webui_page import open_app, wait_settled

pytestmark = pytest.mark.browser


def test_names_show_as_text_and_nothing_runs(browser, serve, tmp_path) -> None:
    trace = hostile_example(HOSTILE).write(tmp_path / "hostile")
    open_app(browser, serve(trace))
    wait_settled(browser, "return document.querySelector('button.finding') && document"
                 ".querySelectorAll('[data-dash-is-loading=\"true\"]').length === 0")
    # an alert() from a name would be open now, and every script call would fail
    assert browser.execute_script("return 1") == 1
    svg = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg text')).map(t => t.textContent)")
    page = browser.execute_script("return document.body.innerText")
    for host in HOSTILE.hosts:  # the lane labels (Plotly), exactly as the trace names them
        assert f"{host} · rank {HOSTILE.hosts.index(host)}" in svg
    assert HOSTILE.mpi_function in svg  # the timeline's legend
    assert HOSTILE.mpi_function in page  # the functions' table (Dash: React's text)
    # no element came from a name: no image, no link, no bold text in the plots
    assert browser.execute_script(
        "return document.querySelectorAll('img, svg a, svg text [style*=\"bold\"]').length"
    ) == 0
