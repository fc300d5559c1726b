"""The server callbacks as plain functions, on a real Himeno trace from the interposer (the
search by tag and communicator on one built by construction, mpiscope_testing.tagtrace)."""

from __future__ import annotations

import json

import pytest
from plotly.io.json import to_json_plotly

from mpiscope.archive import reader
from mpiscope_testing import comparetraces, tagtrace
from mpiscope_testing.comparetraces import LONG_NS, SHORT_NS
from mpiscope_webui.app import create_app, navigation
from mpiscope_webui.controller import Controller, parse_relayout, search_noun
from mpiscope_webui.geometry import untyped
from mpiscope_webui.model import TraceModel
from mpiscope_webui.timeline import curve_names

TL = json.dumps({"panel": 0, "type": "timeline"}, separators=(",", ":"))


@pytest.fixture(scope="module")
def app(himeno_traces):
    return create_app([himeno_traces["unpatched"], himeno_traces["patched"]], analyze_now=True)


@pytest.fixture(scope="module")
def ctl(app):
    return app.controller


def test_relayout_events_box_wheel_pan_and_reset():
    assert parse_relayout({"xaxis.range[0]": 1.0, "xaxis.range[1]": 2.0}) == ([1.0, 2.0],
                                                                             None, False)
    assert parse_relayout({"xaxis.range": [3, 4], "yaxis.range": [2, 0]})[:2] == ([3.0, 4.0],
                                                                                 [2.0, 0.0])
    assert parse_relayout({"xaxis.autorange": True})[2] is True
    assert parse_relayout({"autosize": True}) == (None, None, False)


def test_zoom_then_reset(ctl):
    v = ctl.initial_view(0)
    views = navigation(ctl, TL, "relayoutData", {"xaxis.range[0]": v.t0 + 0.1,
                                                 "xaxis.range[1]": v.t0 + 0.2}, [v, v])
    assert views[0].t0 == pytest.approx(v.t0 + 0.1) and views[1] is v
    back = navigation(ctl, TL, "relayoutData", {"xaxis.autorange": True}, views)
    assert (back[0].t0, back[0].t1) == ctl.full_window(0)
    assert navigation(ctl, TL, "relayoutData", {"autosize": True}, views) is None


def test_shared_time_scale_moves_both(ctl):
    v = [ctl.initial_view(0), ctl.initial_view(1)]
    zoomed = navigation(ctl, TL, "relayoutData", {"xaxis.range[0]": v[0].t0 + 0.1,
                                                  "xaxis.range[1]": v[0].t0 + 0.2}, v)
    # ticking "one time scale" keeps the first panel's window and shows it in the second
    both = navigation(ctl, "shared", "value", ["shared"], zoomed, "time")
    assert both[0] is zoomed[0]
    assert (both[1].t0, both[1].t1) == (zoomed[0].t0, zoomed[0].t1)
    # a reset (double click) with one time scale: both runs whole
    back = navigation(ctl, TL, "relayoutData", {"xaxis.autorange": True}, both, "time")
    assert [(x.t0, x.t1) for x in back] == [ctl.shared_window()] * 2
    z = navigation(ctl, TL, "relayoutData", {"xaxis.range[0]": 0.3, "xaxis.range[1]": 0.31},
                   both, "time")
    assert (z[1].t0, z[1].t1) == (0.3, 0.31)


@pytest.fixture(scope="module")
def uneven(tmp_path_factory):
    """Compare mode on a run and one a fifth as long (traces by construction)."""
    base = tmp_path_factory.mktemp("uneven")
    return create_app([comparetraces.build(base / "long", LONG_NS),
                       comparetraces.build(base / "short", SHORT_NS)]).controller


def test_one_time_scale_for_runs_of_different_lengths(uneven):
    """Both panels draw the same window with one time scale, the longer run's end
    included, however much shorter the other run is: the views as the page stores and
    sends them back, drawn. So does a zoom past the shorter run's end, made in either
    panel. (The shorter run's panel used to slide the window back near its own run.)"""
    ctl = uneven
    assert ctl.full_window(0) == (0.0, LONG_NS / 1e9)
    assert ctl.full_window(1) == (0.0, SHORT_NS / 1e9)

    def drawn(views):
        out = []
        for p, v in enumerate(views):
            back = ctl.view(p, json.loads(json.dumps(v.to_dict())))  # the store's round trip
            fig, _ = ctl.render(p, back, 1400)
            out.append(tuple(fig["layout"]["xaxis"]["range"]))
        return out

    views = [ctl.initial_view(0), ctl.initial_view(1)]
    both = navigation(ctl, "shared", "value", ["shared"], views, "time")
    assert drawn(both) == [(0.0, LONG_NS / 1e9)] * 2
    window = (0.6 * LONG_NS / 1e9, 0.9 * LONG_NS / 1e9)  # all of it after the short run
    for p in (0, 1):
        tl = json.dumps({"panel": p, "type": "timeline"}, separators=(",", ":"))
        z = navigation(ctl, tl, "relayoutData", {"xaxis.range[0]": window[0],
                                                 "xaxis.range[1]": window[1]}, both, "time")
        assert drawn(z) == [window] * 2, p


