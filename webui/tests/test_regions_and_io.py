"""User regions, the bytes of RMA and MPI-IO calls, and the I/O part of the breakdown in
the web UI, on a Score-P-like trace written with tracegen: per rank `main` > `solve` >
(`stencil`, `halo_exchange` with a Send/Recv, `rma_update` with Win_fence, MPI_Put,
Win_fence), an Allreduce per iteration, then `write_dump` with MPI_File_open,
MPI_File_write_at, MPI_File_close.

The first tests call the timeline and the controller directly; the `browser` ones serve
the trace and do what a user does in headless Chromium (hover a region, click a call,
open the Breakdown tab). Screenshots go to test-artifacts/webui/.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

import mpiscope
from mpiscope.archive import reader
from mpiscope.render import palette
from mpiscope_testing.tracegen import TraceBuilder
from mpiscope_testing.webui_page import GD, shot, status, wait_settled, wait_until, zoom_to
from mpiscope_webui import regions, timeline, views
from mpiscope_webui.analysis import Panels
from mpiscope_webui.controller import bytes_lines
from mpiscope_webui.geometry import untyped
from mpiscope_webui.model import TraceModel

US = 1000
ITERATIONS = 10
STEP = 700 * US  # one iteration
PUT_BYTES, WRITE_BYTES = 4096, 1 << 20
PER_RANK = 1 + 4 * ITERATIONS + 1  # main, (solve, stencil, halo_exchange, rma_update) x N, dump


def score_p_like(path: Path) -> Path:
    tb = TraceBuilder(ranks=2, hosts=["node0", "node1"], creator="Score-P")
    for r in range(2):
        tb.enter(r, 0, "main")
        tb.call(r, 10 * US, 200 * US, "MPI_Init")
    t = 300 * US
    for it in range(ITERATIONS):
        for r in range(2):
            tb.enter(r, t, "solve")
            tb.enter(r, t + 10 * US, "stencil")
            tb.leave(r, t + 400 * US, "stencil")
            tb.enter(r, t + 400 * US, "halo_exchange")
        tb.send_call(0, t + 410 * US, t + 430 * US, dest=1, tag=it, nbytes=8000)
        tb.recv_call(1, t + 405 * US, t + 440 * US, src=0, tag=it, nbytes=8000)
        for r in range(2):
            tb.leave(r, t + 450 * US, "halo_exchange")
            tb.enter(r, t + 450 * US, "rma_update")
            tb.call(r, t + 455 * US, t + 470 * US, "MPI_Win_fence")
            tb.call(r, t + 475 * US, t + 490 * US, "MPI_Put")
            tb.call(r, t + 495 * US, t + 520 * US, "MPI_Win_fence")
            tb.leave(r, t + 530 * US, "rma_update")
            tb.collective(r, t + 540 * US, t + 560 * US + r * 5 * US, "MPI_Allreduce",
                          sent=8, received=8)
            tb.leave(r, t + 600 * US, "solve")
        t += STEP
    for r in range(2):
        tb.enter(r, t, "write_dump")
        tb.call(r, t + 10 * US, t + 100 * US, "MPI_File_open")
        tb.call(r, t + 100 * US, t + 2100 * US, "MPI_File_write_at")
        tb.call(r, t + 2100 * US, t + 2200 * US, "MPI_File_close")
        tb.leave(r, t + 2300 * US, "write_dump")
        tb.call(r, t + 2400 * US, t + 2500 * US, "MPI_Finalize")
        tb.leave(r, t + 2600 * US, "main")
    return tb.write(path)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    t = reader.load(score_p_like(tmp_path_factory.mktemp("scorep-like") / "trace"))
    # The bytes as docs/data-model.md puts them in `calls` (bytes_sent: put / written):
    # tracegen writes no RmaPut / IoOperation records to read them from, so they are set
    # here, as the reader sets them from those records.
    c = t.calls
    c.loc[c["function"] == "MPI_Put", "bytes_sent"] = PUT_BYTES
    c.loc[c["function"] == "MPI_File_write_at", "bytes_sent"] = WRITE_BYTES
    return t


@pytest.fixture(scope="module")
def model(trace) -> TraceModel:
    return TraceModel.build(trace)


def whole(model: TraceModel) -> timeline.View:
    return timeline.View(model.index.origin / 1e9, (model.index.origin + model.duration) / 1e9)


def region_bars(fig: dict) -> dict[str, list[tuple[float, float, float, float]]]:
    """region name -> its bars (x0, x1, y0, y1) as the layout's path shapes draw them."""
    out = {}
    for s in fig["layout"]["shapes"]:
        if s.get("name", "").startswith("region "):
            nums = re.findall(r"M([^,]+),([^H]+)H([^V]+)V([^H]+)H[^Z]+Z", s["path"])
            out[s["name"][7:]] = [(float(x0), float(x1), float(y0), float(y1))
                                  for x0, y0, x1, y1 in nums]
    return out


