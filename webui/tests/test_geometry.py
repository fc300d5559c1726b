"""Shapes chained into one polygon: the fill is the union of the shapes, nothing more."""

from __future__ import annotations

import numpy as np

from mpiscope_webui import geometry


def shoelace(x: np.ndarray, y: np.ndarray) -> float:
    """Signed area of a closed polygon (the last point joins the first)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def winding(x: np.ndarray, y: np.ndarray, px: float, py: float) -> int:
    """Winding number of the closed polygon around (px, py)."""
    x0, y0 = np.asarray(x, float), np.asarray(y, float)
    x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
    up = (y0 <= py) & (y1 > py)
    down = (y0 > py) & (y1 <= py)
    side = (x1 - x0) * (py - y0) - (px - x0) * (y1 - y0)
    return int(np.sum(up & (side > 0)) - np.sum(down & (side < 0)))


def test_chained_rectangles_fill_exactly_their_union():
    rng = np.random.default_rng(3)
    n = 40
    x0 = rng.uniform(0, 100, n)
    x1 = x0 + rng.uniform(0.5, 10, n)
    lane = rng.integers(0, 8, n)
    x, y = geometry.rects(x0, x1, lane - 0.4, lane + 0.4)
    assert len(x) == len(y) == geometry.RECT_POINTS * n
    assert not np.isnan(x).any(), "no gaps: Plotly would make an element per piece"
    # connecting edges cancel: the area is the sum of the rectangles' areas (they may
    # overlap, and then count twice, as their winding numbers add up)
    assert np.isclose(abs(shoelace(x, y)), np.sum((x1 - x0) * 0.8), rtol=1e-4)
    # and every point is filled (nonzero winding) exactly where some rectangle covers it
    for _ in range(400):
        px, py = rng.uniform(-5, 115), rng.uniform(-1, 8)
        inside = np.any((x0 <= px) & (px <= x1) & (lane - 0.4 <= py) & (py <= lane + 0.4))
        if np.any(np.isclose(px, np.r_[x0, x1])) or np.any(np.isclose(py, np.r_[lane - .4,
                                                                                   lane + .4])):
            continue  # on an edge: either answer is right
        assert (winding(x, y, px, py) != 0) == inside, (px, py)


def test_frames_are_rings():
    x, y = geometry.frames(np.array([0.0]), np.array([10.0]), np.array([0.0]),
                           np.array([4.0]), 1.0, 1.0)
    assert winding(x, y, 0.5, 2.0) != 0  # on the frame
    assert winding(x, y, 5.0, 2.0) == 0  # in the hole
    assert np.isclose(abs(shoelace(x, y)), 10 * 4 - 8 * 2)


def test_arrows_end_at_the_receive_point_and_all_turn_the_same_way():
    xs, ys = np.array([0.0, 50.0, 10.0]), np.array([0.0, 3.0, 5.0])
    xr, yr = np.array([30.0, 20.0, 10.0]), np.array([2.0, 0.0, 1.0])
    x, y = geometry.arrows(xs, ys, xr, yr, px_per_s=1.0, px_per_lane=20.0)
    assert len(x) == geometry.ARROW_POINTS * len(xs)
    k = geometry.ARROW_STRIDE
    tips = np.arange(len(xs)) * k + geometry.ARROW_TIP
    np.testing.assert_allclose(x[tips], xr)
    np.testing.assert_allclose(y[tips], yr, rtol=1e-6)
    areas = [shoelace(x[i * k:i * k + 7], y[i * k:i * k + 7]) for i in range(len(xs))]
    assert all(a > 0 for a in areas) or all(a < 0 for a in areas)


def test_one_per_key_keeps_one_of_each_in_order():
    rng = np.random.default_rng(1)
    for n, keys in ((10, 3), (5000, 200), (2000, 10**12)):  # dense and sparse key spaces
        key = rng.integers(-1, keys, n)
        got = geometry.one_per_key(key)
        assert (np.diff(got) > 0).all()
        assert np.array_equal(np.sort(key[got]), np.unique(key))


def test_typed_arrays_round_trip():
    z = np.arange(12, dtype=np.uint8).reshape(3, 4)
    spec = geometry.typed(z, "u1")
    assert spec["dtype"] == "u1" and spec["shape"] == "3, 4"
    np.testing.assert_array_equal(geometry.untyped(spec), z)
    assert geometry.typed(np.empty(0)) == []
