"""Self-contained HTML (and Markdown) rendering of a Comparison.

The HTML inlines Plotly's JavaScript once, so the report opens offline with no
network request at all.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone

import plotly.graph_objects as go
import plotly.offline

from mpiscope.analysis.comparison import Comparison, RunSummary
from mpiscope.render.cutshort import cut_short_text

PARTS = ("compute", "communication", "synchronization")
PART_COLOURS = {"compute": "#9bbb59", "communication": "#4f81bd", "synchronization": "#c0504d"}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1200px;color:#222;line-height:1.4}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{font-size:1.2rem;border-bottom:1px solid #ddd;
padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .6rem;text-align:right}
th{background:#f4f4f4} td:first-child,th:first-child{text-align:left}
.good{color:#1a7f37;font-weight:600} .bad{color:#b42318;font-weight:600}
.muted{color:#666} .kpi{display:inline-block;margin-right:2rem}
.kpi b{font-size:1.5rem;display:block} code{background:#f4f4f4;padding:0 .2rem}
.warning{background:#fff4e5;border-left:4px solid #b54708;padding:.5rem .8rem;margin:1rem 0}
"""


def esc(value: object) -> str:
    return html.escape(str(value))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fmt_s(seconds: float) -> str:
    return f"{seconds:.4g} s" if seconds >= 0.01 else f"{seconds * 1e3:.3g} ms"


def fmt_pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def signed(value: float, text: str, lower_is_better: bool = True) -> str:
    good = value < 0 if lower_is_better else value > 0
    cls = "good" if good else "bad" if value else "muted"
    return f'<span class="{cls}">{"+" if value > 0 else ""}{text}</span>'


def figure_div(fig: go.Figure) -> str:
    return plotly.offline.plot(fig, output_type="div", include_plotlyjs=False,
                               config={"displaylogo": False})


def breakdown_figure(runs: Sequence[RunSummary]) -> go.Figure:
    """Per-rank stacked compute/communication/synchronization, runs side by side."""
    fig = go.Figure()
    for part in PARTS:
        runs_axis, ranks_axis, y = [], [], []
        for run in runs:
            for r in run.report["ranks"]:
                runs_axis.append(run.label)
                ranks_axis.append(f"rank {r['rank']}")
                y.append(r[f"{part}_s"])
        fig.add_bar(name=part, x=[runs_axis, ranks_axis], y=y, marker_color=PART_COLOURS[part])
    fig.update_layout(barmode="stack", height=360, yaxis_title="seconds",
                      margin=dict(l=50, r=20, t=30, b=60), legend_orientation="h")
    return fig


def cut_short_notes(cmp: Comparison) -> list[tuple[RunSummary, str]]:
    """(run, warning) for each run whose trace has ranks cut short: its numbers cover only
    the part of the run that was traced, which the reader of a report must be told."""
    notes = []
    for run in (cmp.a, cmp.b):
        text = cut_short_text(run.truncated_ranks)
        if text:
            notes.append((run, text))
    return notes


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


