"""The critical-path overlay and the time-resolved strip, without a browser: on a trace
whose path is known by construction (analyzer/tests/test_critical_path.py's late-sender
chain), and the level of detail of the overlay on a path far longer than the screen is
wide. The browser tests (test_browser_critical_strip.py) check the same on real Himeno
traces as a user sees them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mpiscope.analysis.breakdown import PARTS
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder
from mpiscope_webui import critical, strip
from mpiscope_webui.app import create_app
from mpiscope_webui.critical import EDGES, PATH, PathIndex
from mpiscope_webui.geometry import RECT_POINTS, untyped
from mpiscope_webui.model import TraceModel
from mpiscope_webui.timeline import View


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> TraceModel:
    """Rank 2 sends to rank 1 at 300, rank 1 (waiting since 20) computes and sends to
    rank 0 at 500, rank 0 computes until 1000: the path runs 2 -> 1 -> 0."""
    tb = TraceBuilder(ranks=3)
    for r, fin in enumerate([1000, 900, 800]):
        tb.call(r, 0, 10, "MPI_Init", callsite="c.c:1")
        tb.call(r, fin, fin + 10, "MPI_Finalize", callsite="c.c:99")
    tb.send_call(2, 300, 310, dest=1, tag=1, nbytes=8, callsite="c.c:20")
    tb.recv_call(1, 20, 320, src=2, tag=1, nbytes=8, callsite="c.c:21")
    tb.send_call(1, 500, 510, dest=0, tag=2, nbytes=8, callsite="c.c:22")
    tb.recv_call(0, 30, 520, src=1, tag=2, nbytes=8, callsite="c.c:23")
    path = tb.write(tmp_path_factory.mktemp("chain") / "trace")
    return TraceModel.build(reader.load(path, use_cache=False))


def drawn(model: TraceModel, t0_ns: int, t1_ns: int, width_px: int = 1200):
    """(rects as (lane, x0, x1) in ns, jumps as (lane from, lane to, t from, t to))."""
    fig = {"data": [], "layout": {}}
    fig, status = critical.overlay(model, fig, t0_ns / 1e9, t1_ns / 1e9, width_px, 0)
    path = next(t for t in fig["data"] if t["name"] == PATH)
    edges = next(t for t in fig["data"] if t["name"] == EDGES)
    x = untyped(path["x"]).astype(np.float64)
    y = untyped(path["y"]).astype(np.float64)
    rects = set()
    n = len(x) // RECT_POINTS  # each rect's 5 points (closed), then the way back
    for i in range(n):
        px, py = x[i * 5:(i + 1) * 5], y[i * 5:(i + 1) * 5]
        if py.min() > -1:
            rects.add((round(py.mean()), round(px.min() * 1e9), round(px.max() * 1e9)))
    jx, jy = untyped(edges["x"]), untyped(edges["y"])
    jumps = {(round(jy[i]), round(jy[i + 1]), round(jx[i] * 1e9), round(jx[i + 1] * 1e9))
             for i in range(0, len(jx) - 1, 3) if jy[i] > -1}
    return rects, jumps, status


def test_the_overlay_draws_the_path_known_by_construction(chain):
    lane = {int(r): int(chain.lanes.lane_of_rank[r]) for r in range(3)}
    rects, jumps, status = drawn(chain, 0, 1020)
    # the path: rank 2 until its send (300), rank 1 until its send (500), rank 0 to the end
    assert rects == {(lane[2], 10, 300), (lane[1], 300, 500), (lane[0], 500, 1000)}
    assert jumps == {(lane[2], lane[1], 300, 300), (lane[1], lane[0], 500, 500)}
    assert "3 stretches, 2 jumps drawn" in status


def test_a_zoomed_view_draws_only_its_window(chain):
    rects, jumps, _ = drawn(chain, 400, 700)
    lane = {int(r): int(chain.lanes.lane_of_rank[r]) for r in range(3)}
    assert rects == {(lane[1], 400, 500), (lane[0], 500, 700)}
    assert jumps == {(lane[1], lane[0], 500, 500)}


def test_the_profile_lists_the_path_of_the_json(chain):
    table = next(c for c in critical.profile(chain, 0) if getattr(c, "id", None) ==
                 {"type": "cp-table", "panel": 0})
    doc = chain.session.to_dict()["critical_path"]
    assert [(r["name"], r["callsite"]) for r in table.data] == \
        [(f["name"], f["callsite"]) for f in doc["functions"]]
    # the times in the one unit the header names (the cells hold them in it)
    head = next(c["name"] for c in table.columns if c["id"] == "time_s")
    assert head == "time (ns)"
    assert [round(r["time_s"]) for r in table.data] == [480, 290, 180, 20, 20]


def test_the_path_and_the_strip_are_built_once_per_trace(chain):
    assert critical.path_index(chain) is critical.path_index(chain)
    assert critical.path_index(chain).path is chain.session.critical_path
    assert strip.strip(chain) is strip.strip(chain)


def test_a_long_path_is_merged_per_pixel_column():
    """100 000 stretches alternating between two ranks, 10 ns each, on a 400-pixel view:
    the path is in both lanes in every pixel column, so each lane gets one bar over the
    window; the 250 jumps of each pixel column are one line there."""
    n, w = 100_000, 400
    start = np.arange(n, dtype=np.int64) * 10
    pi = PathIndex(np.arange(n) % 2, start, start + 10, 0, path=None)
    v = critical.query(pi, 0, n * 10, w)
    assert v.stretches_total == n
    assert sorted(zip(v.lane.tolist(), v.start.tolist(), v.end.tolist(), strict=True)) == \
        [(0, 0, n * 10 - 10), (1, 10, n * 10)]
    assert len(v.jump_from) == w  # a line from lane 0 to 1 in each column
    assert set(zip(v.jump_from.tolist(), v.jump_to.tolist(), strict=True)) == {(0, 1)}
    # zoomed in to 30 stretches, each is drawn as it is, and every jump
    v = critical.query(pi, 5000, 5300, w)
    assert v.stretches_total == len(v.lane) == 30
    assert list(zip(v.start, v.end, strict=True)) == [(t, t + 10) for t in range(5000, 5300, 10)]
    assert len(v.jump_from) == 29


def test_a_column_of_many_jumps_is_one_line_over_their_lanes():
    """Round and round four ranks: the jumps of each pixel column are one line from the
    first lane to the last."""
    n, w = 100_000, 400
    start = np.arange(n, dtype=np.int64) * 10
    pi = PathIndex(np.arange(n) % 4, start, start + 10, 0, path=None)
    v = critical.query(pi, 0, n * 10, w, lane_of=np.array([3, 2, 1, 0]))
    assert len(v.jump_from) == w
    assert set(v.jump_from.tolist()) == {0} and set(v.jump_to.tolist()) == {3}
    assert (v.jump_t0 == v.jump_t1).all()
    assert sorted(v.lane.tolist()) == [0, 1, 2, 3]


def test_without_a_main_loop_the_strip_shows_time_bins(chain):
    st = strip.strip(chain)
    assert chain.session.loop is None
    assert st.unit == "time bin" and len(st) == len(chain.session.time_bins)
    # the bins tile the run from the first rank's start to the last rank's end
    assert (st.span_start[0], st.span_end[-1]) == (10, 1000)
    assert (st.span_start[1:] == st.span_end[:-1]).all()
    fig = strip.figure(chain, View(0, 1e-6))
    assert [t["name"] for t in fig["data"]] == ["compute", "communication",
                                                "synchronization", "I/O", strip.BARS]
    assert fig["layout"]["meta"] == {"unit": "time bin", "bars": len(st)}
    # each part one polygon of a rectangle per bin, stacked; one hover point per bin
    tops = np.zeros(len(st))
    n = len(st)
    for t in fig["data"][:4]:
        assert len(untyped(t["x"])) == n * RECT_POINTS and t["fill"] == "toself"
        # geometry.polygons: each rectangle's 4 corners and its first again, in turn
        x, y = (untyped(t[k])[:n * (RECT_POINTS - 1)].reshape(n, -1) for k in ("x", "y"))
        assert x[:, 0] == pytest.approx(st.x0 / 1e9) and x[:, 1] == pytest.approx(st.x1 / 1e9)
        assert y[:, 0] == pytest.approx(tops)
        tops = y[:, 2]
    assert tops == pytest.approx(st.parts.sum(axis=1).to_numpy())
    bars = fig["data"][4]
    assert len(bars["customdata"]) == len(st) and bars["customdata"][0][0] == st.label[0]


def test_clicking_a_bar_zooms_to_its_span(chain):
    st = strip.strip(chain)
    v = View(0, 1e-6, hidden=["MPI_Send"])
    out = strip.zoom_to(chain, v, {"points": [{"pointNumber": 3, "curveNumber": 0}]})
    assert (out.t0, out.t1) == (st.span_start[3] / 1e9, st.span_end[3] / 1e9)
    assert out.hidden == ["MPI_Send"]  # only the window changes
    for bad in (None, {}, {"points": []}, {"points": [{"pointNumber": len(st)}]},
                {"points": [{"pointNumber": "1"}]}, {"points": ["x"]}):
        assert strip.zoom_to(chain, v, bad) is None


def test_many_iterations_are_drawn_in_groups():
    n = 5000
    parts = pd.DataFrame({f"{p}_s": np.full(n, 0.001) for p in PARTS})
    s = np.arange(n, dtype=np.int64) * 1000
    st = strip.Strip("iteration", [f"iteration {i + 1}" for i in range(n)], s, s + 1000,
                     s.astype(float), (s + 1000).astype(float), parts)
    g = strip._grouped(st, 2000)
    assert len(g) <= 2000
    assert g.parts.sum().to_dict() == pytest.approx(parts.sum().to_dict())
    assert g.span_start[0] == 0 and g.span_end[-1] == n * 1000
    assert (g.span_start[1:] == g.span_end[:-1]).all()
    assert g.label[0] == "iterations 1–3"


def test_the_app_has_the_toggle_the_strip_and_the_tab(chain):
    app = create_app(models=[chain], analyze_now=True)
    text = str(app.layout())
    assert "cp-toggle" in text and "'strip'" in text and "tab-critical" in text
