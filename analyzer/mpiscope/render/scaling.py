"""The scaling study rendered: breakdown shares, speed-up and parallel efficiency against
rank count as a terminal table, a self-contained HTML page or a PNG."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import plotly.offline
from plotly.subplots import make_subplots
from rich.console import Console
from rich.table import Table

from mpiscope import numbers, output
from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.errors import UserError
from mpiscope.render import html as html_report
from mpiscope.render import term
from mpiscope.render.palette import PART_COLOURS
from mpiscope.render.term import name


def figure(df: pd.DataFrame) -> go.Figure:
    """Stacked bars of the breakdown shares (`scaling.table`) against rank count."""
    x = [numbers.count(int(n), "rank") for n in df["ranks"]]
    fig = go.Figure([go.Bar(name=PART_LABELS[p], x=x, y=100 * df[f"{p}_share"],
                            marker_color=PART_COLOURS[p],
                            hovertemplate=f"{PART_LABELS[p]}: %{{y:.1f}}%<extra></extra>")
                     for p in PARTS])
    fig.update_layout(barmode="stack", title="Time breakdown vs rank count",
                      yaxis_title="share of summed rank time (%)", xaxis_title="run",
                      template="plotly_white")
    return fig


def speedup_figure(df: pd.DataFrame) -> go.Figure:
    """Speed-up (with the ideal line) and parallel efficiency against rank count, both
    against the smallest run."""
    fewest = int(df["ranks"].min()) if len(df) else 1
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Speed-up", "Parallel efficiency"])
    fig.add_scatter(x=df["ranks"], y=df["ranks"] / fewest, name="ideal", mode="lines",
                    line=dict(dash="dash", color="#999"), row=1, col=1)
    fig.add_scatter(x=df["ranks"], y=df["speedup"], name="speed-up", mode="lines+markers",
                    hovertemplate="%{x} ranks: %{y:.2f}×<extra></extra>", row=1, col=1)
    fig.add_scatter(x=df["ranks"], y=100 * df["efficiency"], name="efficiency",
                    mode="lines+markers", hovertemplate="%{x} ranks: %{y:.0f}%<extra></extra>",
                    row=1, col=2)
    # ticks at the rank counts run, never at 1.5 ranks
    ranks = sorted(int(n) for n in df["ranks"].unique()) if len(df) else []
    fig.update_xaxes(title_text="ranks", tickmode="array", tickvals=ranks,
                     ticktext=[str(n) for n in ranks])
    fig.update_yaxes(title_text=f"× the {fewest}-rank run", row=1, col=1)
    fig.update_yaxes(title_text="%", rangemode="tozero", row=1, col=2)
    fig.update_layout(title=f"Speed-up and parallel efficiency against {fewest} "
                      f"rank{'s' if fewest > 1 else ''}", template="plotly_white")
    return fig


def _shown_parts(df: pd.DataFrame) -> list[str]:
    """The parts with time in some run (I/O only where there was I/O)."""
    return [p for p in PARTS if p != "io" or (df.get("io_share", pd.Series(dtype=float)) > 0).any()]


def _cells(df: pd.DataFrame, parts: list[str]) -> tuple[list[str], list[list[str]]]:
    """Headers and, per run, its cells: one time unit for the wall-time column."""
    wall = numbers.Column.of(df["wall_s"])
    headers = ["ranks", wall.header("wall"), "speed-up", "efficiency",
               *(PART_LABELS[p] for p in parts)]
    rows = [[str(r["ranks"]), wall.cell(r["wall_s"]), f"{r['speedup']:.2f}×",
             f"{r['efficiency']:.0%}", *(f"{r[f'{p}_share']:.1%}" for p in parts)]
            for r in df.to_dict("records")]
    return headers, rows


def print_table(df: pd.DataFrame, console: Console | None = None) -> None:
    """One row per run; where that is wider than the terminal, one column per run (a
    header is never cut, a number never wrapped). The traces are listed below it."""
    console = console or term.console()
    parts = _shown_parts(df)
    headers, rows = _cells(df, parts)
    tab = Table(title="Breakdown vs rank count")
    for h in headers:
        tab.add_column(h, justify="right", no_wrap=True)
    for r in rows:
        tab.add_row(*r)
    # each column: its widest text, a space either side and a border (plus the last)
    needed = 1 + sum(3 + max(len(h), *(len(r[i]) for r in rows)) if rows else 3 + len(h)
                     for i, h in enumerate(headers))
    if needed > console.width:
        tab = Table(title="Breakdown vs rank count")
        tab.add_column("", justify="left", no_wrap=True)
        for r in rows:
            tab.add_column(f"{r[0]} ranks", justify="right", no_wrap=True)
        for i, h in enumerate(headers[1:], 1):
            tab.add_row(h, *(r[i] for r in rows))
    console.print(tab)
    for r in df.to_dict("records"):
        console.print(f"  {numbers.count(int(r['ranks']), 'rank')}: {name(r['trace'])}",
                      highlight=False)
    if len(df):
        fewest = int(df["ranks"].min())
        console.print(
            f"speed-up and efficiency against the {fewest}-rank run (the fastest of them "
            "if several)", highlight=False)


def write_html(df: pd.DataFrame, out: Path) -> None:
    """Both figures as a self-contained page (no network needed to view it)."""
    divs = "".join(plotly.offline.plot(f, output_type="div", include_plotlyjs=False)
                   for f in (figure(df), speedup_figure(df)))
    output.write_text(out, "<!DOCTYPE html><html><head><meta charset='utf-8'>"
                      f"<title>mpiscope scaling</title><style>{html_report.CSS}</style>"
                      "<script type='text/javascript'>"
                      f"{plotly.offline.get_plotlyjs()}</script></head><body>"
                      f"<h1>Scaling</h1>{divs}</body></html>")


def write_png(df: pd.DataFrame, out: Path) -> None:
    try:
        image = figure(df).to_image(format="png")
    except Exception as e:  # plotly raises several types when kaleido is absent
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(str(out), f"PNG export needs kaleido ({why}); use --html instead") from None
    output.write_bytes(out, image)
