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
    unit_of,
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


# what the Profiles tab's tables hold, known by construction (mpiscope_testing.windowtrace)
SEND_NS = [d for _, d in SENDS]  # rank 0's sends, 3 .. 12 µs
RECV_NS = [d + 3 * US for d in SEND_NS]  # rank 1's receives: posted 2 µs early, end 1 µs late
LATE = 20 * US  # rank 2 enters each allreduce this late: ranks 0 and 1 wait for it
ALLREDUCE_NS = {0: 30 * US, 1: 30 * US, 2: 10 * US}  # each allreduce on each rank


def _ns(window: tuple[float, float]) -> int:
    return round(window[1] * 1e9) - round(window[0] * 1e9)


def _median(v: list[int]) -> float:
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def sec(cell: float | str) -> float:
    """A cell as a number (a time column already in seconds)."""
    return cell if isinstance(cell, float) else float(cell.replace(",", ""))


def near(cell: float | str, ns: float) -> bool:
    """A shown time is `ns` (its rounding to the digits shown aside)."""
    return abs(sec(cell) - ns / 1e9) <= 2e-3 * abs(ns / 1e9) + 1e-12


def seconds_when(driver, ident: dict, ok, what: str) -> list[dict]:
    """The table's rows as the user reads them, once `ok(rows)` holds: the time columns
    in seconds by the unit each header names ("time (µs)"), the others as shown."""
    dom_id = json.dumps(json.dumps(ident, sort_keys=True, separators=(",", ":")))
    heads_js = (f"const t=document.getElementById({dom_id}); if (!t) return null; "
                "return Object.fromEntries(Array.from(t.querySelectorAll("
                "'th[data-dash-column]')).map(h => [h.dataset.dashColumn, "
                "h.textContent.replace(/\\u00ad/g, '').trim()]));")

    def read() -> list[dict] | None:
        heads = driver.execute_script(heads_js) or {}
        rows = driver.execute_script(table_js(ident)) or []
        out = []
        for r in rows:
            row = {}
            for k, text in r.items():
                unit = unit_of(heads.get(k, "")) or ""
                timed = unit.endswith("s") and not unit.endswith("B/s")
                row[k] = cell_value(text, heads[k]) if timed else text
            out.append(row)
        return out

    deadline = time.monotonic() + 30
    rows = None
    while time.monotonic() < deadline:
        try:
            rows = read()
            if rows and ok(rows):
                return rows
        except (KeyError, ValueError):  # a table being replaced: read again
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what}: last rows {rows}")


def by(rows: list[dict], *keys: str) -> dict:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


def waits_are(rows: list[dict], expect: dict[str, dict[str, float]]) -> bool:
    """Each rank's wait states: those named as given (ns), every other kind 0."""
    return sorted(r["rank"] for r in rows) == sorted(expect) and all(
        near(r[k], expect[r["rank"]].get(k, 0)) for r in rows
        for k in r if k != "rank")


