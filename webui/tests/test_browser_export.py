"""CSV export of every table, in headless Chromium at 1400×900 and 1024×768, in compare
mode on runs built by construction (mpiscope_testing.comparetraces.halo_pair): the
Differences tab's tables and each run's critical-path table download as CSV holding
exactly the rows the server computed them from (compare.breakdown_delta,
functions_delta; the session's critical path profile), under the headers the page shows
and in the units they name (windowstats.shown), and the differences keep their colours on
the page. Every table the page offers to export writes a header line of plain text: the
headers as shown, without the soft hyphens that let a long word break on the page
(assets/export.js)."""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path

import pandas as pd
import pytest

from mpiscope.archive import reader
from mpiscope_testing import comparetraces
from mpiscope_testing.webui_page import (
    layout_problems,
    open_app,
    open_tab,
    shot,
    wait_settled,
    wait_until,
)
from mpiscope_webui import compare, critical, windowstats
from mpiscope_webui.model import TraceModel

pytestmark = pytest.mark.browser
SIZES = [(1400, 900), (1024, 768)]
GREEN, RED = "rgb(26, 127, 55)", "rgb(192, 57, 43)"  # compare._table's differences


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    return comparetraces.halo_pair(tmp_path_factory.mktemp("export"))


@pytest.fixture(scope="module")
def models(runs) -> tuple[TraceModel, TraceModel]:
    a, b = (TraceModel.build(reader.load(d)) for d in runs)
    return a, b


@pytest.fixture(scope="module")
def url(serve, runs) -> str:
    return serve(*runs)


def dom_id(ident: str | dict) -> str:
    """The DOM id Dash gives a component id (a pattern id as sorted, compact JSON)."""
    return ident if isinstance(ident, str) else json.dumps(ident, sort_keys=True,
                                                           separators=(",", ":"))


def downloaded(driver, dom: str, where: Path) -> Path:
    """Click the Export button of the table with DOM id `dom` as a user does; the CSV."""
    where.mkdir(parents=True)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior",
                           {"behavior": "allow", "downloadPath": str(where)})
    button = wait_until(driver, f"const t=document.getElementById({json.dumps(dom)});"
                        " return t && t.closest('.dash-table-container')"
                        ".querySelector('button.export')", what=f"{dom}'s export button")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    got: list[Path] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not got:
        got = list(where.glob("*.csv"))  # Chromium renames its .crdownload when done
        time.sleep(0.2)
    assert got, f"no CSV of {dom} downloaded"
    return got[0]


def exported(driver, ident: str | dict, where: Path) -> list[dict]:
    """Export a table as a user does; the downloaded CSV's rows."""
    with downloaded(driver, dom_id(ident), where).open(encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))  # Excel's BOM first


def plain(header: str) -> str:
    """A header as a reader reads it on the page: without its soft hyphens (where the
    word may break in a narrow table)."""
    return header.replace("\u00ad", "")


def same_rows(got: list[dict], ref: pd.DataFrame, labels: windowstats.Labels | None = None,
              shared: tuple = ()) -> None:
    """The CSV holds `ref` as its table shows it (windowstats.shown): the headers shown
    (each numeric column's unit), its rows in order, text as text and numbers in the
    header's unit (an empty cell: none, NaN), to the 11 characters Dash's exporter
    (SheetJS's General format) writes a number in: 6 significant digits at least."""
    data, columns = windowstats.shown(ref, labels, shared)
    assert got and list(got[0]) == [plain(c["name"]) for c in columns]
    assert len(got) == len(data)
    for row, want in zip(got, data, strict=True):
        for c in columns:
            key, value = plain(c["name"]), want[c["id"]]
            if isinstance(value, str):
                assert row[key] == value, key
            else:
                cell = float(row[key]) if row[key] != "" else math.nan
                assert cell == pytest.approx(float(value), rel=1e-5, nan_ok=True), key


def path_frame(model: TraceModel) -> pd.DataFrame:
    """The critical-path table's rows (critical.profile), from the session's path."""
    prof = model.session.critical_path.profile().head(critical.PROFILE_ROWS)
    return pd.DataFrame({"name": prof["name"].astype(str),
                         "callsite": prof["callsite"].fillna("").astype(str),
                         "before": prof["before"].fillna("").astype(str),
                         "time_s": prof["time_s"].astype(float),
                         "share": 100 * prof["share"].astype(float)})


