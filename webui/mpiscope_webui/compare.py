"""Compare mode: run A against run B — breakdowns and function tables with the differences."""

from __future__ import annotations

import pandas as pd
from dash import dash_table, dcc, html

from mpiscope_webui import views
from mpiscope_webui.model import TraceModel


def breakdown_delta(a: TraceModel, b: TraceModel) -> pd.DataFrame:
    """part, A (s), B (s), Δ (s), Δ % — summed over ranks, plus the wall time."""
    ta = views.breakdown_table(a.analysis()).set_index("part")["seconds"]
    tb = views.breakdown_table(b.analysis()).set_index("part")["seconds"]
    df = pd.DataFrame({"A_s": ta, "B_s": tb}).fillna(0.0)
    df["delta_s"] = df["B_s"] - df["A_s"]
    df["delta_pct"] = 100 * df["delta_s"] / df["A_s"].where(df["A_s"] != 0)
    return df.rename_axis("part").reset_index()


def functions_delta(a: TraceModel, b: TraceModel) -> pd.DataFrame:
    """name, calls and time in A and B, and the difference, largest change first."""
    fa = a.analysis().functions
    fb = b.analysis().functions
    cols = ["name", "calls", "time_s"]
    fa = fa[cols] if not fa.empty else pd.DataFrame(columns=cols)
    fb = fb[cols] if not fb.empty else pd.DataFrame(columns=cols)
    df = fa.merge(fb, on="name", how="outer", suffixes=("_A", "_B")).fillna(0)
    df["delta_s"] = df["time_s_B"] - df["time_s_A"]
    df["name"] = df["name"].astype(str)
    return df.reindex(df["delta_s"].abs().sort_values(ascending=False).index).reset_index(
        drop=True)


def _table(df: pd.DataFrame, table_id: str) -> dash_table.DataTable:
    columns = []
    for c in df.columns:
        col = {"id": c, "name": c.replace("_s", " (s)").replace("_pct", " %").replace("_", " ")}
        if pd.api.types.is_float_dtype(df[c]):
            col.update(type="numeric", format={"specifier": ".4g"})
        columns.append(col)
    return dash_table.DataTable(
        id=table_id, data=df.to_dict("records"), columns=columns, sort_action="native",
        style_cell={"fontFamily": "sans-serif", "fontSize": 12, "padding": "2px 8px"},
        style_header={"fontWeight": "bold"},
        style_data_conditional=[
            {"if": {"filter_query": "{delta_s} < 0", "column_id": "delta_s"},
             "color": "#1a7f37", "fontWeight": "bold"},
            {"if": {"filter_query": "{delta_s} > 0", "column_id": "delta_s"},
             "color": "#c0392b", "fontWeight": "bold"}])


def differences(a: TraceModel, b: TraceModel) -> list:
    bars = html.Div([
        html.Div(dcc.Graph(figure=views.breakdown_figure(a.analysis(), f"A: {a.label}")),
                 className="column"),
        html.Div(dcc.Graph(figure=views.breakdown_figure(b.analysis(), f"B: {b.label}")),
                 className="column")], className="columns")
    return [
        html.P(f"A = {a.label}, B = {b.label}; negative differences (green) mean B is "
               f"faster.", className="muted"),
        html.H4("Time breakdown, summed over ranks"),
        _table(breakdown_delta(a, b), "diff-breakdown"),
        bars,
        html.H4("MPI functions"), _table(functions_delta(a, b), "diff-functions"),
    ]
