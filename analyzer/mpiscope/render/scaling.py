"""The scaling study's figure: breakdown shares against rank count."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from mpiscope.analysis.breakdown import PARTS
from mpiscope.render.palette import PART_COLOURS


def figure(df: pd.DataFrame) -> go.Figure:
    """Stacked bars of the breakdown shares (`scaling.table`) against rank count."""
    x = [f"{n} ranks" for n in df["ranks"]]
    fig = go.Figure([go.Bar(name=p, x=x, y=100 * df[f"{p}_share"], marker_color=PART_COLOURS[p],
                            hovertemplate=f"{p}: %{{y:.1f}}%<extra></extra>") for p in PARTS])
    fig.update_layout(barmode="stack", title="Time breakdown vs rank count",
                      yaxis_title="share of summed rank time (%)", xaxis_title="run",
                      template="plotly_white")
    return fig
