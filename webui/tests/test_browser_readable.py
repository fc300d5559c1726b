"""In headless Chromium at 1400×900 and 1024×768, what a user reads off the page: every
function in the timeline's legend has a colour of its own (as drawn), none of them a colour
of the time breakdown's parts; the communication matrix has whole-number rank ticks, its
numbers in the cells, a colour scale from 0 and a choice of metric; the message-size
chart has no axis below 0; every table's numeric column in one unit its header names, no
number on the page in scientific notation, compare mode's per-rank tables within their
half of the page."""

from __future__ import annotations

import re

import pytest
from selenium.webdriver.common.by import By

from mpiscope import numbers
from mpiscope.archive import reader
from mpiscope.render import palette
from mpiscope_testing.webui_page import SIZES as WINDOWS
from mpiscope_testing.webui_page import (
    layout_problems,
    open_app,
    open_tab,
    shot,
    tables_shown,
    unit_of,
    wait_settled,
    wait_until,
)

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


# a number as a table cell writes it: digits, maybe grouped, decimals, maybe an SI suffix
NUMBER = re.compile(r"^[−+-]?\d[\d,]*(\.\d+)?[pnµμmkMGT]?$")
PLAIN = re.compile(r"^[−+-]?\d[\d,]*(\.\d+)?$")  # the same without a suffix
EXPONENT = re.compile(r"\d(\.\d+)?[eE][+\-−]\d")  # 8.23e-05, 1.5e+03, Plotly's 1e−6
COUNTS = re.compile(r"^(calls|messages|rank|thread|tag|sender|receiver)\b")  # no unit


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def unreadable(tables: list[dict]) -> list[str]:
    """What breaks "one unit per column" in tables_shown's tables: a numeric column whose
    header names no unit (counts need none), a cell with an SI prefix of its own ("399µ"),
    cells of one column with different decimals (not one unit)."""
    out = []
    for t in tables:
        for key, cells in t["cells"].items():
            head, shown = t["headers"].get(key, key), [c for c in cells if c]
            if not shown or not all(NUMBER.match(c) for c in shown):
                continue  # a text column
            if not (unit_of(head) or "%" in head or COUNTS.match(head)):
                out.append(f"{t['id']}: {head!r} names no unit")
            if any(not PLAIN.match(c) for c in shown):
                out.append(f"{t['id']}: {head!r} has a prefix per cell: {shown[:4]}")
            if len({_decimals(c) for c in shown}) > 1:
                out.append(f"{t['id']}: {head!r} mixes precisions: {shown[:4]}")
    return out


PAGE_TEXT = """return [document.body.innerText, ...Array.from(document.querySelectorAll(
    'svg text')).filter(e => e.getBoundingClientRect().width > 0).map(e => e.textContent)]
    .join('\\n');"""


def exponents(driver) -> list[str]:
    """Numbers in scientific notation anywhere the user reads: the page and its plots."""
    text = driver.execute_script(PAGE_TEXT)
    return [text[max(0, m.start() - 30):m.end() + 10] for m in EXPONENT.finditer(text)]


def show_tab(driver, label: str, tables: int) -> list[dict]:
    """Open a tab, wait until its tables (at least `tables`) are drawn and the page is
    still; what they show."""
    open_tab(driver, label)
    wait_settled(driver, "return document.querySelectorAll('[data-dash-is-loading=\"true\"]')"
                 ".length === 0 && !document.querySelector('.tab-content').innerText"
                 f".includes('analyzing') && {TABLES_SHOWN} >= {tables}",
                 what=f"the {label} tab's tables")
    return tables_shown(driver, ".tab-content")


TABLES_SHOWN = ("Array.from(document.querySelectorAll('.tab-content .dash-table-container'))"
                ".filter(t => t.offsetParent).length")
# a tab of one run and how many tables it shows at least
ONE_RUN_TABS = (("Breakdown", 1), ("Functions", 1), ("Messages", 2), ("Profiles", 5),
                ("Critical path", 1), ("Findings", 0))


@pytest.mark.parametrize("size", WINDOWS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_table_has_one_unit_per_column(browser, app_url, size):
    browser.set_window_size(*size)
    open_app(browser, app_url)
    assert exponents(browser) == []  # the timeline, its status line, the header
    seen = 0
    for tab, least in ONE_RUN_TABS:
        tables = show_tab(browser, tab, least)
        seen += len(tables)
        assert unreadable(tables) == [], tab
        assert exponents(browser) == [], tab
    assert seen >= 10
    shot(browser, f"units-profiles-{size[0]}")


@pytest.fixture(scope="module")
def compare_url(serve, himeno_traces):
    return serve(himeno_traces["unpatched"], himeno_traces["patched"])


@pytest.mark.parametrize("size", WINDOWS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_tables_have_units_and_fit_their_half(browser, compare_url, size):
    browser.set_window_size(*size)
    open_app(browser, compare_url, panels=2)
    tables = show_tab(browser, "Differences", 2)
    assert unreadable(tables) == [] and exponents(browser) == []
    # A, B and their difference in one unit: they compare at a glance
    diff = next(t for t in tables if t["id"] == "diff-breakdown")
    assert len({unit_of(diff["headers"][k]) for k in ("A_s", "B_s", "delta_s")}) == 1
    tables = show_tab(browser, "Breakdown", 2)
    assert len(tables) == 2 and unreadable(tables) == [] and exponents(browser) == []
    # each run's per-rank table within its half of the page: every column visible
    assert [t["scrolls"] for t in tables] == [False, False]
    for t in tables:
        assert {"rank", "total_s", "compute_s", "communication_s",
                "synchronization_s"} <= set(t["headers"])
    browser.execute_script("document.querySelector('.tab-content .dash-table-container')"
                           ".scrollIntoView()")
    shot(browser, f"units-compare-breakdown-{size[0]}")
    assert layout_problems(browser, root="[id*='tab-breakdown']") == []
