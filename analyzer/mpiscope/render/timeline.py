"""A static Jumpshot-style timeline of a few iterations, for the comparison reports.
Names go to Plotly escaped (render.plottext)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mpiscope.analysis.comparison import Comparison
from mpiscope.analysis.iterations import iteration_window
from mpiscope.analysis.session import Analysis
from mpiscope.render.palette import COMPUTE, colours  # same colours as the web UI
from mpiscope.render.plottext import plot_text


def figure(analysis: Analysis, title: str, window: tuple[int, int] | None = None,
           max_states: int = 5000, palette: dict[str, str] | None = None) -> go.Figure:
    """A lane per rank, MPI states coloured by function (`palette`: function -> colour,
    default: the trace's functions' distinct colours); `window` in ns (default: a few
    iterations of the main loop)."""
    trace = analysis.trace
    lo, hi = window or iteration_window(trace, analysis.loop)
    c = trace.calls
    c = c[(c["end"] >= lo) & (c["start"] <= hi) & ~c["kind"].isin(["init", "finalize"])]
    c = c.nlargest(max_states, "end") if len(c) > max_states else c
    palette = palette or colours(map(str, trace.calls["function"].unique()))
    fig = go.Figure()
    # the call path under the call site, where one was recorded
    via = {p: "via " + " <- ".join(f) for p, f in analysis.paths.frames.items() if len(f) > 1}
    pids = c["callpath"].to_numpy() if "callpath" in c.columns else np.full(len(c), -1)
    c = c.assign(via=[plot_text(via.get(int(p), "")) for p in pids])
    for fn, g in c.groupby("function", observed=True):
        s = (g["start"].clip(lower=lo) - lo) / 1e6
        d = (g["end"].clip(upper=hi) - g["start"].clip(lower=lo)) / 1e6
        fig.add_bar(name=plot_text(fn), orientation="h", y=g["rank"], x=d, base=s,
                    marker_color=palette[str(fn)], width=0.6,
                    customdata=np.stack([g["callsite"].astype(str).map(plot_text),
                                         g["via"]], axis=1) if len(g) else None,
                    hovertemplate="%{fullData.name}<br>rank %{y}<br>start %{base:.3f} ms"
                                  "<br>%{x:.3f} ms<br>%{customdata[0]}<br>%{customdata[1]}"
                                  "<extra></extra>")
    fig.update_layout(title=plot_text(title), barmode="overlay",
                      height=120 + 40 * trace.num_ranks,
                      xaxis_title="time in window (ms)", yaxis_title="rank",
                      yaxis=dict(autorange="reversed", dtick=1, tickformat="d"),
                      plot_bgcolor=COMPUTE,
                      margin=dict(l=50, r=20, t=50, b=40), legend_orientation="h")
    return fig


def of_comparison(cmp: Comparison) -> list[go.Figure]:
    """A few iterations of each run analyzed here (none for runs read from saved JSON)."""
    runs = [run for run in (cmp.a, cmp.b) if run.analysis is not None]
    # one colour per function in both figures
    shared = colours(str(f) for run in runs for f in run.analysis.trace.calls["function"].unique())
    return [figure(run.analysis, f"{run.label}: a few iterations", palette=shared)
            for run in runs]
