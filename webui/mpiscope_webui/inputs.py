"""Every value a callback gets from the browser, parsed and checked in one place.

A callback's inputs are whatever the client POSTs to /_dash-update-component: a page
sends what Plotly and Dash produce, but a crafted request can send any JSON (NaN and
Infinity included, which Python's json accepts). Each parser here returns a value of the
type the app works with, inside the range it can use, or None: the callback then leaves
the page as it is (no update) instead of failing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from mpiscope_webui.model import ORDERS
from mpiscope_webui.timeline import View

MAX_SELECTED = 500  # calls outlined at once (a finding's occurrences are capped alike)
MAX_HIDDEN = 1000
MIN_WIDTH_PX, MAX_WIDTH_PX = 300, 20_000
MIN_LANE_PX, MAX_LANE_PX = 6, 80  # lane heights a view may ask for
MAX_NAME = 1000  # characters of a function name sent back by the functions table


def integer(value: object, lo: int, hi: int) -> int | None:
    """An int in [lo, hi), from a JSON integer (or a float with an integral value)."""
    if isinstance(value, bool):  # True is an int to Python, not to us
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        return None
    return value if lo <= value < hi else None


def number(value: object) -> float | None:
    """A finite float from a JSON number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        x = float(value)
    except OverflowError:  # an int past float's range
        return None
    return x if math.isfinite(x) else None


def panel(ident: object, n: int) -> int | None:
    """The panel of a pattern-matching id ({"type": ..., "panel": p})."""
    return integer(ident.get("panel"), 0, n) if isinstance(ident, dict) else None


def output_panel(outputs: object, n: int) -> int | None:
    """The panel a MATCH callback answers for, from Dash's outputs list (a dict for one
    output, a list of dicts for several: all must name the same panel)."""
    outs = outputs if isinstance(outputs, list) else [outputs]
    if not outs or not all(isinstance(o, dict) for o in outs):
        return None
    ps = {panel(o.get("id"), n) for o in outs}
    return ps.pop() if len(ps) == 1 and None not in ps else None


def all_panels(outputs: object, n: int) -> bool:
    """An ALL output covers the panels 0..n-1 in order (what the page has)."""
    return (isinstance(outputs, list) and len(outputs) == n
            and all(isinstance(o, dict) and panel(o.get("id"), n) == p
                    for p, o in enumerate(outputs)))


def window(t0: object, t1: object, full: tuple[float, float],
           min_width: float) -> tuple[float, float] | None:
    """A time window (s): finite, ordered, at least min_width wide, and within a trace's
    length of the trace (a pan off the trace shows the empty time next to it; a window
    further out, or a crafted 1e308, is brought back to that band)."""
    a, b = number(t0), number(t1)
    if a is None or b is None:
        return None
    a, b = min(a, b), max(a, b)
    pad = max(full[1] - full[0], min_width)
    lo, hi = full[0] - pad, full[1] + pad
    width = min(max(b - a, min_width), hi - lo)
    if b - a < min_width:  # widen around the middle
        mid = (a + b) / 2
        a, b = mid - width / 2, mid + width / 2
    # slide into the band, keeping the width where it fits
    if a < lo:
        a, b = lo, lo + width
    if b > hi:
        a, b = hi - width, hi
    return max(a, lo), min(b, hi)


