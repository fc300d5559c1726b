"""Timeline figures (Plotly) from a level-of-detail view.

Figures are plain dicts with the big arrays as Plotly typed arrays (base64), not
plotly.graph_objects: validating ~100 k values per view through graph_objects cost more
than everything else in a zoom callback.

Curve order is fixed so callbacks can tell which legend entry a restyle event is about
without the figure being sent back: compute, summary, one curve per function (in
StateIndex.functions order), waiting, messages, hover points, selection, and for a
trace with user regions two more: their legend entry and their hover points (the bars
themselves are layout shapes under the MPI states, see _region_shapes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mpiscope import numbers
from mpiscope.render import palette
from mpiscope.render.plottext import plot_text
from mpiscope_webui import lod, regions
from mpiscope_webui.geometry import ARROW_POINTS, arrows, frames, one_per_key, rects, typed
from mpiscope_webui.model import Lanes, LaneSpec, TraceModel

MARGIN_L, MARGIN_R = 170, 20
MAX_ARROWS = 2000
# at (nearly) whole-run zoom, more messages than one per this many pixels of lane are a
# smear of arrows: they are drawn as a density per sender instead (zoom in for arrows)
WHOLE_RUN_SHARE = 0.9
ARROW_SPACING_PX = 40
DENSITY_PX = 4  # width of a density bar
DENSITY_HEIGHT = 0.3  # the tallest bar, in lanes (at the lane's top: the states stay seen)
HALF = 0.42  # half the height of a depth-0 state, in lanes
NEST = 0.12  # each nesting level is drawn this much slimmer (inside its parent)
GAP_PX = 0.6  # space left after each exact state so that neighbours stay apart
# Tick labels Plotly does not measure on every draw: by default it measures each label
# (a forced layout of the whole plot) to see whether it overflows the plot or must be
# turned to fit; with 64 lane labels that was most of a redraw (~0.1 s of ~0.15 s)
FIXED_TICKS = {"ticklabeloverflow": "allow", "tickangle": 0}
# The legend sits above the plot, under Plotly's mode bar (top right of the figure). On a
# narrow page it wraps into more rows: Plotly then pushes the plot down (the lanes shrunk
# from 56 to 55 px, 28 to ~20 px with more rows) and the legend's top row ran under the
# mode bar. So the rows are estimated from the names and the width (generously), the top
# margin holds the mode bar and every row, and the figure grows by what it adds.
MARGIN_T = 50  # the top margin the heights below were chosen with (one legend row)
MODEBAR_PX = 28  # the mode bar's row
LEGEND_ROW_PX = 30  # a legend row at font size 11 (measured in Chromium: 29)
LEGEND_ITEM_PX = 46  # a legend entry besides its text (symbol, gaps)
LEGEND_CHAR_PX = 7.2  # per character of an entry's text at font size 11 (at most ~6.6)


def legend_rows(names: list[str], width_px: int) -> int:
    """Rows a horizontal legend of `names` takes in a figure `width_px` wide (an upper
    bound: entries wrap at the plot's width)."""
    room = max(width_px - MARGIN_L - MARGIN_R, 100)
    rows, used = 1, 0.0
    for n in names:
        w = LEGEND_ITEM_PX + LEGEND_CHAR_PX * len(n)
        if used and used + w > room:
            rows, used = rows + 1, 0.0
        used += w
    return rows


def top_margin(names: list[str], width_px: int) -> int:
    """The top margin that holds the mode bar and the legend's rows without overlap."""
    return max(MARGIN_T, MODEBAR_PX + LEGEND_ROW_PX * legend_rows(names, width_px) + 2)


@dataclass
class View:
    """What a user looks at: a window (s, trace time) and what is switched off."""

    t0: float
    t1: float
    hidden: list[str] = field(default_factory=list)
    selected: list[int] = field(default_factory=list)  # call ids outlined
    y_range: list[float] | None = None
    focus: int | None = None  # the call a partner jump went to: highlighted
    lane_px: int | None = None  # lane height chosen (None: from the number of lanes)
    ranks: list[int] | None = None  # ranks shown (None: all)
    order: str = "host"  # lane order, one of model.ORDERS
    expanded: list[int] = field(default_factory=list)  # ranks drawn with a lane per thread
    grouped: list[str] = field(default_factory=list)  # hosts drawn as one lane each

    @property
    def lanes(self) -> LaneSpec:
        return LaneSpec(None if self.ranks is None else tuple(sorted(set(self.ranks))),
                        self.order, tuple(sorted(set(self.expanded))),
                        tuple(sorted(set(self.grouped))))

    def to_dict(self) -> dict:
        return {"t0": self.t0, "t1": self.t1, "hidden": list(self.hidden),
                "selected": [int(c) for c in self.selected], "y_range": self.y_range,
                "focus": self.focus, "lane_px": self.lane_px,
                "ranks": None if self.ranks is None else [int(r) for r in self.ranks],
                "order": self.order, "expanded": [int(r) for r in self.expanded],
                "grouped": [str(h) for h in self.grouped]}

    @classmethod
    def from_dict(cls, d: dict) -> View:
        f = d.get("focus")
        rs = d.get("ranks")
        return cls(float(d["t0"]), float(d["t1"]), list(d.get("hidden", [])),
                   [int(c) for c in d.get("selected", [])], d.get("y_range"),
                   None if f is None else int(f),
                   None if d.get("lane_px") is None else int(d["lane_px"]),
                   None if rs is None else [int(r) for r in rs], str(d.get("order", "host")),
                   [int(r) for r in d.get("expanded", [])],
                   [str(h) for h in d.get("grouped", [])])


Figure = dict  # a Plotly figure as Dash sends it: {"data": [...], "layout": {...}}


def _scatter(name: str, x, y, hidden: set[str] | None = None, **kw) -> dict:
    # names are data: Plotly would render HTML in them (the first view decodes them)
    tr = {"type": "scatter", "name": plot_text(name), "x": typed(x), "y": typed(y, "f4"), **kw}
    if hidden is not None:
        tr["visible"] = "legendonly" if name in hidden else True
    return tr


@dataclass
class Rendered:
    figure: Figure
    view: lod.LodView
    arrows: int
    arrows_total: int
    regions: regions.RegionView | None = None  # user regions drawn (None: none, or hidden)
    density: bool = False  # messages drawn as a density, not as arrows

    def status(self, model: TraceModel) -> str:
        v = self.view
        ns = model.index.origin
        out = (f"{(v.t0 + ns) / 1e9:.6f} – {(v.t1 + ns) / 1e9:.6f} s · "
               f"{len(v.states)} states drawn, {v.summary_cells()} summary cells "
               f"(shorter than {numbers.seconds(v.threshold_ns / 1e9)} merged) · "
               + (f"{self.arrows_total} messages as a density per sender (zoom in for "
                  "arrows)" if self.density else
                  f"{self.arrows} of {self.arrows_total} messages"))
        if self.regions is not None:
            r = self.regions
            out += (f" · {len(r.positions)} user regions drawn (shorter than "
                    f"{numbers.seconds(r.threshold_ns / 1e9)} left out)")
        return out


REGIONS, REGION_HOVER = "user regions", "region hover"


def curve_names(model: TraceModel) -> list[str]:
    extra = [REGIONS, REGION_HOVER] if model.regions is not None else []
    return ["compute", "summary", *model.index.functions, "waiting", "messages", "hover",
            "selected", *extra]


def summary_levels(nf: int) -> int:
    """Shades per function in the summary grid: z must fit one byte (two past 255
    functions), because the grid is the bulk of a view's bytes."""
    return max(1, (255 if nf <= 255 else 65535) // max(nf, 1))


def _colourscale(functions: list[str]) -> list:
    """z = 0: empty (transparent); z = 1 + k * L + l: function k at shade l of L, light
    (sparse bin) to full colour (busy bin)."""
    nf = len(functions)
    if not nf:
        return [[0, "rgba(0,0,0,0)"], [1, "rgba(0,0,0,0)"]]
    levels = summary_levels(nf)
    zmax = nf * levels
    scale = [[0, "rgba(0,0,0,0)"]]
    cs = palette.colours(functions)
    for k, name in enumerate(functions):
        c = cs[name]
        scale.append([(1 + k * levels) / zmax, palette.blend(c, amount=0.75)])
        scale.append([(k + 1) * levels / zmax, c])
    return scale


def summary_z(model: TraceModel, v: lod.LodView, lanes: Lanes | None = None) -> np.ndarray:
    """(lanes, bins) summary grid, coded as _colourscale says (0 where nothing is left).
    `v` is a query of model.lane_index: a lane's cells add up the time of its streams (the
    threads of a collapsed rank: busy if any thread is)."""
    return lane_z(v, lanes or model.lanes, len(model.index.functions))


def lane_z(v: lod.LodView, lanes: Lanes, nf: int) -> np.ndarray:
    """summary_z for `nf` functions: v's rows are streams (lanes.lane_of_stream)."""
    levels = summary_levels(nf)
    nl = len(lanes.ranks)
    lane = lanes.lane_of_stream[: v.summary.shape[0]]
    keep = np.flatnonzero(lane >= 0)
    per = np.zeros((nl, *v.summary.shape[1:]), np.int64)
    np.add.at(per, lane[keep], v.summary[keep])
    busy = per.sum(axis=1)
    dom = v.visible[np.argmax(per, axis=1)] if len(v.visible) else busy * 0
    dom = np.where(busy > 0, dom, -1)
    width = np.diff(v.edges).astype(float)
    frac = busy / np.maximum(width, 1)[None, :] / np.maximum(lanes.nthreads, 1)[:, None]
    # a collapsed rank is shaded by its threads' mean busy share, at least one level
    shade = np.minimum((np.clip(frac, 0, 1) * levels).astype(np.int64), levels - 1)
    return np.where(dom >= 0, 1 + dom * levels + shade, 0)


def _summary_trace(model: TraceModel, v: lod.LodView, to_s, lanes: Lanes | None = None
                   ) -> dict:
    """The summary cells as a heatmap. Empty cells are transparent rather than gaps (NaN),
    so that z fits one byte per cell; hovering one tells the time is all compute."""
    z = summary_z(model, v, lanes)
    if not z.any():  # deep zoom: everything is exact, send no empty grid
        z = np.zeros((1, 1), np.int64)
    nf = len(model.index.functions)
    levels = summary_levels(nf)
    width = (v.edges[-1] - v.edges[0]) / max(v.nbins, 1)
    return {"type": "heatmap", "z": typed(z, "u1" if nf * levels <= 255 else "u2"),
            "x0": float(to_s(v.edges[0] + width / 2)), "dx": width / 1e9, "y0": 0, "dy": 1,
            "zmin": 0, "zmax": max(nf * levels, 1), "zsmooth": False,
            "colorscale": _colourscale(model.index.functions), "showscale": False,
            "hoverinfo": "none", "name": "summary", "showlegend": False,
            "meta": {"levels": levels}}


def _placeholder(view: View) -> tuple[np.ndarray, np.ndarray]:
    """One point off the lanes: Plotly drops empty curves from the legend."""
    return np.array([view.t0]), np.array([-100.0], np.float32)


def _lanes_shape(model: TraceModel, lanes: Lanes, to_s, t0: int, t1: int) -> dict:
    """The lanes' backgrounds (compute) over each rank's (or thread's) lifetime, as one
    path shape drawn between the grid and the traces."""
    r = model.trace.ranks.set_index("rank").loc[lanes.ranks]
    first = r["first_ns"].to_numpy(np.int64).copy()
    last = r["last_ns"].to_numpy(np.int64).copy()
    th = model.trace.threads
    if (lanes.threads >= 0).any() and th is not None and len(th):
        life = th.set_index(["rank", "thread"])
        for i in np.flatnonzero(lanes.threads >= 0):
            key = (int(lanes.ranks[i]), int(lanes.threads[i]))
            if key in life.index:
                first[i], last[i] = life.loc[key, "first_ns"], life.loc[key, "last_ns"]
    if (lanes.members > 1).any():  # a host's lane: from its first rank's start to the last end
        rk = model.trace.ranks["rank"].to_numpy(np.int64)
        lane = lanes.lane_of_rank[np.clip(rk, 0, len(lanes.lane_of_rank) - 1)]
        for i in np.flatnonzero(lanes.members > 1):
            mine = model.trace.ranks[lane == i]
            first[i], last[i] = mine["first_ns"].min(), mine["last_ns"].max()
    x0 = to_s(np.clip(first - model.index.origin, t0, t1))
    x1 = to_s(np.clip(last - model.index.origin, t0, t1))
    path = "".join(f"M{a!r},{lane - 0.46!r}H{b!r}V{lane + 0.46!r}H{a!r}Z"
                   for lane, (a, b) in enumerate(zip(x0.tolist(), x1.tolist(), strict=True))
                   if b > a)
    return {"type": "path", "name": "compute", "xref": "x", "yref": "y", "layer": "between",
            "path": path or "M0,-100Z", "fillcolor": palette.COMPUTE, "line": {"width": 0}}


def render(model: TraceModel, view: View, width_px: int, *, max_exact: int = lod.MAX_EXACT,
           height: int | None = None) -> Rendered:
    idx = model.lane_index  # keyed by stream: idx.rank is a stream
    lanes = model.lanes_for(view.lanes)
    origin = idx.origin
    stream_lane = lanes.lane_of_stream
    call_lane = stream_lane[model.streams.of_call]

    def to_s(t):
        return (np.asarray(t, dtype=np.float64) + origin) / 1e9

    t0 = int(round(view.t0 * 1e9)) - origin
    t1 = int(round(view.t1 * 1e9)) - origin
    plot_px = max(width_px - MARGIN_L - MARGIN_R, 50)
    hidden = set(view.hidden)
    v = lod.query(idx, t0, t1, plot_px, hidden=hidden, max_exact=max_exact,
                  shown=stream_lane >= 0)
    traces: list[dict] = []

    # compute = lane background over each rank's lifetime. A layout shape, not a trace:
    # Plotly draws heatmaps under all scatter traces, so a filled trace would hide the
    # summary cells. The "compute" curve is kept, empty, for its legend entry.
    shapes = [] if "compute" in hidden else [_lanes_shape(model, lanes, to_s, t0, t1)]
    traces.append(_scatter("compute", *_placeholder(view), hidden, fill="toself",
                           fillcolor=palette.COMPUTE, mode="none", hoverinfo="skip"))
    traces.append(_summary_trace(model, v, to_s, lanes))

    # exact states, one path per function; instead of an outline (one SVG element per
    # state) neighbours are told apart by a gap of GAP_PX at the end of each state
    st = v.states
    lane_of = stream_lane[idx.rank[st]]
    half = np.maximum(HALF - NEST * idx.depth[st], 0.08)
    show_regions = model.regions is not None and REGIONS not in hidden
    if show_regions:
        half = model.regions.mpi_half(model.index_positions(st), half)
    s_per_px = (view.t1 - view.t0) / plot_px
    xs0, xs1 = to_s(v.state_start), to_s(v.state_end)
    xs1 = xs1 - np.minimum(GAP_PX * s_per_px, 0.25 * (xs1 - xs0))
    cs = palette.colours(idx.functions)
    for code, name in enumerate(idx.functions):
        sel = idx.fcode[st] == code
        x, y = rects(xs0[sel], xs1[sel], lane_of[sel] - half[sel], lane_of[sel] + half[sel])
        if not len(x):
            x, y = _placeholder(view)
        c = cs[name]
        traces.append(_scatter(name, x, y, hidden, fill="toself", fillcolor=c, mode="none",
                               legendgroup=name, hoverinfo="skip"))

    # the waiting part of each drawn call (it waits from its start), hatched
    wait = np.minimum(idx.wait[st], idx.end[st] - idx.start[st])
    w = wait > 0
    ws = np.maximum(idx.start[st][w], t0)
    we = np.minimum(idx.start[st][w] + wait[w], t1)
    ok = we > ws
    x, y = rects(to_s(ws[ok]), to_s(we[ok]), lane_of[w][ok] - half[w][ok],
                  lane_of[w][ok] + half[w][ok])
    if not len(x):
        x, y = _placeholder(view)
    traces.append(_scatter(
        "waiting", x, y, hidden, fill="toself", mode="none", fillcolor="rgba(0,0,0,0.18)",
        fillpattern={"shape": "/", "fgcolor": "rgba(0,0,0,0.55)", "size": 6, "solidity": 0.3},
        hoverinfo="skip"))

    # message arrows, send -> receive, merged per (pair, pixel) when too many
    rows = model.messages.in_window(t0, t1)
    m = model.trace.messages
    msg_lane = _message_lanes(model, lanes, call_lane)
    rows = rows[(msg_lane[0][rows] >= 0) & (msg_lane[1][rows] >= 0)]
    total = len(rows)
    if total:
        st_t = m["send_time"].to_numpy(np.int64)[rows] - origin
        px = ((st_t - t0) * plot_px // max(t1 - t0, 1)).astype(np.int64)
        key = (m["send_rank"].to_numpy(np.int64)[rows] * idx.num_ranks
               + m["recv_rank"].to_numpy(np.int64)[rows]) * (plot_px + 2) + np.clip(
                   px, -1, plot_px)
        if total > MAX_ARROWS:
            rows = rows[one_per_key(key)]
        if len(rows) > MAX_ARROWS:
            rows = rows[np.linspace(0, len(rows) - 1, MAX_ARROWS).astype(np.int64)]
    nl = len(lanes.ranks)
    density = (total > 0 and (t1 - t0) >= WHOLE_RUN_SHARE * model.duration
               and total * ARROW_SPACING_PX > plot_px * max(nl, 1))
    if density:
        rows = rows[:0]
    n = len(rows)
    # nested user regions need taller lanes to tell their levels apart (3 px a level)
    lane_px = view.lane_px or int(np.clip(560 / max(nl, 1), 8, 56 if show_regions else 28))
    xs = to_s(m["send_time"].to_numpy(np.int64)[rows] - origin)
    xr = to_s(m["recv_time"].to_numpy(np.int64)[rows] - origin)
    ys = msg_lane[0][rows].astype(np.float64)
    yr = msg_lane[1][rows].astype(np.float64)
    head = min(7.0, 0.6 * lane_px)  # in thin lanes a 7-pixel head would hide the lane
    ax, ay = arrows(xs, ys, xr, yr, plot_px / max(view.t1 - view.t0, 1e-12), lane_px,
                     head_px=head, head_half_px=0.45 * head)
    # customdata: the message's row at each point (in geometry.polygons' order); an int array goes
    # out as a JSON list, which Dash can index for hover/click events
    mid = np.concatenate([np.repeat(rows.astype(np.int64), ARROW_POINTS - 1), rows[::-1]])
    if density:
        ax, ay = _density(model, view, t0, t1, plot_px, to_s, lanes, msg_lane[0])
        mid = np.array([-1])
    elif not n:
        ax, ay = _placeholder(view)
        mid = np.array([-1])
    traces.append(_scatter("messages", ax, ay, hidden, mode="none", fill="toself",
                           fillcolor="#222222", hoveron="points", customdata=mid,
                           hoverinfo="none" if n else "skip"))

    # points at state centres, not drawn (no SVG element each): hover/click target carrying
    # the call id
    cx = to_s((v.state_start + v.state_end) / 2)
    traces.append(_scatter("hover", cx, lane_of, mode="none", hoveron="points",
                           showlegend=False, customdata=idx.call[st], hoverinfo="none"))

    # outline of selected calls (details panel, finding occurrences)
    sel_calls = np.asarray(view.selected[:500], np.int64)
    sel_calls = sel_calls[call_lane[sel_calls] >= 0] if len(sel_calls) else sel_calls
    if len(sel_calls):
        c = model.trace.calls
        ss = c["start"].to_numpy(np.int64)[sel_calls] - origin
        se = c["end"].to_numpy(np.int64)[sel_calls] - origin
        traces.append(selected_curve(to_s(ss), to_s(se), call_lane[sel_calls], s_per_px,
                                     lane_px))
    else:
        traces.append(selected_curve(np.empty(0), np.empty(0), np.empty(0), s_per_px,
                                     lane_px))

    if (view.focus is not None and 0 <= view.focus < len(model.trace.calls)
            and call_lane[view.focus] >= 0):
        shapes.append(focus_shape(model, view.focus, to_s, origin, lanes))

    rview = None
    if model.regions is not None:
        rview = regions.query(model.regions, t0, t1, plot_px) if show_regions else None
        rshapes, rhover = _region_shapes(model, rview, view, to_s, s_per_px, lanes)
        shapes += rshapes
        traces.append(_scatter(REGIONS, *_placeholder(view), hidden, fill="toself",
                               fillcolor=REGION_LEGEND, mode="none", hoverinfo="skip"))
        traces.append(rhover)

    boundaries = [i - 0.5 for i in range(1, nl) if lanes.hosts[i] != lanes.hosts[i - 1]]
    top = top_margin([t["name"] for t in traces if t.get("showlegend", True)], width_px)
    layout = dict(
        height=height or 110 + nl * lane_px + top - MARGIN_T,
        margin={"l": MARGIN_L, "r": MARGIN_R, "t": top, "b": 40}, plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff", dragmode="zoom", hovermode="closest", hoverdistance=-1,
        showlegend=True, font={"size": 11},
        legend={"orientation": "h", "x": 0, "y": 1.01, "yanchor": "bottom",
                "itemclick": "toggle", "itemdoubleclick": "toggleothers"},
        # ticklabeloverflow "allow": Plotly's default measures every tick label on every
        # draw (a forced layout of the whole plot, ~50 ms with 64 lanes)
        xaxis={"range": [view.t0, view.t1], "title": {"text": "time (s)"},
               "showgrid": True, "gridcolor": "#dddddd", "zeroline": False,
               "exponentformat": "none", **FIXED_TICKS},
        yaxis={"range": view.y_range or [nl - 0.5, -0.5], "tickmode": "array",
               "tickvals": list(range(nl)), "ticktext": [plot_text(s) for s in lanes.labels()],
               "showgrid": False,
               "zeroline": False, **FIXED_TICKS,
               # lane labels no taller than the lanes, or they overlap (64 ranks: 8 px)
               "tickfont": {"size": max(6, min(11, lane_px - 1))}},
        shapes=shapes + [
            {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": b, "y1": b,
             "line": {"color": "#555555", "width": 1, "dash": "dot"}} for b in boundaries],
    )
    return Rendered({"data": traces, "layout": layout}, v, n, total, rview, density)


def _message_lanes(model: TraceModel, lanes: Lanes, call_lane: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Lane of each message's sender and receiver (-1: not shown): the lane of the call
    that sent (received) it, so a thread's message starts on its thread's lane."""
    m = model.trace.messages
    out = []
    for side in ("send", "recv"):
        lane = lanes.lane_of_rank[np.clip(m[f"{side}_rank"].to_numpy(np.int64), 0,
                                          len(lanes.lane_of_rank) - 1)]
        col = f"{side}_call"
        if col in m.columns and (lanes.threads >= 0).any():
            c = m[col].to_numpy(np.int64)
            ok = (c >= 0) & (c < len(call_lane))
            lane = np.where(ok, call_lane[np.where(ok, c, 0)], lane)
        out.append(lane)
    return out[0], out[1]


def _density(model: TraceModel, view: View, t0: int, t1: int, plot_px: int, to_s,
             lanes: Lanes, send_lane: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Messages sent per DENSITY_PX pixels of each sender's lane, as bars hanging from the
    lane's top (the busiest bar DENSITY_HEIGHT lanes tall)."""
    rows = model.messages.in_window(t0, t1)
    m = model.trace.messages
    st = m["send_time"].to_numpy(np.int64)[rows] - model.index.origin
    nb = max(plot_px // DENSITY_PX, 1)
    b = np.clip((st - t0) * nb // max(t1 - t0, 1), 0, nb - 1)
    lane = send_lane[rows]
    b, st = b[lane >= 0], st[lane >= 0]
    lane = lane[lane >= 0]
    counts = np.bincount(lane * nb + b, minlength=len(lanes.ranks) * nb)
    hit = np.flatnonzero(counts)
    if not len(hit):
        return _placeholder(view)
    ln, bn = hit // nb, hit % nb
    edges = t0 + (np.arange(nb + 1) * (t1 - t0)) // nb
    top = ln - 0.5
    h = DENSITY_HEIGHT * counts[hit] / counts[hit].max()
    return rects(to_s(edges[bn]), to_s(edges[bn + 1]), top, top + h)


FOCUS_FILL, FOCUS_LINE = "rgba(255,196,0,0.35)", "#e08000"


def focus_shape(model: TraceModel, call: int, to_s, origin: int,
                lanes: Lanes | None = None) -> dict:
    """The call a partner jump went to, marked over its whole lane height (a band taller
    than the state, so a call a pixel wide is still seen)."""
    c = model.trace.calls
    s = int(c["start"].iloc[call]) - origin
    e = int(c["end"].iloc[call]) - origin
    lanes = lanes or model.lanes
    return focus_rect(float(to_s(s)), float(to_s(e)),
                      float(lanes.lane_of_stream[model.streams.of_call[call]]))


def focus_rect(x0: float, x1: float, lane: float) -> dict:
    """The mark of the call a partner jump or search went to, from x0 to x1 (s) in a
    lane: both pages draw it so (the out-of-core one from the cache's row)."""
    return {"type": "rect", "name": "partner", "xref": "x", "yref": "y", "layer": "above",
            "x0": x0, "x1": x1, "y0": lane - 0.5, "y1": lane + 0.5,
            "fillcolor": FOCUS_FILL, "line": {"color": FOCUS_LINE, "width": 2}}


def selected_curve(x0: np.ndarray, x1: np.ndarray, lane: np.ndarray, s_per_px: float,
                   lane_px: float) -> dict:
    """The outlines of the selected calls (from x0 to x1, s, in their lanes), a frame
    2.5 px wide around each: the "selected" curve of both pages."""
    if len(x0):
        lane = np.asarray(lane, np.float64)
        x, y = frames(x0, x1, lane - 0.48, lane + 0.48, 2.5 * s_per_px, 2.5 / lane_px)
    else:
        x, y = np.empty(0), np.empty(0, np.float32)
    return _scatter("selected", x, y, mode="none", fill="toself", hoverinfo="skip",
                    fillcolor="#000000", showlegend=False)


REGION_LEGEND = "#d9cbb0"  # the legend swatch of user regions (each name has its colour)
REGION_HOVER_PX = 80  # a long region bar has a hover point every this many pixels


def _region_shapes(model: TraceModel, rv: regions.RegionView | None, view: View, to_s,
                   s_per_px: float, lanes: Lanes) -> tuple[list[dict], dict]:
    """The user regions of a view as layout shapes, one path per region name: drawn
    under every trace (layer "between", like the lanes' background), so the summary cells
    and the MPI states show on top of them. And their hover points: along the band each
    bar shows above its children, every REGION_HOVER_PX, carrying the region's row."""
    if rv is None or not len(rv.positions):
        x, y = _placeholder(view)
        return [], _scatter(REGION_HOVER, x, y, mode="none", hoveron="points",
                            showlegend=False, customdata=np.array([-1]), hoverinfo="skip")
    ri = model.regions
    idx = ri.index
    pos = rv.positions
    # on their thread's lane; those of ranks not shown are left out
    reg = model.trace.regions
    rows = ri.row[pos]
    thread = (reg["thread"].to_numpy(np.int64)[rows] if "thread" in reg.columns
              else np.zeros(len(rows), np.int64))
    stream = model.streams.find(idx.rank[pos].astype(np.int64), thread)
    lane_all = np.where(stream >= 0, lanes.lane_of_stream[np.maximum(stream, 0)],
                        lanes.lane_of_rank[idx.rank[pos]])
    pos_ok = lane_all >= 0
    rv = regions.RegionView(pos[pos_ok], rv.start[pos_ok], rv.end[pos_ok], rv.threshold_ns)
    pos = rv.positions
    lane = lane_all[pos_ok].astype(np.float64)
    half = regions.region_half(ri.nest[pos])
    x0, x1 = to_s(rv.start), to_s(rv.end)
    x1 = x1 - np.minimum(GAP_PX * s_per_px, 0.25 * (x1 - x0))  # neighbours stay apart
    y0, y1 = lane - half, lane + half
    shapes = []
    codes = idx.fcode[pos]
    for code in np.unique(codes):
        sel = np.flatnonzero(codes == code)
        path = "".join(f"M{a!r},{b!r}H{c!r}V{d!r}H{a!r}Z" for a, b, c, d in zip(
            x0[sel].tolist(), y0[sel].tolist(), x1[sel].tolist(), y1[sel].tolist(),
            strict=True))
        c = palette.colours(idx.functions)[idx.functions[int(code)]]
        shapes.append({"type": "path", "name": f"region {idx.functions[int(code)]}",
                       "xref": "x", "yref": "y", "layer": "between", "path": path,
                       "fillcolor": palette.blend(c, towards="#ffffff", amount=0.7),
                       "line": {"color": c, "width": 1}})
    k = np.clip(np.ceil((x1 - x0) / (REGION_HOVER_PX * s_per_px)), 1, 16).astype(np.int64)
    which = np.repeat(np.arange(len(pos)), k)
    step = np.arange(len(which)) - np.repeat(np.cumsum(k) - k, k)  # 0..k-1 per region
    hx = x0[which] + (x1 - x0)[which] * (step + 0.5) / k[which]
    hy = y0[which] + regions.BAND / 2
    return shapes, _scatter(REGION_HOVER, hx, hy, mode="none", hoveron="points",
                            showlegend=False, customdata=ri.row[pos][which], hoverinfo="none")


def overview(model: TraceModel, view: View, width_px: int = 1200) -> Figure:
    """The whole run, small, with the current window marked."""
    idx = model.index
    full = View(idx.origin / 1e9, (idx.origin + model.duration) / 1e9)
    t0 = 0
    t1 = model.duration
    v = lod.query(model.lane_index, t0, t1, max(width_px - MARGIN_L - MARGIN_R, 50),
                  max_exact=0)
    trace = _summary_trace(model, v, lambda t: (np.asarray(t) + idx.origin) / 1e9)
    layout = dict(
        height=90, showlegend=False, dragmode="zoom",
        margin={"l": MARGIN_L, "r": MARGIN_R, "t": 4, "b": 22}, plot_bgcolor=palette.COMPUTE,
        xaxis={"range": [full.t0, full.t1], "exponentformat": "none"},
        yaxis={"range": [len(model.lanes.ranks) - 0.5, -0.5], "fixedrange": True,
               "showticklabels": False, "title": {"text": "whole run", "font": {"size": 10}}},
        shapes=[window_shape(view)])
    return {"data": [trace], "layout": layout}


def window_shape(view: View) -> dict:
    return {"type": "rect", "xref": "x", "yref": "paper", "x0": view.t0, "x1": view.t1,
            "y0": 0, "y1": 1, "line": {"color": "#000000", "width": 2},
            "fillcolor": "rgba(255,255,255,0)"}