def test_align_by_iteration_shows_the_same_iterations(ctl):
    """Each run's main-loop iteration starts (mean over its ranks) are the knots: a window
    from iteration i to j of run A shows iterations i to j of run B, at B's own times."""
    a, b = ctl.iteration_starts(0), ctl.iteration_starts(1)
    assert a is not None and b is not None and min(len(a), len(b)) >= 4
    v = [ctl.initial_view(0), ctl.initial_view(1)]
    both = navigation(ctl, "shared", "value", ["iteration"], v, "iteration")
    assert (both[0].t0, both[0].t1) == (v[0].t0, v[0].t1)  # A stays, B follows it
    i, j = 1, min(len(a), len(b)) - 2
    z = navigation(ctl, TL, "relayoutData", {"xaxis.range[0]": float(a[i]),
                                             "xaxis.range[1]": float(a[j])}, both, "iteration")
    assert (z[0].t0, z[0].t1) == pytest.approx((a[i], a[j]))
    assert (z[1].t0, z[1].t1) == pytest.approx((b[i], b[j]))
    # half an iteration in, half an iteration in; before the loop, the same time before it
    mid = (a[i] + a[i + 1]) / 2
    assert ctl.aligned_window(0, 1, mid, a[j])[0] == pytest.approx((b[i] + b[i + 1]) / 2)
    assert ctl.aligned_window(0, 1, a[0] - 1e-3, a[j])[0] == pytest.approx(b[0] - 1e-3)


def test_legend_click_hides_and_shows_a_function(ctl):
    names = curve_names(ctl.models[0])
    k = names.index("MPI_Allreduce")
    v = ctl.toggle(ctl.initial_view(0), 0, [{"visible": ["legendonly"]}, [k]])
    assert v.hidden == ["MPI_Allreduce"]
    fig, _ = ctl.render(0, v, 1400)
    assert fig["data"][k]["visible"] == "legendonly" and len(untyped(fig["data"][k]["x"])) <= 1
    assert ctl.toggle(v, 0, [{"visible": [True]}, [k]]).hidden == []


def test_hover_and_click_on_a_state_and_a_message(ctl):
    v = ctl.initial_view(0)
    fig, _ = ctl.render(0, v, 1400)
    names = curve_names(ctl.models[0])
    hover = names.index("hover")
    call = int(fig["data"][hover]["customdata"][0])
    pt = {"curveNumber": hover, "pointNumber": 0, "customdata": call,
          "bbox": {"x0": 1, "x1": 2, "y0": 1, "y1": 2}}
    show, bbox, children = ctl.tooltip(0, {"points": [pt]}, v, 1400)
    row = ctl.models[0].trace.calls.iloc[call]
    text = str(children)
    assert show and bbox and str(row["function"]) in text and "call site" in text
    # arrows (not the whole run's density): a window around a message
    first = ctl.models[0].trace.messages.iloc[0]
    v.t0, v.t1 = first["send_time"] / 1e9 - 1e-4, first["recv_time"] / 1e9 + 1e-4
    fig, _ = ctl.render(0, v, 1400)
    msg = names.index("messages")
    row = int(fig["data"][msg]["customdata"][0])
    m = ctl.models[0].trace.messages.iloc[row]
    details = str(ctl.details(0, {"points": [{"curveNumber": msg, "pointNumber": 0,
                                              "customdata": row}]}))
    assert f"rank {int(m['send_rank'])} → rank {int(m['recv_rank'])}" in details
    assert "the receive" in details and f"{int(m['bytes']):,}" in details


def test_summary_cell_tooltip_accounts_the_pixel(ctl):
    v = ctl.initial_view(0)
    lines = dict(ctl.bin_lines(0, v, 1400, (v.t0 + v.t1) / 2, 0))
    shares = [float(val.rstrip("%")) for k, val in lines.items() if k != "summary"]
    assert sum(shares) == pytest.approx(100, abs=len(shares))  # rounded percentages


