"""The self-contained HTML report of a Comparison.

The HTML inlines Plotly's JavaScript once, so the report opens offline with no
network request at all.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import plotly.graph_objects as go
import plotly.offline

from mpiscope import numbers, output
from mpiscope.analysis import callpaths
from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.analysis.comparison import Comparison, RunSummary
from mpiscope.analysis.explanation import Explanation, explain
from mpiscope.numbers import fmt_pct, fmt_s
from mpiscope.render import explain as explained
from mpiscope.render import timeline
from mpiscope.render.palette import PART_COLOURS
from mpiscope.render.plottext import plot_text
from mpiscope.render.runwarnings import RunWarning, report_warnings

# html: a scrollbar from the start, so the page is as wide when Plotly sizes a chart (once,
# to its container) as after the charts below it made the page taller than the window.
# body's padding keeps text off the window's edges below max-width; the findings' messages
# take the table's spare width, so the table fits a 1024-px window
CSS = """
html{overflow-y:scroll}
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
padding:0 1rem;max-width:1200px;color:#222;line-height:1.4}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{font-size:1.2rem;border-bottom:1px solid #ddd;
padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .6rem;text-align:right}
th{background:#f4f4f4} td:first-child,th:first-child{text-align:left}
.good{color:#1a7f37;font-weight:600} .bad{color:#b42318;font-weight:600}
.muted{color:#666} .kpi{display:inline-block;margin-right:2rem}
.kpi b{font-size:1.5rem;display:block} code{background:#f4f4f4;padding:0 .2rem}
table.findings{width:100%} table.findings td:last-child{text-align:left;min-width:16rem}
table.findings th:last-child{text-align:left}
.warning{background:#fff4e5;border-left:4px solid #b54708;padding:.5rem .8rem;margin:1rem 0}
"""


def esc(value: object) -> str:
    return html.escape(str(value))


def site_html(finding: dict) -> str:
    """The call site, and below it its call path where it has more frames."""
    site = finding.get("callsite", "")
    v = callpaths.via(finding.get("callpath") or [], site)
    out = f"<code>{esc(site)}</code>"
    return out + (f'<br><span class="muted callpath">{esc(v)}</span>' if v else "")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def signed(value: float, text: str, lower_is_better: bool = True) -> str:
    good = value < 0 if lower_is_better else value > 0
    cls = "good" if good else "bad" if value else "muted"
    return f'<span class="{cls}">{"+" if value > 0 else ""}{text}</span>'


def figure_div(fig: go.Figure) -> str:
    return plotly.offline.plot(fig, output_type="div", include_plotlyjs=False,
                               config={"displaylogo": False})


def breakdown_figure(runs: Sequence[RunSummary]) -> go.Figure:
    """Per-rank stacked compute/communication/synchronization/I/O, runs side by side."""
    fig = go.Figure()
    for part in PARTS:
        runs_axis, ranks_axis, y = [], [], []
        for run in runs:
            for r in run.report["ranks"]:
                runs_axis.append(plot_text(run.label))
                ranks_axis.append(f"rank {r['rank']}")
                y.append(r.get(f"{part}_s", 0.0))
        fig.add_bar(name=PART_LABELS[part], x=[runs_axis, ranks_axis], y=y,
                    marker_color=PART_COLOURS[part])
    # room below for both rows of labels (rank, then run), the legend above the bars
    fig.update_layout(barmode="stack", height=400, yaxis_title="seconds",
                      margin=dict(l=60, r=20, t=50, b=90), legend_orientation="h",
                      legend=dict(y=1.02, yanchor="bottom", x=0))
    return fig


def warning_html(w: RunWarning) -> str:
    """One warning of a run, above the figures it qualifies."""
    cls = "warning cut-short" if w.cut_short else "warning"
    return (f'<p class="{cls}"><b>warning:</b> {esc(w.run.label)} '
            f'(<code>{esc(w.run.trace_dir)}</code>): {esc(w.text)}</p>')


def run_meta_rows(run: RunSummary) -> list[list[object]]:
    meta = run.report.get("meta", {})
    hosts = sorted({r["host"] for r in run.report["ranks"]})
    return [
        ["program", esc(meta.get("program", "?"))],
        ["ranks", len(run.report["ranks"])],
        ["hosts", esc(", ".join(hosts))],
        ["MPI library", esc(meta.get("mpi_library", "?"))],
        ["date", esc(meta.get("start_time", "?"))],
        ["trace", f"<code>{esc(run.trace_dir)}</code>"],
    ]


def render_html(cmp: Comparison, title: str = "", ex: Explanation | None = None) -> str:
    """The report; with timelines of a few iterations of the runs analyzed here."""
    a, b = cmp.a, cmp.b
    ex = ex or explain(cmp)
    title = title or f"mpiscope: {a.label} vs {b.label}"
    now = datetime.now(timezone.utc)
    parts: list[str] = [f"<h1>{esc(title)}</h1>",
                        f'<p class="muted">generated {now:%Y-%m-%d %H:%M UTC} by mpiscope</p>']
    parts += [warning_html(w) for w in report_warnings(cmp)]

    # headline figures
    kpis = []
    fa, fb = cmp.figure("mflops")
    if fa is not None and fb is not None:
        kpis.append(f'<div class="kpi">MFLOPS<b>{fa:.1f} → {fb:.1f}</b></div>')
    if cmp.speedup:
        kpis.append(f'<div class="kpi">speed-up ({cmp.speedup_basis})'
                    f'<b id="speedup">{cmp.speedup:.3f}×</b></div>')
    kpis.append(f'<div class="kpi">wall time<b>{fmt_s(a.wall_s)} → {fmt_s(b.wall_s)}</b></div>')
    kpis.append(f'<div class="kpi">predicted gain<b>{fmt_s(cmp.predicted_gain_s)}</b></div>')
    kpis.append(f'<div class="kpi">measured gain<b>{fmt_s(cmp.measured_gain_s)}</b></div>')
    parts.append("<div>" + "".join(kpis) + "</div>")

    parts.append("<h2>Runs</h2>")
    rows_a, rows_b = run_meta_rows(a), run_meta_rows(b)
    parts.append(table(["", a.label, b.label],
                       [[ra[0], ra[1], rb[1]] for ra, rb in zip(rows_a, rows_b, strict=True)]))
    if a.figures or b.figures:
        keys = sorted(set(a.figures or {}) | set(b.figures or {}))
        parts.append("<h3>Figures of merit (program output)</h3>")
        parts.append(table(["", a.label, b.label],
                           [[esc(k), esc((a.figures or {}).get(k, "")),
                             esc((b.figures or {}).get(k, ""))] for k in keys]))

    parts.append("<h2>Time breakdown</h2>")
    parts.append(table(["share of time", a.label, b.label, "change"], [
        [PART_LABELS[p], fmt_pct(a.share(p)), fmt_pct(b.share(p)),
         signed(b.share(p) - a.share(p), f"{100 * (b.share(p) - a.share(p)):.1f} pts")]
        for p in PARTS]))
    parts.append(figure_div(breakdown_figure([a, b])))

    parts.append("<h2>MPI functions</h2>")
    # one unit for the times of a table, named in its headers
    tc = numbers.Column.of([x for f in cmp.functions for x in (f.time_a, f.time_b, f.delta_s)])
    parts.append(table(
        ["function", f"calls {a.label}", f"calls {b.label}", tc.header(f"time {a.label}"),
         tc.header(f"time {b.label}"), f"share {a.label}", f"share {b.label}",
         tc.header("Δ time")],
        [[esc(f.name), f.calls_a, f.calls_b, tc.cell(f.time_a), tc.cell(f.time_b),
          fmt_pct(f.share_a), fmt_pct(f.share_b), signed(f.delta_s, tc.cell(f.delta_s))]
         for f in cmp.functions], cls="functions"))

    parts.append("<h2>Wait states</h2>")
    wa, wb = a.report["wait_states"], b.report["wait_states"]
    wc = numbers.Column.of([x for k in wa for x in (wa[k], wb.get(k, 0.0))])
    parts.append(table(["wait state", wc.header(a.label), wc.header(b.label), wc.header("Δ")], [
        [esc(k.removesuffix("_s").replace("_", " ")), wc.cell(wa[k]), wc.cell(wb.get(k, 0.0)),
         signed(wb.get(k, 0.0) - wa[k], wc.cell(wb.get(k, 0.0) - wa[k]))] for k in wa]))

    parts.append(f"<h2>Findings of {esc(a.label)} and what {esc(b.label)} did to them</h2>")
    if cmp.outcomes:
        parts.append(table(
            ["kind", "function", "call site", "calls", "time", "predicted saving",
             f"in {b.label}", "message"],
            [[esc(o.finding["kind"]), esc(o.finding["function"]),
              site_html(o.finding), o.finding["calls"],
              fmt_s(o.finding["time_s"]), fmt_s(o.finding["estimated_savings_s"]),
              '<span class="good">resolved</span>' if o.resolved
              else f'<span class="bad">still {fmt_s(o.time_b_s)}</span>',
              f'<span class="muted">{esc(o.finding["message"])}</span>']
             for o in cmp.outcomes], cls="findings"))
    else:
        parts.append(f"<p>No findings in {esc(a.label)}.</p>")
    parts.append(
        f"<p>Predicted gain from the resolved findings: <b>{fmt_s(cmp.predicted_gain_s)}</b>; "
        f"measured change in wall time: <b>{fmt_s(cmp.measured_gain_s)}</b>.</p>")
    parts.append(explained.html_section(cmp, ex, table, figure_div))

    timelines = timeline.of_comparison(cmp)
    if timelines:
        parts.append("<h2>Timelines (a few iterations)</h2>")
        parts.extend(figure_div(fig) for fig in timelines)

    body = "\n".join(parts)
    plotly_js = plotly.offline.get_plotlyjs()
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{plotly_js}</script>"
            f"</head><body>{body}</body></html>")


def write_html(cmp: Comparison, out: Path, title: str = "",
               ex: Explanation | None = None) -> None:
    output.make_parent(out)
    output.write_text(out, render_html(cmp, title, ex))
