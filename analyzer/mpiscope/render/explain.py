"""The comparison's explanation (analysis.explanation) rendered: HTML section and
per-iteration figure, Markdown lines, terminal lines, JSON document."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from rich.console import Console
from rich.text import Text

from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.analysis.comparison import Comparison
from mpiscope.analysis.explanation import Explanation, per_iteration
from mpiscope.numbers import fmt_s, seconds
from mpiscope.render import term
from mpiscope.render.mdtext import md
from mpiscope.render.palette import PART_COLOURS
from mpiscope.render.plottext import plot_text

MAX_ITERATION_ROWS = 12  # Markdown: more iterations are shown in this many groups


def _esc(value: object) -> str:
    return html.escape(str(value))


def _signed(x: float) -> str:
    return ("+" if x > 0 else "−" if x < 0 else "") + fmt_s(abs(x))


def finding_rows(ex: Explanation) -> list[list[str]]:
    """Per finding of A: kind, function, call site, predicted saving, call-site time per
    rank A → B, measured change, on the critical path A → B, outcome (plain text)."""
    return [[c.kind, c.function, c.callsite, fmt_s(c.predicted_s),
             f"{fmt_s(c.site_a_s)} → {fmt_s(c.site_b_s)}", _signed(-c.measured_s),
             f"{fmt_s(c.path_a_s)} → {fmt_s(c.path_b_s)}",
             "resolved" if c.resolved else "still there"] for c in ex.findings]


FINDING_HEADERS = ["kind", "function", "call site", "predicted saving",
                   "call site per rank", "measured change", "on critical path", "outcome"]
SITE_HEADERS = ["function", "call site", "waiting per rank", "Δ waiting",
                "transfer per rank", "Δ transfer", "on critical path", "waiting in B"]


def site_rows(ex: Explanation, top: int = 12) -> list[list[str]]:
    rows = []
    for s in ex.sites[:top]:
        why = s.wait_kind_b or ""
        if s.partner_b:
            why += f" ({s.partner_b})"
        rows.append([s.function, s.callsite, f"{fmt_s(s.wait_a_s)} → {fmt_s(s.wait_b_s)}",
                     _signed(s.wait_delta_s),
                     f"{fmt_s(s.transfer_a_s)} → {fmt_s(s.transfer_b_s)}",
                     _signed(s.transfer_delta_s),
                     f"{fmt_s(s.path_a_s)} → {fmt_s(s.path_b_s)}", why])
    return rows


def noise_text(ex: Explanation) -> str:
    return (f"run-to-run noise ±{fmt_s(ex.noise.gain_s)} = {ex.noise.model} "
            f"({ex.noise.basis})")


def iteration_figure(cmp: Comparison) -> go.Figure | None:
    """Per iteration of the main loop, both runs one above the other: stacked parts (mean
    per rank), same scales, so a slow phase stands out instead of being averaged away."""
    runs = [(run, per_iteration(run)) for run in (cmp.a, cmp.b)]
    if all(it.empty for _, it in runs):
        return None
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, shared_yaxes=True,
                        vertical_spacing=0.08,
                        subplot_titles=[f"{plot_text(run.label)} ({len(it)} iterations)"
                                        for run, it in runs])
    for row, (_, it) in enumerate(runs, start=1):
        for part in PARTS:
            y = it.get(f"{part}_s")
            # hover text from the project's formatter: Plotly's %{y:.3g} prints 1e-05 s
            text = None if y is None else [seconds(v) for v in y]
            fig.add_bar(name=PART_LABELS[part], x=it["iteration"], y=y, customdata=text,
                        marker_color=PART_COLOURS[part], legendgroup=part, showlegend=row == 1,
                        hovertemplate=f"iteration %{{x}}: {PART_LABELS[part]} %{{customdata}}"
                        "<extra></extra>", row=row, col=1)
        fig.update_yaxes(title_text="s per rank", row=row, col=1)
    fig.update_layout(barmode="stack", bargap=0, height=460, legend_orientation="h",
                      margin=dict(l=60, r=20, t=40, b=40))
    fig.update_xaxes(title_text="iteration", row=2, col=1)
    return fig


def iteration_groups(it: pd.DataFrame, groups: int = MAX_ITERATION_ROWS) -> pd.DataFrame:
    """Iterations in at most `groups` consecutive groups: `first`, `last`, each part's
    mean per iteration, and the slowest iteration's `max_s`."""
    if it.empty:
        return pd.DataFrame(columns=["first", "last", "total_s", "max_s",
                                     *(f"{p}_s" for p in PARTS)])
    size = -(-len(it) // groups)
    g = it.groupby(pd.RangeIndex(len(it)) // size)
    out = g[[f"{p}_s" for p in PARTS] + ["total_s"]].mean()
    out["max_s"] = g["total_s"].max()
    out["first"] = g["iteration"].min()
    out["last"] = g["iteration"].max()
    return out.reset_index(drop=True)


def iteration_rows(cmp: Comparison) -> list[list[str]]:
    """Markdown/terminal rows: per group of iterations, both runs' mean iteration time
    per rank (and its waiting) and the slowest iteration."""
    ga, gb = (iteration_groups(per_iteration(r)) for r in (cmp.a, cmp.b))
    rows = []
    for i in range(max(len(ga), len(gb))):
        cells = []
        for g in (ga, gb):
            if i < len(g):
                r = g.iloc[i]
                span = (f"{int(r['first'])}" if r["first"] == r["last"]
                        else f"{int(r['first'])}–{int(r['last'])}")
                cells += [span, fmt_s(r["total_s"]), fmt_s(r["synchronization_s"]),
                          fmt_s(r["max_s"])]
            else:
                cells += ["", "", "", ""]
        rows.append(cells)
    return rows


def iteration_headers(cmp: Comparison) -> list[str]:
    return [f"{run.label}: {h}" for run in (cmp.a, cmp.b)
            for h in ("iterations", "mean per rank", "of it waiting", "slowest")]


def html_section(cmp: Comparison, ex: Explanation, table, figure_div) -> str:
    """The report's "predicted vs measured" section: verdict, explanation, the findings'
    and call sites' tables, the per-iteration figure. `table` and `figure_div` are the
    HTML report's own helpers (cells are escaped here)."""
    parts = ['<h2 id="explanation">Predicted vs measured: where the time went</h2>']
    parts.append('<ul class="explanation">' + "".join(
        f"<li>{_esc(s)}</li>" for s in ex.sentences) + "</ul>")
    parts.append(f'<p class="muted noise">{_esc(noise_text(ex))}</p>')
    if ex.findings:
        parts.append(f"<h3>Findings of {_esc(cmp.a.label)}: predicted and measured</h3>")
        parts.append(table(FINDING_HEADERS, [[_esc(c) for c in row]
                                             for row in finding_rows(ex)], cls="predicted"))
    parts.append(f"<h3>Waiting and transfer per call site, {_esc(cmp.a.label)} → "
                 f"{_esc(cmp.b.label)}</h3>")
    parts.append(table(SITE_HEADERS, [[_esc(c) for c in row] for row in site_rows(ex)],
                       cls="callsite-diff"))
    fig = iteration_figure(cmp)
    parts.append("<h2 id=\"iterations\">Per iteration, before and after</h2>")
    if fig is None:
        parts.append("<p>Neither run shows a main loop.</p>")
    else:
        parts.append(figure_div(fig))
    return "\n".join(parts)


def md_lines(cmp: Comparison, ex: Explanation, md_table) -> list[str]:
    """The Markdown report's section (`md_table` is the report's table writer)."""
    lines = ["", "#### Predicted vs measured: where the time went", ""]
    lines += [f"- {md(s)}" for s in ex.sentences]
    lines += ["", f"_{md(noise_text(ex))}_", ""]
    if ex.findings:
        lines += md_table(FINDING_HEADERS, finding_rows(ex), "lll" + "r" * 4 + "l")
        lines.append("")
    lines += md_table(SITE_HEADERS, site_rows(ex, top=8), "ll" + "r" * 5 + "l")
    rows = iteration_rows(cmp)
    if rows:
        lines += ["", f"#### Per iteration, {md(cmp.a.label)} → {md(cmp.b.label)}", ""]
        lines += md_table(iteration_headers(cmp), rows, "lrrr" * 2)
    return lines


def print_explanation(ex: Explanation, console: Console | None = None) -> None:
    console = console or term.console()
    # wrapped between words at the console's width (soft_wrap would leave a 200-character
    # sentence to the terminal, which cuts it mid-word), no space left at a line's end
    for s in [*ex.sentences, noise_text(ex)]:
        for line in Text(s).wrap(console, console.width):
            line.rstrip()
            console.print(line, highlight=False, soft_wrap=True)


def to_dict(cmp: Comparison, ex: Explanation) -> dict:
    """`mpiscope compare --json`: both runs, the findings predicted vs measured, the
    explanation, the per-call-site diff and both runs' iterations."""
    def run(r) -> dict:
        return {"label": r.label, "trace": str(r.trace_dir), "wall_s": r.wall_s,
                "figures": r.figures, "program": r.report.get("meta", {}).get("program"),
                "iterations": per_iteration(r).to_dict("records")}

    return {"a": run(cmp.a), "b": run(cmp.b), "speedup": cmp.speedup,
            "speedup_basis": cmp.speedup_basis, **ex.to_dict()}