def test_jump_to_partner_outlines_both_calls(ctl):
    m = ctl.models[0].trace.messages.iloc[5]
    v = ctl.focus_call(ctl.initial_view(0), 0, int(m["recv_complete_call"]),
                       int(m["send_call"]))
    c = ctl.models[0].trace.calls
    assert v.selected == [int(m["recv_complete_call"]), int(m["send_call"])]
    for call in v.selected:
        assert v.t0 <= c["start"].iloc[call] / 1e9 and c["end"].iloc[call] / 1e9 <= v.t1


def test_finding_zooms_to_its_first_occurrences(ctl, himeno_traces):
    a = ctl.models[0].analysis()
    # the first finding at a call site (one of the whole run, descheduled, has no calls
    # and may come first where this run's scheduling gives it)
    at_sites = [i for i, f in enumerate(a.findings) if len(f.calls)]
    assert at_sites, "unpatched Himeno has findings at call sites"
    v = ctl.focus_finding(ctl.initial_view(0), 0, at_sites[0])
    f = a.findings[at_sites[0]]
    calls = reader.load(himeno_traces["unpatched"]).calls
    first = calls.iloc[int(f.calls[0])]
    assert v.t0 <= first["start"] / 1e9 <= first["end"] / 1e9 <= v.t1
    assert v.selected[: len(f.calls)] == [int(c) for c in f.calls[:500]]


def test_differences_table(ctl):
    from mpiscope_webui import compare

    d = compare.functions_delta(*ctl.models)
    row = d[d["name"] == "MPI_Allreduce"].iloc[0]
    assert row["calls_A"] > row["calls_B"]  # patched reduces only at the end
    assert row["delta_s"] == pytest.approx(row["time_s_B"] - row["time_s_A"])


def test_first_view_payload_is_bounded(ctl):
    fig, status = ctl.render(0, ctl.initial_view(0), 1400)
    assert len(to_json_plotly(fig)) < 2_000_000 and "states drawn" in status


@pytest.fixture(scope="module")
def tags(tmp_path_factory) -> Controller:
    """The tag trace (mpiscope_testing.tagtrace) served alone."""
    trace = reader.load(tagtrace.build(tmp_path_factory.mktemp("tags") / "t"))
    return Controller([TraceModel.build(trace)])


def walk(c: Controller, what: str, ranks: list[int] | None, forward: bool = True
         ) -> list[tuple[str, int]]:
    """(function, start ns) of every call the search steps to from the whole run."""
    v, out = c.initial_view(0), []
    calls = c.models[0].trace.calls
    while (found := c.search(v, 0, what, forward, ranks)) is not None:
        v, call = found
        assert v.selected == [call] and v.focus == call and v.t0 <= calls["start"][call] / 1e9
        out.append((str(calls["function"][call]), int(calls["start"][call])))
    return out


US = tagtrace.US
# rank 1's tag-5 receives, by construction: the blocking MPI_Recv from rank 0 (posted
# 2 µs before the send), and the MPI_Wait (from 5 µs before) completing each Irecv of "pair"
RECVS = sorted([("MPI_Recv", t - 2 * US) for t, tag in tagtrace.WORLD_SENDS if tag == 5]
               + [("MPI_Wait", t - 5 * US) for t in tagtrace.PAIR_SENDS], key=lambda x: x[1])


def test_search_by_tag_and_communicator(tags):
    labels = {o["label"]: o["value"] for o in tags.search_options(0)}
    # every tag and communicator the messages have, as receives and as sends
    for side in ("receive", "send"):
        for key in ("with tag 5", "with tag 7", "on communicator MPI_COMM_WORLD",
                    "on communicator pair"):
            assert f"{side} {key}" in labels
    assert "MPI_Recv at b.c:20" in labels  # functions and call sites as before
    assert walk(tags, labels["receive with tag 5"], [1]) == RECVS
    assert walk(tags, labels["receive with tag 5"], [1], forward=False) == RECVS[::-1]
    # all ranks: rank 0's receives of the messages rank 1 sends back too
    back = [("MPI_Recv", t - US) for t in tagtrace.BACK_SENDS]
    assert walk(tags, labels["receive with tag 5"], None) == RECVS + back
    assert walk(tags, labels["receive with tag 7"], [1]) == [
        ("MPI_Recv", t - 2 * US) for t, tag in tagtrace.WORLD_SENDS if tag == 7]
    # "pair": the Waits on rank 1, the sends on rank 2 (a rank set filters the sender)
    assert walk(tags, labels["receive on communicator pair"], None) == [
        x for x in RECVS if x[0] == "MPI_Wait"]
    assert walk(tags, labels["send on communicator pair"], [2]) == [
        ("MPI_Send", t) for t in tagtrace.PAIR_SENDS]
    assert walk(tags, labels["send on communicator pair"], [0, 1]) == []
    assert search_noun(labels["send with tag 5"]) == "send"
    assert search_noun(labels["receive on communicator pair"]) == "receive"
    assert search_noun(labels["MPI_Recv"]) == "call"


