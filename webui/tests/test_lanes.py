"""Timeline lanes: a lane per thread of a rank (collapsed into the rank's lane unless the
rank is expanded), and the ranks shown, their order and grouping, as the lane bar sets
them, on a trace built by construction (mpiscope_testing.lanetrace: four ranks on two
hosts, host order 0 2 1 3; only rank 1 has a second thread calling MPI)."""

from __future__ import annotations

import numpy as np
import pytest

from mpiscope_testing.lanetrace import WORKER_SEND, build
from mpiscope_webui import lod, timeline
from mpiscope_webui.app import create_app
from mpiscope_webui.geometry import untyped
from mpiscope_webui.windowstats import WINDOW, Scope

WIDTH = 1200


@pytest.fixture(scope="module")
def ctl(tmp_path_factory):
    app = create_app([build(tmp_path_factory.mktemp("lanes") / "t")], analyze_now=True)
    return app.controller


def labels(fig: dict) -> list[str]:
    return list(fig["layout"]["yaxis"]["ticktext"])


def drawn_calls(fig: dict) -> dict[int, float]:
    """Call id -> lane of every state drawn exactly (the hover points)."""
    hover = next(t for t in fig["data"] if t["name"] == "hover")
    return {int(c): float(y) for c, y in zip(hover["customdata"], untyped(hover["y"]),
                                             strict=True)}


def call_id(ctl, rank: int, thread: int, function: str) -> int:
    c = ctl.models[0].trace.calls
    hit = c[(c["rank"] == rank) & (c["thread"] == thread) & (c["function"] == function)]
    assert len(hit)
    return int(hit.sort_values("start")["call"].iloc[0])  # the first such call


def chosen(ctl, picks=(), order="host", threads=None, grouped=None) -> timeline.View:
    v = ctl.with_lanes(0, ctl.initial_view(0), list(picks), order, threads, grouped)
    assert v is not None
    # as the page sends it back: checked again
    back = ctl.view(0, v.to_dict())
    assert back is not None and back.to_dict() == v.to_dict()
    return back


def test_a_threaded_rank_is_one_lane_by_default_its_threads_together(ctl):
    fig, _ = ctl.render(0, ctl.initial_view(0), WIDTH)
    assert labels(fig) == ["nodeA · rank 0", "nodeA · rank 2", "nodeB · rank 1 (2 threads)",
                           "nodeB · rank 3"]
    lanes = drawn_calls(fig)
    # both threads' calls in rank 1's lane
    assert lanes[call_id(ctl, 1, 1, "MPI_Ssend")] == 2
    assert lanes[call_id(ctl, 1, 0, "MPI_Recv")] == 2


def test_expanded_rank_has_a_lane_per_thread(ctl):
    v = chosen(ctl, threads=[1])
    fig, _ = ctl.render(0, v, WIDTH)
    assert labels(fig) == ["nodeA · rank 0", "nodeA · rank 2", "nodeB · rank 1 · thread 0",
                           "nodeB · rank 1 · thread 1", "nodeB · rank 3"]
    lanes = drawn_calls(fig)
    assert lanes[call_id(ctl, 1, 0, "MPI_Recv")] == 2
    assert lanes[call_id(ctl, 1, 1, "MPI_Ssend")] == 3
    assert lanes[call_id(ctl, 3, 0, "MPI_Recv")] == 4
    # "all ranks" expands every rank with several threads: here only rank 1
    assert chosen(ctl, threads=[-1]).expanded == [1]
    # the worker's message leaves from the worker's lane
    msgs = next(t for t in fig["data"] if t["name"] == "messages")
    ys = set(np.round(untyped(msgs["y"]).astype(float)).tolist())
    assert 3 in ys


def test_user_regions_on_their_threads_lane(ctl):
    def region_lanes(view) -> set[float]:
        fig, _ = ctl.render(0, view, WIDTH)
        hover = next(t for t in fig["data"] if t["name"] == timeline.REGION_HOVER)
        return set(np.round(untyped(hover["y"]).astype(float)).tolist())

    assert region_lanes(ctl.initial_view(0)) == {2}  # rank 1's one lane
    assert region_lanes(chosen(ctl, threads=[1])) == {3}  # its worker thread's
    assert not region_lanes(chosen(ctl, picks=["r:0"]))  # rank 1 not shown: none


