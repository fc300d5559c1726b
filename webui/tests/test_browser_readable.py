"""In headless Chromium at 1400×900 and 1024×768, what a user reads off the page: every
function in the timeline's legend has a colour of its own (as drawn), none of them a colour
of the time breakdown's parts; the communication matrix has whole-number rank ticks, its
numbers in the cells, a colour scale from 0 and a choice of metric; the message-size
chart has no axis below 0."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from mpiscope import numbers
from mpiscope.archive import reader
from mpiscope.render import palette
from mpiscope_testing.webui_page import layout_problems, open_app, wait_until

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
    # the legend (more rows at 1024 px) clear of the mode bar and the checkbox, lanes as tall
    assert layout_problems(browser) == []


# the analysis tab's figures (the timeline has a heatmap too)
PLOTS = "Array.from(document.querySelectorAll('.js-plotly-plot')).filter(g => " \
    "!g.closest('.timeline') && g._fullData)"
MATRIX = f"{PLOTS}.find(g => g._fullLayout.xaxis.title.text === 'receiver')"
SIZES = f"{PLOTS}.find(g => g._fullLayout.yaxis2)"


def matrix_seen(driver) -> dict:
    return driver.execute_script(f"""
        const g = {MATRIX};
        const t = Array.from(g.querySelectorAll('.heatmap-label')).map(e => e.textContent);
        return {{cells: t, zmin: g._fullData[0].zmin,
                xt: Array.from(g.querySelectorAll('.xtick text')).map(e => e.textContent),
                yt: Array.from(g.querySelectorAll('.ytick text')).map(e => e.textContent)}};""")


@pytest.mark.parametrize("size", [(1400, 900), (1024, 768)])
def test_matrix_and_message_sizes_read_true(browser, app_url, himeno_traces, size):
    browser.set_window_size(*size)
    open_app(browser, app_url)
    browser.find_element(By.XPATH, "//div[contains(@class,'tab')][normalize-space(.)="
                         "'Messages']").click()
    wait_until(browser, f"return {MATRIX} && {SIZES}", what="messages tab")
    trace = reader.load(himeno_traces["unpatched"])
    g = trace.messages.groupby(["send_rank", "recv_rank"])
    seen = matrix_seen(browser)
    # the bytes each pair sent, written in the cells as the number formatter writes them
    assert sorted(seen["cells"]) == sorted(numbers.data(b) for b in g["bytes"].sum())
    assert seen["zmin"] == 0
    ranks = [str(r) for r in range(trace.num_ranks)]
    assert seen["xt"] == ranks and sorted(seen["yt"]) == ranks  # whole ranks, no 0.5
    # the metric buttons: messages per pair
    browser.find_element(By.XPATH, "//*[contains(@class,'updatemenu-button')]"
                         "[normalize-space(.)='messages']").click()
    wait_until(browser, f"return {MATRIX}._fullData[0].colorbar.title.text === 'messages'",
               what="matrix shows messages")
    assert sorted(matrix_seen(browser)["cells"]) == sorted(f"{n:,}" for n in g.size())
    lo = browser.execute_script(f"const l = {SIZES}._fullLayout; "
                                "return [l.yaxis.range[0], l.yaxis2.range[0]]")
    assert lo == [0, 0]  # from 0: no "−95 MB/s"
