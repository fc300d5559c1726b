"""The Call tree tab (Cube's metric × call path × rank) on a trace with call paths built
by construction (mpiscope_testing.calltreetrace): the tree of the paths with inclusive
values, the selected node spread over the ranks, a metric choice, and the window and
rank set followed. First through the tab's functions, then in headless Chromium as a
user clicks."""

from __future__ import annotations

import time

import pytest
from dash import html
from selenium.webdriver.common.by import By

from mpiscope.archive import reader
from mpiscope_testing.calltreetrace import FIRST, STEPS, US, build
from mpiscope_testing.webui_page import (
    layout_problems,
    open_app,
    open_tab,
    resize,
    shot,
    wait_until,
)
from mpiscope_webui import calltreeview, pyramid
from mpiscope_webui.model import TraceModel
from mpiscope_webui.windowstats import Scope

SOLVE_REDUCE = "solve · solver.c:31"


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("calltree") / "t")


@pytest.fixture(scope="module")
def model(trace_dir) -> TraceModel:
    return TraceModel.build(reader.load(trace_dir))


def walk(node):
    yield node
    kids = getattr(node, "children", None)
    for k in (kids if isinstance(kids, list) else [kids] if kids is not None else []):
        yield from walk(k)


def buttons(parts: list) -> dict[str, dict]:
    """Each node button's label -> its id, class and the value text beside it."""
    out = {}
    for part in parts:
        for n in walk(part):
            kids = getattr(n, "children", None)
            if not isinstance(kids, list):
                continue
            for a, b in zip(kids, kids[1:], strict=False):
                if isinstance(a, html.Button) and isinstance(b, html.Span):
                    out[a.children] = {"id": a.id, "class": a.className, "value": b.children}
    return out


def rank_line(parts: list) -> str:
    return next(n.children for p in parts for n in walk(p)
                if getattr(n, "className", None) == "ct-rank-line")


def test_the_tab_lists_the_tree_with_inclusive_values(model):
    body = calltreeview.body(model, Scope(None, None), "time_s", None, 0)
    nodes = buttons(body)
    # main holds the halo (40 µs per step) and the reduction (140 µs per step, both ranks)
    assert nodes["main · main.c:50"]["value"].startswith(f" {STEPS * 180} µs")
    assert nodes[SOLVE_REDUCE]["value"].startswith(f" {STEPS * 140} µs")
    assert nodes["MPI_Allreduce"]["value"].startswith(f" {STEPS * 140} µs")
    # the largest root is selected first, and the rank pane says how it is spread
    assert nodes["main · main.c:50"]["class"] == "ct-node selected"
    # (rank 0: 20 + 40 µs per step, rank 1: 20 + 100 µs)
    assert rank_line(body) == ("time in main · main.c:50 per rank: min 240 µs (rank 0), "
                               "median 360 µs, max 480 µs (rank 1)")


def test_a_node_and_a_metric_chosen(model):
    nodes = buttons(calltreeview.body(model, Scope(None, None), "time_s", None, 0))
    node = nodes[SOLVE_REDUCE]["id"]["node"]
    body = calltreeview.body(model, Scope(None, None), "wait_s", node, 0)
    assert buttons(body)[SOLVE_REDUCE]["class"] == "ct-node selected"
    assert rank_line(body) == (f"waiting in {SOLVE_REDUCE} per rank: min 0 s (rank 0), "
                               "median 120 µs, max 240 µs (rank 1)")
    calls = buttons(calltreeview.body(model, Scope(None, None), "calls", node, 0))
    # of 4 calls per step and one MPI_Init and MPI_Finalize per rank
    assert calls[SOLVE_REDUCE]["value"] == f" {2 * STEPS} ({100 * 2 / (4 + 4 / STEPS):.1f}%)"


def test_the_tab_follows_the_window_and_ranks(model):
    lo = model.session.window_index.span[0]
    first_step = Scope((lo + FIRST, lo + FIRST + 300 * US), (1,))
    nodes = buttons(calltreeview.body(model, first_step, "calls", None, 0))
    assert nodes[SOLVE_REDUCE]["value"].startswith(" 1 (")
    assert "MPI_Finalize" not in nodes


