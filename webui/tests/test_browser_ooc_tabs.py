"""The out-of-core page's analysis tabs (ooctabs.py), in headless Chromium at 1400×900 and
1024×768: `mpiscope serve` out of core (MPISCOPE_TIMELINE_OOC=1) on the lanes' trace
(mpiscope_testing.lanetrace) shows Breakdown, Functions, Messages, Profiles and Findings
with the numbers of `mpiscope analyze --engine dask --json` on the same trace (and the
Profiles tab its profiles per process, thread and tag and its messages per tag, their
counts those of the trace's tables) and the Call tree (from each rank's rows), and what
out of core cannot fill is said in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from selenium.webdriver.common.by import By

from mpiscope.analysis import stats
from mpiscope.archive import reader
from mpiscope_testing.lanetrace import WORKER_REGION, WORKER_SEND, build
from mpiscope_testing.webui_page import (
    GD,
    SIZES,
    cell_resolution,
    cell_value,
    layout_problems,
    open_tab,
    shot,
    tables_shown,
    wait_until,
)
from mpiscope_webui import ooctabs, pyramid, windowstats

pytestmark = pytest.mark.browser
ANALYSIS_S = 600  # the Dask analysis runs in the background on a loaded machine


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    d = build(tmp_path_factory.mktemp("ooctabs") / "t")
    reader.load(d)  # the Parquet cache the pyramid and the Dask engine read
    return d


@pytest.fixture(scope="module")
def analysis(trace_dir, tmp_path_factory) -> dict:
    """The JSON a user gets from the CLI for the same trace."""
    out = tmp_path_factory.mktemp("ooctabs-json") / "a.json"
    subprocess.run([sys.executable, "-m", "mpiscope", "analyze", "--engine", "dask",
                    str(trace_dir), "--json", str(out)], check=True, capture_output=True,
                   timeout=ANALYSIS_S)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def calls(trace_dir) -> dict[tuple[int, int, int, str], int]:
    """MPI calls per (rank, thread, tag, function), counted in the trace's calls table."""
    c = reader.load(trace_dir).calls
    n = c.assign(n=stats.polls(c)).groupby(["rank", "thread", "tag", "function"],
                                            observed=True)["n"]
    return {(int(r), int(t), int(g), str(f)): int(v) for (r, t, g, f), v in n.sum().items()}


@pytest.fixture(scope="module")
def messages(trace_dir) -> dict[int, int]:
    """Messages per tag (one communicator), counted in the trace's messages table."""
    return {int(t): int(n) for t, n in
            reader.load(trace_dir).messages.groupby("tag").size().items()}


def counts(calls: dict, *keep: int) -> dict[tuple, int]:
    """The calls added up over all but the key positions `keep` (function last)."""
    out: dict[tuple, int] = {}
    for k, n in calls.items():
        key = tuple(k[i] for i in keep)
        out[key] = out.get(key, 0) + n
    return out


@pytest.fixture(scope="module")
def url(serve, trace_dir, analysis):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(pyramid.ENV, "1")
        return serve(trace_dir)


def value(text: str) -> float:
    """A count or bytes as the table shows them: thousands separators."""
    return float(text.replace(",", "").replace("−", "-").strip())


def headers(driver, name: str) -> dict[str, str]:
    """The headers of the tab's table `name` ({column id: header})."""
    dom_id = json.dumps({"name": name, "type": "otable"}, sort_keys=True,
                        separators=(",", ":"))
    return next(t["headers"] for t in tables_shown(driver) if t["id"] == dom_id)


def rows(driver, name: str) -> list[dict]:
    """The rows of the tab's table `name` as shown, once there ({column id: text})."""
    dom_id = json.dumps({"name": name, "type": "otable"}, sort_keys=True,
                        separators=(",", ":"))
    script = (f"const t=document.getElementById({json.dumps(dom_id)}); if (!t) return null; "
              "const r = Array.from(t.querySelectorAll('tr')).map(r => Object.fromEntries("
              "Array.from(r.querySelectorAll('td[data-dash-column]')).map(c => "
              "[c.dataset.dashColumn, c.textContent.trim()]))).filter(r => Object.keys(r)"
              ".length); return r.length ? r : null;")
    return wait_until(driver, script, timeout=ANALYSIS_S, what=f"table {name} shown")


def close(shown: list[dict], col: str, header: str, row: dict, expected: float) -> bool:
    """A time as the table writes it (in the unit its header names, the column's
    decimals) within half its last place of `expected` (s)."""
    step = cell_resolution([r[col] for r in shown], header)
    return abs(cell_value(row[col], header) - expected) <= 1.001 * step + 1e-15