def curve(fig: dict, name: str) -> dict:
    return next(t for t in fig["data"] if t["name"] == name)


# -- the timeline, without a browser -------------------------------------------------------

def test_regions_are_drawn_nested_with_the_mpi_states_inside(model, trace):
    r = timeline.render(model, whole(model), 1400)
    bars = region_bars(r.figure)
    assert {k: len(v) for k, v in bars.items()} == {
        "main": 2, "solve": 2 * ITERATIONS, "stencil": 2 * ITERATIONS,
        "halo_exchange": 2 * ITERATIONS, "rma_update": 2 * ITERATIONS, "write_dump": 2}
    assert f"{2 * PER_RANK} user regions drawn" in r.status(model)

    def halves(name: str) -> set[float]:
        return {round((y1 - y0) / 2, 3) for _, _, y0, y1 in bars[name]}

    # each nesting level slimmer than its parent, as Jumpshot nests states
    assert halves("main") == {0.46} and halves("solve") == {0.41}
    assert halves("stencil") == halves("halo_exchange") == halves("rma_update") == {0.36}
    # an MPI state sits inside its innermost region, slimmer still (Send: in
    # halo_exchange, 3 regions deep; Init: in main only)
    send = curve(r.figure, "MPI_Send")
    lane0 = np.abs(untyped(send["y"]) - 0)[:-2]
    assert lane0.max() == pytest.approx(0.36 - regions.MPI_INSIDE, abs=1e-6)
    init = untyped(curve(r.figure, "MPI_Init")["y"])
    assert np.abs(init[init < 0.5]).max() == pytest.approx(0.46 - regions.MPI_INSIDE,
                                                          abs=1e-6)
    # the bars are where the regions are (seconds of trace time)
    t = trace.regions
    solve = t[(t["function"] == "solve") & (t["rank"] == 1)]
    assert sorted(b[0] for b in bars["solve"] if b[2] > 0.5) == pytest.approx(
        (solve["start"] / 1e9).tolist())


def test_a_real_score_p_trace_draws_its_main(tmp_path):
    from mpiscope_testing.scenarios import SCOREP_PING_PONG
    from mpiscope_testing.tracegen import copy_trace

    if not (SCOREP_PING_PONG / "traces.otf2").is_file():
        pytest.skip(f"{SCOREP_PING_PONG} not present")
    m = TraceModel.build(reader.load(copy_trace(SCOREP_PING_PONG, tmp_path / "t")))
    bars = region_bars(timeline.render(m, whole(m), 1400).figure)
    # Score-P's ping-pong: one `main` per rank, every MPI call inside it
    assert {k: len(v) for k, v in bars.items()} == {"int main(int, char**)": 2}
    assert (m.regions.mpi_enclosing == 1).all()


def test_regions_follow_the_level_of_detail(model):
    v = whole(model)
    # 100 px for the whole run: a pixel is ~0.1 ms, so the 50 µs halo_exchange regions
    # are left out, the 390 µs stencils are not
    bars = region_bars(timeline.render(model, v, 100 + timeline.MARGIN_L
                                       + timeline.MARGIN_R).figure)
    assert "halo_exchange" not in bars and len(bars["stencil"]) == 2 * ITERATIONS
    # no more than the budget: the longest are kept
    rv = regions.query(model.regions, 0, model.duration, 1400, max_regions=2)
    names = [model.regions.index.functions[k] for k in model.regions.index.fcode[rv.positions]]
    assert names == ["main", "main"]
    # zoomed into one iteration: its regions only, all of them
    t0 = int(300 * US + 3 * STEP - model.index.origin)
    rv = regions.query(model.regions, t0, t0 + 600 * US, 1000)
    assert len(rv.positions) == 2 * 5  # main, solve and its 3 children on both ranks