def regions_are(rows: list[dict], ranks: int, window_ns: int, mpi_ns: int) -> bool:
    """main and solve cover the window on each rank: inclusive all of it; main's own
    time none (solve is directly inside), solve's all but its MPI calls'."""
    got = by(rows, "name")
    return set(got) == {"main", "solve"} and all(
        got[n]["calls"] == str(ranks) and near(got[n]["inclusive_s"], ranks * window_ns)
        for n in got) and near(got["main"]["exclusive_s"], 0) and \
        near(got["solve"]["exclusive_s"], ranks * window_ns - mpi_ns)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rank_set_and_profiles(browser, url, trace_dir, size):
    browser.set_window_size(*size)
    open_app(browser, url)
    open_tab(browser, "Breakdown")
    bd = {"type": "wtable", "panel": 0, "name": "breakdown"}
    rows_when(browser, bd, lambda r: [x["rank"] for x in r] == ["0", "1", "2"], "3 ranks")
    # phase A, all ranks: the sends' profiles, rank 1's late senders, the messages
    zoom_to(browser, *PHASE_A)
    open_tab(browser, "Profiles")
    waits = {"type": "ptable", "panel": 0, "name": "waits"}
    seconds_when(browser, waits, lambda r: waits_are(r, {
        "0": {}, "1": {"late_sender": len(SENDS) * 2 * US}, "2": {}}),
        "phase A: rank 1 waits 2 µs for each send")
    sites = {"type": "ptable", "panel": 0, "name": "per-callsite"}
    got = by(seconds_when(browser, sites, lambda r: {x["function"] for x in r} == {
        "MPI_Send", "MPI_Recv"}, "phase A's call sites"), "function", "callsite")
    for key, ns in ((("MPI_Send", "a.c:10"), SEND_NS), (("MPI_Recv", "a.c:20"), RECV_NS)):
        row = got[key]
        assert row["calls"] == str(len(ns))
        assert near(row["min_s"], min(ns)), (key, row)
        assert near(row["median_s"], _median(ns)), (key, row)
        assert near(row["max_s"], max(ns)), (key, row)
    comms = {"type": "ptable", "panel": 0, "name": "per-comm"}
    got = by(seconds_when(browser, comms, lambda r: len(r) == 2, "phase A per communicator"),
             "function", "comm")
    assert set(got) == {("MPI_Send", "MPI_COMM_WORLD"), ("MPI_Recv", "MPI_COMM_WORLD")}
    assert near(got["MPI_Send", "MPI_COMM_WORLD"]["time_s"], sum(SEND_NS))
    assert near(got["MPI_Recv", "MPI_COMM_WORLD"]["time_s"], sum(RECV_NS))
    tags = {"type": "ptable", "panel": 0, "name": "messages-comm-tag"}
    [row] = seconds_when(browser, tags, lambda r: len(r) == 1, "phase A's messages")
    assert (row["comm"], row["tag"], row["messages"], row["bytes"]) == (
        "MPI_COMM_WORLD", "5", str(len(SENDS)), f"{1000 * sum(range(1, 11)):,}")
    regions = {"type": "ptable", "panel": 0, "name": "regions"}
    seconds_when(browser, regions, lambda r: regions_are(
        r, 3, _ns(PHASE_A), sum(SEND_NS) + sum(RECV_NS)), "phase A's user regions")
    # phase B, all ranks: ranks 0 and 1 wait at each allreduce for rank 2
    zoom_to(browser, *PHASE_B_S)
    seconds_when(browser, waits, lambda r: waits_are(r, {
        "0": {"wait_at_nxn": ALLREDUCES * LATE}, "1": {"wait_at_nxn": ALLREDUCES * LATE},
        "2": {}}), "phase B: ranks 0 and 1 wait 20 µs at each allreduce")
    per_rank = {"type": "ptable", "panel": 0, "name": "per-rank"}
    got = by(seconds_when(browser, per_rank, lambda r: {x["function"] for x in r} == {
        "MPI_Allreduce"}, "phase B per rank"), "rank")
    assert set(got) == {"0", "1", "2"}
    for rank, ns in ALLREDUCE_NS.items():  # every allreduce of a rank lasts as long
        row = got[str(rank)]
        assert row["calls"] == str(ALLREDUCES)
        assert all(near(row[k], ns) for k in ("min_s", "median_s", "max_s")), row
    seconds_when(browser, regions, lambda r: regions_are(
        r, 3, _ns(PHASE_B_S), ALLREDUCES * sum(ALLREDUCE_NS.values())),
        "phase B's user regions")
    # rank 2 alone: its tables only
    open_tab(browser, "Breakdown")
    _pick_rank(browser, 2)
    rows_when(browser, bd, lambda r: [x["rank"] for x in r] == ["2"], "rank 2 alone")
    open_tab(browser, "Profiles")
    rows = seconds_when(browser, per_rank,
                        lambda r: {(x["rank"], x["function"]) for x in r} == {(
                            "2", "MPI_Allreduce")}, "rank 2's allreduces in phase B")
    assert rows[0]["calls"] == str(ALLREDUCES)
    assert all(near(rows[0][k], ALLREDUCE_NS[2]) for k in ("min_s", "median_s", "max_s"))
    seconds_when(browser, waits, lambda r: waits_are(r, {"2": {}}), "rank 2 never waits")
    # user regions: solve is all of a window inside it, inclusive and exclusive
    seconds_when(browser, regions, lambda r: regions_are(
        r, 1, _ns(PHASE_B_S), ALLREDUCES * ALLREDUCE_NS[2]), "rank 2's user regions")
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
