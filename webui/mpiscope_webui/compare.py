"""Compare mode: run A against run B — what the replay predicted the change would gain
against what was measured (`mpiscope compare`'s analysis), breakdowns and function tables
with the differences."""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
from dash import dash_table, dcc, html

from mpiscope import numbers
from mpiscope.analysis import comparison
from mpiscope.analysis.explanation import Explanation, explain
from mpiscope_webui import views, windowstats
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


# the Differences tab's columns (breakdown_delta, functions_delta): A, B and their
# difference in one unit, so that they compare at a glance
DIFF_LABELS: windowstats.Labels = {
    "part": ("part", "t"), "A_s": ("A", "s"), "B_s": ("B", "s"),
    "delta_s": ("Δ B − A", "s"), "delta_pct": ("Δ (%)", "%"),
    "calls_A": ("calls, A", "n"), "calls_B": ("calls, B", "n"),
    "time_s_A": ("time, A", "s"), "time_s_B": ("time, B", "s")}
DIFF_UNITS = (frozenset({"A_s", "B_s", "delta_s"}),
              frozenset({"time_s_A", "time_s_B", "delta_s"}))


def _table(df: pd.DataFrame, table_id: str) -> dash_table.DataTable:
    data, columns = windowstats.shown(df, DIFF_LABELS, DIFF_UNITS)
    return dash_table.DataTable(
        id=table_id, data=data, columns=columns, sort_action="native", **windowstats.EXPORT,
        style_cell=windowstats.CELL_STYLE, style_header=windowstats.HEADER_STYLE,
        style_cell_conditional=windowstats.text_left(columns),
        style_data_conditional=[
            {"if": {"filter_query": "{delta_s} < 0", "column_id": "delta_s"},
             "color": "#1a7f37", "fontWeight": "bold"},
            {"if": {"filter_query": "{delta_s} > 0", "column_id": "delta_s"},
             "color": "#c0392b", "fontWeight": "bold"}])


def _trace_dir(model: TraceModel) -> Path:
    """The run's directory (fom.read looks beside the trace for the program's output)."""
    path = Path(model.trace.path)
    return path if path.is_dir() else path.parent


def explanation(a: TraceModel, b: TraceModel) -> Explanation:
    """`mpiscope compare A B`'s analysis (analysis.explanation.explain) of the served runs,
    from the sessions the tabs already use (nothing analyzed twice)."""
    runs = [comparison.summarize(m.session, _trace_dir(m), m.label) for m in (a, b)]
    return explain(comparison.build(*runs))


class Explained:
    """The explanation of two served runs, computed once for every page that asks (it
    needs all of both runs' analyses: seconds on a big trace)."""

    def __init__(self, a: TraceModel, b: TraceModel) -> None:
        self._runs = (a, b)
        self._lock = threading.Lock()
        self._done: Explanation | str | None = None

    def get(self) -> Explanation | str:
        """The explanation, or why there is none (one line, as the tabs list errors)."""
        with self._lock:
            if self._done is None:
                try:
                    self._done = explanation(*self._runs)
                except Exception as err:  # noqa: BLE001 - shown to the user, one line
                    self._done = f"{type(err).__name__}: {err}".splitlines()[0]
            return self._done


def findings_frame(doc: dict) -> pd.DataFrame:
    """Per finding of A (`findings` of Explanation.to_dict, the JSON's): predicted saving,
    measured saving (its call site's time per rank, A − B), the call site's time per rank
    and on the critical path in both runs, and the outcome."""
    cols = ["kind", "function", "callsite", "predicted_s", "measured_s", "site_a_s",
            "site_b_s", "path_a_s", "path_b_s"]
    df = pd.DataFrame(doc["findings"], columns=[*cols, "resolved"])
    # a table shows no booleans: the outcome in words, as the reports write it
    outcome = ["resolved" if r else "still there" for r in df["resolved"]]
    return df[cols].assign(outcome=outcome)


def _gains(doc: dict) -> html.Table:
    """The verdict's numbers, each in its own cell (as numbers.seconds writes them, as
    the verdict does)."""
    rows = [("predicted gain", doc["predicted_gain_s"], "explain-predicted"),
            ("measured gain", doc["measured_gain_s"], "explain-measured"),
            ("difference", doc["difference_s"], "explain-difference"),
            ("noise ±", doc["noise"]["gain_s"], "explain-noise")]
    return html.Table([html.Tr([html.Th(k), html.Td(numbers.seconds(v), id=ident)])
                       for k, v, ident in rows], className="kv explain-gains")


def predicted_section(a: TraceModel, ex: Explanation | str) -> list:
    """The report's "predicted vs measured": the verdict and its numbers, where the time
    went, and per finding of A its predicted and measured saving (CSV export)."""
    head = html.H4("Predicted vs measured: did the change gain what the replay predicted?")
    if isinstance(ex, str):
        return [head, html.Div(f"analysis incomplete — {ex}", className="error")]
    doc = ex.to_dict()  # what `mpiscope compare --json` writes of it
    sentences, noise = doc["explanation"], doc["noise"]
    out = [head, html.P(doc["verdict"], id="explain-verdict", className="verdict"),
           _gains(doc), html.Ul([html.Li(s) for s in sentences[1:]], className="explanation"),
           html.P(f"noise: {noise['model']} ({noise['basis']})", className="muted")]
    if doc["findings"]:
        out += [html.H5(f"Findings of A ({a.label}): the saving predicted and measured "
                        "(per rank), their call site's time per rank and on the critical "
                        "path in A and B"),
                windowstats.table(findings_frame(doc), "diff-predicted")]
    else:
        out.append(html.P(f"A ({a.label}) has no findings: nothing was predicted.",
                          className="muted"))
    return out


def differences(a: TraceModel, b: TraceModel, ex: Explanation | str) -> list:
    pa, pb = a.analysis(), b.analysis()
    # one y-range for both: the bars of the two runs compare at a glance
    top = max(views.breakdown_top(pa), views.breakdown_top(pb))
    bars = html.Div([
        html.Div(dcc.Graph(id="diff-bars-a",
                           figure=views.breakdown_figure(pa, f"A: {a.label}", top)),
                 className="column"),
        html.Div(dcc.Graph(id="diff-bars-b",
                           figure=views.breakdown_figure(pb, f"B: {b.label}", top)),
                 className="column")], className="columns")
    return [
        html.P(f"A = {a.label}, B = {b.label}; negative differences (green) mean B is "
               f"faster.", className="muted"),
        *predicted_section(a, ex),
        html.H4("Time breakdown, summed over ranks"),
        _table(breakdown_delta(a, b), "diff-breakdown"),
        bars,
        html.H4("MPI functions"), _table(functions_delta(a, b), "diff-functions"),
    ]