def render_html(cmp: Comparison, timelines: Sequence[go.Figure] = (), title: str = "") -> str:
    a, b = cmp.a, cmp.b
    title = title or f"mpiscope: {a.label} vs {b.label}"
    now = datetime.now(timezone.utc)
    parts: list[str] = [f"<h1>{esc(title)}</h1>",
                        f'<p class="muted">generated {now:%Y-%m-%d %H:%M UTC} by mpiscope</p>']
    for run, text in cut_short_notes(cmp):
        parts.append(f'<p class="warning cut-short"><b>warning:</b> {esc(run.label)} '
                     f'(<code>{esc(run.trace_dir)}</code>): {esc(text)}</p>')

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
        [p, fmt_pct(a.share(p)), fmt_pct(b.share(p)),
         signed(b.share(p) - a.share(p), f"{100 * (b.share(p) - a.share(p)):.1f} pts")]
        for p in PARTS]))
    parts.append(figure_div(breakdown_figure([a, b])))

    parts.append("<h2>MPI functions</h2>")
    parts.append(table(
        ["function", f"calls {a.label}", f"calls {b.label}", f"time {a.label}",
         f"time {b.label}", f"share {a.label}", f"share {b.label}", "Δ time"],
        [[esc(f.name), f.calls_a, f.calls_b, fmt_s(f.time_a), fmt_s(f.time_b),
          fmt_pct(f.share_a), fmt_pct(f.share_b), signed(f.delta_s, fmt_s(f.delta_s))]
         for f in cmp.functions], cls="functions"))

    parts.append("<h2>Wait states</h2>")
    wa, wb = a.report["wait_states"], b.report["wait_states"]
    parts.append(table(["wait state", a.label, b.label, "Δ"], [
        [esc(k.removesuffix("_s").replace("_", " ")), fmt_s(wa[k]), fmt_s(wb.get(k, 0.0)),
         signed(wb.get(k, 0.0) - wa[k], fmt_s(wb.get(k, 0.0) - wa[k]))] for k in wa]))

    parts.append(f"<h2>Findings of {esc(a.label)} and what {esc(b.label)} did to them</h2>")
    if cmp.outcomes:
        parts.append(table(
            ["kind", "function", "call site", "calls", "time", "predicted saving",
             f"in {b.label}", "message"],
            [[esc(o.finding["kind"]), esc(o.finding["function"]),
              f'<code>{esc(o.finding["callsite"])}</code>', o.finding["calls"],
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

    if timelines:
        parts.append("<h2>Timelines (a few iterations)</h2>")
        parts.extend(figure_div(fig) for fig in timelines)

    body = "\n".join(parts)
    plotly_js = plotly.offline.get_plotlyjs()
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{plotly_js}</script>"
            f"</head><body>{body}</body></html>")


def md(value: object) -> str:
    """Text safe inside a Markdown table cell (labels and messages may hold `|`)."""
    return " ".join(str(value).split()).replace("|", "\\|")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
             align: str = "") -> list[str]:
    """A GitHub table; `align` is one letter per column, l or r (default: l then r...)."""
    align = align or "l" + "r" * (len(headers) - 1)
    rule = "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"
    return ["| " + " | ".join(md(h) for h in headers) + " |", rule,
            *("| " + " | ".join(md(c) for c in row) + " |" for row in rows)]


def md_change(a: float, b: float) -> str:
    return f"{100 * (b - a) / a:+.1f}%" if a else "–"


def md_run_rows(a: RunSummary, b: RunSummary) -> list[list[object]]:
    def meta(run: RunSummary) -> dict:
        return run.report.get("meta", {})

    def hosts(run: RunSummary) -> str:
        return ", ".join(sorted({r["host"] for r in run.report["ranks"]}))

    return [
        ["command", f"`{meta(a).get('cmdline', '?')}`", f"`{meta(b).get('cmdline', '?')}`"],
        ["ranks", len(a.report["ranks"]), len(b.report["ranks"])],
        ["hosts", hosts(a), hosts(b)],
        ["MPI library", meta(a).get("mpi_library", "?"), meta(b).get("mpi_library", "?")],
        ["date", meta(a).get("start_time", "?"), meta(b).get("start_time", "?")],
        ["trace", f"`{a.trace_dir}`", f"`{b.trace_dir}`"],
    ]


def md_rank_rows(a: RunSummary, b: RunSummary) -> list[list[object]]:
    """One row per rank: each part as `before → after` seconds."""
    ra = {r["rank"]: r for r in a.report["ranks"]}
    rb = {r["rank"]: r for r in b.report["ranks"]}

    def cell(rank: int, key: str) -> str:
        x, y = ra.get(rank, {}).get(key), rb.get(rank, {}).get(key)
        return f"{'–' if x is None else fmt_s(x)} → {'–' if y is None else fmt_s(y)}"

    return [[rank, ra.get(rank, rb.get(rank, {})).get("host", "?"),
             *(cell(rank, f"{k}_s") for k in ("total", *PARTS))]
            for rank in sorted(set(ra) | set(rb))]


def render_markdown(cmp: Comparison) -> str:
    """A summary for a pull-request comment: the headline, then tables a reviewer can scan
    (the HTML report has the same numbers plus the charts and timelines)."""
    a, b = cmp.a, cmp.b
    lines = [f"### mpiscope: {md(a.label)} vs {md(b.label)}", ""]
    for run, text in cut_short_notes(cmp):
        lines += [f"> **warning:** {md(run.label)} (`{run.trace_dir}`): {md(text)}", ""]

    headline: list[list[object]] = []
    fa, fb = cmp.figure("mflops")
    if fa is not None and fb is not None:
        headline.append(["MFLOPS (program output)", f"{fa:.1f}", f"{fb:.1f}", md_change(fa, fb)])
    headline.append(["wall time (slowest rank)", fmt_s(a.wall_s), fmt_s(b.wall_s),
                     md_change(a.wall_s, b.wall_s)])
    lines += md_table(["", a.label, b.label, "change"], headline)
    lines.append("")
    if cmp.speedup:
        lines.append(f"**speed-up {cmp.speedup:.3f}×** ({cmp.speedup_basis}); predicted gain "
                     f"{fmt_s(cmp.predicted_gain_s)}, measured {fmt_s(cmp.measured_gain_s)}")
    else:
        lines.append(f"predicted gain {fmt_s(cmp.predicted_gain_s)}, "
                     f"measured {fmt_s(cmp.measured_gain_s)}")

    lines += ["", "#### Runs", ""]
    lines += md_table(["", a.label, b.label], md_run_rows(a, b), "lll")

    lines += ["", "#### Time breakdown (share of all ranks' time)", ""]
    lines += md_table(["", a.label, b.label, "change"], [
        [p, fmt_pct(a.share(p)), fmt_pct(b.share(p)),
         f"{100 * (b.share(p) - a.share(p)):+.1f} pts"] for p in PARTS])

    rank_rows = md_rank_rows(a, b)
    rank_table = md_table(["rank", "host", "total", *PARTS], rank_rows, "rlrrrr")
    title = f"Per rank, {a.label} → {b.label}"
    if len(rank_rows) > 16:  # long: folded, so the comment stays short
        lines += ["", f"<details><summary>{md(title)}</summary>", "", *rank_table, "",
                  "</details>"]
    else:
        lines += ["", f"#### {md(title)}", "", *rank_table]

    wa, wb = a.report["wait_states"], b.report["wait_states"]
    lines += ["", "#### Wait states (summed over ranks)", ""]
    lines += md_table(["", a.label, b.label, "Δ"], [
        [k.removesuffix("_s").replace("_", " "), fmt_s(wa[k]), fmt_s(wb.get(k, 0.0)),
         ("+" if wb.get(k, 0.0) > wa[k] else "") + fmt_s(wb.get(k, 0.0) - wa[k])]
        for k in wa])

    lines += ["", f"#### MPI functions, {md(a.label)} → {md(b.label)}", ""]
    lines += md_table(
        ["function", "calls", "time (all ranks)", "share of time", "Δ time"],
        [[f.name, f"{f.calls_a} → {f.calls_b}", f"{fmt_s(f.time_a)} → {fmt_s(f.time_b)}",
          f"{fmt_pct(f.share_a)} → {fmt_pct(f.share_b)}",
          ("+" if f.delta_s > 0 else "") + fmt_s(f.delta_s)] for f in cmp.functions[:10]])

    lines += ["", f"#### Findings of {md(a.label)} and what {md(b.label)} did to them", ""]
    if cmp.outcomes:
        lines += md_table(["finding", "call site", "predicted saving", "outcome"], [
            [f"{o.finding['kind']} {o.finding['function']}", f"`{o.finding['callsite']}`",
             fmt_s(o.finding["estimated_savings_s"]),
             "resolved" if o.resolved else "still " + fmt_s(o.time_b_s)]
            for o in cmp.outcomes], "llrl")
    else:
        lines.append(f"No findings in {md(a.label)}.")
    return "\n".join(lines) + "\n"
