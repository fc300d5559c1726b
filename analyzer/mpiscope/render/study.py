"""The Himeno study's reports (`mpiscope study himeno`): a comparison page and a Markdown
summary per rank count, study.json, the scaling page and the index page that links them.

Input is what mpiscope.jobs.study ran (its StudyResult): the kept run of each variant at
each rank count, with every run's MFLOPS. It is described here by what the pages read
(the Protocols below), so that rendering does not depend on the layer that runs jobs.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pandas as pd
import plotly.graph_objects as go
import plotly.offline
from plotly.subplots import make_subplots

from mpiscope import output
from mpiscope.analysis import scaling
from mpiscope.analysis.comparison import compare_traces
from mpiscope.render import html as html_report
from mpiscope.render import markdown, palette
from mpiscope.render import scaling as scaling_figure


class StudyConfig(Protocol):
    out: Path
    size: str
    iterations: int
    ranks: tuple[int, ...]
    cluster: str | None
    repeat: int


class StudyRun(Protocol):
    ranks: int
    variant: str
    trace_dir: Path
    figures: dict | None
    attempt: int  # which of the `repeat` runs was kept (1-based)
    all_mflops: list[float | None]  # every run of this configuration, in order

    @property
    def mflops(self) -> float | None: ...


class StudyResult(Protocol):
    config: StudyConfig
    runs: list[StudyRun]

    def run(self, ranks: int, variant: str) -> StudyRun: ...


def write(result: StudyResult) -> list[dict]:
    """Write every report of the study into its output directory; returns the summary of
    each kept run (the rows of study.json), in the order of the reports."""
    cfg = result.config
    ranks = cfg.ranks
    summary: list[dict] = []
    links: list[tuple[str, str]] = []
    # one row list per variant, in the order they were run
    scaling_rows: dict[str, list] = {r.variant: [] for r in result.runs}
    for n in ranks:
        a, b = result.run(n, "unpatched"), result.run(n, "patched")
        cmp = compare_traces(a.trace_dir, b.trace_dir, "unpatched", "patched")
        page = f"compare-{n}.html"
        best_of = f" (best of {cfg.repeat} runs each)" if cfg.repeat > 1 else ""
        html_report.write_html(cmp, cfg.out / page,
                               f"Himeno {cfg.size}, {n} ranks: unpatched vs patched{best_of}")
        markdown.write_markdown(cmp, cfg.out / f"compare-{n}.md")
        links.append((f"{n} ranks: unpatched vs patched", page))
        for run_, s in ((a, cmp.a), (b, cmp.b)):
            total = s.rank_time_s
            summary.append({
                "ranks": n, "variant": run_.variant, "trace": str(run_.trace_dir),
                "mflops": run_.mflops,
                # every run of this configuration, in order; the kept one is `kept_run`
                "mflops_all_runs": run_.all_mflops, "kept_run": run_.attempt,
                "gosa": (run_.figures or {}).get("gosa"), "wall_s": s.wall_s,
                "allreduce_share": _share(s.report["functions"], "MPI_Allreduce", total),
                **{f"{p}_share": s.share(p) for p in ("compute", "communication",
                                                      "synchronization", "io")},
                "findings": [f["kind"] for f in s.report["findings"]],
            })
            # the comparison already analyzed this run: reuse its breakdown
            scaling_rows[run_.variant].append(scaling.row_from_breakdown(
                str(run_.trace_dir), pd.DataFrame(s.report["ranks"])))
    output.write_text(cfg.out / "study.json", json.dumps(
        {"size": cfg.size, "iterations": cfg.iterations, "ranks": list(ranks),
         "cluster": cfg.cluster, "repeat": cfg.repeat, "selection": selection_note(cfg),
         "runs": summary}, indent=2))
    _scaling_page(cfg.out / "scaling.html", scaling_rows, summary)
    links.append(("scaling: breakdown and MFLOPS against rank count", "scaling.html"))
    _index_page(cfg.out / "index.html", cfg, links, summary)
    return summary


def ratio_line(summary: list[dict], n: int, repeat: int) -> str:
    """The terminal's line for n ranks: patched/unpatched MFLOPS, best (and median) of
    the runs."""
    return (f"  {n} ranks: patched/unpatched MFLOPS {_ratio(summary, n, max)}"
            + (f" (best of {repeat}; median {_ratio(summary, n, statistics.median)})"
               if repeat > 1 else ""))


def _share(functions: list[dict], name: str, total: float) -> float:
    return sum(f["time_s"] for f in functions if f["name"] == name) / total if total else 0.0


def _mflops_points(summary: list[dict]) -> dict[str, list[tuple[int, float, bool]]]:
    """variant -> (ranks, MFLOPS, kept) of every run, in order."""
    out: dict[str, list[tuple[int, float, bool]]] = {}
    for s in summary:
        for i, m in enumerate(s["mflops_all_runs"], 1):
            if m is not None:
                out.setdefault(s["variant"], []).append((s["ranks"], m, i == s["kept_run"]))
    return out


def _medians(points: list[tuple[int, float, bool]]) -> tuple[list[int], list[float]]:
    ranks = sorted({n for n, _, _ in points})
    return ranks, [statistics.median(m for k, m, _ in points if k == n) for n in ranks]


def scaling_figures(summary: list[dict]) -> list[go.Figure]:
    """MFLOPS, speed-up and parallel efficiency against rank count from every run of each
    variant (a point per run, the kept one ringed; the line through their medians), so that
    one lucky or unlucky run cannot pass for the trend. Speed-up is against the median of
    the unpatched runs at the fewest ranks (MFLOPS of one problem size: proportional to
    speed); ticks at the rank counts run."""
    points = _mflops_points(summary)
    ranks = sorted({s["ranks"] for s in summary})
    base_variant = "unpatched" if "unpatched" in points else next(iter(points), None)
    if base_variant is None:
        return []
    fewest = min(n for n, _, _ in points[base_variant])
    base = statistics.median(m for n, m, _ in points[base_variant] if n == fewest)
    # neutral greys: a variant is no function (MPI_Send's blue would read as MPI_Send)
    colours = {v: c for v, c in zip(points, palette.NEUTRALS, strict=False)}
    axis = {"tickmode": "array", "tickvals": ranks, "ticktext": [str(n) for n in ranks],
            "title": "ranks"}
    mflops = go.Figure()
    both = make_subplots(rows=1, cols=2, subplot_titles=["Speed-up", "Parallel efficiency"])
    both.add_scatter(x=ranks, y=[n / fewest for n in ranks], name="ideal", mode="lines",
                     line={"dash": "dash", "color": "#999"}, row=1, col=1)
    for v, pts in points.items():
        c = colours.get(v, palette.NEUTRALS[-1])
        xs, med = _medians(pts)
        kept = [p for p in pts if p[2]]
        for fig, scale, col in ((mflops, None, None), (both, "speedup", 1),
                                (both, "efficiency", 2)):
            def y(n: int, m: float, scale: str | None = scale) -> float:
                if scale is None:
                    return m
                sp = m / base if base else float("nan")
                return sp if scale == "speedup" else 100 * sp * fewest / n
            kw = {"row": 1, "col": col} if col else {}
            unit = {None: "MFLOPS", "speedup": "×", "efficiency": "%"}[scale]
            fig.add_scatter(x=[n for n, _, _ in pts], y=[y(n, m) for n, m, _ in pts],
                            mode="markers", name=f"{v}: every run", legendgroup=v,
                            showlegend=col in (None, 1), marker={"color": c, "opacity": 0.5},
                            hovertemplate=f"{v}, %{{x}} ranks: %{{y:.3~f}} {unit}"
                                          "<extra>a run</extra>", **kw)
            fig.add_scatter(x=[n for n, _, _ in kept], y=[y(n, m) for n, m, _ in kept],
                            mode="markers", name=f"{v}: kept run", legendgroup=v,
                            showlegend=col in (None, 1),
                            marker={"color": "rgba(0,0,0,0)", "size": 13,
                                    "line": {"color": c, "width": 2}},
                            hoverinfo="skip", **kw)
            fig.add_scatter(x=xs, y=[y(n, m) for n, m in zip(xs, med, strict=True)],
                            mode="lines", name=f"{v}: median", legendgroup=v,
                            showlegend=col in (None, 1), line={"color": c}, **kw)
    mflops.update_layout(title="MFLOPS vs rank count (every run)", xaxis=axis,
                         yaxis={"title": "MFLOPS", "rangemode": "tozero"},
                         template="plotly_white")
    both.update_xaxes(**axis)
    both.update_yaxes(title_text=f"× the unpatched {fewest}-rank median", rangemode="tozero",
                      row=1, col=1)
    both.update_yaxes(title_text="%", rangemode="tozero", row=1, col=2)
    both.update_layout(title=f"Speed-up and parallel efficiency (against the {base_variant} "
                       f"{fewest}-rank runs' median MFLOPS)", template="plotly_white")
    return [mflops, both]


def _scaling_page(out: Path, rows: dict, summary: list[dict]) -> None:
    figs = []
    for variant, rs in rows.items():
        fig = scaling_figure.figure(scaling.table(rs))
        fig.update_layout(title=f"Time breakdown vs rank count ({variant}, kept runs)")
        figs.append(fig)
    figs += scaling_figures(summary)
    divs = "".join(plotly.offline.plot(f, output_type="div", include_plotlyjs=False)
                   for f in figs)
    js = plotly.offline.get_plotlyjs()
    output.write_text(out, "<!DOCTYPE html><html><head><meta charset='utf-8'><title>mpiscope: "
                      f"Himeno scaling</title><style>{html_report.CSS}</style><script>{js}"
                      "</script></head><body><h1>Himeno scaling</h1><p class='muted'>MFLOPS, "
                      "speed-up and efficiency from every run (a point each, the kept run "
                      "ringed, the line through the medians); the time breakdowns from the "
                      "traced runs the reports show. <a href='index.html'>All reports</a>"
                      f"</p>{divs}</body></html>")


def selection_note(cfg: StudyConfig) -> str:
    """How the runs in the reports were chosen (index page and study.json)."""
    if cfg.repeat == 1:
        return "each variant ran once per rank count; the reports show that run"
    return (f"each variant ran {cfg.repeat} times per rank count, the variants alternating "
            f"(unpatched first, then patched first, ...); the reports and the traces are "
            f"those of the run with the best MFLOPS of each variant (best against best, "
            f"as bench/himeno does), the MFLOPS of all runs are listed")


def _ratio(summary: list[dict], n: int, pick: Callable[[list[float]], float]) -> str:
    """patched/unpatched of pick(MFLOPS of the runs) at n ranks, as text."""
    figs = {s["variant"]: [m for m in s["mflops_all_runs"] if m is not None]
            for s in summary if s["ranks"] == n}
    u, p = figs.get("unpatched"), figs.get("patched")
    return f"{pick(p) / pick(u):.3f}×" if u and p and pick(u) else "–"


def _index_page(out: Path, cfg: StudyConfig, links: list[tuple[str, str]],
                summary: list[dict]) -> None:
    def runs_text(s: dict) -> str:
        return ", ".join("–" if m is None else
                         (f"<b>{m:.1f}</b>" if i == s["kept_run"] else f"{m:.1f}")
                         for i, m in enumerate(s["mflops_all_runs"], 1))

    rows = "".join(
        f"<tr><td>{s['ranks']}</td><td>{s['variant']}</td><td>{(s['mflops'] or 0):.1f}</td>"
        f"<td>{runs_text(s)}</td>"
        f"<td>{100 * s['allreduce_share']:.1f}%</td><td>{100 * s['compute_share']:.1f}%</td>"
        f"<td>{100 * s['communication_share']:.1f}%</td>"
        f"<td>{100 * s['synchronization_share']:.1f}%</td>"
        f"<td>{100 * s.get('io_share', 0.0):.1f}%</td></tr>" for s in summary)
    ratios = "".join(
        f"<tr><td>{n}</td><td>{_ratio(summary, n, max)}</td>"
        f"<td>{_ratio(summary, n, statistics.median)}</td></tr>"
        for n in dict.fromkeys(s["ranks"] for s in summary))
    items = "".join(f"<li><a href='{html.escape(href)}'>{html.escape(text)}</a></li>"
                    for text, href in links)
    where = f" on the emulated cluster {html.escape(cfg.cluster)}" if cfg.cluster else ""
    output.write_text(
        out,
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>mpiscope: Himeno study</title>"
        f"<style>{html_report.CSS}</style></head><body>"
        f"<h1>Himeno study</h1><p>size {html.escape(cfg.size)}, {cfg.iterations} iterations"
        f"{where}.</p><p id='selection'>Runs: {html.escape(selection_note(cfg))}.</p>"
        f"<ul>{items}</ul><table><tr><th>ranks</th><th>variant</th><th>MFLOPS (kept run)</th>"
        "<th>MFLOPS of every run (kept in bold)</th><th>MPI_Allreduce</th><th>compute</th>"
        f"<th>communication</th><th>synchronization</th><th>I/O</th></tr>{rows}</table>"
        "<table id='ratios'><tr><th>ranks</th><th>patched/unpatched MFLOPS, best</th>"
        f"<th>median of the runs</th></tr>{ratios}</table></body></html>")
