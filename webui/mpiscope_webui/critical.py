"""The run's critical path in the web UI: highlighted on the timeline (switched on and off
by a checkbox per panel) and its profile in the "Critical path" tab.

The path comes from the trace's analysis session (`Analysis.critical_path`, the JSON's
`critical_path`), computed once per trace. For drawing it is reduced once to stretches:
runs of consecutive path segments on one rank, joined by a jump (a message or collective
dependency) from one rank's lane to another's. A view sends the stretches of its window
at the timeline's level of detail: those shorter than a pixel are merged per (pixel
column, lane), and the jumps per (pixel column, from lane, to lane), so a long trace
sends at most a few per pixel column, never every segment.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from dash import MATCH, Dash, Input, Output, State, ctx, dash_table, dcc, html
from dash.exceptions import PreventUpdate

from mpiscope import numbers
from mpiscope.analysis.critical_path import CriticalPath
from mpiscope.render import palette
from mpiscope_webui import inputs, windowstats
from mpiscope_webui.geometry import rects, typed
from mpiscope_webui.model import TraceModel

PATH, EDGES = "critical path", "critical path edges"  # names of the overlay's curves
COLOUR = palette.CRITICAL  # apart from every function colour it is drawn over
BAND = 0.09  # half the height of the highlight, in lanes (states are 0.42)
PROFILE_ROWS = 200  # the tab lists the path's largest entries, up to this many
TOGGLE = "cp-toggle"
JUMPS_PER_PX = 4  # jumps a pixel column shows one by one; more become one line
_lock = threading.Lock()


@dataclass
class PathIndex:
    """The critical path as stretches on one rank each, in path order (trace times: the
    path's clock-skew corrected times minus each rank's offset, relative to the state
    index's origin)."""

    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray
    max_skew: int  # largest |offset|: how far trace times may stray from path order
    path: CriticalPath

    @classmethod
    def build(cls, path: CriticalPath, offsets: dict[int, int], origin: int) -> PathIndex:
        s = path.segments
        rank = s["rank"].to_numpy(np.int64)
        start, end = s["start"].to_numpy(np.int64), s["end"].to_numpy(np.int64)
        # consecutive segments on one rank are one stretch (the path runs on through it)
        new = np.r_[True, rank[1:] != rank[:-1]] if len(rank) else np.empty(0, bool)
        first = np.flatnonzero(new)
        last = np.r_[first[1:] - 1, len(rank) - 1] if len(first) else first
        off = np.zeros(int(rank.max(initial=-1)) + 1, np.int64)
        for r, o in offsets.items():
            if 0 <= int(r) < len(off):
                off[int(r)] = int(o)
        r = rank[first]
        return cls(r, start[first] - off[r] - origin, end[last] - off[r] - origin,
                   int(np.abs(off).max(initial=0)), path)


def path_index(model: TraceModel) -> PathIndex:
    """The model's path index, built on first use and kept on the model (one per trace,
    shared by every browser session)."""
    got = getattr(model, "_critical_index", None)
    if got is None:
        session = model.session
        path = session.critical_path
        offsets = session.wait_states.skew.offsets_ns
        with _lock:
            got = getattr(model, "_critical_index", None)
            if got is None:
                got = PathIndex.build(path, offsets, model.index.origin)
                model._critical_index = got  # type: ignore[attr-defined]
    return got


@dataclass
class PathView:
    """What one view draws of the path, ns from the origin: stretches as (lane, start,
    end) bars, and jumps from one lane to another (times on each side)."""

    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    jump_from: np.ndarray  # lanes
    jump_to: np.ndarray
    jump_t0: np.ndarray
    jump_t1: np.ndarray
    stretches_total: int  # in the window before merging


def _runs(lane: np.ndarray, col: np.ndarray, s: np.ndarray, e: np.ndarray, ncols: int,
          t0: int, px_ns: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cells (lane, pixel column) merged along each lane where columns follow each other:
    (lane, start, end) per run, to the pixel (and to the ns at a lane's first and last)."""
    nl = int(lane.max()) + 1
    grid = np.zeros((nl, ncols + 2), bool)  # a free column each side: runs end there
    grid.reshape(-1)[lane * (ncols + 2) + col + 1] = True
    edge = np.diff(grid.view(np.int8), axis=1)
    rl, rc0 = np.nonzero(edge == 1)  # run from column rc0 ...
    _, rc1 = np.nonzero(edge == -1)  # ... to before rc1 (nonzero goes lane by lane)
    first = np.full(nl, np.iinfo(np.int64).max)
    last = np.full(nl, np.iinfo(np.int64).min)
    np.minimum.at(first, lane, s)
    np.maximum.at(last, lane, e)
    rs = np.maximum((t0 + rc0 * px_ns).astype(np.int64), first[rl])
    re = np.minimum((t0 + rc1 * px_ns).astype(np.int64), last[rl])
    return rl, rs, re


def query(pi: PathIndex, t0: int, t1: int, plot_px: int,
          lane_of: np.ndarray | None = None) -> PathView:
    """The path in [t0, t1) at the timeline's level of detail: stretches at least a pixel
    long one by one; shorter ones merged per (pixel column, lane), and those cells along
    each lane into runs; jumps one by one, except in a pixel column with more than
    JUMPS_PER_PX of them: there one line over the lanes they span."""
    t0, t1 = sorted((int(t0), int(t1)))
    t1 = max(t1, t0 + 1)
    plot_px = max(int(plot_px), 1)
    if lane_of is None:
        lane_of = np.arange(int(pi.rank.max(initial=-1)) + 1)
    # stretches are in path order; trace times may stray from it by the clock offsets
    lo = max(int(np.searchsorted(pi.end, t0 - pi.max_skew, side="left")) - 1, 0)
    hi = int(np.searchsorted(pi.start, t1 + pi.max_skew, side="right"))
    k = np.arange(lo, hi)
    k = k[(pi.end[lo:hi] > t0) & (pi.start[lo:hi] < t1)]
    lane = lane_of[pi.rank[k]]
    s, e = np.maximum(pi.start[k], t0), np.minimum(pi.end[k], t1)
    # jumps: the end of stretch i joins the start of stretch i + 1 (both in the window)
    if len(k) and k[-1] - k[0] == len(k) - 1:  # all consecutive (no skew): every pair
        nxt = k[:-1]
    else:
        nxt = k[:-1][np.diff(k) == 1] if len(k) > 1 else np.empty(0, np.int64)
    jf, jt = lane_of[pi.rank[nxt]], lane_of[pi.rank[nxt + 1]]
    j0, j1 = pi.end[nxt], pi.start[nxt + 1]
    px_ns = (t1 - t0) / plot_px
    short = (e - s) * plot_px < (t1 - t0)
    if short.any():
        sel = np.flatnonzero(short)
        col = np.minimum((s[sel] - t0) * plot_px // (t1 - t0), plot_px - 1)
        rl, rs, re = _runs(lane[sel], col, s[sel], e[sel], plot_px, t0, px_ns)
        keep = np.flatnonzero(~short)
        lane, s, e = np.r_[lane[keep], rl], np.r_[s[keep], rs], np.r_[e[keep], re]
    if len(jf) > plot_px:
        jcol = (np.clip(j0, t0, t1 - 1) - t0) * plot_px // (t1 - t0)
        per_col = np.bincount(jcol, minlength=plot_px)
        dense = per_col[jcol] > JUMPS_PER_PX
        if dense.any():  # many ways back and forth in one column: one line over them
            c = jcol[dense]
            top = np.full(len(per_col), np.iinfo(np.int64).max)
            bottom = np.full(len(per_col), -1)
            np.minimum.at(top, c, np.minimum(jf[dense], jt[dense]))
            np.maximum.at(bottom, c, np.maximum(jf[dense], jt[dense]))
            cols = np.flatnonzero(bottom >= 0)
            mid = (t0 + (cols + 0.5) * px_ns).astype(np.int64)
            sparse = ~dense
            jf, jt = np.r_[jf[sparse], top[cols]], np.r_[jt[sparse], bottom[cols]]
            j0, j1 = np.r_[j0[sparse], mid], np.r_[j1[sparse], mid]
    return PathView(lane, s, e, jf, jt, j0, j1, len(k))


def enabled(value: object) -> bool:
    """The checkbox's value as Dash sends it: ["on"] when ticked."""
    v = inputs.strings(value)
    return bool(v) and "on" in v


def overlay(model: TraceModel, figure: dict, t0_s: float, t1_s: float, width_px: int,
            margin_px: int, lane_of_rank: np.ndarray | None = None) -> tuple[dict, str]:
    """The timeline `figure` with the path's curves appended (after every other curve,
    so that the legend's curve numbers stay as they are; they have no legend entry), and
    what the status line says about them."""
    try:
        pi = path_index(model)
    except Exception as err:  # noqa: BLE001 - the timeline is drawn without it
        return figure, f" · critical path unavailable ({type(err).__name__})"
    origin = model.index.origin
    t0 = int(round(t0_s * 1e9)) - origin
    t1 = int(round(t1_s * 1e9)) - origin
    plot_px = max(width_px - margin_px, 50)
    lane_of = model.lanes.lane_of_rank if lane_of_rank is None else lane_of_rank
    pv = query(pi, t0, t1, plot_px, lane_of)
    # ranks not shown (lane -1): their stretches and the jumps to or from them left out
    on = pv.lane >= 0
    jon = (pv.jump_from >= 0) & (pv.jump_to >= 0)
    pv = PathView(pv.lane[on], pv.start[on], pv.end[on], pv.jump_from[jon], pv.jump_to[jon],
                  pv.jump_t0[jon], pv.jump_t1[jon], pv.stretches_total)

    def to_s(t):
        return (np.asarray(t, np.float64) + origin) / 1e9

    ly = pv.lane.astype(np.float64)
    x, y = rects(to_s(pv.start), to_s(pv.end), ly - BAND, ly + BAND)
    if not len(x):
        x, y = np.array([t0_s]), np.array([-100.0])
    # jumps as line pieces separated by gaps (NaN)
    n = len(pv.jump_from)
    jx = np.full(3 * n, np.nan)
    jy = np.full(3 * n, np.nan)
    jx[0::3], jx[1::3] = to_s(pv.jump_t0), to_s(pv.jump_t1)
    jy[0::3], jy[1::3] = pv.jump_from, pv.jump_to
    if not n:
        jx, jy = np.array([t0_s]), np.array([-100.0])
    fig = dict(figure)
    fig["data"] = [*figure["data"],
                   {"type": "scatter", "name": PATH, "x": typed(x), "y": typed(y, "f4"),
                    "mode": "none", "fill": "toself", "fillcolor": COLOUR,
                    "hoverinfo": "skip", "showlegend": False},
                   {"type": "scatter", "name": EDGES, "x": typed(jx), "y": typed(jy, "f4"),
                    "mode": "lines", "line": {"color": COLOUR, "width": 2},
                    "connectgaps": False, "hoverinfo": "skip", "showlegend": False}]
    status = (f" · critical path: {len(pv.lane)} stretches, {n} jumps drawn "
              f"({pv.stretches_total} in the window)")
    return fig, status


def toggle(panel: int) -> dcc.Checklist:
    return dcc.Checklist(id={"type": TOGGLE, "panel": panel},
                         options=[{"label": " critical path", "value": "on"}], value=[],
                         className="cp-toggle", inline=True)


# -- the profile tab ----------------------------------------------------------------------
def _fmt(s: float) -> str:
    return numbers.seconds(s, digits=4)


# the profile table's columns (windowstats.shown: one unit for the time column)
PROFILE_LABELS: windowstats.Labels = {
    "name": ("on the path", "t"), "callsite": ("call site", "t"),
    "before": ("burst ends at", "t"), "time_s": ("time", "s"), "share": ("% of path", "%")}


def profile(model: TraceModel, panel: int, label: str = "") -> list:
    """The path's length, its profile (time per function / call site / compute burst)
    and each rank's share of it."""
    try:
        path = model.session.critical_path
    except Exception as err:  # noqa: BLE001 - one line for the user, the rest still works
        return [html.Div(f"critical path unavailable — {type(err).__name__}: {err}"
                         .splitlines()[0], className="error")]
    prof = path.profile()
    shown = prof.head(PROFILE_ROWS)
    head = [html.H4(label)] if label else []
    summary = (f"{_fmt(path.length_ns / 1e9)} from the first rank's start to the last "
               f"rank's end · {len(path.segments):,} segments · {path.rank_switches:,} "
               f"jumps between ranks")
    note = ([html.Div(f"the {PROFILE_ROWS} largest of {len(prof)} entries", className="muted")]
            if len(prof) > PROFILE_ROWS else [])
    rows = pd.DataFrame({"name": shown["name"].astype(str),
                         "callsite": shown["callsite"].fillna("").astype(str),
                         "before": shown["before"].fillna("").astype(str),
                         "time_s": shown["time_s"].astype(float),
                         "share": 100 * shown["share"].astype(float)})
    data, columns = windowstats.shown(rows, PROFILE_LABELS)
    table = dash_table.DataTable(
        id={"type": "cp-table", "panel": panel}, data=data, columns=columns,
        sort_action="native", page_action="none", **windowstats.EXPORT,
        style_table={"maxHeight": "420px", "overflowY": "auto"},
        style_cell=windowstats.CELL_STYLE, style_header=windowstats.HEADER_STYLE,
        style_cell_conditional=windowstats.text_left(columns))
    fig = _per_rank_figure(path.per_rank())
    return [*head, html.Div(summary, className="muted cp-summary"), *note, table,
            dcc.Graph(figure=fig, id={"type": "cp-ranks", "panel": panel})]


def _per_rank_figure(pr: pd.DataFrame) -> go.Figure:
    """Each rank's time on the path, computing and in MPI, in one unit (the axis title's),
    the hover as the one number formatter writes it."""
    col = numbers.Column.of([*pr["compute_s"], *pr["mpi_s"]], "s")
    fig = go.Figure()
    x = [f"rank {r}" for r in pr["rank"]]
    share = 100 * pr["share"].to_numpy()
    for key, name, colour, what in (
            ("compute_s", "compute", palette.PART_COLOURS["compute"], "computing on it"),
            ("mpi_s", "MPI", COLOUR, "in MPI on it")):
        text = [numbers.seconds(v) for v in pr[key]]
        fig.add_bar(x=x, y=pr[key] / col.scale, name=name, marker_color=colour,
                    customdata=[[s, t] for s, t in zip(share, text, strict=True)],
                    hovertemplate=f"%{{x}} (%{{customdata[0]:.1f}}% of the path): "
                    f"%{{customdata[1]}} {what}<extra></extra>")
    fig.update_layout(template="plotly_white", barmode="stack", height=300,
                      title={"text": "Each rank's share of the path", "font": {"size": 14}},
                      yaxis={"title": col.header("time"), "exponentformat": "none"},
                      margin={"l": 60, "r": 20, "t": 40, "b": 45})
    return fig


def tab(n: int) -> dcc.Tab:
    return dcc.Tab(label="Critical path", value="critical", children=html.Div(
        [html.Div("analyzing…", id={"type": "tab-critical", "panel": p}, className="column")
         for p in range(n)], className="columns"))


def register(app: Dash, models: list[TraceModel]) -> None:
    n = len(models)

    # filled when opened, not at page load (as the other analysis tabs, app.py)
    @app.callback(Output({"type": "tab-critical", "panel": MATCH}, "children"),
                  Input("tabs", "value"), State({"type": "tab-critical", "panel": MATCH}, "id"))
    def critical_tab(tab, ident):
        p = inputs.output_panel(ctx.outputs_list, n)
        if tab != "critical" or p is None or inputs.panel(ident, n) != p:
            raise PreventUpdate
        return profile(models[p], p, models[p].label if n > 1 else "")
