"""The time-resolved strip above a panel's timeline: the breakdown (compute /
communication / synchronization / I/O) per iteration of the main loop, or per time bin
where no loop is detected, as stacked bars on the timeline's time axis.

It follows the timeline: its x-range is the timeline's window. Clicking a bar zooms the
timeline to that iteration (or bin). The bars come from the trace's analysis session
(`per_iteration`, `time_bins`: the JSON's `iterations` and `time_bins`), computed once
per trace.

How it is drawn: each part's bars are ONE filled polygon (geometry.rects, as the timeline
draws its states), stacked in PARTS order, and one undrawn point per bar (at its centre,
half its height) carries the hover text and takes the click. As Plotly bars (one SVG
element per bar and part, up to 4 x 2000) the strip's first draw was one 0.25-1.2 s task
right after the timeline's, during which the page took no zoom (docs/webui.md); as
polygons it is a few SVG paths.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd
from dash import MATCH, Dash, Input, Output, Patch, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from mpiscope import numbers
from mpiscope.analysis import breakdown
from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.render import palette
from mpiscope_webui import inputs
from mpiscope_webui.geometry import rects, typed
from mpiscope_webui.model import TraceModel
from mpiscope_webui.timeline import MARGIN_L, MARGIN_R, View

MAX_BARS = 2000  # more iterations than this are drawn in groups of consecutive ones
HEIGHT = 150
HEADROOM = 1.05  # a shared y-range: the tallest bar just below the top
_lock = threading.Lock()


@dataclass
class Strip:
    """One bar per iteration (or time bin, or group of them): its span for zooming (ns,
    trace time, over all ranks), where it is drawn, and the seconds of each part per
    rank (the mean over ranks, so that a bar is about as tall as its iteration is long)."""

    unit: str  # "iteration" or "time bin"
    label: list[str]
    span_start: np.ndarray
    span_end: np.ndarray
    x0: np.ndarray  # drawn from x0 to x1 (ns): neighbours tile without overlapping
    x1: np.ndarray
    parts: pd.DataFrame  # <part>_s columns, one row per bar

    def __len__(self) -> int:
        return len(self.label)


def _iterations(model: TraceModel) -> Strip | None:
    s = model.session
    loop = s.loop
    per = s.per_iteration if loop is not None else None
    if loop is None or per is None or not len(per):
        return None
    it = per["iteration"].to_numpy()
    start, end = loop.starts[:, :-1][:, it], loop.starts[:, 1:][:, it]
    ranks = max(len(loop.ranks), 1)
    parts = pd.DataFrame({f"{p}_s": per[f"{p}_s"].to_numpy() / ranks
                          for p in PARTS if f"{p}_s" in per})
    # drawn between the ranks' mean boundaries: one rank's iteration ends where its next
    # begins, so the means tile too; zooming goes to all ranks' span
    return Strip("iteration", [f"iteration {int(i) + 1}" for i in it],
                 start.min(axis=0), end.max(axis=0),
                 start.mean(axis=0), end.mean(axis=0), parts)


def _time_bins(model: TraceModel) -> Strip:
    s = model.session
    tb = s.time_bins
    # time_bins counts from the earliest rank's measured start
    lo = int(breakdown.intervals(model.trace)["begin"].min())
    a = lo + np.rint(tb["t0_s"].to_numpy() * 1e9).astype(np.int64)
    z = lo + np.rint(tb["t1_s"].to_numpy() * 1e9).astype(np.int64)
    nranks = max(int(model.trace.num_ranks), 1)
    parts = pd.DataFrame({f"{p}_s": tb[f"{p}_s"].to_numpy() / nranks
                          for p in PARTS if f"{p}_s" in tb})
    return Strip("time bin", [f"time bin {i + 1}" for i in range(len(tb))], a, z,
                 a.astype(np.float64), z.astype(np.float64), parts)


def _grouped(st: Strip, most: int) -> Strip:
    """Consecutive bars in groups, at most `most` of them (sums of the parts)."""
    if len(st) <= most:
        return st
    k = -(-len(st) // most)
    g = np.arange(len(st)) // k
    first = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
    last = np.r_[first[1:] - 1, len(st) - 1]
    label = [f"{st.unit}s {a + 1}–{b + 1}" for a, b in zip(first, last, strict=True)]
    return Strip(st.unit, label, np.minimum.reduceat(st.span_start, first),
                 np.maximum.reduceat(st.span_end, first), st.x0[first], st.x1[last],
                 st.parts.groupby(g).sum().reset_index(drop=True))


def strip(model: TraceModel) -> Strip:
    """The model's strip, built on first use and kept on it (one per trace)."""
    got = getattr(model, "_strip", None)
    if got is None:
        built = _iterations(model)
        if built is None:
            built = _time_bins(model)
        built = _grouped(built, MAX_BARS)
        with _lock:
            got = getattr(model, "_strip", None)
            if got is None:
                got = model._strip = built  # type: ignore[attr-defined]
    return got


BARS = "bars"  # the hover/click trace's name: one point per bar


def top(model: TraceModel) -> float:
    """The tallest bar of the model's strip (s per rank), 0 without bars."""
    parts = strip(model).parts
    return float(parts.sum(axis=1).max()) if len(parts) and len(parts.columns) else 0.0


def shared_top(models: list[TraceModel]) -> float | None:
    """Compare mode: the tallest bar of both runs' strips, the top of both y-axes (bars
    compare across the panels); None for one run (its own scale)."""
    if len(models) < 2:
        return None
    tops = []
    for m in models:
        try:
            tops.append(top(m))
        except Exception:  # noqa: BLE001, S112 - that strip fails alone (the tabs list it)
            continue
    return max(tops, default=0.0) or None