def test_level_of_detail_is_per_lane(ctl):
    """With no state drawn exactly, the summary cells carry each lane's own time: the
    worker thread's lane is busy only during its Ssend, the main thread's not then."""
    model = ctl.models[0]
    v = chosen(ctl, threads=[1])
    lanes = model.lanes_for(v.lanes)
    idx = model.lane_index
    q = lod.query(idx, 0, model.duration, 1000, max_exact=0)
    z = timeline.summary_z(model, q, lanes)
    assert z.shape[0] == len(lanes.ranks) == 5
    origin = model.index.origin
    _, start, end = WORKER_SEND
    t0 = model.trace.calls["start"].min()  # the tracegen times are relative to the first
    mid = (start + end) // 2 + (t0 - origin)
    col = int(np.searchsorted(q.edges, mid, side="right")) - 1
    assert z[3, col] > 0  # worker: in MPI_Ssend
    assert z[2, col] == 0  # main thread: its Recv ended at 200
    # accounted per stream: the worker's Ssend time, whole
    ssend = idx.functions.index("MPI_Ssend")
    stream = int(np.flatnonzero(lanes.lane_of_stream == 3)[0])
    assert q.summary[stream, list(q.visible).index(ssend)].sum() == end - start


def test_only_the_chosen_ranks_or_hosts_are_drawn(ctl):
    v = chosen(ctl, picks=["h:nodeB"])
    assert v.ranks == [1, 3]
    fig, _ = ctl.render(0, v, WIDTH)
    assert labels(fig) == ["nodeB · rank 1 (2 threads)", "nodeB · rank 3"]
    drawn = drawn_calls(fig)
    calls = ctl.models[0].trace.calls.set_index("call")
    assert set(calls.loc[list(drawn), "rank"]) == {1, 3}
    # the messages from ranks 0 and 2 (not shown) are not drawn; rank 1's worker's is
    assert "3 of 3 messages" in ctl.render(0, ctl.initial_view(0), WIDTH)[1]
    assert "1 of 1 messages" in ctl.render(0, v, WIDTH)[1]
    picked = chosen(ctl, picks=["r:2", "r:0"])
    assert labels(ctl.render(0, picked, WIDTH)[0]) == ["nodeA · rank 0", "nodeA · rank 2"]


def test_a_hosts_ranks_share_one_summary_lane(ctl):
    v = chosen(ctl, grouped=["nodeB"])
    fig, _ = ctl.render(0, v, WIDTH)
    assert labels(fig) == ["nodeA · rank 0", "nodeA · rank 2", "nodeB · 2 ranks"]
    drawn = drawn_calls(fig)
    assert drawn[call_id(ctl, 1, 1, "MPI_Ssend")] == drawn[call_id(ctl, 3, 0, "MPI_Recv")] == 2
    assert ctl.bin_lines(0, v, WIDTH, fig["layout"]["xaxis"]["range"][0], 2)[0][1] \
        .startswith("nodeB, 2 ranks")
    # an unknown host is no choice
    assert ctl.with_lanes(0, v, [], "host", None, ["nowhere"]).grouped == []


def test_window_statistics_follow_the_ranks_shown(ctl):
    model = ctl.models[0]
    v = chosen(ctl, picks=["h:nodeB"])
    assert Scope.of(model, v, WINDOW, None).ranks == (1, 3)
    assert Scope.of(model, v, WINDOW, [0]).ranks == (0,)  # a rank set chosen there wins
    assert Scope.of(model, ctl.initial_view(0), WINDOW, None).ranks is None


def test_lanes_by_rank_and_by_waiting_time(ctl):
    by_rank = labels(ctl.render(0, chosen(ctl, order="rank"), WIDTH)[0])
    assert by_rank == ["nodeA · rank 0", "nodeB · rank 1 (2 threads)", "nodeA · rank 2",
                       "nodeB · rank 3"]
    by_wait = labels(ctl.render(0, chosen(ctl, order="wait"), WIDTH)[0])
    assert by_wait[0] == "nodeB · rank 3"  # the late sender's receiver waits most
    assert sorted(by_wait) == sorted(by_rank)


def test_summary_hover_names_the_thread(ctl):
    v = chosen(ctl, threads=[1])
    _, start, end = WORKER_SEND
    model = ctl.models[0]
    x = (model.trace.calls["start"].min() + (start + end) / 2) / 1e9
    rows = ctl.bin_lines(0, v, WIDTH, x, 3)
    assert rows[0][1].startswith("rank 1 thread 1")
    assert rows[1][0] == "MPI_Ssend"


@pytest.mark.parametrize("bad", [{"ranks": [99]}, {"ranks": "0"}, {"order": "random"},
                                 {"expanded": [-1]}, {"expanded": None},
                                 {"ranks": [True]}, {"grouped": [3]}])
def test_hostile_lane_choices_are_refused(ctl, bad):
    d = ctl.initial_view(0).to_dict()
    d.update(bad)
    assert ctl.view(0, d) is None
    assert ctl.with_lanes(0, ctl.initial_view(0), ["r:99", "x:1", "h:nowhere"], "host",
                          None).ranks == []
    assert ctl.with_lanes(0, ctl.initial_view(0), [], "sideways", None) is None
    assert ctl.with_lanes(0, ctl.initial_view(0), [], "host", ["1"]) is None