def delta_colours(driver, ident: str) -> list[str]:
    """The colour of each difference cell the table shows, in row order (the rows are
    the data's, unsorted; read from the cells' style, whatever their number format)."""
    return driver.execute_script(
        f"return Array.from(document.getElementById({json.dumps(ident)})"
        ".querySelectorAll('td[data-dash-column=\"delta_s\"]')).map(c => "
        "getComputedStyle(c).color)")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_differences_and_critical_path_tables_export_csv(browser, url, models, tmp_path,
                                                         size):
    browser.set_window_size(*size)
    open_app(browser, url, panels=2)
    open_tab(browser, "Differences")
    wait_until(browser, "return document.getElementById('diff-functions')",
               what="the Differences tab")
    a, b = models
    diff = (compare.DIFF_LABELS, compare.DIFF_UNITS)
    same_rows(exported(browser, "diff-breakdown", tmp_path / "breakdown"),
              compare.breakdown_delta(a, b), *diff)
    same_rows(exported(browser, "diff-functions", tmp_path / "functions"),
              compare.functions_delta(a, b), *diff)
    # on the page the differences keep their colours: B faster green, slower red
    deltas = compare.functions_delta(a, b)["delta_s"].to_numpy()
    assert (deltas < 0).any() and (deltas > 0).any()
    shown = delta_colours(browser, "diff-functions")
    assert len(shown) == len(deltas)
    for d, colour in zip(deltas, shown, strict=True):
        if d:
            assert colour == (GREEN if d < 0 else RED), (d, colour)
    assert layout_problems(browser, root="#differences") == []
    shot(browser, f"export-differences-{size[0]}")
    open_tab(browser, "Critical path")
    for p, model in enumerate(models):
        ident = {"type": "cp-table", "panel": p}
        same_rows(exported(browser, ident, tmp_path / f"path-{p}"), path_frame(model),
                  critical.PROFILE_LABELS)
        assert layout_problems(browser, p, root="[id*='tab-critical']") == []
    shot(browser, f"export-critical-{size[0]}")


# the tabs with tables, each one per panel (Differences: of both runs); Findings and Call
# tree have none
TABLE_TABS = ("Breakdown", "Functions", "Messages", "Profiles", "Critical path",
              "Differences")
# the tables the open tab shows: DOM id and headers as on the page, in order
TABLES_JS = """
return Array.from(document.querySelectorAll('.dash-table-container'))
  .filter(t => t.offsetParent && t.querySelector('button.export'))
  .map(t => ({id: t.id, headers: Array.from(t.querySelectorAll('th[data-dash-column]'))
                .map(h => h.textContent.trim())}));"""


def header_line(path: Path) -> str:
    """The CSV's first line as written, after the byte-order mark Excel reads it by."""
    return path.read_text(encoding="utf-8").removeprefix("\ufeff").split("\n", 1)[0]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_tables_csv_header_is_plain_text(browser, url, tmp_path, size):
    # at 1024x768 the narrow columns are where the soft hyphens break words on the page
    browser.set_window_size(*size)
    open_app(browser, url, panels=2)
    seen_shy = []
    for tab in TABLE_TABS:
        open_tab(browser, tab)
        # both panels' tables there (Differences: the runs' differences), nothing loading
        want = (["diff-breakdown", "diff-functions"] if tab == "Differences" else
                ['"panel":0', '"panel":1'])
        wait_until(browser, "const ids = Array.from(document.querySelectorAll("
                   "'.dash-table-container')).filter(t => t.offsetParent && "
                   "t.querySelector('button.export')).map(t => t.id); return "
                   f"{json.dumps(want)}.every(w => ids.some(i => i.includes(w)))",
                   what=f"the {tab} tab's tables")
        wait_settled(browser, "return document.querySelectorAll("
                     "'[data-dash-is-loading=\"true\"]').length === 0",
                     what=f"the {tab} tab")
        tables = browser.execute_script(TABLES_JS)
        assert len(tables) >= 2, (tab, tables)
        assert all(t["id"] for t in tables), tables  # an id to find its Export button by
        for i, t in enumerate(tables):
            line = header_line(downloaded(browser, t["id"], tmp_path / f"{tab}-{i}"))
            bad = sorted({f"U+{ord(c):04X}" for c in line if not c.isprintable()})
            assert bad == [], (tab, t["id"], line)
            # the headers a reader sees on the page, in the same order
            assert next(csv.reader([line])) == [plain(h) for h in t["headers"]], t["id"]
            seen_shy += [h for h in t["headers"] if "\u00ad" in h]
    # the breakdown's long words are soft-hyphenated on the page, not in the CSV
    assert {plain(h).split(" (")[0] for h in seen_shy} >= {"communication",
                                                             "synchronization"}
