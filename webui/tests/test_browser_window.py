"""The analysis tabs follow the zoom and the rank set, in headless Chromium at 1400×900 and
1024×768, on a trace built by construction (mpiscope_testing.windowtrace): what each
window holds is known, and the tables must show exactly that. Their CSV exports hold the
session's window tables (in the units the headers name)."""

from __future__ import annotations

import csv
import json
import time

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.webui_page import (
    cell_value,
    open_app,
    open_tab,
    shot,
    wait_until,
    zoom_to,
)
from mpiscope_testing.windowtrace import ALLREDUCES, END, PHASE_B, SENDS, US, build

pytestmark = pytest.mark.browser
SIZES = [(1400, 900), (1024, 768)]
PHASE_A = (50 * US / 1e9, (PHASE_B - 10 * US) / 1e9)  # the sends, no allreduce
PHASE_B_S = ((PHASE_B - 10 * US) / 1e9, (END - 30 * US) / 1e9)  # the allreduces only
FIRST_SENDS = (50 * US / 1e9, 320 * US / 1e9)  # the first five sends (3 .. 7 µs long)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("window") / "t")


@pytest.fixture(scope="module")
def url(serve, trace_dir):
    return serve(trace_dir)


def table_js(ident: dict) -> str:
    """JS: the rows of a DataTable as shown ({column id: text}), by its Dash id."""
    dom_id = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return (f"const t=document.getElementById({json.dumps(dom_id)}); if (!t) return null; "
            "return Array.from(t.querySelectorAll('tr')).map(r => Object.fromEntries("
            "Array.from(r.querySelectorAll('td[data-dash-column]')).map(c => "
            "[c.dataset.dashColumn, c.textContent.trim()]))).filter(r => Object.keys(r)"
            ".length);")


def rows_when(driver, ident: dict, ok, what: str) -> list[dict]:
    """The table's rows once `ok(rows)` holds (the server recomputes after each zoom)."""
    deadline = time.monotonic() + 30
    rows = None
    while time.monotonic() < deadline:
        rows = driver.execute_script(table_js(ident))
        if rows and ok(rows):
            return rows
        time.sleep(0.2)
    raise AssertionError(f"{what}: last rows {rows}")


FUNCTIONS = {"type": "ftable", "panel": 0}


def names(rows: list[dict]) -> set[str]:
    return {r["name"] for r in rows}


# JS: the duration histogram's function and its bars (calls per bin), as Plotly drew them
HISTOGRAM = ("const g = document.querySelector('[id*=fhist] .js-plotly-plot'); "
             "if (!g || !g._fullData || !g._fullData.length) return null; "
             "const t = g._fullData[0]; return {name: t.name, x: Array.from(t.x), "
             "y: Array.from(t.y)};")


def histogram_when(driver, name: str, calls: int, what: str) -> dict:
    """The histogram once it shows `name` with bars adding up to `calls`."""
    return wait_until(driver, f"const h = (() => {{ {HISTOGRAM} }})(); return h && "
                      f"h.name === {json.dumps(name)} && h.y.reduce((a, b) => a + b, 0) "
                      f"=== {calls} && h", what=what)


def select_function(driver, name: str) -> None:
    """Tick a function's row in the functions table, as a user does."""
    driver.find_element(By.XPATH, "//tr[td[@data-dash-column='name'][normalize-space(.)="
                        f"'{name}']]//input").click()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_functions_follow_the_zoom(browser, url, size):
    browser.set_window_size(*size)
    open_app(browser, url)
    open_tab(browser, "Functions")
    everything = {"MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Allreduce", "MPI_Finalize"}
    rows_when(browser, FUNCTIONS, lambda r: names(r) == everything, "whole run")
    zoom_to(browser, *PHASE_A)
    rows = rows_when(browser, FUNCTIONS, lambda r: names(r) == {"MPI_Send", "MPI_Recv"},
                     "phase A: the sends and receives only")
    send = next(r for r in rows if r["name"] == "MPI_Send")
    assert send["calls"] == str(len(SENDS))
    scope = browser.find_element(By.CSS_SELECTOR, "#tabs-content .scope-text, .scope-text")
    assert f"{PHASE_A[0]:.6f} – {PHASE_A[1]:.6f} s" in scope.text
    # the histogram of the row chosen counts the window's calls, as the table does
    select_function(browser, "MPI_Send")
    bars = histogram_when(browser, "MPI_Send", len(SENDS), "phase A's ten sends")
    longest = max(x for x, y in zip(bars["x"], bars["y"], strict=True) if y)
    assert 11e-6 < longest < 12.1e-6  # the last send lasts 12 µs
    shot(browser, f"window-phase-a-{size[0]}")
    # a narrower window: the same function still chosen, its histogram of that window
    zoom_to(browser, *FIRST_SENDS)
    rows_when(browser, FUNCTIONS, lambda r: {x["name"]: x["calls"] for x in r}.get(
        "MPI_Send") == "5", "the first five sends")
    bars = histogram_when(browser, "MPI_Send", 5, "the first five sends' histogram")
    longest = max(x for x, y in zip(bars["x"], bars["y"], strict=True) if y)
    assert 6e-6 < longest < 7.1e-6  # the fifth send lasts 7 µs
    zoom_to(browser, *PHASE_B_S)
    rows = rows_when(browser, FUNCTIONS, lambda r: names(r) == {"MPI_Allreduce"},
                     "phase B: the allreduces only")
    assert rows[0]["calls"] == str(3 * ALLREDUCES)
    # the chosen function has no call here: the histogram is of the table's first row
    histogram_when(browser, "MPI_Allreduce", 3 * ALLREDUCES, "phase B's allreduces")
    # the histogram and the table stay on screen, not under another element
    table = browser.find_element(By.CSS_SELECTOR, ".dash-spreadsheet")
    assert table.is_displayed() and table.size["width"] <= size[0]


