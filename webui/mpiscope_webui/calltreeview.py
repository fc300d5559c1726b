"""The "Call tree" tab: Cube's three panes for the visible window and rank set — a metric
(time, waiting, calls, bytes), the call tree with each node's inclusive value and share,
and how the selected node's value is spread over the ranks (min, median, max and a bar
per rank). The tree is analysis.calltree's, built from the window's profile.

The tab is filled by app.analysis_tabs when it opens and when the window or the rank set
changes; choosing a metric or clicking a node redraws its body from the scope kept in
the tab (a Store), without recomputing the window.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from dash import ALL, MATCH, Dash, Input, Output, State, ctx, dcc, html
from dash.exceptions import PreventUpdate

from mpiscope import numbers
from mpiscope.analysis.callpaths import CallPaths
from mpiscope.analysis.calltree import METRICS, CallTree
from mpiscope.render import palette
from mpiscope.render.plottext import plot_text
from mpiscope_webui import inputs
from mpiscope_webui.model import TraceModel
from mpiscope_webui.windowstats import Scope, chosen_ranks, window_of

CHILDREN_SHOWN = 40  # per node, largest first; the rest are counted
OPEN_LEVELS = 2  # levels unfolded at first (and every node above the selected one)
DEFAULT = "time_s"


def fmt(metric: str, v: float) -> str:
    if metric in ("time_s", "wait_s"):
        return numbers.seconds(v)
    if metric == "bytes":
        return numbers.size(v)
    return f"{int(round(v)):,}"


def tab(model: TraceModel, scope: Scope, panel: int) -> list:
    """The tab's controls, the scope it shows, and its body."""
    return panes(scope, model.session.paths, scope.text(model),
                 body(model, scope, DEFAULT, None, panel), panel)


def panes(scope: Scope, paths: CallPaths, text: str, first: list, panel: int) -> list:
    """The tab of `scope` (described by `text`): its controls (the metric; the scope kept
    for the redraws) and its body, `first` (the out-of-core page's too)."""
    state = {"window": list(scope.window) if scope.window else None,
             "ranks": list(scope.ranks) if scope.ranks else None}
    frames = paths.frames
    depth = max((len(f) for f in frames.values()), default=0)
    note = (f"Call paths as recorded: up to {depth} frames each (MPISCOPE_CALLPATH_DEPTH); "
            "callers beyond that are not in the trace, so a root may be a caller's frame "
            "seen deeper elsewhere." if depth else
            "No call paths in this trace: each MPI call hangs under its call site "
            "(record them with MPISCOPE_CALLPATH_DEPTH).")
    return [
        html.Div(text, className="muted scope-text"),
        html.Div(note, className="muted ct-note"),
        dcc.RadioItems(id={"type": "ct-metric", "panel": panel}, value=DEFAULT, inline=True,
                       className="ct-metric",
                       options=[{"label": f" {v}", "value": k} for k, v in METRICS.items()]),
        dcc.Store(id={"type": "ct-scope", "panel": panel}, data=state),
        html.Div(first, id={"type": "ct-body", "panel": panel}, className="ct-body")]


def _tree(model: TraceModel, scope: Scope) -> CallTree:
    return window_of(model, scope).call_tree(model.session.paths)


def body(model: TraceModel, scope: Scope, metric: str, selected: int | None,
         panel: int) -> list:
    try:
        tree = _tree(model, scope)
    except Exception as err:  # noqa: BLE001 - shown to the user, one line
        return [html.Div(f"call tree: {type(err).__name__}: {err}".splitlines()[0],
                         className="error")]
    return tree_body(tree, metric, selected, panel)


def tree_body(tree: CallTree, metric: str, selected: int | None, panel: int) -> list:
    """The tree's panes for `metric`, node `selected` (None: the largest root) open
    (the out-of-core page's too)."""
    if not len(tree):
        return [html.Div("No MPI calls in this window.", className="muted")]
    total = tree.total(metric)
    roots = tree.children(-1)
    whole = float(total[roots].sum())
    if selected is None or not 0 <= selected < len(tree):
        selected = int(roots[np.argmax(total[roots])])
    above = set()
    at = int(tree.parent[selected])
    while at >= 0:
        above.add(at)
        at = int(tree.parent[at])

    def item(node: int, depth: int) -> html.Li:
        share = total[node] / whole if whole > 0 else 0.0
        label = html.Button(plot_text(tree.label[node]),
                            id={"type": "ct-node", "panel": panel, "node": node},
                            className="ct-node selected" if node == selected else "ct-node",
                            title=" <- ".join(reversed(tree.path(node))))
        value = html.Span(f" {fmt(metric, total[node])} ({numbers.pct(share)})",
                          className="muted ct-value")
        if tree.leaf[node]:
            return html.Li([label, value], className="ct-leaf")
        kids = level(node, depth + 1)
        return html.Li(html.Details([html.Summary([label, value]), kids],
                                    open=depth < OPEN_LEVELS or node in above))

    def level(up: int, depth: int) -> html.Ul:
        kids = tree.children(up)
        kids = kids[np.argsort(-total[kids], kind="stable")]
        kids = kids[total[kids] > 0] if whole > 0 else kids
        shown = [item(int(k), depth) for k in kids[:CHILDREN_SHOWN]]
        if len(kids) > CHILDREN_SHOWN:
            shown.append(html.Li(f"and {len(kids) - CHILDREN_SHOWN} more", className="muted"))
        return html.Ul(shown, className="ct-level")

    return [html.Div([level(-1, 0)], className="ct-tree"),
            html.Div(ranks_pane(tree, selected, metric), className="ct-ranks")]


