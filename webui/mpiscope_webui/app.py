"""The Dash app: `create_app(trace_dirs)` serves one trace, or two side by side (compare)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import flask
import numpy as np
from dash import ALL, MATCH, Dash, Input, Output, Patch, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from mpiscope import numbers
from mpiscope_webui import (
    bundle,
    calltreeview,
    compare,
    critical,
    firstview,
    inputs,
    navsearch,
    safety_net,
    security,
    strip,
    timeline,
    views,
    windowstats,
)
from mpiscope_webui.analysis import Panels, RunNotes
from mpiscope_webui.controller import Controller, parse_relayout
from mpiscope_webui.model import Lanes, TraceModel
from mpiscope_webui.timeline import View

ASSETS = Path(__file__).parent / "assets"
LANE_HEIGHTS = (("auto", 0), ("S", 12), ("M", 24), ("L", 40))  # px a lane
DEFAULT_WIDTH = 1400
DIFFERENCES_PENDING = "analyzing…"  # the Differences tab until it is first opened
# showTips off: Plotly's "double-click on legend" notice covered the critical-path checkbox
GRAPH_CONFIG = {"scrollZoom": True, "displaylogo": False, "responsive": False,
                "showTips": False,
                "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}


def load_models(trace_dirs: Sequence[Path | str], *, skip_frames: str = "",
                group_by: str = "frame") -> list[TraceModel]:
    from mpiscope.archive import reader

    return [TraceModel.build(reader.load(Path(d)), skip_frames=skip_frames,
                             group_by=group_by) for d in trace_dirs]


def create_app(trace_dirs: Sequence[Path | str] | None = None, *,
               models: list[TraceModel] | None = None, analyze_now: bool = False,
               guard: security.Guard | None = None, plotly: str = bundle.PLOTLY,
               compress: bool = True, still: bool = True) -> Dash:
    """The app for one or two traces (raises mpiscope.errors.UserError on bad input).
    `guard`: which Host headers and token requests need (default: loopback, no token).
    `plotly` (the vendored bundle the page loads, or "full": Dash's, bundle.PLOTLIES),
    `compress`, `still`: the page as before bundle.py and before the still first view
    (firstview.py), for benchmarks."""
    models = models if models is not None else load_models(trace_dirs or [])
    if not 1 <= len(models) <= 2:
        raise ValueError("serve one trace, or two to compare")
    for m in models:
        # analyses run in the background; the timeline does not wait for them
        if analyze_now:
            m.analysis()
            windowstats.warm(m)
        else:
            threading.Thread(target=_analyze, args=(m,), daemon=True).start()
    guard = guard or security.Guard.loopback()
    server = flask.Flask("mpiscope_webui", static_folder=None)
    security.install(server, guard)
    app = firstview.Page("mpiscope_webui", server=server, assets_folder=str(ASSETS),
                         title="mpiscope", update_title=None, serve_locally=True,
                         suppress_callback_exceptions=True,
                         on_error=safety_net.callback_failed,
                         assets_ignore=bundle.assets_ignore(plotly))
    app.index_string = firstview.index_string(app.config.requests_pathname_prefix)
    safety_net.install(server)
    if compress:
        bundle.install_compression(server)  # the smaller Plotly is in ASSETS (see bundle.py)
    bundle.install_compile_hints(server, lambda: app.compile_hints)
    ctl = Controller(models)
    # a function: each page load gets the current state (e.g. wait states ready or not)
    # and the first view drawn for its width
    app.layout = lambda: _layout(ctl, firstview.page_width(DEFAULT_WIDTH))
    if still:
        app.first_view = lambda width: _static_view(ctl, width)
    _callbacks(app, ctl)
    if compress:
        bundle.warm(server, guard.token)  # Dash set up before any browser asks
    app.controller = ctl  # for tests and benchmarks
    return app


def _analyze(m: TraceModel) -> None:
    m.analysis()
    windowstats.warm(m)  # the whole run's tables: what the tabs show first


def _info(m: TraceModel) -> str:
    return (f"{numbers.count(m.trace.num_ranks, 'rank')} on "
            f"{numbers.count(len(set(m.lanes.hosts)), 'host')} · "
            f"{numbers.seconds(m.duration / 1e9, 4)} · {len(m.trace.calls):,} MPI calls · "
            f"{len(m.trace.messages):,} messages · {m.trace.meta.creator or '?'}")


def _static_view(ctl: Controller, width: int) -> firstview.StaticView:
    n = len(ctl.models)
    panels = []
    for p, m in enumerate(ctl.models):
        fig, status, over = ctl.first_view(p, width)
        panels.append(firstview.StaticPanel(m.label, _info(m), status,
                                            [("overview", over), ("timeline", fig)]))
    return firstview.StaticView(["compare: A above, B below"] if n == 2 else [], panels,
                                GRAPH_CONFIG)


LANE_ORDERS = (("by host", "host"), ("by rank", "rank"), ("most waiting first", "wait"))


def _lane_bar(m: TraceModel, p: int) -> html.Div:
    return lane_bar(m.lanes, m.streams.threads_of(), p)


def lane_bar(lanes: Lanes, count: np.ndarray, p: int) -> html.Div:
    """Which lanes the timeline draws: a choice of ranks or hosts, their order, and (for
    ranks with several threads, `count` threads per rank) the ranks drawn with a lane per
    thread. `lanes`: the default lanes (every rank, by host)."""
    hosts = list(dict.fromkeys(lanes.hosts))
    rank_opts = ([{"label": f"host {h}", "value": f"h:{h}"} for h in hosts] if len(hosts) > 1
                 else []) + [{"label": label, "value": f"r:{int(r)}"}
                             for label, r in zip(lanes.labels(), lanes.ranks, strict=True)]
    parts = [
        html.Span("lanes", className="muted"),
        dcc.Dropdown(id={"type": "lane-ranks", "panel": p}, multi=True, options=rank_opts,
                     placeholder="all ranks (or choose ranks, hosts)",
                     className="lane-ranks"),
        dcc.RadioItems(id={"type": "lane-order", "panel": p}, value="host", inline=True,
                       className="lane-order",
                       options=[{"label": f" {t}", "value": v} for t, v in LANE_ORDERS]),
    ]
    threaded = np.flatnonzero(count > 1)
    # on every panel (the callback's input), seen only where a rank has several threads
    hide = {} if len(threaded) else {"display": "none"}
    parts += [html.Span("a lane per thread", className="muted lane-label", style=hide),
              html.Div(dcc.Dropdown(id={"type": "lane-threads", "panel": p}, multi=True,
                                    className="lane-threads", placeholder="threads together",
                                    options=[{"label": "all ranks", "value": -1}] + [
                                        {"label": f"rank {int(r)} ({int(count[r])} threads)",
                                         "value": int(r)} for r in threaded]), style=hide)]
    parts += [html.Span("one lane per host", className="muted lane-label"),
              dcc.Dropdown(id={"type": "lane-hosts", "panel": p}, multi=True,
                           className="lane-hosts", placeholder="a lane per rank",
                           options=[{"label": h, "value": h} for h in hosts])]
    return html.Div(parts, className="search lanes")


def export_buttons(p: int) -> html.Span:
    """Save panel `p`'s timeline as drawn, as SVG or PNG (assets/navigation.js finds the
    graph under #panel-p .timeline): the page in memory and out of core (ooc.py) alike."""
    return html.Span([html.Button(f"save {f.upper()}", className="export-image",
                                  title=f"the timeline as shown, as {f.upper()}",
                                  **{"data-format": f, "data-panel": p})
                      for f in ("svg", "png")], className="exports")


def lane_height_choice(p: int) -> list:
    """The lane height of panel `p` (px a lane, 0: from the number of lanes); the view's
    lane_px, set by each page's callback."""
    return [html.Span("lane height", className="muted lane-label"),
            dcc.RadioItems(id={"type": "lane-px", "panel": p}, value=0, inline=True,
                           className="lane-px", options=[{"label": f" {t}", "value": v}
                                                         for t, v in LANE_HEIGHTS])]


def history_buttons() -> html.Span:
    """◀ ▶: the browser's back and forward through the views in the URL (navigation.js)."""
    return html.Span([html.Button("◀", className="hist-back", title="previous view ( [ )"),
                      html.Button("▶", className="hist-forward", title="next view ( ] )")],
                     className="history")


def search_bar(p: int, options: list[dict]) -> html.Div:
    """Panel p's search (navsearch's values in `options`; ◀ ▶, or n / p in
    navigation.js) and lane height: the page in memory and out of core (ooc.py) alike."""
    return html.Div([
        dcc.Dropdown(id={"type": "search-what", "panel": p}, className="search-what",
                     options=options, placeholder="find a function, call "
                     "site, tag or communicator (on the chosen ranks)"),
        html.Button("◀ previous", id={"type": "search", "panel": p, "dir": -1},
                    n_clicks=0, className="search-prev", title="previous match (p)"),
        html.Button("next ▶", id={"type": "search", "panel": p, "dir": 1}, n_clicks=0,
                    className="search-next", title="next match (n)"),
        html.Span(id={"type": "search-note", "panel": p}, className="muted"),
        *lane_height_choice(p),
    ], className="search")


def details_box(p: int) -> html.Div:
    """Where panel p shows the call clicked, found or jumped to (both pages)."""
    return html.Div(id={"type": "details", "panel": p}, className="details")


def search_step(triggered: list, what: object) -> int | str | None:
    """What a press of a search button asks (the callback's ctx.triggered): the step, -1
    or 1, or a note to show instead (nothing chosen to find); None: no press of one."""
    trig = triggered[0] if len(triggered) == 1 and isinstance(triggered[0], dict) else {}
    parsed = inputs.trigger(trig.get("prop_id"))
    if parsed is None or not inputs.clicks(trig.get("value")):
        return None
    if not isinstance(what, str) or len(what) > 2 * inputs.MAX_NAME:
        return "choose what to find first"
    tid = parsed[0] if isinstance(parsed[0], dict) else {}
    step = inputs.integer(tid.get("dir"), -1, 2)
    return step if step in (-1, 1) else None


def jump_pressed(triggered: list, calls: int, panels: int) -> tuple[int, int | None] | None:
    """The (call, call left or None) of the partner-jump button pressed (the callback's
    ctx.triggered), checked against the panel's `calls`; None if none was pressed."""
    trig = triggered[0] if len(triggered) == 1 and isinstance(triggered[0], dict) else {}
    parsed = inputs.trigger(trig.get("prop_id"))
    if parsed is None or not inputs.clicks(trig.get("value")):
        return None
    tid = parsed[0] if isinstance(parsed[0], dict) else {}
    if inputs.panel(tid, panels) is None:
        return None
    return navsearch.jump_target(tid, calls)


def lane_px_of(view: View, px: object) -> View | None:
    """`view` with the lane height the radio sends (None: not one it offers)."""
    chosen = inputs.integer(px, 0, inputs.MAX_LANE_PX + 1)
    if chosen is None or (chosen and chosen < inputs.MIN_LANE_PX):
        return None
    view.lane_px = chosen or None
    return view


def _panel(ctl: Controller, p: int, width: int) -> html.Div:
    m = ctl.models[p]
    view = ctl.initial_view(p)
    # the first view is in the layout: drawn as soon as the page has it (firstview.py)
    fig, status, over = ctl.first_view(p, width)
    info = _info(m)
    return html.Div([
        html.Div([html.H3(m.label, className="trace-label"), html.Span(info, className="muted"),
                  export_buttons(p),
                  critical.toggle(p)], className="panel-head"),
        # the run's warnings and totals, once the analysis has them (run_notes below)
        html.Div(id={"type": "notes", "panel": p}, className="run-notes"),
        dcc.Store(id={"type": "view", "panel": p}, data=view.to_dict()),
        # the wait states come in the background; until then a cheap poll asks for them,
        # and the timeline is drawn again, shaded, once they are there
        dcc.Store(id={"type": "waits", "panel": p}, data=m.waits_ready),
        dcc.Interval(id={"type": "wait-poll", "panel": p}, interval=400,
                     disabled=m.waits_ready),
        dcc.Graph(id={"type": "overview", "panel": p}, figure=over,
                  config={"displayModeBar": False, "scrollZoom": False, "responsive": False},
                  className="overview"),
        strip.graph(p),
        html.Div(status, id={"type": "status", "panel": p}, className="status"),
        search_bar(p, ctl.search_options(p)),
        _lane_bar(m, p),
        html.Div([
            dcc.Graph(id={"type": "timeline", "panel": p}, figure=fig, config=GRAPH_CONFIG,
                      clear_on_unhover=True, className="timeline"),
            dcc.Tooltip(id={"type": "tip", "panel": p}, direction="bottom"),
        ], className="timeline-wrap"),
        details_box(p),
    ], className="panel key-focus" if p == 0 and len(ctl.models) > 1 else "panel",
        id=f"panel-{p}")  # keys act on panel A until another is clicked (navigation.js)


def _layout(ctl: Controller, width: int = DEFAULT_WIDTH) -> html.Div:
    n = len(ctl.models)
    head = [html.H1("mpiscope"),
            html.Span("compare: A above, B below" if n == 2 else "", className="muted"),
            history_buttons(),
            keys_help(n)]
    controls = []
    if n == 2:
        controls = [dcc.Checklist(id="shared", options=[
            {"label": " one time scale for both", "value": "shared"},
            {"label": " align by iteration", "value": "iteration",
             "title": "each run shows the same iterations of its main loop (times of its own)"}],
            value=[], className="shared"),
            # the runs' first calls of a function or call site at one x (Controller.follow);
            # chosen, it decides how the panels follow each other over the boxes above
            html.Span([html.Span("align on the first call of", className="muted"),
                       dcc.Dropdown(id="align-event", options=ctl.event_options(),
                                    placeholder="a function or call site (both runs')",
                                    className="align-event")], className="align-by")]
    tabs = [dcc.Tab(label="Breakdown", value="breakdown",
                    children=_columns(n, "tab-breakdown")),
            dcc.Tab(label="Functions", value="functions", children=_columns(n, "tab-functions")),
            dcc.Tab(label="Messages", value="messages", children=_columns(n, "tab-messages")),
            dcc.Tab(label="Profiles", value="profiles", children=_columns(n, "tab-profiles")),
            dcc.Tab(label="Call tree", value="calltree", children=_columns(n, "tab-calltree")),
            dcc.Tab(label="Findings", value="findings", children=_columns(n, "tab-findings")),
            critical.tab(n)]
    if n == 2:
        tabs.append(dcc.Tab(label="Differences", value="differences",
                            children=html.Div(id="differences",
                                              children=DIFFERENCES_PENDING)))
    return html.Div([
        html.Div(head + controls, className="header"),
        dcc.Store(id="boot", data=0), dcc.Store(id="viewport", data=width),
        dcc.Store(id="url-pop"), dcc.Store(id="url-sync"),
        *[dcc.Store(id=f"finding-click-{p}") for p in range(n)],
        *[dcc.Store(id={"type": "tabs-filled", "panel": p}, data={}) for p in range(n)],
        # the function chosen in the Functions tab: still chosen in the next window's table
        *[dcc.Store(id={"type": "fsel", "panel": p}) for p in range(n)],
        html.Div([_panel(ctl, p, width) for p in range(n)], id="timelines"),
        windowstats.scope_bar(max(m.trace.num_ranks for m in ctl.models)),
        dcc.Tabs(id="tabs", value="findings", children=tabs, className="tabs"),
    ], className="page")


# the keys assets/navigation.js handles (outside text fields), as the page lists them
KEYS = (("n / p", "next / previous match of the search"),
        ("+ / -", "zoom in / out, 2× around the middle"),
        ("← / →", "move the window a quarter of its width"),
        ("[ / ]", "previous / next view"))


def keys_help(panels: int) -> html.Details:
    """The keys, folded under "keys" in the header; with two panels, which one they move."""
    rows = [html.Tr([html.Th(html.Kbd(k)), html.Td(what)]) for k, what in KEYS]
    note = ([html.Div("they act on the panel last clicked (marked), A at first",
                      className="muted")] if panels > 1 else [])
    return html.Details([html.Summary("keys"),
                         html.Div([html.Table(rows, className="kv"), *note],
                                  className="keys-list")], className="keys-help")


def _columns(n: int, kind: str) -> html.Div:
    return html.Div([html.Div("analyzing…", id={"type": kind, "panel": p}, className="column")
                     for p in range(n)], className="columns")


# the view in the URL, one history entry per view (assets/navigation.js); only the
# window, the hidden functions and the lanes shown (the ranks chosen, their order, the
# ranks with a lane per thread, the vertical range): selections stay out of links
URL_SYNC = """function(views) {
            const small = (views || []).map(v => v && {t0: v.t0, t1: v.t1,
                hidden: v.hidden || [], y_range: v.y_range || null,
                ranks: v.ranks === undefined ? null : v.ranks, order: v.order || "host",
                expanded: v.expanded || [], grouped: v.grouped || []});
            const hash = "#view=" + encodeURIComponent(JSON.stringify(small));
            if (location.hash !== hash) {
                if (location.hash.startsWith("#view=")) history.pushState(null, "", hash);
                else history.replaceState(null, "", hash);
            }
            return window.dash_clientside.no_update;
        }"""
# ... and back: a link's view on load, the history's on back/forward, and the lane
# bar set as the view's lanes. The server checks every value (inputs.view) before it
# draws it
URL_LOAD = """function(boot, popped, views) {
            const nu = window.dash_clientside.no_update;
            const none = () => views.map(() => nu);
            const h = location.hash.startsWith("#view=") ? location.hash.slice(6) : "";
            let got = null;
            try { got = h ? JSON.parse(decodeURIComponent(h)) : null; } catch (e) {}
            if (!Array.isArray(got) || !Array.isArray(views))
                return [none(), none(), none(), none(), none()];
            const out = views.map((v, i) => {
                const g = got[i];
                if (!v || !g || typeof g !== "object") return nu;
                const lanes = x => JSON.stringify([x.ranks === undefined ? null : x.ranks,
                                                   x.order || "host", x.expanded || [],
                                                   x.grouped || []]);
                if (g.t0 === v.t0 && g.t1 === v.t1 && JSON.stringify(g.hidden || [])
                    === JSON.stringify(v.hidden || []) && JSON.stringify(g.y_range || null)
                    === JSON.stringify(v.y_range || null) && lanes(g) === lanes(v)) return nu;
                return Object.assign({}, v, {t0: g.t0, t1: g.t1, hidden: g.hidden || [],
                                             y_range: g.y_range || null, selected: [],
                                             focus: null,
                                             ranks: g.ranks === undefined ? null : g.ranks,
                                             order: g.order || "host",
                                             expanded: g.expanded || [],
                                             grouped: g.grouped || []});
            });
            const bar = f => out.map(v => v === nu ? nu : f(v));
            const list = x => Array.isArray(x) ? x : [];
            return [out, bar(v => v.ranks === null ? [] : list(v.ranks).map(r => "r:" + r)),
                    bar(v => v.order), bar(v => list(v.expanded)), bar(v => list(v.grouped))];
        }"""


def url_callbacks(app: Dash) -> None:
    """The views of the panels ({"type": "view"} stores) in the URL and back, the lane
    bars set from them: the page in memory and out of core (ooc.py) alike."""
    app.clientside_callback(URL_SYNC, Output("url-sync", "data"),
                            Input({"type": "view", "panel": ALL}, "data"),
                            prevent_initial_call=True)
    app.clientside_callback(
        URL_LOAD, Output({"type": "view", "panel": ALL}, "data", allow_duplicate=True),
        Output({"type": "lane-ranks", "panel": ALL}, "value"),
        Output({"type": "lane-order", "panel": ALL}, "value"),
        Output({"type": "lane-threads", "panel": ALL}, "value"),
        Output({"type": "lane-hosts", "panel": ALL}, "value"),
        Input("boot", "data"), Input("url-pop", "data"),
        State({"type": "view", "panel": ALL}, "data"), prevent_initial_call="initial_duplicate")


def _callbacks(app: Dash, ctl: Controller) -> None:
    n = len(ctl.models)

    app.clientside_callback(firstview.MEASURE_WIDTH, Output("viewport", "data"),
                            Input("boot", "data"), State("viewport", "data"))

    # the view in the URL, one history entry per view (assets/navigation.js); only the
    # window, the hidden functions and the lanes shown (the ranks chosen, their order, the
    # ranks with a lane per thread, the vertical range): selections stay out of links
    url_callbacks(app)

    nav_inputs = [Input({"type": "timeline", "panel": ALL}, "relayoutData"),
                  Input({"type": "timeline", "panel": ALL}, "restyleData"),
                  Input({"type": "overview", "panel": ALL}, "relayoutData"),
                  *[Input(f"finding-click-{p}", "data") for p in range(n)],
                  Input({"type": "jump", "panel": ALL, "call": ALL, "also": ALL}, "n_clicks")]
    if n == 2:
        nav_inputs += [Input("shared", "value"), Input("align-event", "value")]

    @app.callback(Output({"type": "view", "panel": ALL}, "data"), *nav_inputs,
                  State({"type": "view", "panel": ALL}, "data"), prevent_initial_call=True)
    def navigate(*args):
        stored = args[-1]
        if not inputs.all_panels(ctx.outputs_list, n) or not isinstance(stored, list) \
                or len(stored) != n:
            raise PreventUpdate
        views_now = [ctl.view(p, d) for p, d in enumerate(stored)]
        if None in views_now:
            raise PreventUpdate
        chosen = (inputs.strings(args[4 + n]) or []) if n == 2 else []
        event = args[5 + n] if n == 2 else None
        shared = ("event" if n == 2 and ctl.event_shift(0, 1, event) is not None else
                  "iteration" if "iteration" in chosen else "time" if "shared" in chosen
                  else "")
        changed = False
        # several inputs can fire at once (e.g. a zoom while the findings list appears)
        for trig in ctx.triggered:
            parsed = inputs.trigger(trig.get("prop_id"))
            if parsed is None:
                continue
            ident, prop = parsed
            new = navigation(ctl, ident, prop, trig.get("value"), views_now, shared, event)
            if new is not None:
                views_now, changed = new, True
        return [v.to_dict() for v in views_now] if changed else [no_update] * n

    @app.callback(Output({"type": "timeline", "panel": MATCH}, "figure"),
                  Output({"type": "status", "panel": MATCH}, "children"),
                  Output({"type": "overview", "panel": MATCH}, "figure"),
                  Input({"type": "view", "panel": MATCH}, "data"), Input("viewport", "data"),
                  Input({"type": "waits", "panel": MATCH}, "data"),
                  Input({"type": critical.TOGGLE, "panel": MATCH}, "value"),
                  prevent_initial_call=True)  # the first view is in the layout
    def render(view, width, _waits, path_on):
        p = inputs.output_panel(ctx.outputs_list, n)
        v = None if p is None else ctl.view(p, view)
        if v is None:
            raise PreventUpdate
        width = inputs.width_px(width, DEFAULT_WIDTH)
        fig, status = ctl.render(p, v, width)
        if critical.enabled(path_on):
            fig, more = critical.overlay(ctl.models[p], fig, v.t0, v.t1, width,
                                         timeline.MARGIN_L + timeline.MARGIN_R,
                                         ctl.models[p].lanes_for(v.lanes).lane_of_rank)
            status += more
        fired = {t["prop_id"] for t in ctx.triggered}
        if "viewport.data" in fired:  # a new width: new bins
            return fig, status, timeline.overview(ctl.models[p], v, width)
        patch = Patch()  # a zoom: only the window mark moves
        patch["layout"]["shapes"][0] = timeline.window_shape(v)
        patch["layout"]["xaxis"]["range"] = list(ctl.full_window(p))
        return fig, status, patch

    @app.callback(Output({"type": "waits", "panel": MATCH}, "data"),
                  Output({"type": "wait-poll", "panel": MATCH}, "disabled"),
                  Input({"type": "wait-poll", "panel": MATCH}, "n_intervals"),
                  prevent_initial_call=True)
    def waits_ready(_):
        p = inputs.output_panel(ctx.outputs_list, n)
        if p is None:
            raise PreventUpdate
        return (True, True) if ctl.models[p].waits_ready else (no_update, no_update)

    @app.callback(Output({"type": "tip", "panel": MATCH}, "show"),
                  Output({"type": "tip", "panel": MATCH}, "bbox"),
                  Output({"type": "tip", "panel": MATCH}, "children"),
                  Input({"type": "timeline", "panel": MATCH}, "hoverData"),
                  State({"type": "view", "panel": MATCH}, "data"), State("viewport", "data"))
    def tooltip(hover, view, width):
        p = inputs.output_panel(ctx.outputs_list, n)
        v = None if p is None else ctl.view(p, view)
        if v is None:
            raise PreventUpdate
        show, bbox, children = ctl.tooltip(p, hover, v, inputs.width_px(width, DEFAULT_WIDTH))
        return show, bbox if bbox else no_update, children

    @app.callback(Output({"type": "details", "panel": MATCH}, "children"),
                  Input({"type": "timeline", "panel": MATCH}, "clickData"))
    def details(click):
        p = inputs.output_panel(ctx.outputs_list, n)
        if p is None:
            raise PreventUpdate
        return ctl.details(p, click)

    # search: the next/previous call of a function or call site, or receive or send of a
    # tag or communicator, selected and marked
    @app.callback(Output({"type": "view", "panel": MATCH}, "data", allow_duplicate=True),
                  Output({"type": "details", "panel": MATCH}, "children",
                         allow_duplicate=True),
                  Output({"type": "search-note", "panel": MATCH}, "children"),
                  Input({"type": "search", "panel": MATCH, "dir": ALL}, "n_clicks"),
                  State({"type": "search-what", "panel": MATCH}, "value"),
                  State("rankset", "value"), State({"type": "view", "panel": MATCH}, "data"),
                  prevent_initial_call=True)
    def search(_clicks, what, ranks, view):
        p = inputs.output_panel(ctx.outputs_list, n)
        v = None if p is None else ctl.view(p, view)
        step = search_step(ctx.triggered, what)
        if v is None or step is None:
            raise PreventUpdate
        if isinstance(step, str):
            return no_update, no_update, step
        rs = windowstats.Scope.of(ctl.models[p], v, windowstats.WINDOW, ranks).ranks
        found = ctl.search(v, p, what, step > 0, list(rs) if rs else None)
        if found is None:
            return no_update, no_update, navsearch.none_found(what, step > 0)
        new, call = found
        return new.to_dict(), ctl.call_details(p, call), ""

    @app.callback(Output({"type": "view", "panel": MATCH}, "data", allow_duplicate=True),
                  Input({"type": "lane-ranks", "panel": MATCH}, "value"),
                  Input({"type": "lane-order", "panel": MATCH}, "value"),
                  Input({"type": "lane-threads", "panel": MATCH}, "value"),
                  Input({"type": "lane-hosts", "panel": MATCH}, "value"),
                  State({"type": "view", "panel": MATCH}, "data"), prevent_initial_call=True)
    def lane_choice(chosen, order, threads, hosts, view):
        p = inputs.output_panel(ctx.outputs_list, n)
        v = None if p is None else ctl.view(p, view)
        if v is None:
            raise PreventUpdate
        new = ctl.with_lanes(p, v, chosen, order, threads, hosts)
        if new is None:
            raise PreventUpdate
        return new.to_dict()

    @app.callback(Output({"type": "view", "panel": MATCH}, "data", allow_duplicate=True),
                  Input({"type": "lane-px", "panel": MATCH}, "value"),
                  State({"type": "view", "panel": MATCH}, "data"), prevent_initial_call=True)
    def lane_height(px, view):
        p = inputs.output_panel(ctx.outputs_list, n)
        v = None if p is None else ctl.view(p, view)
        v = None if v is None else lane_px_of(v, px)
        if v is None:
            raise PreventUpdate
        return v.to_dict()

    # a partner jump selects the partner: its details replace those of the call left
    @app.callback(Output({"type": "details", "panel": MATCH}, "children",
                         allow_duplicate=True),
                  Input({"type": "jump", "panel": MATCH, "call": ALL, "also": ALL},
                        "n_clicks"), prevent_initial_call=True)
    def partner_details(_clicks):
        p = inputs.output_panel(ctx.outputs_list, n)
        got = None if p is None else jump_pressed(ctx.triggered,
                                                  len(ctl.models[p].trace.calls), n)
        if got is None:
            raise PreventUpdate
        return ctl.call_details(p, got[0], came_from=got[1])

    # a tab is filled when first opened (the findings at page load): its figures and
    # tables are work the server and the page would otherwise do while the timeline draws.
    # The window's tabs are filled again when the window, the scope or the rank set
    # changes while they are open (Vampir's displays follow the zoom)
    @app.callback(*[Output({"type": f"tab-{k}", "panel": MATCH}, "children") for k in TABS],
                  Output({"type": "tabs-filled", "panel": MATCH}, "data"),
                  Input("tabs", "value"), Input({"type": "view", "panel": MATCH}, "data"),
                  Input("scope", "value"), Input("rankset", "value"),
                  State({"type": "tabs-filled", "panel": MATCH}, "data"),
                  State({"type": "fsel", "panel": MATCH}, "data"))
    def analysis_tabs(tab, view, scope, ranks, filled, chosen):
        p = inputs.output_panel(ctx.outputs_list, n)
        filled = filled if isinstance(filled, dict) else {}
        if p is None or tab not in TABS:
            raise PreventUpdate
        v = ctl.view(p, view)
        if v is None:
            raise PreventUpdate
        sc = windowstats.Scope.of(ctl.models[p], v, scope, ranks)
        key = "once" if tab not in WINDOW_TABS else sc.key()
        if filled.get(tab) == key:
            raise PreventUpdate
        out: list = [no_update] * len(TABS)
        out[TABS.index(tab)] = analysis_panel(ctl, p, tab, sc, chosen)
        return *out, {**filled, tab: key}

    # the histogram of the function chosen, of the table's window and rank set: a new
    # window's table (analysis_tabs) comes with a new selection, which calls this again
    @app.callback(Output({"type": "fhist", "panel": MATCH}, "figure"),
                  Output({"type": "fsel", "panel": MATCH}, "data"),
                  Input({"type": "ftable", "panel": MATCH}, "selected_rows"),
                  State({"type": "ftable", "panel": MATCH}, "data"),
                  State({"type": "view", "panel": MATCH}, "data"),
                  State("scope", "value"), State("rankset", "value"))
    def histogram(rows, data, view, scope, ranks):
        p = inputs.output_panel(ctx.outputs_list, n)
        v = None if p is None else ctl.view(p, view)
        if v is None:
            raise PreventUpdate
        m = ctl.models[p]
        name = inputs.selected_name(rows, data, m.index.functions)
        w = windowstats.window_of(m, windowstats.Scope.of(m, v, scope, ranks))
        return views.duration_histogram(m, name, w), name

    # filled at page load, from the background analysis (waited for: the timeline is not)
    @app.callback(Output({"type": "notes", "panel": MATCH}, "children"),
                  Input({"type": "notes", "panel": MATCH}, "id"))
    def run_notes(ident):
        p = inputs.output_panel(ctx.outputs_list, n)
        if p is None or inputs.panel(ident, n) != p:
            raise PreventUpdate
        return views.run_notes(RunNotes.of(ctl.models[p].session))

    critical.register(app, ctl.models)
    calltreeview.register(app, ctl.models)
    strip.register(app, ctl.models)

    if n == 2:
        compare_callbacks(app, ctl)


def compare_callbacks(app: Dash, ctl: Controller) -> None:
    """Compare mode's own: the Differences tab (with `mpiscope compare`'s predicted vs
    measured, computed once for every page) and one y-scale for both runs' breakdowns."""
    explained = compare.Explained(*ctl.models)

    # filled when the tab is first opened, not at page load: the predicted vs measured
    # replays both runs, which the timeline's first callbacks should not wait behind
    @app.callback(Output("differences", "children"), Input("tabs", "value"),
                  State("differences", "children"))
    def differences(tab, shown):
        if tab != "differences" or shown != DIFFERENCES_PENDING:
            raise PreventUpdate
        return compare.differences(ctl.models[0], ctl.models[1], explained.get())

    # each panel's Breakdown tab follows its own window (a callback each): its tallest
    # bar comes with it, and both charts then get the taller of the two as their top
    @app.callback(Output({"type": BREAKDOWN_GRAPH, "panel": ALL}, "figure"),
                  Input({"type": BREAKDOWN_TOP, "panel": ALL}, "data"))
    def shared_breakdown_scale(tops):
        outs = ctx.outputs_list if isinstance(ctx.outputs_list, list) else []
        got = [inputs.number(t) for t in (tops if isinstance(tops, list) else [])]
        top = max((t for t in got if t is not None and t >= 0), default=0.0)
        if not outs or views.bar_range(top) is None:
            raise PreventUpdate
        patches = []
        for _ in outs:
            patch = Patch()
            patch["layout"]["yaxis"]["range"] = views.bar_range(top)
            patch["layout"]["yaxis"]["autorange"] = False
            patches.append(patch)
        return patches


def navigation(ctl: Controller, ident: str | dict, prop: str, value, views_now: list[View],
               shared: str = "", event: object = None) -> list[View] | None:
    """The views after one user action, or None if the action changes nothing (or is
    not one the page can send: every value is checked by mpiscope_webui.inputs).
    `shared`: how two panels follow each other ("time": one time scale, "iteration":
    the same iterations of each run's main loop, "event": `event`, the first call of a
    function or call site, at one x; "": not at all)."""
    n = len(views_now)
    if ident == "align-event":
        # choosing it brings both runs' event into view, lined up; clearing it leaves
        # the views, the boxes then decide
        return ctl.align_on_event(views_now, value) if prop == "value" and n == 2 else None
    if ident == "shared":
        if not shared or prop != "value":
            return None
        # the second run follows the first: ticking keeps what panel 0 shows
        w = ctl.follow(0, 1, views_now[0].t0, views_now[0].t1, shared, event)
        return [views_now[0], _with_window(views_now[1], *w)]
    if isinstance(ident, str) and ident.startswith("finding-click-"):
        p = next((q for q in range(n) if ident == f"finding-click-{q}"), None)
        if p is None or prop != "data" or not value:
            return None
        i = inputs.finding(value, len(ctl.models[p].analysis().findings))
        if i is None:
            return None
        out = list(views_now)
        out[p] = ctl.focus_finding(views_now[p], p, i)
        return out
    tid = ident
    if isinstance(ident, str):  # a pattern id as Dash spells it in a trigger: JSON
        parsed = inputs.trigger(ident + ".prop")
        tid = parsed[0] if parsed else None
    p = inputs.panel(tid, n)
    if p is None:
        return None
    v = views_now[p]
    kind = tid.get("type")
    if kind in ("timeline", "overview") and prop == "relayoutData":
        x, y, reset = parse_relayout(value)
        if kind == "overview":
            y = None
        if x is None and y is None and not reset:
            return None
        new = ctl.zoom(v, x, y, reset, p)
        if shared == "time" and reset:
            new = _with_window(new, *ctl.shared_window())
    elif kind == "timeline" and prop == "restyleData":
        new = ctl.toggle(v, p, value)
    elif kind == "jump" and prop == "n_clicks" and inputs.clicks(value):
        got = navsearch.jump_target(tid, len(ctl.models[p].trace.calls))
        if got is None:
            return None
        new = ctl.focus_call(v, p, *got)
    else:
        return None
    out = list(views_now)
    out[p] = new
    if shared and kind != "jump" and prop != "restyleData":
        out = [new if q == p else
               _with_window(views_now[q], *ctl.follow(p, q, new.t0, new.t1, shared, event))
               for q in range(n)]
    return out


def _with_window(v: View, t0: float, t1: float) -> View:
    out = View.from_dict(v.to_dict())
    out.t0, out.t1 = t0, t1
    return out


TABS = ("breakdown", "functions", "messages", "profiles", "calltree", "findings")
# compare mode: a panel's breakdown chart and its tallest bar (compare_callbacks)
BREAKDOWN_GRAPH, BREAKDOWN_TOP = "bgraph", "btop"
WINDOW_TABS = ("breakdown", "functions", "messages", "profiles", "calltree")  # follow the window


def analysis_panel(ctl: Controller, p: int, tab: str,
                   scope: windowstats.Scope | None = None, chosen: object = None) -> list:
    """The contents of one analysis tab (one of TABS) for panel p; the window's tabs
    for `scope` (default: the whole run, all ranks); `chosen`: the function to select
    in the functions table if it has a row (else the first row)."""
    m = ctl.models[p]
    label = m.label if len(ctl.models) > 1 else ""
    title = [html.H4(label)] if label else []
    if tab == "findings":
        return title + [views.findings_list(m.analysis(), p)]
    scope = scope or windowstats.Scope(None, None)
    title.append(html.Div(scope.text(m), className="muted scope-text"))
    if tab == "profiles":
        return title[:-1] + windowstats.profiles_tab(m, scope, p)
    if tab == "calltree":
        return title[:-1] + calltreeview.tab(m, scope, p)
    a = windowstats.panels(m, scope)
    errors = [html.Div(f"analysis incomplete — {e}", className="error") for e in a.errors]
    title += errors

    def tbl(df, name: str, **kw):
        return windowstats.table(df, {"type": "wtable", "panel": p, "name": name}, **kw)

    if tab == "breakdown":
        return title + _breakdown_chart(a, p, len(ctl.models) == 2) + [
            tbl(a.breakdown, "breakdown")]
    if tab == "functions":
        rows = list(a.functions["name"]) if "name" in a.functions.columns else []
        at = rows.index(chosen) if isinstance(chosen, str) and chosen in rows else 0
        return title + [windowstats.table(windowstats.functions_frame(a.functions),
                                          {"type": "ftable", "panel": p}, selectable=True,
                                          selected=at),
                        dcc.Graph(id={"type": "fhist", "panel": p})]
    return title + [dcc.Graph(figure=views.comm_matrix_figure(a, m.trace.num_ranks)),
                    tbl(a.comm_matrix, "matrix"),
                    dcc.Graph(figure=views.message_size_figure(a)),
                    tbl(a.message_sizes, "message-sizes")]


def _breakdown_chart(a: Panels, p: int, compared: bool) -> list:
    """The Breakdown tab's chart; in compare mode with its tallest bar beside it, for the
    scale both runs' charts share (compare_callbacks)."""
    if not compared:
        return [dcc.Graph(figure=views.breakdown_figure(a))]
    top = views.breakdown_top(a)
    return [dcc.Graph(id={"type": BREAKDOWN_GRAPH, "panel": p},
                      figure=views.breakdown_figure(a, top=top)),
            dcc.Store(id={"type": BREAKDOWN_TOP, "panel": p}, data=top)]
