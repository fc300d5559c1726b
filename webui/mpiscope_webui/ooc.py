"""`mpiscope serve` on a trace too big to hold: the timeline and the whole run's analysis,
out of core.

Every view comes from mpiscope_webui.pyramid (the multi-resolution summary and the
time-sorted detail beside the Parquet cache); no table of the trace is loaded, so memory
does not grow with the trace. The lanes are chosen as in memory (the lane bar: ranks or
hosts shown, their order, a lane per thread, one lane per host; in the URL), from the
cache's small ranks table, the pyramid's cells per thread, and for "most waiting first"
the Dask engine's per-rank wait files (`<cache>/derived/waits`, computed once if
missing). The analysis tabs are the Dask engine's analysis of the whole run
(mpiscope_webui.ooctabs: `mpiscope analyze --engine dask` run once, niced, in a child
process when a page first asks, then the function profiles rank by rank); under the
scope bar (the visible window or the whole run, a rank set) the Functions, Breakdown,
Messages, Profiles and Call tree tabs follow the zoom and the rank set
(mpiscope_webui.oocwindow: the functions from the pyramid and its detail, the breakdown
and the messages from each rank's measured calls and sent messages that the profiles'
pass writes; mpiscope_webui.oocprofiles: the profiles and the call tree from each rank's
calls and user regions written by the same pass, for scopes of at most its bound). The
search (n / p), a click's call details and the partner jump are the in-memory page's
(navsearch, on the cache's rows read a rank at a time: mpiscope_webui.oocnav), as is the
keys' help. Compare mode needs both traces in memory and is not offered in this mode.

`serve` uses it when MPISCOPE_TIMELINE_OOC=1, or, unless MPISCOPE_TIMELINE_OOC=0, when
the trace's cache says its tables would not fit: rows x BYTES_PER_ROW above the memory
available (/proc/meminfo) times MEMORY_SHARE.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import flask
import numpy as np
from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from mpiscope import numbers
from mpiscope.archive import cache
from mpiscope.errors import UserError
from mpiscope.render import palette
from mpiscope.render.plottext import plot_text
from mpiscope_webui import (
    bundle,
    firstview,
    inputs,
    navsearch,
    oocnav,
    oocprofiles,
    ooctabs,
    oocwindow,
    pyramid,
    safety_net,
    security,
    timeline,
    windowstats,
)
from mpiscope_webui.app import (
    details_box,
    export_buttons,
    history_buttons,
    jump_pressed,
    keys_help,
    lane_bar,
    lane_px_of,
    search_bar,
    search_step,
    url_callbacks,
)
from mpiscope_webui.geometry import rects, typed
from mpiscope_webui.model import Lanes, LaneSpec
from mpiscope_webui.timeline import View

BYTES_PER_ROW = 72  # measured in memory at 10 M events (issue 17)
MEMORY_SHARE = 0.5  # the rest is for the analyses, the views and everyone else
DEFAULT_WIDTH = 1400
MIN_WINDOW_NS = 100
CURVES = ["summary"]  # a view's hidden curves: none can be hidden out of core
# selected calls outlined: the page selects two at most (a jump's pair); each is a read
# of its row, so a crafted view's hundreds are not all read
MAX_MARKED = 8
# showTips off: Plotly's "double-click on legend" notice covered the page's top right
GRAPH_CONFIG = {"scrollZoom": True, "displaylogo": False, "responsive": False,
                "showTips": False}


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


class LaneSource:
    """The lanes of the out-of-core timeline, from the cache's ranks table (rank, host)
    and the pyramid's streams; the waiting time per rank (for "most waiting first") from
    the Dask engine's per-rank wait files, read (or computed) on first use."""

    def __init__(self, trace_dir: Path, p: pyramid.Pyramid) -> None:
        from mpiscope.engines.daskcache import open_cache

        self.trace_dir = trace_dir
        self.p = p
        self.tables = open_cache(trace_dir)
        if self.tables is None:
            raise UserError(str(trace_dir), "no current Parquet cache of this trace")
        self.ranks = self.tables.small("ranks")[["rank", "host"]]
        self.count = p.streams.threads_of()
        self.default = Lanes.of_ranks(self.ranks, p.num_ranks, p.streams)
        self._wait: np.ndarray | None = None
        self._lock = threading.Lock()
        self._lanes: dict[LaneSpec, Lanes] = {}

    def host_of(self) -> dict[int, str]:
        return {int(r): str(h) for r, h in zip(self.ranks["rank"], self.ranks["host"],
                                               strict=True)}

    def wait_by_rank(self) -> np.ndarray:
        """ns waited per rank (the wait states' wait_ns summed), one file per rank read;
        the files are the Dask engine's (`mpiscope analyze --engine dask` leaves them),
        computed here on an in-process Dask cluster if missing."""
        with self._lock:
            if self._wait is None:
                from mpiscope.engines import waits

                ranks = self.tables.ranks_of("calls")

                def read(d: Path) -> np.ndarray:
                    w = np.zeros(self.p.num_ranks, np.float64)
                    for r in ranks:
                        w[r] = float(waits.read_rank(d, r)["wait_ns"].sum())
                    return w

                try:
                    self._wait = read(self.tables.dir / cache.DERIVED / "waits")
                except OSError:  # not there (or not whole): computed once, kept there
                    self._wait = read(self._compute_waits())
            return self._wait

    def _compute_waits(self) -> Path:
        from distributed import Client

        from mpiscope.engines import ranktasks

        with Client(processes=False, n_workers=1, threads_per_worker=os.cpu_count() or 1,
                    dashboard_address=None) as client:
            rt = ranktasks.RankTasks(client, self.tables)
            try:
                return Path(rt.wait_states.scratch)
            finally:
                rt.close()

    def lanes(self, spec: LaneSpec) -> Lanes:
        if spec == LaneSpec():
            return self.default
        with self._lock:
            got = self._lanes.get(spec)
        if got is None:
            wait = self.wait_by_rank() if spec.order == "wait" else None
            got = Lanes.of_ranks(self.ranks, self.p.num_ranks, self.p.streams, spec, wait)
            with self._lock:
                if len(self._lanes) > 32:
                    self._lanes.clear()
                self._lanes[spec] = got
        return got


