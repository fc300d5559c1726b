"""Comparison reports: analyze two traces, compare them, render HTML / Markdown / terminal."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
from rich.console import Console
from rich.table import Table

from mpiscope import output
from mpiscope.analysis import iterations, report
from mpiscope.analysis.comparison import Comparison, RunSummary, build
from mpiscope.archive import fom, reader
from mpiscope.archive.trace import Trace
from mpiscope.render import html as htmlreport
from mpiscope.render.palette import COMPUTE, colour  # same colours as the web UI


def summarize(trace_dir: Path, label: str | None = None) -> tuple[RunSummary, Trace]:
    trace = reader.load(trace_dir)
    rep = report.analyze(trace).to_dict()
    return RunSummary(label or Path(trace_dir).name, Path(trace_dir), rep,
                      fom.read(trace_dir)), trace


def iteration_window(trace: Trace, count: int = 3) -> tuple[int, int]:
    """A few iterations of the main loop (ns), or the start of the run without one."""
    loop = iterations.detect(trace)
    if loop is not None and loop.iterations > count:
        b = loop.bounds[loop.bounds["rank"] == 0].sort_values("iteration")
        first = min(1, len(b) - count)
        return int(b["start"].iloc[first]), int(b["end"].iloc[first + count - 1])
    c = trace.calls
    lo = int(c["start"].min()) if len(c) else 0
    hi = int(c["end"].max()) if len(c) else 1
    return lo, lo + max((hi - lo) // 20, 1)


def timeline_figure(trace: Trace, title: str, window: tuple[int, int] | None = None,
                    max_states: int = 5000) -> go.Figure:
    """A static Jumpshot-style picture: a lane per rank, MPI states coloured by function."""
    lo, hi = window or iteration_window(trace)
    c = trace.calls
    c = c[(c["end"] >= lo) & (c["start"] <= hi) & ~c["kind"].isin(["init", "finalize"])]
    c = c.nlargest(max_states, "end") if len(c) > max_states else c
    fig = go.Figure()
    for fn, g in c.groupby("function", observed=True):
        s = (g["start"].clip(lower=lo) - lo) / 1e6
        d = (g["end"].clip(upper=hi) - g["start"].clip(lower=lo)) / 1e6
        fig.add_bar(name=str(fn), orientation="h", y=g["rank"], x=d, base=s,
                    marker_color=colour(str(fn)), width=0.6,
                    customdata=g[["callsite"]].astype(str).to_numpy(),
                    hovertemplate="%{fullData.name}<br>rank %{y}<br>start %{base:.3f} ms"
                                  "<br>%{x:.3f} ms<br>%{customdata[0]}<extra></extra>")
    fig.update_layout(title=title, barmode="overlay", height=120 + 40 * trace.num_ranks,
                      xaxis_title="time in window (ms)", yaxis_title="rank",
                      yaxis=dict(autorange="reversed", dtick=1), plot_bgcolor=COMPUTE,
                      margin=dict(l=50, r=20, t=50, b=40), legend_orientation="h")
    return fig


def comparison(a: Path, b: Path, label_a: str | None = None,
               label_b: str | None = None) -> tuple[Comparison, list[go.Figure]]:
    sa, ta = summarize(a, label_a)
    sb, tb = summarize(b, label_b)
    cmp = build(sa, sb)
    return cmp, [timeline_figure(ta, f"{sa.label}: a few iterations"),
                 timeline_figure(tb, f"{sb.label}: a few iterations")]


def _make_parent(out: Path) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise output.cannot_write(out, err) from None


def write_html(cmp: Comparison, timelines: list[go.Figure], out: Path, title: str = "") -> None:
    _make_parent(out)
    output.write_text(out, htmlreport.render_html(cmp, timelines, title))


def write_markdown(cmp: Comparison, out: Path) -> None:
    _make_parent(out)
    output.write_text(out, htmlreport.render_markdown(cmp))


def print_comparison(cmp: Comparison, console: Console | None = None) -> None:
    console = console or Console()
    a, b = cmp.a, cmp.b
    t = Table(title=f"{a.label} → {b.label}")
    for col in ("", a.label, b.label):
        t.add_column(col, justify="right" if col else "left")
    fa, fb = cmp.figure("mflops")
    if fa is not None and fb is not None:
        t.add_row("MFLOPS", f"{fa:.1f}", f"{fb:.1f}")
    t.add_row("wall time (s)", f"{a.wall_s:.4f}", f"{b.wall_s:.4f}")
    for part in htmlreport.PARTS:
        t.add_row(f"{part} share", f"{100 * a.share(part):.1f}%", f"{100 * b.share(part):.1f}%")
    for f in cmp.functions[:5]:
        t.add_row(f"{f.name} share", f"{100 * f.share_a:.1f}%", f"{100 * f.share_b:.1f}%")
    console.print(t)
    if cmp.speedup:
        console.print(f"speed-up {cmp.speedup:.3f}× ({cmp.speedup_basis}); predicted gain "
                      f"{cmp.predicted_gain_s:.4f} s, measured {cmp.measured_gain_s:.4f} s")