def _pick_rank(driver, rank: int) -> None:
    """Choose a rank in the rank-set dropdown, as a user does: open it, tick the rank."""
    driver.find_element(By.ID, "rankset").click()
    option = wait_until(driver, "return Array.from(document.querySelectorAll("
                        "'.dash-dropdown-option')).find(o => o.textContent.trim() === "
                        f"'rank {rank}')", what="the rank's option")
    option.click()
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rank_set_and_profiles(browser, url, trace_dir, size):
    browser.set_window_size(*size)
    open_app(browser, url)
    open_tab(browser, "Breakdown")
    bd = {"type": "wtable", "panel": 0, "name": "breakdown"}
    rows_when(browser, bd, lambda r: [x["rank"] for x in r] == ["0", "1", "2"], "3 ranks")
    _pick_rank(browser, 2)
    rows_when(browser, bd, lambda r: [x["rank"] for x in r] == ["2"], "rank 2 alone")
    zoom_to(browser, *PHASE_B_S)
    open_tab(browser, "Profiles")
    per_rank = {"type": "ptable", "panel": 0, "name": "per-rank"}
    rows = rows_when(browser, per_rank,
                     lambda r: {(x["rank"], x["function"]) for x in r} == {("2",
                                                                            "MPI_Allreduce")},
                     "rank 2's allreduces in phase B")
    assert rows[0]["calls"] == str(ALLREDUCES)
    # user regions: solve is all of a window inside it, inclusive and exclusive
    regions = {"type": "ptable", "panel": 0, "name": "regions"}
    rows = rows_when(browser, regions, lambda r: {x["name"] for x in r} == {"main", "solve"},
                     "user regions listed")
    assert {x["name"]: x["calls"] for x in rows} == {"main": "1", "solve": "1"}
    shot(browser, f"window-profiles-{size[0]}")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_csv_export_holds_the_window_table(browser, url, trace_dir, tmp_path, size):
    browser.set_window_size(*size)
    browser.execute_cdp_cmd("Browser.setDownloadBehavior",
                            {"behavior": "allow", "downloadPath": str(tmp_path)})
    open_app(browser, url)
    zoom_to(browser, *PHASE_A)
    open_tab(browser, "Profiles")
    per_site = {"type": "ptable", "panel": 0, "name": "per-callsite"}
    rows_when(browser, per_site, lambda r: {x["function"] for x in r} == {"MPI_Send",
                                                                          "MPI_Recv"},
              "phase A's call sites")
    dom_id = json.dumps(json.dumps(per_site, sort_keys=True, separators=(",", ":")))
    browser.execute_script(f"document.getElementById({dom_id}).closest('.dash-table-container')"
                           ".querySelector('button.export').click()")
    got: list = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not got:
        got = [p for p in tmp_path.glob("*.csv")]
        time.sleep(0.2)
    assert got, "no CSV downloaded"
    with got[0].open(encoding="utf-8-sig") as f:  # Excel's BOM first
        table = list(csv.DictReader(f))
    a, b = (round(x * 1e9) for x in PHASE_A)
    ref = Analysis(reader.load(trace_dir)).window(a, b).profile(("function", "callsite"))
    # the headers as shown, the times in the unit the time column's header names
    assert [(r["function"], r["call site"], int(r["calls"])) for r in table] == \
        [(r.function, r.callsite, r.calls) for r in ref.itertuples()]
    [head] = [h for h in table[0] if h.startswith("time (")]
    assert [cell_value(r[head], head) for r in table] == pytest.approx(list(ref["time_s"]))