def strings(value: object, limit: int = MAX_HIDDEN) -> list[str] | None:
    """A list of strings (e.g. a checklist's value); None for anything else."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > limit:
        return None
    return value if all(isinstance(s, str) for s in value) else None


def view(data: object, full: tuple[float, float], min_width: float, num_calls: int,
         curve_names: list[str], num_lanes: int, num_ranks: int = 0) -> View | None:
    """A panel's view as stored in the page (timeline.View.to_dict), checked."""
    if not isinstance(data, dict):
        return None
    w = window(data.get("t0"), data.get("t1"), full, min_width)
    hidden = strings(data.get("hidden"))
    sel = data.get("selected", [])
    if w is None or hidden is None or not isinstance(sel, list):
        return None
    selected = [integer(c, 0, num_calls) for c in sel[:MAX_SELECTED]]
    if None in selected:
        return None
    known = set(curve_names)
    y = data.get("y_range")
    y_range = None
    if y is not None:
        if not isinstance(y, list) or len(y) != 2:
            return None
        ys = [number(v) for v in y]
        if None in ys:
            return None
        # lanes run 0..num_lanes-1; a range far past them shows nothing useful
        lo, hi = -0.5 - num_lanes, 2 * num_lanes + 0.5
        y_range = [min(max(v, lo), hi) for v in ys]
        if y_range[0] == y_range[1]:
            y_range = None
    lane_px = data.get("lane_px")
    if lane_px is not None:
        lane_px = integer(lane_px, MIN_LANE_PX, MAX_LANE_PX + 1)
        if lane_px is None:
            return None
    focus = data.get("focus")
    if focus is not None:
        focus = integer(focus, 0, num_calls)
        if focus is None:
            return None
    ranks = rank_list(data.get("ranks"), num_ranks, allow_none=True)
    expanded = rank_list(data.get("expanded", []), num_ranks)
    order = data.get("order", "host")
    grouped = strings(data.get("grouped", []), limit=max(num_ranks, 1))
    if (ranks is False or expanded is False or expanded is None or order not in ORDERS
            or grouped is None):
        return None
    return View(w[0], w[1], sorted({h for h in hidden if h in known}), selected, y_range,
                focus, lane_px, ranks, order, expanded, sorted(set(grouped)))


def lane_choice(view: View, chosen: object, order: object, threads: object,
                grouped: object, num_ranks: int, host_of: dict[int, str],
                count: np.ndarray) -> View | None:
    """The view with the lanes the lane bar chose: `chosen` ranks ("r:3") and hosts
    ("h:node0"), none: all; `order` one of ORDERS; `threads` the ranks drawn with a lane
    per thread (-1: every rank with several threads; `count`: threads per rank);
    `grouped` the hosts drawn as one lane each. None: not a choice."""
    picks = strings(chosen, limit=4 * max(num_ranks, 1) + 64)
    hosts = strings(grouped, limit=max(num_ranks, 1))
    if picks is None or hosts is None or order not in ORDERS:
        return None
    ranks: set[int] = set()
    for pick in picks:
        kind, _, what = pick.partition(":")
        if kind == "h":
            ranks |= {int(r) for r, h in host_of.items() if str(h) == what}
        elif kind == "r" and what.isdigit() and len(what) < 10 and int(what) < num_ranks:
            ranks.add(int(what))
    want = [] if threads is None else threads
    if not isinstance(want, list) or len(want) > len(count) + 1:
        return None
    if -1 in want:
        expanded = [int(r) for r in np.flatnonzero(count > 1)]
    else:
        ok = [integer(r, 0, len(count)) for r in want]
        if None in ok:
            return None
        expanded = sorted({int(r) for r in ok if count[r] > 1})
    v = View.from_dict(view.to_dict())
    v.ranks = sorted(ranks) if picks else None
    v.order, v.expanded = str(order), expanded
    v.grouped = sorted(set(hosts) & {str(h) for h in host_of.values()})
    if v.lanes != view.lanes:
        v.y_range = None  # lane numbers mean other ranks now
    return v


def rank_list(value: object, num_ranks: int, *, allow_none: bool = False
              ) -> list[int] | None | bool:
    """A list of distinct ranks, sorted (None when allowed and given; False: not one)."""
    if value is None:
        return None if allow_none else False
    if not isinstance(value, list) or len(value) > max(num_ranks, 1):
        return False
    rs = [integer(r, 0, num_ranks) for r in value]
    return False if None in rs else sorted(set(rs))


@dataclass(frozen=True)
class Relayout:
    """A Plotly relayout event: the new x and y ranges (unchecked order), and autorange."""

    x: list[float] | None
    y: list[float] | None
    reset: bool