def test_hiding_user_regions(model):
    from mpiscope_webui.controller import Controller

    # a click on their legend entry
    k = timeline.curve_names(model).index(timeline.REGIONS)
    hidden = Controller([model]).toggle(whole(model), 0, [{"visible": ["legendonly"]}, [k]])
    assert hidden.hidden == [timeline.REGIONS]
    r = timeline.render(model, hidden, 1400)
    assert region_bars(r.figure) == {} and "user regions drawn" not in r.status(model)
    # the MPI states get their own heights back
    send = untyped(curve(r.figure, "MPI_Send")["y"])[:-2]
    assert np.abs(send[send < 0.5]).max() == pytest.approx(timeline.HALF, abs=1e-6)


def test_region_curves_come_last_and_only_with_regions(model):
    from mpiscope_testing.scenarios import Scenario

    # the other curves keep their places (callbacks tell legend clicks apart by place)
    names = timeline.curve_names(model)
    assert names[-2:] == [timeline.REGIONS, timeline.REGION_HOVER]
    assert names[:2] == ["compute", "summary"]
    sc = Scenario()
    sc.call(0, "MPI_Barrier", 0, 100)
    sc.call(1, "MPI_Barrier", 0, 100)
    plain = TraceModel.build(sc.trace())
    assert plain.regions is None
    assert timeline.curve_names(plain)[-2:] == ["hover", "selected"]
    assert region_bars(timeline.render(plain, whole(plain), 800).figure) == {}


def test_region_hover_and_click_name_the_region(model, trace):
    from mpiscope_webui.controller import Controller

    ctl = Controller([model])
    k = timeline.curve_names(model).index(timeline.REGION_HOVER)
    row = int(np.flatnonzero(trace.regions["function"] == "write_dump")[0])
    show, _, children = ctl.tooltip(0, {"points": [{"curveNumber": k, "customdata": row}]},
                                    whole(model), 1400)
    assert show and "write_dump" in str(children) and "2.3 ms" in str(children)
    details = ctl.details(0, {"points": [{"curveNumber": k, "customdata": row}]})
    assert "User region" in str(details) and "write_dump" in str(details)
    # a row that is not one (a crafted request): nothing shown
    for bad in (len(trace.regions), -1, "x"):
        assert ctl.tooltip(0, {"points": [{"curveNumber": k, "customdata": bad}]},
                           whole(model), 1400)[0] is False


@pytest.mark.parametrize(("function", "kind", "sent", "received", "expected"), [
    ("MPI_Put", "rma", 4096, 0, [("bytes put", "4,096 B (4 KiB) into the target's window")]),
    ("MPI_Rget", "rma", 0, 800, [("bytes got", "800 B from the target's window")]),
    ("MPI_Fetch_and_op", "rma", 8, 8, [
        ("bytes to target", "8 B (origin data of the atomic update)"),
        ("bytes fetched", "8 B (the target's former data)")]),
    ("MPI_File_write_at", "io", 1 << 20, 0, [("bytes written", "1,048,576 B (1 MiB)")]),
    ("MPI_File_read_all", "io", 0, 1536, [("bytes read", "1,536 B (1.5 KiB)")]),
    ("MPI_Send", "p2p_send", 8000, 0, [("bytes", "8,000 sent, 0 received")]),
    ("MPI_Win_fence", "rma_sync", 0, 0, []),
])
def test_bytes_say_what_they_are(function, kind, sent, received, expected):
    assert bytes_lines(function, kind, sent, received) == expected


def breakdown(io: bool):
    import pandas as pd

    bd = pd.DataFrame({"rank": [0, 1], "host": ["a", "b"], "total_s": [1.0, 1.0],
                       "compute_s": [0.5, 0.4], "communication_s": [0.2, 0.2],
                       "synchronization_s": [0.1, 0.1]})
    if io:
        bd["io_s"] = [0.2, 0.3]
    return Panels(bd, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), [])


def test_breakdown_has_an_io_part_when_the_analyzer_gives_one():
    three = views.breakdown_figure(breakdown(io=False))
    assert [b.name for b in three.data] == ["compute", "communication", "synchronization"]
    four = views.breakdown_figure(breakdown(io=True))
    assert [b.name for b in four.data][-1] == "I/O"
    io = four.data[-1]
    assert list(io.y) == [0.2, 0.3]
    assert io.marker.color == palette.PART_COLOURS["io"]
    table = views.breakdown_table(breakdown(io=True)).set_index("part")
    assert table.loc["io", "seconds"] == pytest.approx(0.5)
    assert table.loc["io", "share"] == pytest.approx(0.25)


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
    """The index of a point of the curve whose customdata is `row`, once drawn."""
    return wait_until(driver, f"const t={GD.format(p=0)}._fullData.find(t => t.name === "
                      f"{curve_name!r}); const i=t ? Array.from(t.customdata).indexOf({row})"
                      " : -1; return i >= 0 && [i]", what=f"{curve_name} row {row} drawn")[0]


