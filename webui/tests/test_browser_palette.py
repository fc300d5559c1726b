"""In headless Chromium at 1400×900 and 1024×768: every function in the timeline's legend
has a colour of its own (as drawn, read back from the page), none of them a colour of the
time breakdown's parts, and the colours are the palette's for the functions shown."""

from __future__ import annotations

import pytest

from mpiscope.archive import reader
from mpiscope.render import palette
from mpiscope_testing.webui_page import open_app

pytestmark = pytest.mark.browser

LEGEND = """
const out = [];
document.querySelectorAll('#panel-0 .timeline .legend .traces').forEach(t => {
  const text = t.querySelector('.legendtext').textContent;
  const sym = t.querySelector('.legendfill path, .legendpoints path, .legendlines path');
  const fill = sym ? getComputedStyle(sym).fill : '';
  const r = t.getBoundingClientRect();
  out.push([text, fill, r.width > 0 && r.height > 0]);
});
return out;"""


def hex_of(css: str) -> str:
    """'rgb(238, 102, 119)' -> '#ee6677'."""
    r, g, b = (int(v) for v in css[css.index("(") + 1:css.index(")")].split(",")[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


@pytest.fixture(scope="module")
def app_url(serve, himeno_traces):
    return serve(himeno_traces["unpatched"])


@pytest.mark.parametrize("size", [(1400, 900), (1024, 768)])
def test_legend_colours_are_distinct(browser, app_url, himeno_traces, size):
    browser.set_window_size(*size)
    open_app(browser, app_url)
    entries = browser.execute_script(LEGEND)
    functions = {str(f) for f in
                 reader.load(himeno_traces["unpatched"]).calls["function"].unique()}
    shown = {text: hex_of(fill) for text, fill, visible in entries
             if text in functions and visible}
    # every function of the trace is in the legend, drawn in its own colour
    assert set(shown) == functions and len(functions) >= 4
    assert len(set(shown.values())) == len(shown), shown
    assert not set(shown.values()) & set(palette.PART_COLOURS.values())
    assert shown == palette.colours(functions)