def figure(model: TraceModel, view: View, y_top: float | None = None) -> dict:
    """The stacked bars, on the timeline's time axis and margins, showing its window;
    `y_top`: the y-axis' top (s), None: Plotly's own."""
    st = strip(model)
    x0, x1 = st.x0 / 1e9, st.x1 / 1e9
    centre = (x0 + x1) / 2
    data = []
    base = np.zeros(len(st))
    custom: list[list] = [[label] for label in st.label]
    lines = []
    for part in PARTS:
        col = f"{part}_s"
        if col not in st.parts:
            continue
        name = PART_LABELS[part]
        h = st.parts[col].to_numpy(np.float64)
        x, y = rects(x0, x1, base, base + h)
        data.append({"type": "scatter", "name": name, "x": typed(x), "y": typed(y, "f4"),
                     "fill": "toself", "fillcolor": palette.PART_COLOURS[part],
                     "mode": "none", "hoverinfo": "skip"})
        for row, v in zip(custom, h.tolist(), strict=True):
            row.append(numbers.seconds(v))  # the hover's text, as the formatter writes it
        lines.append(f"{name}: %{{customdata[{len(lines) + 1}]}} per rank")
        base = base + h
    data.append({"type": "scatter", "name": BARS, "x": typed(centre), "y": typed(base / 2),
                 "mode": "none", "hoveron": "points", "showlegend": False,
                 "customdata": custom,
                 "hovertemplate": "%{customdata[0]}<br>" + "<br>".join(lines) + "<extra></extra>"})
    title = (f"per {st.unit} (mean over ranks) — click a bar to zoom to it"
             if len(st) else "no breakdown over time")
    layout = {"height": HEIGHT,
              "margin": {"l": MARGIN_L, "r": MARGIN_R, "t": 26, "b": 20},
              "plot_bgcolor": "#ffffff", "paper_bgcolor": "#ffffff", "font": {"size": 11},
              "title": {"text": title, "font": {"size": 12}, "x": 0, "xref": "paper"},
              "showlegend": True, "legend": {"orientation": "h", "x": 1, "xanchor": "right",
                                             "y": 1.02, "yanchor": "bottom"},
              "xaxis": {"type": "linear", "range": [view.t0, view.t1], "showgrid": False,
                        "zeroline": False, "exponentformat": "none", "fixedrange": True,
                        "ticklabeloverflow": "allow"},
              "yaxis": {"title": {"text": "s"}, "fixedrange": True, "zeroline": False,
                        "rangemode": "tozero",
                        **({"range": [0.0, y_top * HEADROOM], "autorange": False}
                           if y_top and np.isfinite(y_top) else {})},
              # the bar under the pointer (its point nearest in x), as bars hover
              "dragmode": False, "hovermode": "x", "hoverdistance": -1,
              "meta": {"unit": st.unit, "bars": len(st)}}
    return {"data": data, "layout": layout}


def graph(panel: int) -> html.Div:
    return html.Div([dcc.Graph(id={"type": "strip", "panel": panel},
                               config={"displayModeBar": False, "scrollZoom": False,
                                       "responsive": False}),
                     # whether the bars are drawn: a zoom then only moves the x-range
                     dcc.Store(id={"type": "strip-drawn", "panel": panel}, data=False)],
                    className="strip")


def zoom_to(model: TraceModel, view: View, click: object) -> View | None:
    """The view zoomed to the clicked bar's span (None: not a bar of this strip)."""
    st = strip(model)
    if not isinstance(click, dict) or not isinstance(click.get("points"), list) \
            or not click["points"] or not isinstance(click["points"][0], dict):
        return None
    i = inputs.integer(click["points"][0].get("pointNumber"), 0, len(st))
    if i is None:
        return None
    out = View.from_dict(view.to_dict())
    out.t0, out.t1 = int(st.span_start[i]) / 1e9, int(st.span_end[i]) / 1e9
    out.y_range = None
    return out


def register(app: Dash, models: list[TraceModel]) -> None:
    n = len(models)

    @app.callback(Output({"type": "strip", "panel": MATCH}, "figure"),
                  Output({"type": "strip-drawn", "panel": MATCH}, "data"),
                  Input({"type": "view", "panel": MATCH}, "data"),
                  State({"type": "strip-drawn", "panel": MATCH}, "data"))
    def draw(view, drawn):
        p = inputs.output_panel(ctx.outputs_list, n)
        v = None if p is None else _view(models, p, view)
        if v is None:
            raise PreventUpdate
        if drawn is True:  # the bars are there: only the window moves (no figure sent)
            patch = Patch()
            patch["layout"]["xaxis"]["range"] = [v.t0, v.t1]
            return patch, no_update
        try:
            return figure(models[p], v, shared_top(models)), True
        except Exception:  # noqa: BLE001 - the analysis tabs list the error
            return no_update, no_update

    @app.callback(Output({"type": "view", "panel": MATCH}, "data", allow_duplicate=True),
                  Input({"type": "strip", "panel": MATCH}, "clickData"),
                  State({"type": "view", "panel": MATCH}, "data"), prevent_initial_call=True)
    def click(data, view):
        p = inputs.output_panel(ctx.outputs_list, n)
        v = None if p is None else _view(models, p, view)
        new = None if v is None else zoom_to(models[p], v, data)
        if new is None:
            raise PreventUpdate
        return new.to_dict()


def _view(models: list[TraceModel], p: int, data: object) -> View | None:
    """Panel p's view as the page sends it, checked (as Controller.view does)."""
    from mpiscope_webui import timeline
    from mpiscope_webui.controller import MIN_WINDOW_S, view_bounds

    model = models[p]
    return inputs.view(data, view_bounds(models), MIN_WINDOW_S, len(model.trace.calls),
                       timeline.curve_names(model), len(model.streams.rank),
                       model.trace.num_ranks)