def table_rows(driver, selector: str, has: str) -> dict[str, str]:
    """The key -> value rows of the table in `selector`, once it shows `has`."""
    return wait_until(driver, f"const t=document.querySelector({selector!r}); "
                      f"if (!t || !t.textContent.includes({has!r})) return null; "
                      "const o={}; t.querySelectorAll('tr').forEach(r => "
                      "o[r.querySelector('th').textContent] = r.querySelector('td')"
                      ".textContent); return o;", what=f"{selector} showing {has}")


def tooltip(driver, has: str) -> dict[str, str]:
    return table_rows(driver, ".dcc-tooltip-bounding-box", has)


@pytest.mark.browser
def test_regions_drawn_and_hovered(browser, url, trace):
    open_page(browser, url)
    names = browser.execute_script(f"return {GD.format(p=0)}.layout.shapes.map(s => s.name)"
                                   ".filter(n => n && n.startsWith('region '))")
    assert sorted(names) == sorted(f"region {n}" for n in (
        "main", "solve", "stencil", "halo_exchange", "rma_update", "write_dump"))
    assert f"{2 * PER_RANK} user regions drawn" in status(browser)
    legend = browser.execute_script(
        "return Array.from(document.querySelectorAll('#panel-0 .timeline .legend "
        ".legendtext')).map(e => e.textContent)")
    assert timeline.REGIONS in legend
    # zoom into the 4th iteration and hover rank 1's stencil region
    r = trace.regions
    row = int(np.flatnonzero((r["function"] == "stencil") & (r["rank"] == 1))[3])
    stencil = r.iloc[row]
    zoom_to(browser, stencil["start"] / 1e9 - 2e-5, stencil["end"] / 1e9 + 3e-4)
    mouse_to(browser, timeline.REGION_HOVER, point_of(browser, timeline.REGION_HOVER, row))
    tip = tooltip(browser, "user region")
    assert tip["user region"] == "stencil" and tip["rank"] == "1"
    assert tip["duration"] == "390 µs" and tip["nesting"] == "inside 2 other regions"
    shot(browser, "20-user-regions")


@pytest.mark.browser
def test_put_and_file_write_show_their_bytes(browser, url, trace):
    open_page(browser, url)
    c = trace.calls
    for function, label, value in (
            ("MPI_Put", "bytes put", "4,096 B (4 KiB) into the target's window"),
            ("MPI_File_write_at", "bytes written", "1,048,576 B (1 MiB)")):
        call = c[(c["function"] == function) & (c["rank"] == 0)].iloc[-1]
        zoom_to(browser, call["start"] / 1e9 - 5e-6, call["end"] / 1e9 + 5e-6)
        mouse_to(browser, "hover", point_of(browser, "hover", int(call["call"])), click=True)
        details = table_rows(browser, "#panel-0 .details", function)
        assert details["function"] == function and details[label] == value
        tip = tooltip(browser, function)
        assert tip[label] == value
        shot(browser, f"21-bytes-{function}")


@pytest.mark.browser
def test_breakdown_tab_shows_io(browser, url, trace):
    open_page(browser, url)
    browser.find_element(By.XPATH, "//div[contains(@class,'tab')][normalize-space(.)="
                         "'Breakdown']").click()
    column = '{"panel":0,"type":"tab-breakdown"}'  # the breakdown tab's column (Dash's id)
    bars = wait_until(browser, f"const c=document.getElementById({column!r}); "
                      "const g=c && c.querySelector('.js-plotly-plot'); "
                      "return g && g._fullData.length && g._fullData.map(t => [t.name, "
                      "Array.from(t.y), t.marker.color])", what="breakdown drawn")
    shot(browser, "22-breakdown-io")
    names = [b[0] for b in bars]
    assert names[:3] == ["compute", "communication", "synchronization"]
    ranks = mpiscope.analyze(trace).ranks
    for name, y, _ in bars[:3]:
        assert y == pytest.approx(ranks[f"{name}_s"].tolist())
    name, y, colour = bars[3]
    assert name == "I/O" and colour == palette.PART_COLOURS["io"]
    # the MPI-IO calls (open, write_at, close: 2.19 ms per rank) are I/O time
    assert y == pytest.approx(ranks["io_s"].tolist()) and min(y) > 0