@pytest.mark.parametrize("what", ["t:recv\t²", "t:recv\t-5", "t:recv\t", "c:both\t0",
                                  "t:recv\t99999999999", "x:recv\t5", "t:recv 5"])
def test_search_values_not_offered_find_nothing(tags, what):
    assert tags.search_calls(0, what) is None
    assert tags.search(tags.initial_view(0), 0, what, True) is None


@pytest.fixture(scope="module")
def halo(tmp_path_factory):
    """The halo program with and without its Allreduce (comparetraces.halo_pair): rank 0
    reaches MPI_Finalize at 54.0 ms in the first run, at 50.0 ms in the second."""
    before, after = comparetraces.halo_pair(tmp_path_factory.mktemp("halo-event"))
    return Controller([TraceModel.build(reader.load(d)) for d in (before, after)])


def first_start(ctl: Controller, p: int, function: str) -> float:
    c = ctl.models[p].trace.calls
    return float(c.loc[c["function"] == function, "start"].min()) / 1e9


def test_align_by_event_lines_up_the_first_call(halo):
    """Choosing an event shows each run's first call of it at the same place of its
    panel's window, selected and marked, and a zoom of either panel keeps it so; an event
    one run lacks (the fix removed the Allreduce) is not offered and changes nothing."""
    ctl = halo
    values = [o["value"] for o in ctl.event_options()]
    assert "s:MPI_Finalize\tapp.c:80" in values and "f:MPI_Waitall" in values
    assert not any("MPI_Allreduce" in v for v in values)  # only in the first run
    ta, tb = first_start(ctl, 0, "MPI_Finalize"), first_start(ctl, 1, "MPI_Finalize")
    assert tb - ta == pytest.approx(-4e-3)
    v = [ctl.initial_view(0), ctl.initial_view(1)]
    what = "s:MPI_Finalize\tapp.c:80"
    both = navigation(ctl, "align-event", "value", what, v, "event", what)
    assert (both[0].t0, both[0].t1) == (v[0].t0, v[0].t1)  # in A's window: A stays
    assert ta - both[0].t0 == pytest.approx(tb - both[1].t0, abs=1e-12)
    assert both[1].t1 - both[1].t0 == pytest.approx(both[0].t1 - both[0].t0)
    for p, t in enumerate((ta, tb)):
        call = both[p].focus
        assert both[p].selected == [call]
        assert ctl.models[p].trace.calls["start"].iloc[call] / 1e9 == t
    # a zoom of B: A follows, the event still at one offset into both windows
    tl1 = json.dumps({"panel": 1, "type": "timeline"}, separators=(",", ":"))
    z = navigation(ctl, tl1, "relayoutData", {"xaxis.range[0]": tb - 1e-4,
                                              "xaxis.range[1]": tb + 3e-4}, both, "event", what)
    assert (z[1].t0, z[1].t1) == pytest.approx((tb - 1e-4, tb + 3e-4))
    assert (z[0].t0, z[0].t1) == pytest.approx((ta - 1e-4, ta + 3e-4))
    # A zoomed away from it (to its start): choosing it again centres A on it
    away = navigation(ctl, TL, "relayoutData", {"xaxis.range[0]": 0.0,
                                                "xaxis.range[1]": 1e-3}, z, "")
    again = navigation(ctl, "align-event", "value", "f:MPI_Finalize", away, "event",
                       "f:MPI_Finalize")
    assert (again[0].t0, again[0].t1) == pytest.approx((ta - 5e-4, ta + 5e-4))
    assert (again[1].t0, again[1].t1) == pytest.approx((tb - 5e-4, tb + 5e-4))
    assert navigation(ctl, "align-event", "value", "f:MPI_Allreduce", v, "event") is None
    assert navigation(ctl, "align-event", "value", None, v, "") is None
    assert ctl.follow(0, 1, 0.1, 0.2, "event", "f:MPI_Allreduce") == (0.1, 0.2)