def ranks_pane(tree: CallTree, node: int, metric: str) -> list:
    """The selected node over the ranks: its line of figures and a bar per rank."""
    per = tree.per_rank(node, metric)
    name = METRICS[metric]
    hi, lo = int(np.argmax(per)), int(np.argmin(per))
    line = (f"{name} in {tree.label[node]} per rank: min {fmt(metric, per[lo])} (rank {lo}), "
            f"median {fmt(metric, float(np.median(per)))}, max {fmt(metric, per[hi])} "
            f"(rank {hi})")
    # one unit for the axis, named in its title (the one formatter's), no SI tick suffixes
    if metric in ("time_s", "wait_s"):
        col = numbers.Column.of(per, "s")
        unit, y = col.unit, per / col.scale
    elif metric == "bytes":
        col = numbers.Column.of(per, "B", lowest=0)
        unit, y = col.unit, per / col.scale
    else:
        unit, y = "calls", per
    fig = go.Figure(go.Bar(x=np.arange(len(per)), y=y, marker_color=palette.PART_COLOURS[
        "synchronization" if metric == "wait_s" else "communication"],
        hovertemplate=f"rank %{{x}}: %{{y}} {unit}<extra></extra>"))
    fig.update_layout(height=260, margin=dict(l=60, r=10, t=30, b=40),
                      title=dict(text=plot_text(" <- ".join(reversed(tree.path(node)))),
                                 font=dict(size=12)),
                      xaxis=dict(title="rank", dtick=1 if len(per) <= 32 else None,
                                 tickformat="d"),
                      yaxis=dict(title=f"{name} ({unit})", rangemode="tozero",
                                 exponentformat="none"))
    return [html.Div(line, className="ct-rank-line"), dcc.Graph(figure=fig)]


def register(app: Dash, models: list[TraceModel]) -> None:
    n = len(models)

    @app.callback(Output({"type": "ct-body", "panel": MATCH}, "children"),
                  Output({"type": "ct-scope", "panel": MATCH}, "data"),
                  Input({"type": "ct-metric", "panel": MATCH}, "value"),
                  Input({"type": "ct-node", "panel": MATCH, "node": ALL}, "n_clicks"),
                  State({"type": "ct-scope", "panel": MATCH}, "data"),
                  State({"type": "ct-body", "panel": MATCH}, "id"),
                  prevent_initial_call=True)
    def redraw(metric, clicks, state, ident):
        p = inputs.panel(ident, n)
        if p is None:
            raise PreventUpdate
        metric, selected = choice(metric, clicks, state)
        model = models[p]
        scope = _scope(model, state)
        return body(model, scope, metric, selected, p), {**state, "node": selected}


def choice(metric: object, clicks: object, state: object) -> tuple[str, int | None]:
    """The metric and the node a redraw shows (from the page: checked like any input; the
    tab's Store keeps the selected node across metrics); PreventUpdate if none."""
    if not isinstance(metric, str) or metric not in METRICS or not isinstance(state, dict):
        raise PreventUpdate
    selected = inputs.integer(state.get("node"), 0, 1 << 31)
    hit = ctx.triggered_id
    if isinstance(hit, dict) and hit.get("type") == "ct-node":
        if not isinstance(clicks, list) or not any(inputs.clicks(c) for c in clicks):
            raise PreventUpdate  # a node drawn anew, not clicked
        selected = inputs.integer(hit.get("node"), 0, 1 << 31)
    return metric, selected


def _scope(model: TraceModel, state: dict) -> Scope:
    """The Scope a tab's Store holds (from the page: checked like any input; it also
    keeps the selected node)."""
    return Scope(stored_window(state, model.session.window_index.span),
                 chosen_ranks(model, state.get("ranks")))


def stored_window(state: dict, span: tuple[int, int]) -> tuple[int, int] | None:
    """The window a tab's Store holds, if one within the trace's span (ns), else None."""
    w = state.get("window")
    if isinstance(w, list) and len(w) == 2:
        lo, hi = span
        a, b = (inputs.integer(x, lo - (hi - lo) - 1, hi + (hi - lo) + 2) for x in w)
        if a is not None and b is not None and a < b:
            return a, b
    return None