def create_app(trace_dir: Path | str, *, guard: security.Guard | None = None,
               analyze: bool = True) -> Dash:
    """The out-of-core page; `analyze=False`: its tabs never start the analysis (the
    timeline benchmarks measure the timeline alone)."""
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
    lanes = LaneSource(trace_dir, p)
    calls = oocnav.OocCalls(lanes.tables)
    # the search's call sites and tags are counted rank by rank: not on the first
    # view's way (the dropdown lists the functions until then, search-poll below)
    threading.Thread(target=calls.search_options, daemon=True).start()
    info = (f"{numbers.count(p.num_ranks, 'rank')} · {numbers.seconds((p.span - 2) / 1e9, 4)} · "
            f"{sum(man['calls']):,} MPI "
            f"calls · out-of-core timeline (the tabs: the Dask engine's analysis of the whole run; "
            f"Functions, Breakdown, Messages, Profiles and Call tree follow the zoom)")

    @functools.lru_cache(maxsize=16)  # a few widths, not one per resize forever
    def first(width: int) -> tuple[dict, str]:
        """The whole run for `width`: once for the page's still picture and its layout."""
        return figure(p, full[0], full[1], width, lanes.default)

    def still(width: int) -> firstview.StaticView:
        fig, status = first(width)
        return firstview.StaticView([Path(trace_dir).name], [firstview.StaticPanel(
            Path(trace_dir).name, info, status, [("timeline", fig)])], GRAPH_CONFIG)

    def layout() -> html.Div:
        # the whole run, drawn for the page's width, is in the layout (firstview.py)
        width = firstview.page_width(DEFAULT_WIDTH)
        fig, status = first(width)
        return html.Div([
            html.Div([html.H1("mpiscope"), html.Span(Path(trace_dir).name, className="muted"),
                      history_buttons(), keys_help(1)], className="header"),
            dcc.Store(id="boot", data=0), dcc.Store(id="viewport", data=width),
            dcc.Store(id="url-pop"), dcc.Store(id="url-sync"),
            html.Div(html.Div([
                html.Div([html.H3(Path(trace_dir).name, className="trace-label"),
                          html.Span(info, className="muted"), export_buttons(0)],
                         className="panel-head"),
                dcc.Store(id={"type": "view", "panel": 0}, data=View(*full).to_dict()),
                html.Div(status, id="ooc-status", className="status"),
                search_bar(0, search_options()),
                dcc.Interval(id="search-poll", interval=1000,
                             disabled=calls.options_ready()),
                lane_bar(lanes.default, lanes.count, 0),
                # the run's extent: the keys zoom out no further (navigation.js)
                html.Div(dcc.Graph(id="ooc-timeline", className="timeline", figure=fig,
                                   config=GRAPH_CONFIG), className="timeline-wrap",
                         **{"data-run": json.dumps(full)}),
                details_box(0),
            ], className="panel", id="panel-0"), id="timelines"),
            windowstats.scope_bar(p.num_ranks),
            dcc.Store(id="ooc-filled"),
            dcc.Tabs(id="ooc-tabs", value="breakdown", className="tabs", children=[
                dcc.Tab(label=label, value=value) for label, value in ooctabs.TABS]),
            # as the in-memory tabs' columns: a wide table scrolls inside, not the page
            html.Div(html.Div(id="ooc-tab", className="column"), className="columns"),
            dcc.Interval(id="ooc-poll", interval=1000, disabled=False),
        ], className="page")

    def search_options() -> list[dict]:
        """The search's choices: all of them once counted, the functions until then."""
        if calls.options_ready():
            return calls.search_options()
        return [{"label": f, "value": f"f:{f}"} for f in p.functions]

    app.layout = layout
    app.first_view = still
    app.clientside_callback(firstview.MEASURE_WIDTH, Output("viewport", "data"),
                            Input("boot", "data"), State("viewport", "data"))
    url_callbacks(app)  # the window and the lanes in the URL, as in memory
    view_id = {"type": "view", "panel": 0}

    def checked(data: object) -> View | None:
        return inputs.view(data, (full[0], full[1]), MIN_WINDOW_NS / 1e9, calls.total,
                           CURVES, p.num_streams, p.num_ranks)

    # one callback from the zoom to its figure: a separate one for the window (relayout →
    # view store → figure) cost the page a second round trip per zoom. Not at page load:
    # the first view is in the layout. The view store is also an input: the lane bar and
    # a link's view change it
    @app.callback(Output("ooc-timeline", "figure"), Output("ooc-status", "children"),
                  Output(view_id, "data", allow_duplicate=True),
                  Input("ooc-timeline", "relayoutData"), Input("viewport", "data"),
                  Input(view_id, "data"), prevent_initial_call=True)
    def render(rd, width, stored):
        width = inputs.width_px(width, DEFAULT_WIDTH)
        got = [inputs.trigger(t.get("prop_id")) for t in ctx.triggered if isinstance(t, dict)]
        fired = {(str(g[0].get("type")) if isinstance(g[0], dict) else g[0], g[1])
                 for g in got if g is not None}
        v = checked(stored)
        if v is None:
            raise PreventUpdate
        view = [v.t0, v.t1]
        window = navigate(rd, view) if ("ooc-timeline", "relayoutData") in fired else None
        if window is None:
            # a new width, or the stored view changed (the lane bar, a link's view)
            if not fired & {("viewport", "data"), ("view", "data")}:
                raise PreventUpdate
            window = current(view)  # a new width or lanes: the same window
        a, b = window
        shown = lanes.lanes(v.lanes)
        fig, status = figure(p, a, b, width, shown, v.lane_px, marks_of(calls, p, v, shown))
        if [a, b] == view:
            return fig, status, no_update
        v.t0, v.t1 = a, b
        return fig, status, v.to_dict()

    # search, a click's details and the partner jump: the in-memory page's (navsearch),
    # on the cache's rows (oocnav)
    details_id = {"type": "details", "panel": 0}

    @app.callback(Output({"type": "search-what", "panel": 0}, "options"),
                  Output("search-poll", "disabled"), Input("search-poll", "n_intervals"),
                  prevent_initial_call=True)
    def search_choices(_tick):
        if not calls.options_ready():
            raise PreventUpdate
        return calls.search_options(), True

    @app.callback(Output(view_id, "data", allow_duplicate=True),
                  Output(details_id, "children", allow_duplicate=True),
                  Output({"type": "search-note", "panel": 0}, "children"),
                  Input({"type": "search", "panel": 0, "dir": ALL}, "n_clicks"),
                  State({"type": "search-what", "panel": 0}, "value"),
                  State("rankset", "value"), State(view_id, "data"),
                  prevent_initial_call=True)
    def search(_clicks, what, ranks, stored):
        v = checked(stored)
        step = search_step(ctx.triggered, what)
        if v is None or step is None:
            raise PreventUpdate
        if isinstance(step, str):
            return no_update, no_update, step
        rs = ooctabs.scope_of(p, v, windowstats.WINDOW, ranks).ranks
        got = navsearch.found_next(v, calls.matches(what, list(rs) if rs else None),
                                   step > 0, None if v.focus is None else
                                   calls.span(v.focus)[0], calls.total, calls.span,
                                   (full[0], full[1]))
        if got is None:
            return no_update, no_update, navsearch.none_found(what, step > 0)
        new, call = got
        return new.to_dict(), calls.details(0, call), ""

    @app.callback(Output(details_id, "children"), Input("ooc-timeline", "clickData"))
    def details(click):
        pt = inputs.point(click, 2)
        if pt is None or pt.curve != HOVER_CURVE or pt.customdata is None \
                or pt.customdata >= calls.total:
            return [html.Div("Zoom in until single calls are drawn, then click one for "
                             "its details.", className="muted")]
        return calls.details(0, pt.customdata)

    @app.callback(Output(view_id, "data", allow_duplicate=True),
                  Output(details_id, "children", allow_duplicate=True),
                  Input({"type": "jump", "panel": 0, "call": ALL, "also": ALL}, "n_clicks"),
                  State(view_id, "data"), prevent_initial_call=True)
    def partner(_clicks, stored):
        v = checked(stored)
        got = None if v is None else jump_pressed(ctx.triggered, calls.total, 1)
        if got is None:
            raise PreventUpdate
        call, also = got
        new = navsearch.focused(v, call, calls.span(call), also,
                                None if also is None else calls.span(also))
        return new.to_dict(), calls.details(0, call, came_from=also)

    results: list[ooctabs.Results] = []  # started by the first page that shows a tab
    started = threading.Lock()
    # the Call tree's metric and node, out of core (from each rank's rows, once written)
    oocprofiles.register(app, lambda: results[0].window_rows if results else None)

    @functools.lru_cache(maxsize=8)  # a tab switch or a lane change asks again
    def window_of(window: tuple[int, int], ranks: tuple[int, ...] | None
                  ) -> oocwindow.WindowStats:
        return oocwindow.window_stats(p, *window, ranks)

    # the tab follows the view (the zoom, the lanes shown), the scope and the rank set; it
    # is redrawn only when what it shows changes (a redraw resets the tables' sorting)
    @app.callback(Output("ooc-tab", "children"), Output("ooc-poll", "disabled"),
                  Output("ooc-filled", "data"),
                  Input("ooc-tabs", "value"), Input("ooc-poll", "n_intervals"),
                  Input(view_id, "data"), Input("scope", "value"), Input("rankset", "value"),
                  State("ooc-filled", "data"))
    def analysis_tab(name, _tick, stored, scope, ranks, filled):
        if not analyze:
            return (html.Div("The analysis is off for this server.", className="muted"),
                    True, no_update)
        with started:
            if not results:
                results.append(ooctabs.Results(trace_dir, start=analyze))
        r = results[0]
        # No early "nothing new" for a poll tick: when two calls of this callback overlap
        # (a zoom's and a tick's, under load), Dash puts back what the outputs held when
        # the later one started if it returns no update (plotly/dash#1861), which undid
        # the zoom's tab. Every call reads the current view, so the key below decides.
        # whatever the page sends: a tab's name, else the first tab
        name = name if isinstance(name, str) and name in dict(ooctabs.TABS).values() \
            else "breakdown"
        sc = ooctabs.scope_of(p, checked(stored), scope, ranks)
        key = f"{name}|{ooctabs.tab_key(name, sc)}|{r.done}"
        if key == filled:
            raise PreventUpdate
        return ooctabs.tab(r, name, sc, p, window_of), r.done, key

    @app.callback(Output(view_id, "data", allow_duplicate=True),
                  Input({"type": "lane-ranks", "panel": 0}, "value"),
                  Input({"type": "lane-order", "panel": 0}, "value"),
                  Input({"type": "lane-threads", "panel": 0}, "value"),
                  Input({"type": "lane-hosts", "panel": 0}, "value"),
                  State(view_id, "data"), prevent_initial_call=True)
    def lane_choice(chosen, order, threads, hosts, stored):
        v = checked(stored)
        new = None if v is None else inputs.lane_choice(
            v, chosen, order, threads, hosts, p.num_ranks, lanes.host_of(), lanes.count)
        if new is None or new.to_dict() == v.to_dict():
            raise PreventUpdate
        return new.to_dict()

    # the lane height: into the view, whose change redraws the window (render above)
    @app.callback(Output(view_id, "data", allow_duplicate=True),
                  Input({"type": "lane-px", "panel": 0}, "value"),
                  State(view_id, "data"), prevent_initial_call=True)
    def lane_height(px, stored):
        v = checked(stored)
        v = None if v is None else lane_px_of(v, px)
        if v is None:
            raise PreventUpdate
        return v.to_dict()

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
    app.lanes = lanes
    app.calls = calls
    app.results = results
    return app


