"""Shapes as Plotly draws them fast, and arrays as Plotly.js typed arrays.

Plotly's scatter makes an SVG element for every NaN-separated piece of a curve, even of a
fill-only one (and then styles and removes them: ~0.3 s for a few thousand). So a curve
of many shapes here is ONE polygon without gaps (`polygons`), drawn as a fill.
"""

from __future__ import annotations

import base64

import numpy as np

POLY_EXTRA = 2  # points polygons() adds to each polygon
RECT_POINTS = 4 + POLY_EXTRA  # points per rectangle in a figure's x/y
ARROW_POINTS = 7 + POLY_EXTRA  # points per message arrow
# where arrow i's own points are: from i * ARROW_STRIDE on (the way back through all the
# first points comes after all arrows, see polygons); ARROW_TIP after that is its tip
ARROW_STRIDE, ARROW_TIP = 7 + 1, 3


_DTYPES = {"f8": np.float64, "f4": np.float32, "u1": np.uint8, "u2": np.uint16}


def typed(a: np.ndarray, dtype: str = "f8") -> dict | list:
    """A Plotly.js typed array ({dtype, bdata[, shape]}): compact, and decoded without
    parsing text in the browser. Only for x/y/z: Dash hands customdata to hover and click
    events by indexing it, which a typed array does not support."""
    a = np.ascontiguousarray(a, dtype=_DTYPES[dtype])
    if a.size == 0:
        return []
    out = {"dtype": dtype, "bdata": base64.b64encode(a.tobytes()).decode("ascii")}
    if a.ndim > 1:
        out["shape"] = ", ".join(map(str, a.shape))
    return out


def untyped(spec) -> np.ndarray:
    """The array behind a typed array (or a plain list): for tests and tools."""
    if isinstance(spec, dict):
        a = np.frombuffer(base64.b64decode(spec["bdata"]), _DTYPES[spec["dtype"]])
        if "shape" in spec:
            a = a.reshape([int(x) for x in spec["shape"].split(",")])
        return a
    return np.asarray(spec, dtype=float)


def polygons(px: np.ndarray, py: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """n polygons of k points each ((n, k) arrays) as ONE polygon without gaps, to fill.

    The polygons are chained: each is closed back to its first point, the next starts from
    there, and at the end the path walks back through all the first points. Every
    connecting edge is then traversed once each way, which adds nothing to the winding
    number: under SVG's nonzero rule the fill is exactly the union of the polygons (given
    they all run the same way round, as rects and arrows make them). POLY_EXTRA points
    are added per polygon."""
    n, k = px.shape
    x = np.empty((n, k + 1))
    y = np.empty((n, k + 1), np.float32)
    x[:, :k], y[:, :k] = px, py
    x[:, k], y[:, k] = px[:, 0], py[:, 0]
    back = slice(None, None, -1)
    return (np.concatenate([x.ravel(), px[back, 0]]),
            np.concatenate([y.ravel(), py[back, 0].astype(np.float32)]))


def rects(x0, x1, y0, y1) -> tuple[np.ndarray, np.ndarray]:
    """Rectangles as one filled polygon (RECT_POINTS points each)."""
    x = np.stack(np.broadcast_arrays(x0, x1, x1, x0), axis=1).astype(np.float64)
    y = np.stack(np.broadcast_arrays(y0, y0, y1, y1), axis=1).astype(np.float64)
    return polygons(x.reshape(-1, 4), y.reshape(-1, 4))


def frames(x0, x1, y0, y1, wx: float, wy: float) -> tuple[np.ndarray, np.ndarray]:
    """Rectangle outlines wx by wy thick (inwards), as one filled polygon: the outer ring,
    then the inner one the other way round, which makes it a hole."""
    xi0, xi1 = np.minimum(x0 + wx, x1), np.maximum(x1 - wx, x0)
    yi0, yi1 = np.minimum(y0 + wy, y1), np.maximum(y1 - wy, y0)
    x = np.stack(np.broadcast_arrays(x0, x1, x1, x0, x0, xi0, xi0, xi1, xi1, xi0), axis=1)
    y = np.stack(np.broadcast_arrays(y0, y0, y1, y1, y0, yi0, yi1, yi1, yi0, yi0), axis=1)
    return polygons(x.astype(np.float64), y.astype(np.float64))


def arrows(xs, ys, xr, yr, px_per_s: float, px_per_lane: float,
            head_px: float = 7.0, head_half_px: float = 3.2,
            shaft_half_px: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Arrows as one filled polygon (ARROW_POINTS points each, see polygons).

    Filled, because Plotly draws every piece of a *line* as an SVG element of its own
    (thousands of arrows = thousands of elements, seconds to draw). The shape is computed
    in pixels so it looks the same at every zoom: a shaft one pixel wide, then a head
    ending at the receive point."""
    n = len(xs)
    dx, dy = (xr - xs) * px_per_s, (yr - ys) * px_per_lane
    length = np.hypot(dx, dy)
    norm = np.maximum(length, 1e-9)
    ux, uy = dx / norm, dy / norm
    nx, ny = -uy, ux  # unit normal
    head = np.minimum(head_px, length)
    x = np.empty((n, 7))
    y = np.empty((n, 7))
    # offsets from the send point (S) or the receive point (R), in pixels:
    # S+w, B+w, B+h, R, B-h, B-w, S-w with B = R - head along the arrow
    for col, (at_r, back, side) in enumerate((
            (False, 0, shaft_half_px), (True, 1, shaft_half_px), (True, 1, head_half_px),
            (True, 0, 0.0), (True, 1, -head_half_px), (True, 1, -shaft_half_px),
            (False, 0, -shaft_half_px))):
        ox = -ux * head * back + nx * side
        oy = -uy * head * back + ny * side
        x[:, col] = (xr if at_r else xs) + ox / px_per_s
        y[:, col] = (yr if at_r else ys) + oy / px_per_lane
    return polygons(x, y)


def one_per_key(key: np.ndarray) -> np.ndarray:
    """Sorted positions of one element per distinct key: np.unique's first occurrences
    without sorting, which took 75 ms for the ~1 M messages of a whole-run view."""
    n = len(key)
    lo = int(key.min())
    span = int(key.max()) - lo + 1
    if span > 4 * n + 4_000_000:  # sparse keys: a slot per key would cost too much memory
        return np.sort(np.unique(key, return_index=True)[1])
    pos = np.arange(n, dtype=np.int32)
    slot = np.empty(span, np.int32)
    slot[key - lo] = pos  # of several writes to one slot one wins: exactly one per key
    return np.flatnonzero(slot[key - lo] == pos)
