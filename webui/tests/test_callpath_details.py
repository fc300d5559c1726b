"""Call paths in the web UI: hovering an MPI state shows its call site (the frame chosen
outside the wrapper layer) and its path; clicking it lists the path's frames, innermost
first, the call site marked.

The trace is written with tracegen as the interposer writes call paths (OTF2 calling
contexts): 2 ranks, 10 iterations of MPI_Allreduce called from app.c:10 in step() through
a two-level wrapper, comm_layer() -> comm_inner(). Served with `--skip-frames 'comm_*'`
as a user names that layer. The first test calls the controller directly; the `browser`
one does what a user does in headless Chromium. Screenshots go to test-artifacts/webui/.
"""

from __future__ import annotations

import threading

import pytest
from dash import html
from selenium.webdriver.common.action_chains import ActionChains

from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder
from mpiscope_testing.webui_page import GD, wait_settled, wait_until, zoom_to
from mpiscope_testing.webui_server import ARTIFACTS
from mpiscope_webui.model import TraceModel
from mpiscope_webui.timeline import curve_names

US = 1000
PATH = [("comm_inner.c:5", "comm_inner"), ("comm_layer.c:20", "comm_layer"),
        ("app.c:10", "step")]
FRAMES = [f for f, _fn in PATH]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 10 * US, "MPI_Init", callsite="main.c:2")
    t = 100 * US
    for _ in range(10):
        for r in (0, 1):
            tb.collective(r, t + 30 * US * r, t + 100 * US, "MPI_Allreduce", sent=8,
                          received=8, callpath=PATH)
        t += 500 * US
    for r in (0, 1):
        tb.call(r, t, t + 10 * US, "MPI_Finalize", callsite="main.c:40")
    return reader.load(tb.write(tmp_path_factory.mktemp("callpaths") / "trace"))


@pytest.fixture(scope="module")
def model(trace) -> TraceModel:
    return TraceModel.build(trace, skip_frames="comm_*")


def first_allreduce(trace) -> int:
    c = trace.calls
    return int(c[(c["function"] == "MPI_Allreduce") & (c["rank"] == 1)]["call"].iloc[3])


def test_hover_and_details_of_a_call_show_its_path(model, trace):
    from mpiscope_webui.controller import Controller

    ctl = Controller([model])
    call = first_allreduce(trace)
    lines = dict(ctl.call_lines(0, call))
    assert lines["call site"] == "app.c:10"
    assert lines["call path"] == "comm_inner.c:5 <- comm_layer.c:20 <- app.c:10"
    hover = curve_names(model).index("hover")
    details = ctl.details(0, {"points": [{"curveNumber": hover, "pointNumber": 0,
                                          "customdata": call}]})
    lists = [d for d in details if isinstance(d, html.Ol)]
    assert len(lists) == 1
    items = lists[0].children
    assert [i.children[0].children for i in items] == FRAMES
    assert [i.children[2].children for i in items] == ["comm_inner", "comm_layer", "step"]
    assert [i.className for i in items] == ["", "", "chosen"]
    # a call without a path: its call site, no path lines
    init = int(trace.calls[trace.calls["function"] == "MPI_Init"]["call"].iloc[0])
    assert dict(ctl.call_lines(0, init))["call site"] == "main.c:2"
    assert "call path" not in dict(ctl.call_lines(0, init))
    assert ctl.callpath_list(0, init) == []


def test_findings_list_names_the_apps_line_with_the_path(model):
    from mpiscope_webui import views

    text = str(views.findings_list(model.analysis(), 0))
    assert "load_imbalance: MPI_Allreduce at app.c:10" in text
    assert "via comm_inner.c:5 <- comm_layer.c:20 <- app.c:10" in text


# -- in the browser ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def url(model):
    from werkzeug.serving import make_server

    from mpiscope_webui.app import create_app

    app = create_app(models=[model], analyze_now=True)
    srv = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


def open_page(driver, url: str) -> None:
    driver.get(url)
    wait_until(driver, f"const g={GD.format(p=0)}; return g && g._fullData && "
               "g._fullData.length > 5", what="timeline drawn")
    # as webui_page.open_app: interact once the page has settled
    wait_settled(driver, "return document.querySelectorAll('[data-dash-is-loading=\"true\"]')"
                 ".length === 0 && !document.body.textContent.includes('analyzing')")


def mouse_to(driver, curve_name: str, point: int, click: bool = False) -> None:
    """Move the real mouse onto point `point` of a curve (data -> pixels)."""
    off = driver.execute_script(f"""
        const g={GD.format(p=0)}; const t=g._fullData.find(t => t.name === {curve_name!r});
        const xa=g._fullLayout.xaxis, ya=g._fullLayout.yaxis;
        const r=g.getBoundingClientRect();
        return [xa._offset + xa.d2p(t.x[{point}]) - r.width / 2,
                ya._offset + ya.d2p(t.y[{point}]) - r.height / 2];""")
    el = driver.execute_script(f"return {GD.format(p=0)}")
    chain = ActionChains(driver).move_to_element_with_offset(el, int(off[0]), int(off[1]))
    (chain.click() if click else chain).perform()


def point_of(driver, curve_name: str, row: int) -> int:
    return wait_until(driver, f"const t={GD.format(p=0)}._fullData.find(t => t.name === "
                      f"{curve_name!r}); const i=t ? Array.from(t.customdata).indexOf({row})"
                      " : -1; return i >= 0 && [i]", what=f"{curve_name} row {row} drawn")[0]


@pytest.mark.browser
def test_click_an_mpi_state_lists_its_frames(browser, url, trace):
    open_page(browser, url)
    call = first_allreduce(trace)
    row = trace.calls.iloc[call]
    zoom_to(browser, row["start"] / 1e9 - 20e-6, row["end"] / 1e9 + 20e-6)
    mouse_to(browser, "hover", point_of(browser, "hover", call), click=True)
    frames = wait_until(browser, "const l=document.querySelectorAll('#panel-0 .details "
                        "ol.callpath li'); return l.length && Array.from(l).map(e => "
                        "e.textContent)", what="call path in the details")
    assert frames == ["comm_inner.c:5 comm_inner", "comm_layer.c:20 comm_layer",
                      "app.c:10 step (call site)"]
    chosen = browser.execute_script("return document.querySelector('#panel-0 .details "
                                    "ol.callpath li.chosen code').textContent")
    assert chosen == "app.c:10"
    tip = wait_until(browser, "const t=document.querySelector('.dcc-tooltip-bounding-box');"
                     "return t && t.textContent.includes('call path') && t.textContent",
                     what="tooltip with the path")
    assert "comm_inner.c:5 <- comm_layer.c:20 <- app.c:10" in tip
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "30-callpath-details.png"))
