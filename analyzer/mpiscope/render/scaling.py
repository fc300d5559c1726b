"""The scaling study rendered: breakdown shares against rank count as a terminal table, a
self-contained HTML figure or a PNG."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from rich.console import Console
from rich.table import Table

from mpiscope import output
from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.errors import UserError
from mpiscope.render.palette import PART_COLOURS


def figure(df: pd.DataFrame) -> go.Figure:
    """Stacked bars of the breakdown shares (`scaling.table`) against rank count."""
    x = [f"{n} ranks" for n in df["ranks"]]
    fig = go.Figure([go.Bar(name=PART_LABELS[p], x=x, y=100 * df[f"{p}_share"],
                            marker_color=PART_COLOURS[p],
                            hovertemplate=f"{PART_LABELS[p]}: %{{y:.1f}}%<extra></extra>")
                     for p in PARTS])
    fig.update_layout(barmode="stack", title="Time breakdown vs rank count",
                      yaxis_title="share of summed rank time (%)", xaxis_title="run",
                      template="plotly_white")
    return fig


def print_table(df: pd.DataFrame, console: Console | None = None) -> None:
    tab = Table(title="Breakdown vs rank count")
    for col in ("ranks", "wall (s)", *(PART_LABELS[p] for p in PARTS), "trace"):
        tab.add_column(col, justify="left" if col == "trace" else "right", overflow="fold")
    for r in df.to_dict("records"):
        tab.add_row(str(r["ranks"]), f"{r['wall_s']:.4f}",
                    *(f"{r[f'{p}_share']:.1%}" for p in PARTS), r["trace"])
    (console or Console()).print(tab)


def write_html(df: pd.DataFrame, out: Path) -> None:
    """The figure as a self-contained page (no network needed to view it)."""
    output.write_text(out, figure(df).to_html(include_plotlyjs=True))


def write_png(df: pd.DataFrame, out: Path) -> None:
    try:
        image = figure(df).to_image(format="png")
    except Exception as e:  # plotly raises several types when kaleido is absent
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(str(out), f"PNG export needs kaleido ({why}); use --html instead") from None
    output.write_bytes(out, image)