def relayout(rd: object) -> Relayout:
    """What a relayout event asks for; nothing (all None) for anything else."""
    if not isinstance(rd, dict):
        return Relayout(None, None, False)

    def rng(axis: str) -> list[float] | None:
        if f"{axis}.range" in rd:
            pair = rd[f"{axis}.range"]
            if not isinstance(pair, list) or len(pair) != 2:
                return None
            a, b = pair
        else:
            a, b = rd.get(f"{axis}.range[0]"), rd.get(f"{axis}.range[1]")
        a, b = number(a), number(b)
        return None if a is None or b is None else [a, b]

    return Relayout(rng("xaxis"), rng("yaxis"), rd.get("xaxis.autorange") is True)


def restyle(value: object, num_curves: int) -> tuple[list[object], list[int]] | None:
    """A legend click, Plotly's [{"visible": v or [v, ...]}, [curve, ...]]: (one visibility
    per curve, the curves)."""
    if not isinstance(value, list) or len(value) < 2:
        return None
    change, curves = value[0], value[1]
    if not isinstance(change, dict) or "visible" not in change or not isinstance(curves, list):
        return None
    if len(curves) > num_curves:
        return None
    cs = [integer(c, 0, num_curves) for c in curves]
    if None in cs:
        return None
    vis = change["visible"]
    vis = vis if isinstance(vis, list) else [vis] * len(cs)
    if len(vis) != len(cs) or not all(v in (True, False, "legendonly") for v in vis):
        return None
    return vis, cs


@dataclass(frozen=True)
class Point:
    """The first point of a Plotly hover or click event."""

    curve: int
    customdata: int | None  # a call id or message row: checked by the caller
    x: float | None
    y: float | None
    bbox: dict | None


def point(data: object, num_curves: int) -> Point | None:
    if not isinstance(data, dict):
        return None
    pts = data.get("points")
    if not isinstance(pts, list) or not pts or not isinstance(pts[0], dict):
        return None
    pt = pts[0]
    curve = integer(pt.get("curveNumber"), 0, num_curves)
    if curve is None:
        return None
    cd = pt.get("customdata")
    if isinstance(cd, list) and len(cd) == 1:  # Plotly sends a row for 2-d customdata
        cd = cd[0]
    box = pt.get("bbox")
    bbox = None
    if isinstance(box, dict):
        bbox = {k: number(box.get(k)) for k in ("x0", "x1", "y0", "y1")}
        bbox = None if None in bbox.values() else bbox
    return Point(curve, integer(cd, 0, 2**62), number(pt.get("x")), number(pt.get("y")), bbox)


def width_px(value: object, default: int) -> int:
    """The page's width in pixels (the clientside callback measures it)."""
    x = number(value)
    return default if x is None else int(min(max(x, MIN_WIDTH_PX), MAX_WIDTH_PX))


def cookie_int(raw: object) -> int | None:
    """A small non-negative integer from a cookie's text (None: anything else)."""
    if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        return None
    return int(raw)


def trigger(prop_id: object) -> tuple[str | dict, str] | None:
    """("id", "prop") or ({pattern id}, "prop") from Dash's "id.prop" trigger string."""
    if not isinstance(prop_id, str) or "." not in prop_id:
        return None
    ident, prop = prop_id.rsplit(".", 1)
    if ident.startswith("{"):
        try:
            ident = json.loads(ident)
        except ValueError:
            return None
        if not isinstance(ident, dict):
            return None
    return ident, prop


def finding(value: object, num_findings: int) -> int | None:
    """The finding a click in the findings list names (assets/findings.js)."""
    return integer(value.get("idx"), 0, num_findings) if isinstance(value, dict) else None


def clicks(value: object) -> bool:
    """A button's n_clicks says it was clicked."""
    return integer(value, 1, 2**62) is not None


def selected_name(rows: object, data: object, names: list[str]) -> str | None:
    """The function of the row selected in the functions table, if it is one we know."""
    if not isinstance(rows, list) or not rows or not isinstance(data, list):
        return None
    i = integer(rows[0], 0, len(data))
    if i is None or not isinstance(data[i], dict):
        return None
    name = data[i].get("name")
    return name if isinstance(name, str) and len(name) <= MAX_NAME and name in names else None
