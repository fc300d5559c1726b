"""`mpiscope study himeno`: unpatched vs patched Himeno at several rank counts, traced,
compared, with a scaling report and an index page."""

from __future__ import annotations

import argparse
import html
import json
import statistics
from pathlib import Path

from mpiscope import output
from mpiscope.errors import UserError

HELP = "run the Himeno study: both variants at 1, 2, 4 ranks, traced and compared"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workload", choices=["himeno"], help="the study to run")
    p.add_argument("--out", type=Path, default=Path("mpiscope-study"),
                   help="output directory (default: ./mpiscope-study)")
    p.add_argument("--size", default="S", help="Himeno size XS|S|M|L|XL (default: S)")
    p.add_argument("--iterations", type=int, default=200,
                   help="Jacobi iterations per run (default: 200; the original study: 7000)")
    p.add_argument("--ranks", default="1,2,4", help="rank counts (default: 1,2,4)")
    p.add_argument("--allreduce-every", type=int, default=None,
                   help="patched variant: reduce every K iterations (default: only the last)")
    p.add_argument("--repeat", type=int, default=3, metavar="R",
                   help="run each variant R times per rank count, alternating, and keep the "
                   "run with the best MFLOPS for the reports (default: 3)")
    p.add_argument("--cluster", default=None, metavar="NxRATE",
                   help="run on the emulated cluster, e.g. 4x100mbit (needs root)")


def parse_ranks(text: str) -> tuple[int, ...]:
    """`1,2,4` -> (1, 2, 4); anything else is a one-line error (exit code 2)."""
    try:
        ranks = tuple(int(r) for r in text.split(","))
    except ValueError:
        ranks = ()
    if not ranks or min(ranks) < 1:
        raise UserError("study", f"--ranks wants rank counts >= 1 like 1,2,4, not {text!r}")
    return tuple(dict.fromkeys(ranks))  # each rank count once, in the order given


def _share(functions: list[dict], name: str, total: float) -> float:
    return sum(f["time_s"] for f in functions if f["name"] == name) / total if total else 0.0


def run(args: argparse.Namespace) -> int:
    import pandas as pd
    from rich.console import Console

    from mpiscope.analysis import scaling
    from mpiscope.analysis.comparison import compare_traces
    from mpiscope.jobs.study import VARIANTS, StudyConfig, run_all
    from mpiscope.render import html as html_report
    from mpiscope.render import markdown

    ranks = parse_ranks(args.ranks)
    # checked here, in one line, before any job starts (Himeno checks the rest itself)
    if args.allreduce_every is not None and args.allreduce_every < 1:
        raise UserError("study", f"--allreduce-every wants K >= 1, not {args.allreduce_every}")
    if args.repeat < 1:
        raise UserError("study", f"--repeat wants R >= 1, not {args.repeat}")
    # the pages are written after minutes of runs: a directory we cannot write is
    # refused now, in one line
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise output.cannot_write(args.out, err) from None
    output.check_writable(args.out / "study.json")
    cfg = StudyConfig(out=args.out, size=args.size, iterations=args.iterations, ranks=ranks,
                      allreduce_every=args.allreduce_every, cluster=args.cluster,
                      repeat=args.repeat)
    console = Console(stderr=True)
    with console.status("running Himeno") as status:
        def progress(run):
            mflops = run.mflops or 0.0
            console.print(f"  {run.ranks} ranks {run.variant:9s} run {run.attempt}/"
                          f"{cfg.repeat} {mflops:9.1f} MFLOPS ({run.wall_s:.1f} s)")
            status.update("running Himeno")
        result = run_all(cfg, progress)
    summary = []
    links = []
    scaling_rows = {v: [] for v in VARIANTS}
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
                                                      "synchronization")},
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
    for n in ranks:
        console.print(f"  {n} ranks: patched/unpatched MFLOPS {_ratio(summary, n, max)}"
                      + (f" (best of {cfg.repeat}; median {_ratio(summary, n, statistics.median)})"
                         if cfg.repeat > 1 else ""))
    console.print(f"reports: {cfg.out / 'index.html'}")
    return 0


def _scaling_page(out: Path, rows: dict, summary: list[dict]) -> None:
    import plotly.graph_objects as go
    import plotly.offline

    from mpiscope.analysis import scaling
    from mpiscope.render import scaling as scaling_figure

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


def selection_note(cfg) -> str:
    """How the runs in the reports were chosen (index page and study.json)."""
    if cfg.repeat == 1:
        return "each variant ran once per rank count; the reports show that run"
    return (f"each variant ran {cfg.repeat} times per rank count, the variants alternating "
            f"(unpatched first, then patched first, ...); the reports and the traces are "
            f"those of the run with the best MFLOPS of each variant (best against best, "
            f"as bench/himeno does), the MFLOPS of all runs are listed")


def _ratio(summary: list[dict], n: int, pick) -> str:
    """patched/unpatched of pick(MFLOPS of the runs) at n ranks, as text."""
    figs = {s["variant"]: [m for m in s["mflops_all_runs"] if m is not None]
            for s in summary if s["ranks"] == n}
    u, p = figs.get("unpatched"), figs.get("patched")
    return f"{pick(p) / pick(u):.3f}×" if u and p and pick(u) else "–"


def _index_page(out: Path, cfg, links: list[tuple[str, str]], summary: list[dict]) -> None:
    def runs_text(s: dict) -> str:
        return ", ".join("–" if m is None else
                         (f"<b>{m:.1f}</b>" if i == s["kept_run"] else f"{m:.1f}")
                         for i, m in enumerate(s["mflops_all_runs"], 1))

    rows = "".join(
        f"<tr><td>{s['ranks']}</td><td>{s['variant']}</td><td>{(s['mflops'] or 0):.1f}</td>"
        f"<td>{runs_text(s)}</td>"
        f"<td>{100 * s['allreduce_share']:.1f}%</td><td>{100 * s['compute_share']:.1f}%</td>"
        f"<td>{100 * s['communication_share']:.1f}%</td>"
        f"<td>{100 * s['synchronization_share']:.1f}%</td></tr>" for s in summary)
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
        f"<th>communication</th><th>synchronization</th></tr>{rows}</table>"
        "<table id='ratios'><tr><th>ranks</th><th>patched/unpatched MFLOPS, best</th>"
        f"<th>median of the runs</th></tr>{ratios}</table></body></html>")
