"""The timeline's lanes out of core (ooc.py, MPISCOPE_TIMELINE_OOC=1), on the trace built by
construction for the lanes (mpiscope_testing.lanetrace: four ranks on two hosts, rank 1
with a worker thread calling MPI): each lane choice draws the lanes the in-memory
timeline draws for it, with the same time per lane and function, from the pyramid (a
wide view) and from the detail (a narrow one); and the page's lane bar sets them, and the
link keeps them, in headless Chromium."""

from __future__ import annotations

import numpy as np
import pytest

from mpiscope.archive import reader
from mpiscope_testing.lanetrace import WORKER_SEND, build
from mpiscope_webui import inputs, lod, ooc, pyramid, timeline
from mpiscope_webui.app import create_app
from mpiscope_webui.geometry import untyped
from mpiscope_webui.model import LaneSpec

WIDE_PX = timeline.MARGIN_L + timeline.MARGIN_R + 100  # 100 bins: the pyramid resolves them
SPECS = [LaneSpec(), LaneSpec(expanded=(1,)), LaneSpec(order="rank"), LaneSpec(order="wait"),
         LaneSpec(grouped=("nodeB",)), LaneSpec(ranks=(1, 3), expanded=(1,)),
         LaneSpec(ranks=(0, 2), order="rank")]


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    d = build(tmp_path_factory.mktemp("ooclanes") / "t")
    reader.load(d)  # the Parquet cache the pyramid is built from
    return d


@pytest.fixture(scope="module")
def ooc_app(trace_dir):
    return ooc.create_app(trace_dir)


@pytest.fixture(scope="module")
def mem(trace_dir):
    return create_app([trace_dir], analyze_now=True).controller.models[0]


def names(fig: dict) -> list[str]:
    return list(fig["layout"]["yaxis"]["ticktext"])


def lane_time(z_view: lod.LodView, lanes, functions: list[str]) -> dict:
    """{(lane, function): ns} of a view whose rows are streams (summary cells)."""
    out: dict = {}
    per = z_view.summary.sum(axis=2)
    for s in range(per.shape[0]):
        lane = int(lanes.lane_of_stream[s]) if s < len(lanes.lane_of_stream) else -1
        if lane < 0:
            continue
        for k, code in enumerate(z_view.visible):
            if per[s, k]:
                key = (lane, functions[code])
                out[key] = out.get(key, 0) + int(per[s, k])
    return out


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_out_of_core_lanes_are_the_in_memory_lanes(ooc_app, mem, spec):
    p = ooc_app.pyramid
    ool = ooc_app.lanes.lanes(spec)
    mem.waits()  # the in-memory order by waiting needs the wait states
    want = mem.lanes_for(spec)
    assert ool.labels() == want.labels()
    assert ool.lane_of_stream.tolist() == want.lane_of_stream.tolist()
    full = (p.origin / 1e9, (p.origin + p.span - 2) / 1e9)
    # a wide view: from the pyramid, its cells added up per lane as in memory
    fig, status = ooc.figure(p, *full, WIDE_PX, ool)
    assert "from the pyramid" in status
    assert names(fig) == want.labels()
    out = pyramid.query(p, 0, p.span - 2, 100, shown=ool.lane_of_stream >= 0)
    m = lod.query(mem.lane_index, 0, 0, 1, max_exact=0, edges=out.view.edges,
                  shown=want.lane_of_stream >= 0)
    got = lane_time(out.view, ool, p.functions)
    assert got and got == lane_time(m, want, mem.index.functions)
    assert np.array_equal(timeline.lane_z(out.view, ool, len(p.functions)) > 0,
                          timeline.summary_z(mem, m, want) > 0)
    # a narrow one (the worker's Ssend): from the detail, each state on its lane
    t0 = mem.index.origin + WORKER_SEND[1] - 50
    fig, status = ooc.figure(p, t0 / 1e9, (t0 + 400) / 1e9, 1200, ool)
    assert "from the detail" in status
    rendered = timeline.render(mem, timeline.View(t0 / 1e9, (t0 + 400) / 1e9,
                                                  ranks=None if spec.ranks is None
                                                  else list(spec.ranks), order=spec.order,
                                                  expanded=list(spec.expanded),
                                                  grouped=list(spec.grouped)), 1200)
    assert names(fig) == names(rendered.figure)

    def lanes_by_function(f: dict) -> dict[str, set[int]]:
        got: dict[str, set[int]] = {}
        for t in f["data"]:
            if t["type"] != "scatter" or not t["name"].startswith("MPI_"):
                continue
            y = np.asarray(untyped(t["y"]), float)
            ys = {int(round(v)) for v in y[y > -50]}
            if ys:
                got[t["name"]] = ys
        return got

    assert lanes_by_function(fig) == lanes_by_function(rendered.figure)


def test_lane_choices_checked_as_in_memory(ooc_app):
    lanes = ooc_app.lanes
    v = timeline.View(0.0, 1.0)
    got = inputs.lane_choice(v, ["h:nodeB"], "host", [-1], ["nowhere"], 4, lanes.host_of(),
                             lanes.count)
    assert got is not None and got.ranks == [1, 3] and got.expanded == [1] and not got.grouped
    assert inputs.lane_choice(v, [], "sideways", None, None, 4, lanes.host_of(),
                              lanes.count) is None


@pytest.mark.parametrize("px", [12, 40])
def test_out_of_core_lane_height_is_the_in_memory_one(ooc_app, mem, px):
    """A lane height chosen (the page's lane-px, the view's lane_px) draws the lanes as
    tall as in memory: the figure's height for the same lanes."""
    p = ooc_app.pyramid
    full = (p.origin / 1e9, (p.origin + p.span - 2) / 1e9)
    fig, _status = ooc.figure(p, *full, 1200, ooc_app.lanes.default, px)
    auto, _status = ooc.figure(p, *full, 1200, ooc_app.lanes.default)
    n = len(ooc_app.lanes.default.ranks)
    assert fig["layout"]["height"] - auto["layout"]["height"] == n * px - n * int(
        np.clip(560 / n, 8, 28))
    rendered = timeline.render(mem, timeline.View(*full, lane_px=px), 1200)
    assert fig["layout"]["height"] == rendered.figure["layout"]["height"]