HOVER_CURVE = 1  # the curve of the states' click targets (figure)


@dataclass
class Marks:
    """The calls a view selects (outlined) and the one it marks, as (start, end, lane)
    (s, s, lane) of those in a lane shown."""

    selected: list[tuple[float, float, int]]
    focus: tuple[float, float, int] | None


def marks_of(calls: oocnav.OocCalls, p: pyramid.Pyramid, v: View, lanes: Lanes) -> Marks:
    """The view's selected calls and its marked one, from the cache's rows."""
    def one(call: int) -> tuple[float, float, int] | None:
        c = calls.row(call)
        stream = p.streams.find(np.array([int(c["rank"])]), np.array([int(c["thread"])]))
        lane = int(lanes.lane_of_stream[stream[0]]) if stream[0] >= 0 else -1
        return (int(c["start"]) / 1e9, int(c["end"]) / 1e9, lane) if lane >= 0 else None

    sel = [m for m in (one(c) for c in v.selected[:MAX_MARKED]) if m is not None]
    return Marks(sel, None if v.focus is None else one(v.focus))


def figure(p: pyramid.Pyramid, a: float, b: float, width_px: int,
           lanes: Lanes, lane_px: int | None = None, marks: Marks | None = None
           ) -> tuple[dict, str]:
    """The timeline of [a, b] (s) as a Plotly figure with `lanes`, `lane_px` pixels a lane
    (None: from the number of lanes, as in memory), `marks` drawn as on the in-memory
    page, and its status line."""
    plot_px = max(width_px - timeline.MARGIN_L - timeline.MARGIN_R, 50)
    out = pyramid.query(p, int(round(a * 1e9)) - p.origin, int(round(b * 1e9)) - p.origin,
                        plot_px, shown=lanes.lane_of_stream >= 0)
    v = out.view
    origin = p.origin if out.index is None else out.index.origin
    names = p.functions if out.index is None else out.index.functions

    def to_s(t):
        return (np.asarray(t, dtype=np.float64) + origin) / 1e9

    levels = timeline.summary_levels(len(names))
    z = timeline.lane_z(v, lanes, len(names))  # the streams' cells added up per lane
    if not z.any():
        z = np.zeros((1, 1), np.int64)
    dx = (v.edges[-1] - v.edges[0]) / max(v.nbins, 1)
    traces = [{"type": "heatmap", "z": typed(z, "u1" if len(names) * levels <= 255 else "u2"),
               "x0": float(to_s(v.edges[0] + dx / 2)), "dx": dx / 1e9, "y0": 0, "dy": 1,
               "zmin": 0, "zmax": max(len(names) * levels, 1), "zsmooth": False,
               "colorscale": timeline._colourscale(names), "showscale": False,
               "hoverinfo": "none", "name": "summary", "showlegend": False}]
    stream = out.index.rank[v.states] if out.index is not None else np.empty(0, np.int64)
    rank = lanes.lane_of_stream[stream]  # the lane of each exact state (shown ones only)
    fcode = out.index.fcode[v.states] if out.index is not None else np.empty(0, np.int64)
    depth = out.index.depth[v.states] if out.index is not None else np.empty(0, np.int64)
    half = np.maximum(timeline.HALF - timeline.NEST * depth, 0.08)
    xs0, xs1 = to_s(v.state_start), to_s(v.state_end)
    # the states' centres, not drawn: what a click reaches (its call id), as in memory
    calls = out.index.call[v.states] if out.index is not None else np.empty(0, np.int64)
    traces.append({"type": "scatter", "name": "hover", "x": typed((xs0 + xs1) / 2),
                   "y": typed(rank, "f4"), "mode": "none", "hoveron": "points",
                   "showlegend": False, "customdata": [int(c) for c in calls],
                   "hoverinfo": "none"})
    cs = palette.colours(names)
    for code, name in enumerate(names):
        sel = fcode == code
        x, y = rects(xs0[sel], xs1[sel], rank[sel] - half[sel], rank[sel] + half[sel])
        if not len(x):
            x, y = np.array([a]), np.array([-100.0], np.float32)  # keeps its legend entry
        traces.append({"type": "scatter", "name": name, "x": typed(x), "y": typed(y, "f4"),
                       "fill": "toself", "fillcolor": cs[name], "mode": "none",
                       "hoverinfo": "skip"})
    n = len(lanes.ranks)
    lane_px = lane_px or int(np.clip(560 / max(n, 1), 8, 28))
    marks = marks or Marks([], None)
    s_per_px = (b - a) / plot_px
    sel = np.array(marks.selected, np.float64).reshape(-1, 3)
    traces.append(timeline.selected_curve(sel[:, 0], sel[:, 1], sel[:, 2], s_per_px, lane_px))
    boundaries = [i - 0.5 for i in range(1, n) if lanes.hosts[i] != lanes.hosts[i - 1]]
    top = timeline.top_margin(list(names), width_px)
    layout = {
        "height": 110 + n * lane_px + top - timeline.MARGIN_T, "plot_bgcolor": palette.COMPUTE,
        "showlegend": True,
        "margin": {"l": timeline.MARGIN_L, "r": timeline.MARGIN_R, "t": top, "b": 40},
        "dragmode": "zoom", "font": {"size": 11},
        "legend": {"orientation": "h", "x": 0, "y": 1.01, "yanchor": "bottom"},
        # tick labels as timeline.render draws them: not measured on every draw
        "xaxis": {"range": [a, b], "title": {"text": "time (s)"}, "exponentformat": "none",
                  **timeline.FIXED_TICKS},
        "yaxis": {"range": [n - 0.5, -0.5], "tickmode": "array", "tickvals": list(range(n)),
                  "ticktext": [plot_text(s) for s in lanes.labels()], "showgrid": False,
                  "zeroline": False, "fixedrange": True, **timeline.FIXED_TICKS,
                  "tickfont": {"size": max(6, min(11, lane_px - 1))}},
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y,
                    "line": {"color": "#555555", "width": 1, "dash": "dot"}}
                   for y in boundaries]
        + ([timeline.focus_rect(*marks.focus)] if marks.focus else [])}
    status = (f"{a:.6f} – {b:.6f} s · from the {out.source} · {len(v.states)} states drawn, "
              f"{v.summary_cells()} summary cells · {out.calls_read:,} calls read")
    return {"data": traces, "layout": layout}, status
