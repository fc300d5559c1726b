"""`mpiscope study himeno`: unpatched vs patched Himeno at several rank counts, traced,
compared, with a scaling report and an index page."""

from __future__ import annotations

import argparse
import html
import json
from pathlib import Path

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
    p.add_argument("--cluster", default=None, metavar="NxRATE",
                   help="run on the emulated cluster, e.g. 4x100mbit (needs root)")


def _share(functions: list[dict], name: str, total: float) -> float:
    return sum(f["time_s"] for f in functions if f["name"] == name) / total if total else 0.0


def run(args: argparse.Namespace) -> int:
    import pandas as pd
    from rich.console import Console

    from mpiscope import reports, scaling
    from mpiscope.errors import UserError
    from mpiscope.study import VARIANTS, StudyConfig, run_all

    try:
        ranks = tuple(int(r) for r in args.ranks.split(","))
    except ValueError:
        raise UserError(None, f"study: --ranks wants numbers like 1,2,4, not {args.ranks!r}")\
            from None
    cfg = StudyConfig(out=args.out, size=args.size, iterations=args.iterations, ranks=ranks,
                      allreduce_every=args.allreduce_every, cluster=args.cluster)
    console = Console(stderr=True)
    with console.status("running Himeno") as status:
        def progress(run):
            mflops = (run.figures or {}).get("mflops", 0)
            console.print(f"  {run.ranks} ranks {run.variant:9s} {mflops:9.1f} MFLOPS "
                          f"({run.wall_s:.1f} s)")
            status.update("running Himeno")
        result = run_all(cfg, progress)
    summary = []
    links = []
    scaling_rows = {v: [] for v in VARIANTS}
    for n in ranks:
        a, b = result.run(n, "unpatched"), result.run(n, "patched")
        cmp, timelines = reports.comparison(a.trace_dir, b.trace_dir, "unpatched", "patched")
        page = f"compare-{n}.html"
        reports.write_html(cmp, timelines, cfg.out / page,
                           f"Himeno {cfg.size}, {n} ranks: unpatched vs patched")
        reports.write_markdown(cmp, cfg.out / f"compare-{n}.md")
        links.append((f"{n} ranks: unpatched vs patched", page))
        for run_, s in ((a, cmp.a), (b, cmp.b)):
            total = s.rank_time_s
            summary.append({
                "ranks": n, "variant": run_.variant, "trace": str(run_.trace_dir),
                "mflops": (run_.figures or {}).get("mflops"),
                "gosa": (run_.figures or {}).get("gosa"), "wall_s": s.wall_s,
                "allreduce_share": _share(s.report["functions"], "MPI_Allreduce", total),
                **{f"{p}_share": s.share(p) for p in ("compute", "communication",
                                                      "synchronization")},
                "findings": [f["kind"] for f in s.report["findings"]],
            })
            # the comparison already analyzed this run: reuse its breakdown
            scaling_rows[run_.variant].append(scaling.row_from_breakdown(
                str(run_.trace_dir), pd.DataFrame(s.report["ranks"])))
    (cfg.out / "study.json").write_text(json.dumps(
        {"size": cfg.size, "iterations": cfg.iterations, "ranks": list(ranks),
         "cluster": cfg.cluster, "runs": summary}, indent=2))
    _scaling_page(cfg.out / "scaling.html", scaling_rows, summary)
    links.append(("scaling: breakdown and MFLOPS against rank count", "scaling.html"))
    _index_page(cfg.out / "index.html", cfg, links, summary)
    console.print(f"reports: {cfg.out / 'index.html'}")
    return 0


def _scaling_page(out: Path, rows: dict, summary: list[dict]) -> None:
    import plotly.graph_objects as go
    import plotly.offline

    from mpiscope import scaling

    divs = []
    for variant, rs in rows.items():
        fig = scaling.figure(scaling.table(rs))
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
    out.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Himeno scaling"
                   f"</title><script>{js}</script></head><body><h1>Himeno scaling</h1>"
                   + "".join(divs) + "</body></html>")


def _index_page(out: Path, cfg, links: list[tuple[str, str]], summary: list[dict]) -> None:
    rows = "".join(
        f"<tr><td>{s['ranks']}</td><td>{s['variant']}</td><td>{(s['mflops'] or 0):.1f}</td>"
        f"<td>{100 * s['allreduce_share']:.1f}%</td><td>{100 * s['compute_share']:.1f}%</td>"
        f"<td>{100 * s['communication_share']:.1f}%</td>"
        f"<td>{100 * s['synchronization_share']:.1f}%</td></tr>" for s in summary)
    items = "".join(f"<li><a href='{html.escape(href)}'>{html.escape(text)}</a></li>"
                    for text, href in links)
    where = f" on the emulated cluster {html.escape(cfg.cluster)}" if cfg.cluster else ""
    out.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>mpiscope: Himeno study</title>"
        "<style>body{font-family:system-ui,sans-serif;max-width:900px;margin:2rem auto}"
        "td,th{border:1px solid #ddd;padding:.2rem .6rem;text-align:right}"
        "table{border-collapse:collapse}</style></head><body>"
        f"<h1>Himeno study</h1><p>size {html.escape(cfg.size)}, {cfg.iterations} iterations"
        f"{where}.</p><ul>{items}</ul><table><tr><th>ranks</th><th>variant</th><th>MFLOPS</th>"
        "<th>MPI_Allreduce</th><th>compute</th><th>communication</th><th>synchronization</th>"
        f"</tr>{rows}</table></body></html>")
