"""The callback input parsers: what the page sends is taken, anything else is None."""

from __future__ import annotations

import math

import pytest

from mpiscope_webui import inputs

FULL = (10.0, 20.0)  # a trace from 10 s to 20 s
MIN = 1e-7


@pytest.mark.parametrize("value", [None, "1", True, math.nan, math.inf, -math.inf, [1], {},
                                   2**70 * 1.0 + 0.5])
def test_numbers_are_finite_json_numbers(value):
    assert inputs.number(value) is None or math.isfinite(inputs.number(value))
    if value is not None and not isinstance(value, float):
        assert inputs.number(value) is None


@pytest.mark.parametrize(("value", "want"), [(0, 0), (3, 3), (3.0, 3), (4, None), (-1, None),
                                             (0.5, None), (True, None), ("1", None),
                                             (None, None), (math.nan, None), (10**30, None)])
def test_integers_in_range(value, want):
    assert inputs.integer(value, 0, 4) == want


@pytest.mark.parametrize(("t0", "t1", "want"), [
    (12, 14, (12, 14)),  # inside: as asked
    (14, 12, (12, 14)),  # reversed: ordered
    (5, 8, (5, 8)),  # partly before the trace: shown (the time before is empty)
    (-100, -90, (0, 10)),  # wholly before, further than a trace's length: brought back
    (25, 29, (25, 29)),  # past the end by less than a trace's length: shown, empty
    (300, 310, (20, 30)),  # far past the end: the band's edge, same width
    (-1e308, 1e308, (0, 30)),  # wider than the band: the band
])
def test_windows_are_ordered_and_kept_near_the_trace(t0, t1, want):
    assert inputs.window(t0, t1, FULL, MIN) == pytest.approx(want)


@pytest.mark.parametrize("t", [15, 0, 30, -5])
def test_a_window_of_no_width_gets_the_minimum_width(t):
    a, b = inputs.window(t, t, FULL, MIN)
    assert b - a == pytest.approx(MIN) and 0 <= a < b <= 30


@pytest.mark.parametrize(("t0", "t1"), [(math.nan, 1), (1, math.inf), ("1", 2), (None, 2),
                                        ([1], 2), (True, 2)])
def test_windows_that_are_not_numbers_are_refused(t0, t1):
    assert inputs.window(t0, t1, FULL, MIN) is None


def test_views_keep_only_what_the_panel_has():
    names = ["compute", "summary", "MPI_Send", "hover"]
    ok = {"t0": 12, "t1": 13, "hidden": ["MPI_Send", "nope"], "selected": [1, 2],
          "y_range": [3.5, -0.5]}
    v = inputs.view(ok, FULL, MIN, 10, names, 4)
    assert (v.t0, v.t1, v.hidden, v.selected, v.y_range) == (12, 13, ["MPI_Send"], [1, 2],
                                                             [3.5, -0.5])
    for bad in ({**ok, "selected": [10]}, {**ok, "selected": [-1]}, {**ok, "hidden": [1]},
                {**ok, "y_range": [1]}, {**ok, "y_range": [1, math.nan]}, {**ok, "t0": None},
                {"t1": 1}, [], None, "view"):
        assert inputs.view(bad, FULL, MIN, 10, names, 4) is None, bad


def test_relayout_and_restyle_events():
    r = inputs.relayout({"xaxis.range[0]": 1, "xaxis.range[1]": 2, "yaxis.range": [3, 0]})
    assert (r.x, r.y, r.reset) == ([1, 2], [3, 0], False)
    assert inputs.relayout({"xaxis.autorange": True}).reset
    for bad in ({"xaxis.range": [1]}, {"xaxis.range[0]": math.nan, "xaxis.range[1]": 1},
                {"xaxis.range[0]": "1", "xaxis.range[1]": 2}, {"xaxis.autorange": "yes"},
                [], None, 5):
        r = inputs.relayout(bad)
        assert (r.x, r.y, r.reset) == (None, None, False), bad
    assert inputs.restyle([{"visible": ["legendonly"]}, [2]], 5) == (["legendonly"], [2])
    assert inputs.restyle([{"visible": True}, [1, 2]], 5) == ([True, True], [1, 2])
    for bad in ([{"visible": [True]}, [5]], [{"visible": [True]}, ["1"]], [{"visible": 3}, [1]],
                [{}, [1]], [{"visible": [True, False]}, [1]], "x", None, [1]):
        assert inputs.restyle(bad, 5) is None, bad


def test_points_and_triggers():
    p = inputs.point({"points": [{"curveNumber": 2, "customdata": 7, "x": 1.5, "y": 0,
                                  "bbox": {"x0": 1, "x1": 2, "y0": 3, "y1": 4}}]}, 5)
    assert (p.curve, p.customdata, p.x, p.y) == (2, 7, 1.5, 0)
    assert inputs.point({"points": [{"curveNumber": 9}]}, 5) is None
    assert inputs.point({"points": [{"curveNumber": 1, "customdata": -1}]}, 5).customdata \
        is None
    assert inputs.point({"points": []}, 5) is None and inputs.point("x", 5) is None
    assert inputs.trigger('{"panel":0,"type":"timeline"}.relayoutData') == (
        {"panel": 0, "type": "timeline"}, "relayoutData")
    assert inputs.trigger("shared.value") == ("shared", "value")
    for bad in ("nope", "{bad.x", "{\"a\": 1.x", None, 3):
        assert inputs.trigger(bad) is None, bad