def open_page(driver, url: str, size: tuple[int, int]) -> None:
    driver.set_window_size(*size)
    driver.get(url)
    wait_until(driver, f"const g={GD.format(p=0)}; return g && g._fullData && "
               "g._fullData.length > 1", what="timeline drawn")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_out_of_core_tabs_show_the_dask_analysis(browser, url, analysis, calls, messages,
                                                   size):
    open_page(browser, url, size)
    tabs = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#ooc-tabs .tab")]
    assert tabs == [label for label, _ in ooctabs.TABS]

    # Breakdown (first tab): one row per rank, its times those of the JSON
    shown = rows(browser, "breakdown")
    expected = {r["rank"]: r for r in analysis["ranks"]}
    assert sorted(int(r["rank"]) for r in shown) == sorted(expected)
    head = headers(browser, "breakdown")
    for r in shown:
        e = expected[int(r["rank"])]
        assert r["host"] == e["host"]
        for col in ("total_s", "compute_s", "communication_s", "synchronization_s"):
            assert close(shown, col, head[col], r, e[col]), (col, r, e)
    scope = browser.find_element(By.CSS_SELECTOR, "#ooc-tab .scope-text").text
    assert "whole run, all ranks" in scope and "Dask engine" in scope

    open_tab(browser, "Functions")
    shown = rows(browser, "functions")
    expected = {f["name"]: f for f in analysis["functions"]}
    assert {r["name"] for r in shown} == set(expected)
    head = headers(browser, "functions")
    for r in shown:
        e = expected[r["name"]]
        assert value(r["calls"]) == e["calls"] and value(r["bytes"]) == e["bytes"]
        assert close(shown, "time_s", head["time_s"], r, e["time_s"]), (r, e)
    table = browser.find_element(By.CSS_SELECTOR, "#ooc-tab .dash-spreadsheet")
    assert table.is_displayed() and table.rect["x"] + table.rect["width"] <= size[0]
    shot(browser, f"ooc-functions-{size[0]}")

    open_tab(browser, "Messages")
    shown = rows(browser, "matrix")
    expected = {(m["send_rank"], m["recv_rank"]): m for m in analysis["comm_matrix"]}
    assert {(int(r["send_rank"]), int(r["recv_rank"])) for r in shown} == set(expected)
    for r in shown:
        e = expected[int(r["send_rank"]), int(r["recv_rank"])]
        assert value(r["messages"]) == e["messages"] and value(r["bytes"]) == e["bytes"]

    open_tab(browser, "Profiles")
    shown = rows(browser, "per-callsite")
    expected = {(c["function"], c["callsite"]): c for c in analysis["callsites"]}
    assert {(r["function"], r["callsite"]) for r in shown} == set(expected)
    head = headers(browser, "per-callsite")
    for r in shown:
        e = expected[r["function"], r["callsite"]]
        assert value(r["calls"]) == e["calls"]
        for col in ("time_s", "wait_s"):
            assert close(shown, col, head[col], r, e[col]), (col, r, e)
    threads = rows(browser, "threads")
    assert {(int(r["rank"]), int(r["thread"])) for r in threads} == {
        (t["rank"], t["thread"]) for t in analysis["threads"]}
    # per process: a row per (rank, function) with its calls; per tag likewise; per
    # thread: rank 1's worker thread, which calls MPI too
    per_rank = counts(calls, 0, 3)
    shown = rows(browser, "per-rank")
    assert len(shown) == min(len(per_rank), 15)  # a page of the table
    assert {(int(r["rank"]), r["function"]): value(r["calls"]) for r in shown}.items() \
        <= per_rank.items()
    per_tag = counts(calls, 2, 3)
    shown = rows(browser, "per-tag")
    assert {(int(value(r["tag"])), r["function"]): value(r["calls"]) for r in shown} == per_tag
    r, t = WORKER_SEND[0]
    per_thread = counts(calls, 0, 1, 3)
    shown = rows(browser, "per-thread")
    got = {(int(x["rank"]), int(x["thread"]), x["function"]): value(x["calls"])
           for x in shown}
    assert got.items() <= per_thread.items()
    assert got[r, t, "MPI_Ssend"] == per_thread[r, t, "MPI_Ssend"] == 1
    shown = rows(browser, ooctabs.MESSAGES)
    assert {int(value(r["tag"])): value(r["messages"]) for r in shown} == messages
    heads = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#ooc-tab h4")]
    assert heads[:6] == [*(f"MPI functions {title}" for title, _n, _b in windowstats.PROFILES),
                         "Messages per communicator and tag"]
    # the run's user region (the worker's), from each rank's rows, as in memory
    shown = rows(browser, "regions")
    assert [(r["name"], r["calls"]) for r in shown] == [(WORKER_REGION[0], "1")]
    assert not browser.find_elements(By.CSS_SELECTOR, "#ooc-tab .ooc-note")
    assert layout_problems(browser) == []  # the tables fit the page, nothing overlaps
    shot(browser, f"ooc-profiles-{size[0]}")

    open_tab(browser, "Call tree")  # from each rank's rows (oocprofiles): the run is small
    tree = wait_until(browser, "const n = document.querySelector('#ooc-tab .ct-tree');"
                      " return n && n.textContent", what="the run's call tree")
    assert "MPI_Ssend" in tree  # the worker thread's send

    open_tab(browser, "Findings")
    text = wait_until(browser, "const f = document.querySelector('#ooc-tab .findings, "
                      "#ooc-tab .no-findings'); return f && f.textContent",
                      what="the findings listed")
    for f in analysis["findings"]:
        assert f"{f['kind']}: {f['function']}" in text
    if not analysis["findings"]:
        assert "No findings" in text
