"""`mpiscope serve` on a trace too big to hold: the timeline alone, out of core.

Every view comes from mpiscope_webui.pyramid (the multi-resolution summary and the
time-sorted detail beside the Parquet cache); no table of the trace is loaded, so memory
does not grow with the trace. What needs the whole trace in memory (the analysis tabs,
messages, details of a call, compare mode) is not offered in this mode.

`serve` uses it when MPISCOPE_TIMELINE_OOC=1, or, unless MPISCOPE_TIMELINE_OOC=0, when
the trace's cache says its tables would not fit: rows x BYTES_PER_ROW above the memory
available (/proc/meminfo) times MEMORY_SHARE.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import flask
import numpy as np
from dash import Dash, Input, Output, State, ctx, dcc, html
from dash.exceptions import PreventUpdate

from mpiscope import numbers
from mpiscope.errors import UserError
from mpiscope.render import palette
from mpiscope_webui import bundle, firstview, inputs, pyramid, safety_net, security, timeline
from mpiscope_webui.geometry import rects, typed

BYTES_PER_ROW = 72  # measured in memory at 10 M events (issue 17)
MEMORY_SHARE = 0.5  # the rest is for the analyses, the views and everyone else
DEFAULT_WIDTH = 1400
MIN_WINDOW_NS = 100
GRAPH_CONFIG = {"scrollZoom": True, "displaylogo": False, "responsive": False}


def memory_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def estimated_bytes(trace_dir: Path) -> int | None:
    """Memory the trace's tables would take, from its cache's row counts (None: no cache)."""
    try:
        _d, man = pyramid.find_cache(trace_dir)
    except UserError:
        return None
    rows = 0
    for info in man["tables"].values():
        parts = info.get("partitions")
        rows += sum(n for _v, n in parts) if parts else 0
    return rows * BYTES_PER_ROW


def trace_dir_of(arg: Path | str) -> Path:
    """`serve` takes a trace directory or its traces.otf2."""
    p = Path(arg)
    return p.parent if p.suffix == ".otf2" else p


def wanted(trace_dirs: list[Path | str]) -> bool:
    """Serve out of core? MPISCOPE_TIMELINE_OOC=1/0 decides; else the estimate does."""
    env = os.environ.get(pyramid.ENV, "")
    if env in ("0", "1"):
        return env == "1"
    avail = memory_available()
    need = [estimated_bytes(trace_dir_of(d)) for d in trace_dirs]
    return avail is not None and any(n is not None and n > avail * MEMORY_SHARE
                                     for n in need)


def open_pyramid(trace_dir: Path) -> pyramid.Pyramid:
    """The trace's pyramid, built (Dask) if missing or stale. Without a cache the trace is
    converted first: in memory today (out-of-core conversion is the Dask engine's)."""
    try:
        pyramid.find_cache(trace_dir)
    except UserError:
        from mpiscope.archive import reader

        reader.load(trace_dir)
    return pyramid.Pyramid.open(trace_dir)


def create_app(trace_dir: Path | str, *, guard: security.Guard | None = None) -> Dash:
    trace_dir = trace_dir_of(trace_dir)
    p = open_pyramid(trace_dir)
    man = json.loads((p.path / "manifest.json").read_text())
    guard = guard or security.Guard.loopback()
    server = flask.Flask("mpiscope_webui", static_folder=None)
    security.install(server, guard)
    app = firstview.Page("mpiscope_webui", server=server,
                         assets_folder=str(Path(__file__).parent / "assets"),
                         title="mpiscope", update_title=None, serve_locally=True,
                         suppress_callback_exceptions=True,
                         on_error=safety_net.callback_failed,
                         assets_ignore=bundle.assets_ignore())
    app.index_string = firstview.index_string(app.config.requests_pathname_prefix)
    safety_net.install(server)
    bundle.install_compression(server)
    bundle.install_compile_hints(server, lambda: app.compile_hints)
    full = [p.origin / 1e9, (p.origin + p.span - 2) / 1e9]
    info = (f"{numbers.count(p.num_ranks, 'rank')} · {numbers.seconds((p.span - 2) / 1e9, 4)} · "
            f"{sum(man['calls']):,} MPI "
            f"calls · out-of-core timeline (analyses need `mpiscope analyze --engine dask`)")

    @functools.lru_cache(maxsize=16)  # a few widths, not one per resize forever
    def first(width: int) -> tuple[dict, str]:
        """The whole run for `width`: once for the page's still picture and its layout."""
        return figure(p, full[0], full[1], width)

    def still(width: int) -> firstview.StaticView:
        fig, status = first(width)
        return firstview.StaticView([Path(trace_dir).name], [firstview.StaticPanel(
            Path(trace_dir).name, info, status, [("timeline", fig)])], GRAPH_CONFIG)

    def layout() -> html.Div:
        # the whole run, drawn for the page's width, is in the layout (firstview.py)
        width = firstview.page_width(DEFAULT_WIDTH)
        fig, status = first(width)
        return html.Div([
            html.Div([html.H1("mpiscope"), html.Span(Path(trace_dir).name,
                                                     className="muted")], className="header"),
            dcc.Store(id="boot", data=0), dcc.Store(id="viewport", data=width),
            dcc.Store(id="ooc-view", data=full),
            html.Div(html.Div([
                html.Div([html.H3(Path(trace_dir).name, className="trace-label"),
                          html.Span(info, className="muted")], className="panel-head"),
                html.Div(status, id="ooc-status", className="status"),
                html.Div(dcc.Graph(id="ooc-timeline", className="timeline", figure=fig,
                                   config=GRAPH_CONFIG), className="timeline-wrap"),
            ], className="panel", id="panel-0"), id="timelines"),
        ], className="page")

    app.layout = layout
    app.first_view = still
    app.clientside_callback(firstview.MEASURE_WIDTH, Output("viewport", "data"),
                            Input("boot", "data"), State("viewport", "data"))

    # one callback from the zoom to its figure: a separate one for the window (relayout →
    # view store → figure) cost the page a second round trip per zoom. Not at page load:
    # the first view is in the layout.
    @app.callback(Output("ooc-timeline", "figure"), Output("ooc-status", "children"),
                  Output("ooc-view", "data"),
                  Input("ooc-timeline", "relayoutData"), Input("viewport", "data"),
                  State("ooc-view", "data"), prevent_initial_call=True)
    def render(rd, width, view):
        width = inputs.width_px(width, DEFAULT_WIDTH)
        fired = {t["prop_id"] for t in ctx.triggered}
        window = navigate(rd, view) if "ooc-timeline.relayoutData" in fired else None
        if window is None:
            if "viewport.data" not in fired:
                raise PreventUpdate
            window = current(view)  # a new width: the same window, new pixel bins
        a, b = window
        fig, status = figure(p, a, b, width)
        return fig, status, [a, b]

    def navigate(rd, view) -> list[float] | None:
        """The window a relayout asks for (None: it asks for none, or the same one)."""
        r = inputs.relayout(rd)
        if r.reset:
            return None if current(view) == full else full
        if r.x is None:
            return None
        a, b = clamp(*r.x)
        return None if [a, b] == current(view) else [a, b]

    def current(view) -> list[float]:
        """The window the page shows (its store), checked: whatever the page sends."""
        if not isinstance(view, list) or len(view) != 2:
            return full
        a, b = (inputs.number(x) for x in view)
        return full if a is None or b is None else clamp(a, b)

    def clamp(a: float, b: float) -> list[float]:
        """A window within a run's length of the run, not empty."""
        run = full[1] - full[0]
        a, b = sorted((min(max(a, full[0] - run), full[1] + run),
                       min(max(b, full[0] - run), full[1] + run)))
        return [a, max(b, a + MIN_WINDOW_NS / 1e9)]

    bundle.warm(server, guard.token)  # Dash set up before any browser asks
    app.pyramid = p  # for tests and benchmarks
    return app


def figure(p: pyramid.Pyramid, a: float, b: float, width_px: int) -> tuple[dict, str]:
    """The timeline of [a, b] (s) as a Plotly figure, and its status line."""
    plot_px = max(width_px - timeline.MARGIN_L - timeline.MARGIN_R, 50)
    out = pyramid.query(p, int(round(a * 1e9)) - p.origin, int(round(b * 1e9)) - p.origin,
                        plot_px)
    v = out.view
    origin = p.origin if out.index is None else out.index.origin
    names = p.functions if out.index is None else out.index.functions

    def to_s(t):
        return (np.asarray(t, dtype=np.float64) + origin) / 1e9

    levels = timeline.summary_levels(len(names))
    shade = np.minimum((np.clip(v.busy_fraction, 0, 1) * levels).astype(np.int64), levels - 1)
    z = np.where(v.dominant >= 0, 1 + v.dominant * levels + shade, 0)
    if not z.any():
        z = np.zeros((1, 1), np.int64)
    dx = (v.edges[-1] - v.edges[0]) / max(v.nbins, 1)
    traces = [{"type": "heatmap", "z": typed(z, "u1" if len(names) * levels <= 255 else "u2"),
               "x0": float(to_s(v.edges[0] + dx / 2)), "dx": dx / 1e9, "y0": 0, "dy": 1,
               "zmin": 0, "zmax": max(len(names) * levels, 1), "zsmooth": False,
               "colorscale": timeline._colourscale(names), "showscale": False,
               "hoverinfo": "none", "name": "summary", "showlegend": False}]
    rank = out.index.rank[v.states] if out.index is not None else np.empty(0, np.int64)
    fcode = out.index.fcode[v.states] if out.index is not None else np.empty(0, np.int64)
    depth = out.index.depth[v.states] if out.index is not None else np.empty(0, np.int64)
    half = np.maximum(timeline.HALF - timeline.NEST * depth, 0.08)
    xs0, xs1 = to_s(v.state_start), to_s(v.state_end)
    cs = palette.colours(names)
    for code, name in enumerate(names):
        sel = fcode == code
        x, y = rects(xs0[sel], xs1[sel], rank[sel] - half[sel], rank[sel] + half[sel])
        if not len(x):
            x, y = np.array([a]), np.array([-100.0], np.float32)  # keeps its legend entry
        traces.append({"type": "scatter", "name": name, "x": typed(x), "y": typed(y, "f4"),
                       "fill": "toself", "fillcolor": cs[name], "mode": "none",
                       "hoverinfo": "skip"})
    n = p.num_ranks
    lane_px = int(np.clip(560 / max(n, 1), 8, 28))
    layout = {
        "height": 110 + n * lane_px, "plot_bgcolor": palette.COMPUTE, "showlegend": True,
        "margin": {"l": timeline.MARGIN_L, "r": timeline.MARGIN_R, "t": 50, "b": 40},
        "dragmode": "zoom", "font": {"size": 11},
        "legend": {"orientation": "h", "x": 0, "y": 1.01, "yanchor": "bottom"},
        # tick labels as timeline.render draws them: not measured on every draw
        "xaxis": {"range": [a, b], "title": {"text": "time (s)"}, "exponentformat": "none",
                  **timeline.FIXED_TICKS},
        "yaxis": {"range": [n - 0.5, -0.5], "tickmode": "array", "tickvals": list(range(n)),
                  "ticktext": [f"rank {r}" for r in range(n)], "showgrid": False,
                  "zeroline": False, "fixedrange": True, **timeline.FIXED_TICKS,
                  "tickfont": {"size": max(6, min(11, lane_px - 1))}}}
    status = (f"{a:.6f} – {b:.6f} s · from the {out.source} · {len(v.states)} states drawn, "
              f"{v.summary_cells()} summary cells · {out.calls_read:,} calls read")
    return {"data": traces, "layout": layout}, status