def test_the_tab_says_how_deep_paths_were_recorded(model):
    text = [n for part in calltreeview.tab(model, Scope(None, None), 0) for n in walk(part)
            if getattr(n, "className", None) == "muted ct-note"]
    # the deepest path of calltreetrace: comm_inner <- comm_layer <- solve <- main
    assert text[0].children.startswith("Call paths as recorded: up to 4 frames each")


@pytest.mark.browser
def line_when(browser, ok, what: str, timeout: float = 30) -> str:
    """The selected node's line over the ranks once `ok(line)` holds."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:  # read in the page: the pane is redrawn
        text = browser.execute_script(
            "const e = document.querySelector('.ct-rank-line'); "
            "return e ? e.textContent : ''")
        if ok(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{what}: {text!r}")


def click_node_and_metric(browser) -> None:
    """Click a node, then the waiting metric: its lines as the trace makes them."""
    assert browser.execute_script(
        "const b = Array.from(document.querySelectorAll('button.ct-node'))"
        ".find(b => b.textContent === arguments[0]); if (b) b.click(); return !!b;",
        SOLVE_REDUCE), SOLVE_REDUCE
    line_when(browser, lambda t: t == f"time in {SOLVE_REDUCE} per rank: min 160 µs "
              "(rank 0), median 280 µs, max 400 µs (rank 1)", "after the click")
    browser.find_element(By.XPATH, "//label[normalize-space(.)='waiting']").click()
    line_when(browser, lambda t: t == f"waiting in {SOLVE_REDUCE} per rank: min 0 s "
              "(rank 0), median 120 µs, max 240 µs (rank 1)", "the waiting metric, same node")
    assert browser.execute_script(
        "return document.querySelector('button.ct-node.selected').textContent") == SOLVE_REDUCE


def test_clicking_a_node_shows_its_ranks_in_the_browser(browser, serve, trace_dir):
    browser.set_window_size(1400, 900)
    open_app(browser, serve(trace_dir))
    open_tab(browser, "Call tree")
    line_when(browser, lambda t: t.startswith("time in main · main.c:50 per rank"),
              "first view")
    click_node_and_metric(browser)
    shot(browser, "calltree")
    # the same page at 1024x768: the node still selected, its line the same, and the tab
    # all there (nothing cut off at the right, no sideways scrolling)
    resize(browser, (1024, 768))
    assert browser.execute_script(
        "return document.querySelector('button.ct-node.selected').textContent") == SOLVE_REDUCE
    line_when(browser, lambda t: t.startswith(f"waiting in {SOLVE_REDUCE} per rank"),
              "at 1024 px")
    assert layout_problems(browser, root=".tab-parent") == []
    ranks = browser.find_element(By.CSS_SELECTOR, ".ct-ranks .js-plotly-plot")
    assert ranks.is_displayed() and ranks.rect["x"] + ranks.rect["width"] <= 1024
    shot(browser, "calltree-1024")


def test_out_of_core_the_same_clicks_show_the_same_lines(browser, serve, trace_dir):
    """Served out of core (the tree from each rank's rows, mpiscope_webui.oocprofiles), the
    same tree, node and metric choices give the same lines as in memory."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(pyramid.ENV, "1")
        url = serve(trace_dir)
    browser.set_window_size(1400, 900)
    browser.get(url)
    wait_until(browser, "const g = document.querySelector('#panel-0 .timeline "
               ".js-plotly-plot'); return g && g._fullData && g._fullData.length > 1",
               what="timeline drawn")
    open_tab(browser, "Call tree")
    # once the analysis and the profiles' pass are done (a child process, niced)
    line_when(browser, lambda t: t.startswith("time in main · main.c:50 per rank"),
              "first view out of core", timeout=600)
    click_node_and_metric(browser)
    shot(browser, "calltree-ooc")
