"""Scaling study: the time breakdown of one program's runs at several rank counts.

Each run contributes one row: its rank count, wall time (the longest rank's measured
interval) and the shares of compute, communication and synchronization in the summed
rank time. Synchronization growing with the rank count is the classic result.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from mpiscope.analysis import breakdown, waitstates
from mpiscope.archive.trace import Trace

PARTS = ("compute", "communication", "synchronization")


@dataclass
class ScalingRow:
    trace: str
    ranks: int
    wall_s: float
    compute_s: float  # summed over ranks
    communication_s: float
    synchronization_s: float

    @property
    def shares(self) -> dict[str, float]:
        total = self.compute_s + self.communication_s + self.synchronization_s
        return {p: getattr(self, f"{p}_s") / total if total else 0.0 for p in PARTS}


def row(trace: Trace) -> ScalingRow:
    return row_from_breakdown(str(trace.path),
                              breakdown.per_rank(trace, waitstates.compute(trace)))


def row_from_breakdown(trace: str, ranks: pd.DataFrame) -> ScalingRow:
    """One run's row from its per-rank breakdown (e.g. an analysis already made)."""
    return ScalingRow(trace, len(ranks), float(ranks["total_s"].max()),
                      float(ranks["compute_s"].sum()), float(ranks["communication_s"].sum()),
                      float(ranks["synchronization_s"].sum()))


def table(rows: list[ScalingRow]) -> pd.DataFrame:
    """One line per run, sorted by rank count, with seconds and shares of each part."""
    df = pd.DataFrame([{"trace": r.trace, "ranks": r.ranks, "wall_s": r.wall_s,
                        **{f"{p}_s": getattr(r, f"{p}_s") for p in PARTS},
                        **{f"{p}_share": s for p, s in r.shares.items()}} for r in rows])
    return df.sort_values(["ranks", "trace"], ignore_index=True)


def figure(df: pd.DataFrame) -> go.Figure:
    """Stacked bars of the breakdown shares against rank count."""
    colors = {"compute": "#4c9a2a", "communication": "#3b73b9", "synchronization": "#d62728"}
    x = [f"{n} ranks" for n in df["ranks"]]
    fig = go.Figure([go.Bar(name=p, x=x, y=100 * df[f"{p}_share"], marker_color=colors[p],
                            hovertemplate=f"{p}: %{{y:.1f}}%<extra></extra>") for p in PARTS])
    fig.update_layout(barmode="stack", title="Time breakdown vs rank count",
                      yaxis_title="share of summed rank time (%)", xaxis_title="run",
                      template="plotly_white")
    return fig
