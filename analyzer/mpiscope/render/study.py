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

from mpiscope import output
from mpiscope.analysis import scaling
from mpiscope.analysis.comparison import compare_traces
from mpiscope.render import html as html_report
from mpiscope.render import markdown
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


def _scaling_page(out: Path, rows: dict, summary: list[dict]) -> None:
    divs = []
    for variant, rs in rows.items():
        fig = scaling_figure.figure(scaling.table(rs))
        fig.update_layout(title=f"Time breakdown vs rank count ({variant})")
        divs.append(plotly.offline.plot(fig, output_type="div", include_plotlyjs=False))
    fig = go.Figure()
    for variant in rows:
        pts = [s for s in summary if s["variant"] == variant]
        fig.add_scatter(x=[s["ranks"] for s in pts], y=[s["mflops"] for s in pts],
                        mode="lines+markers", name=variant)
    fig.update_layout(title="MFLOPS vs rank count", xaxis_title="ranks", yaxis_title="MFLOPS",
                      template="plotly_white")
    divs.append(plotly.offline.plot(fig, output_type="div", include_plotlyjs=False))
    js = plotly.offline.get_plotlyjs()
    output.write_text(out, f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Himeno "
                      f"scaling</title><script>{js}</script></head><body><h1>Himeno scaling"
                      "</h1>" + "".join(divs) + "</body></html>")


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
        "<style>body{font-family:system-ui,sans-serif;max-width:900px;margin:2rem auto}"
        "td,th{border:1px solid #ddd;padding:.2rem .6rem;text-align:right}"
        "table{border-collapse:collapse;margin:1rem 0}</style></head><body>"
        f"<h1>Himeno study</h1><p>size {html.escape(cfg.size)}, {cfg.iterations} iterations"
        f"{where}.</p><p id='selection'>Runs: {html.escape(selection_note(cfg))}.</p>"
        f"<ul>{items}</ul><table><tr><th>ranks</th><th>variant</th><th>MFLOPS (kept run)</th>"
        "<th>MFLOPS of every run (kept in bold)</th><th>MPI_Allreduce</th><th>compute</th>"
        f"<th>communication</th><th>synchronization</th><th>I/O</th></tr>{rows}</table>"
        "<table id='ratios'><tr><th>ranks</th><th>patched/unpatched MFLOPS, best</th>"
        f"<th>median of the runs</th></tr>{ratios}</table></body></html>")
