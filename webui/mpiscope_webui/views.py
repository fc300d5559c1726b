"""Analysis views: breakdown bars, function statistics, histograms, matrix, findings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from dash import html

from mpiscope import numbers
from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.analysis.findings import run_wide, where
from mpiscope.analysis.window import Window
from mpiscope.render import palette
from mpiscope.render.plottext import plot_text
from mpiscope_webui.analysis import FindingView, Panels, RunNotes, Totals
from mpiscope_webui.model import TraceModel


def _layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(template="plotly_white", title={"text": title, "font": {"size": 14}},
                      height=height, margin={"l": 60, "r": 20, "t": 40, "b": 45})
    return fig


def breakdown_parts(bd: pd.DataFrame) -> list[str]:
    """The parts a breakdown has (`<part>_s` columns), in the analyzer's order; a saved
    result from before the I/O part has the other three."""
    return [p for p in PARTS if f"{p}_s" in bd.columns]


def part_colour(part: str) -> str:
    return palette.PART_COLOURS[part]


BAR_HEADROOM = 1.05  # a y-range given to bars: the tallest bar just below the top


def breakdown_top(a: Panels) -> float:
    """The tallest stacked bar of the breakdown (s): its parts summed per rank."""
    bd = a.breakdown
    parts = [f"{p}_s" for p in breakdown_parts(bd)]
    if bd.empty or not parts:
        return 0.0
    top = float(bd[parts].sum(axis=1).max())
    return top if np.isfinite(top) else 0.0


def bar_range(top: float) -> list[float] | None:
    """A y-range [0, top] with headroom for bars, None (Plotly's own) for no bars."""
    return [0.0, top * BAR_HEADROOM] if top > 0 else None


def breakdown_figure(a: Panels, label: str = "", top: float | None = None) -> go.Figure:
    """Stacked bars per rank; `top`: the y-range's top (the larger of two runs' tallest
    bars in compare mode, so both charts share one scale), None: Plotly's own."""
    bd = a.breakdown
    fig = go.Figure()
    if not bd.empty:
        x = [f"rank {r}" for r in bd["rank"]]
        for part in breakdown_parts(bd):
            name = PART_LABELS[part]
            fig.add_bar(x=x, y=bd[f"{part}_s"], name=name, marker_color=part_colour(part),
                        customdata=[numbers.seconds(v) for v in bd[f"{part}_s"]],
                        hovertemplate=f"%{{x}}<br>{name}: %{{customdata}}<extra></extra>")
    # plain decimals on the axis (its unit in the title): no "500µ", no exponent
    fig.update_layout(barmode="stack", yaxis={"title": "seconds", "exponentformat": "none"})
    shared = None if top is None else bar_range(top)
    if shared:
        fig.update_yaxes(range=shared, autorange=False)
    return _layout(fig, f"Time per rank {plot_text(label)}".strip())


def duration_histogram(model: TraceModel, function: str | None,
                       window: Window | None = None) -> go.Figure:
    """Jumpshot's statistics window: how long the calls of one function take, those of
    `window` (default: the whole run, all ranks) counted as its functions table counts
    them, so the bars add up to the table's `calls`."""
    fig = go.Figure()
    if function:
        w = window or model.session.window_index.whole()
        d, n = w.durations(function)
        d = np.maximum(d, 1)
        if len(d):
            edges = np.logspace(np.log10(d.min()), np.log10(d.max() * 1.0001), 41)
            # the ends exactly: 10**log10(x) may round above x and drop the shortest call
            edges[0], edges[-1] = d.min(), d.max() * 1.0001
            counts, edges = np.histogram(d, bins=edges, weights=n)
            centres = np.sqrt(edges[:-1] * edges[1:]) / 1e9
            fig.add_bar(x=centres, y=counts.astype(np.int64), width=np.diff(edges) / 1e9,
                        marker_color=palette.colours(model.index.functions).get(
                            function, palette.colour(function)), name=plot_text(function),
                        customdata=[numbers.seconds(c) for c in centres],
                        hovertemplate="%{customdata}: %{y} calls<extra></extra>")
    # a log axis over decades: SI ticks with the unit on each ("10µs", "1ms"), not 1e-05
    fig.update_layout(xaxis={"type": "log", "title": "duration", "exponentformat": "SI",
                             "ticksuffix": "s"}, yaxis_title="calls")
    return _layout(fig, f"Durations of {plot_text(function) if function else '…'}")


# the matrix's colours: empty pairs stay white, any pair with messages is visibly blue
MATRIX_SCALE = [[0.0, "#dbe9f6"], [0.5, "#4f8fc0"], [1.0, "#08306b"]]
CELL_TEXT_MAX_RANKS = 16  # more ranks: numbers on hover only (cells too small to read)


def rank_axis(n: int) -> dict:
    """An axis of ranks: whole numbers only (never a tick at 0.5), at most ~16 ticks."""
    return {"tickmode": "linear", "tick0": 0, "dtick": max(1, -(-n // 16)),
            "tickformat": "d", "range": [-0.5, n - 0.5]}


def matrix_metrics(a: Panels, num_ranks: int) -> dict[str, tuple[np.ndarray, list]]:
    """metric -> (values, cell texts) of the sender × receiver matrix; NaN where no
    message went. Bandwidth is bytes over the summed send-to-receive time."""
    m = a.comm_matrix
    shape = (num_ranks, num_ranks)
    z = {k: np.full(shape, np.nan) for k in ("bytes", "messages", "time", "bandwidth")}
    if not m.empty:
        s, r = m["send_rank"].to_numpy(np.int64), m["recv_rank"].to_numpy(np.int64)
        ok = (s >= 0) & (s < num_ranks) & (r >= 0) & (r < num_ranks)
        s, r, m = s[ok], r[ok], m[ok]
        z["bytes"][s, r] = m["bytes"].to_numpy(float)
        z["messages"][s, r] = m["messages"].to_numpy(float)
        if "transfer_s" in m:
            t = m["transfer_s"].to_numpy(float)
            z["time"][s, r] = t
            z["bandwidth"][s, r] = np.where(t > 0, m["bytes"].to_numpy(float) / np.where(
                t > 0, t, 1), np.nan)
    fmt = {"bytes": numbers.data, "messages": lambda v: f"{v:,.0f}",
           "time": numbers.seconds, "bandwidth": numbers.rate}
    out = {}
    for k, v in z.items():
        if k in ("time", "bandwidth") and "transfer_s" not in m:
            continue
        out[k] = (v, [[fmt[k](x) if np.isfinite(x) else "" for x in row] for row in v])
    return out


MATRIX_LABELS = {"bytes": "bytes sent", "messages": "messages", "time": "time in flight",
                 "bandwidth": "bandwidth"}


def comm_matrix_figure(a: Panels, num_ranks: int) -> go.Figure:
    """Sender × receiver, coloured from 0 (not from the smallest value), the number in
    each cell (up to 16 ranks), and buttons for bytes, messages, time and bandwidth."""
    metrics = matrix_metrics(a, num_ranks)
    show_text = num_ranks <= CELL_TEXT_MAX_RANKS

    def style(key: str) -> dict:
        z, text = metrics[key]
        top = float(np.nanmax(z)) if np.isfinite(z).any() else 1.0
        return {"z": z, "text": text, "zmin": 0.0, "zmax": top or 1.0,
                "texttemplate": "%{text}" if show_text else None,
                "colorbar": {"title": {"text": MATRIX_LABELS[key]}},
                "hovertemplate": f"rank %{{y}} → rank %{{x}}<br>{MATRIX_LABELS[key]}: "
                                 "%{text}<extra></extra>"}

    first = style("bytes")
    fig = go.Figure(go.Heatmap(x=list(range(num_ranks)), y=list(range(num_ranks)),
                               colorscale=MATRIX_SCALE, xgap=1, ygap=1,
                               textfont={"size": 10}, **first))
    buttons = []
    for key in metrics:
        st = style(key)
        buttons.append({"label": key, "method": "restyle", "args": [{
            "z": [st["z"]], "text": [st["text"]], "zmin": [0.0], "zmax": [st["zmax"]],
            "colorbar.title.text": MATRIX_LABELS[key], "hovertemplate": [st["hovertemplate"]],
        }]})
    fig.update_layout(
        xaxis={"title": "receiver", **rank_axis(num_ranks)},
        # senders top to bottom: rank 0 first
        yaxis={"title": "sender", **rank_axis(num_ranks), "range": [num_ranks - 0.5, -0.5]},
        plot_bgcolor="#ffffff",
        updatemenus=[{"type": "buttons", "direction": "right", "buttons": buttons,
                      "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom",
                      "showactive": True, "pad": {"r": 4, "t": 0}}])
    return _layout(fig, "Communication matrix", 400)


def message_size_figure(a: Panels) -> go.Figure:
    ms = a.message_sizes
    fig = go.Figure()
    if not ms.empty:
        label = [_size(lo) for lo in ms["bucket_lo"]]
        fig.add_bar(x=label, y=ms["messages"], name="messages",
                    marker_color=palette.PART_COLOURS["communication"],
                    hovertemplate="%{x}: %{y} messages<extra></extra>")
        fig.add_scatter(x=label, y=ms["bandwidth_MBps"], name="bandwidth (MB/s)", yaxis="y2",
                        mode="lines+markers", line={"color": palette.NEUTRALS[0]},
                        customdata=[numbers.rate(v * 1e6) for v in ms["bandwidth_MBps"]],
                        hovertemplate="%{x}: %{customdata}<extra></extra>")
        buckets = list(ms["bucket_lo"])
        for sw in a.protocol_switches:
            lo = 1 << (int(sw.bytes).bit_length() - 1) if sw.bytes > 0 else 0
            if lo not in buckets:
                continue
            # categories sit at 0, 1, 2...: the line goes between the last eager bucket
            # and the first one past the switch
            x = buckets.index(lo) - 0.5
            fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, yref="paper",
                          line={"color": "#555", "dash": "dash", "width": 1})
            fig.add_annotation(x=x, y=1, yref="paper", showarrow=False, xanchor="left",
                               yanchor="top", font={"size": 11},
                               text=f"{plot_text(sw.path)}: eager up to "
                                    f"{_size(sw.last_below_bytes)}, "
                                    f"rendezvous from {_size(sw.bytes)} ({sw.jump:.1f}x)")
    # bandwidths and counts are never negative: axes from 0 (Plotly pads below otherwise)
    fig.update_layout(xaxis_title="message size (from)",
                      yaxis={"title": "messages", "rangemode": "tozero"},
                      yaxis2={"title": "MB/s", "overlaying": "y", "side": "right",
                              "rangemode": "tozero"},
                      legend={"orientation": "h", "y": 1.12})
    return _layout(fig, "Message sizes and achieved bandwidth")


def _size(b: int) -> str:
    return numbers.size(b)


def findings_list(a: Panels, panel: int) -> html.Div:
    listed = [(i, f) for i, f in enumerate(a.findings) if not f.minor_reason]
    minor = [(i, f) for i, f in enumerate(a.findings) if f.minor_reason]
    if not a.findings:
        return html.Div("No findings.", className="muted no-findings")
    parts: list = [html.Ol([_finding_item(f, panel, i) for i, f in listed],
                           className="findings")] if listed else [
        html.Div("No findings above the noise floor.", className="muted")]
    if minor:  # listed apart, each with why it is minor (as `minor` in the JSON)
        parts += [html.Details([
            html.Summary(f"Below the noise floor: {numbers.count(len(minor), 'finding')}"),
            html.Div(a.noise_rule, className="muted"),
            html.Ol([_finding_item(f, panel, i) for i, f in minor],
                    className="findings minor")], open=not listed)]
    return html.Div(parts)


def _finding_item(f: FindingView, panel: int, i: int) -> html.Li:
    # a finding of the whole run (descheduled) has no calls to zoom to or count
    whole = run_wide(f.function, f.callsite)
    title = f"{f.kind}: {where(f.function, f.callsite)}"
    return html.Li([
        html.B(title, className="finding-run") if whole else
        html.Button(title, className="finding", title="zoom the timeline to its occurrences",
                    **{"data-panel": panel, "data-idx": i}),  # see assets/findings.js
        *oversubscribed_mark(f.oversubscribed_note),
        html.Span((f" saves ≈ {numbers.seconds(f.estimated_savings_s)} of "
                   if f.saving_stated else " no saving stated · ")
                  + numbers.seconds(f.time_s)
                  + ("" if whole else f" · {numbers.count(len(f.calls), 'call')}"),
                  className="muted"),
        *([html.Div("via " + " <- ".join(f.callpath), className="muted callpath")]
          if len(f.callpath) > 1 else []),
        html.Div(f.message, className="finding-msg"),
        *([html.Div(f.oversubscribed_note, className="finding-msg oversubscribed-note")]
          if f.oversubscribed_note else []),
        *([html.Div("minor: " + f.minor_reason, className="muted minor-reason")]
          if f.minor_reason else []),
    ])


def oversubscribed_mark(note: str | bool | None) -> list[html.Span]:
    """The mark of a finding that descheduling may drive (the JSON's `oversubscribed`),
    its note as the tooltip where there is one."""
    if not note:
        return []
    title = note if isinstance(note, str) else "measured oversubscribed"
    return [html.Span("oversubscribed", className="mark oversubscribed", title=title)]


def breakdown_table(a: Panels) -> pd.DataFrame:
    """Summed over ranks: the parts in seconds and as a share of the total."""
    bd = a.breakdown
    if bd.empty:
        return pd.DataFrame(columns=["part", "seconds", "share"])
    total = float(bd["total_s"].sum()) or 1.0
    rows = [{"part": part, "seconds": float(bd[f"{part}_s"].sum()),
             "share": float(bd[f"{part}_s"].sum()) / total} for part in breakdown_parts(bd)]
    rows.append({"part": "wall (slowest rank)", "seconds": float(bd["total_s"].max()),
                 "share": float("nan")})
    return pd.DataFrame(rows)


# -- above each run's timeline: its warnings and how its lengths relate ---------------------
SECONDS_DIGITS = 4  # as the panel's header writes the run's span


def _s(x: float) -> str:
    return numbers.seconds(x, SECONDS_DIGITS)


def _num(x: float, cls: str) -> html.Span:
    """A number of the totals line, its class naming what it is (tests read them)."""
    return html.Span(_s(x), className=cls)


def _measured_interval(t: Totals) -> str:
    """Where each rank's breakdown starts and ends, and what that leaves out."""
    start = f"{t.init}'s end" if t.init else "its first event"
    end = f"{t.finalize}'s start" if t.finalize else "its last event"
    outside = "both" if t.init and t.finalize else t.init or t.finalize
    return f"from {start} to {end}" + (f" ({outside} outside it)" if outside else "")


def totals_line(t: Totals) -> html.Div:
    """One line: the run's span (the header's), the interval the breakdown covers per
    rank, the critical path's length and interval, so the three totals are not read as
    one disagreeing with another."""
    lo, hi = t.rank_s
    ranks = ([_num(lo, "total-rank-min"), " to ", _num(hi, "total-rank-max")]
             if _s(lo) != _s(hi) else [_num(hi, "total-rank-max")])
    return html.Div([
        "run ", _num(t.run_s, "total-run"), " (trace start to last event) · breakdown ",
        *ranks, f" per rank, {_measured_interval(t)} · critical path ",
        _num(t.path_s, "total-path"), ", from ", _num(t.path_from_s, "total-path-from"),
        " to ", _num(t.path_to_s, "total-path-to"), " (across the ranks' intervals)",
    ], className="muted totals")


def run_notes(notes: RunNotes) -> list:
    """The run's warnings (every one the analysis gave), then its totals line."""
    out: list = [html.Div([html.B("warning: "), w.text], className="run-warning")
                 for w in notes.warnings]
    if notes.totals is not None:
        out.append(totals_line(notes.totals))
    return out
