"""`mpiscope scaling DIR... [--json OUT] [--html OUT | --png OUT]`: breakdown vs ranks."""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.errors import UserError

HELP = "compare runs of one program at several rank counts: breakdown shares vs ranks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", type=Path, nargs="+", metavar="DIR", help="trace directories")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the table as JSON")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--html", type=Path, metavar="OUT", help="write the plot as HTML")
    out.add_argument("--png", type=Path, metavar="OUT", help="write the plot as PNG (kaleido)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from mpiscope.analysis import scaling
    from mpiscope.analysis.session import Analysis
    from mpiscope.render import scaling as scaling_figure
    from mpiscope.render.loading import load_with_progress

    df = scaling.table([scaling.row(Analysis(load_with_progress(p))) for p in args.traces])
    tab = Table(title="Breakdown vs rank count")
    for col in ("ranks", "wall (s)", "compute", "communication", "synchronization", "trace"):
        tab.add_column(col, justify="left" if col == "trace" else "right", overflow="fold")
    for r in df.itertuples():
        tab.add_row(str(r.ranks), f"{r.wall_s:.4f}", f"{r.compute_share:.1%}",
                    f"{r.communication_share:.1%}", f"{r.synchronization_share:.1%}", r.trace)
    Console().print(tab)
    if args.json:
        output.write_text(args.json,
                          df.to_json(orient="records", indent=2, double_precision=15))
    if args.html or args.png:
        fig = scaling_figure.figure(df)
        if args.html:  # self-contained, no network
            output.write_text(args.html, fig.to_html(include_plotlyjs=True))
        else:
            try:
                image = fig.to_image(format="png")
            except Exception as e:  # plotly raises several types when kaleido is absent
                why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise UserError(str(args.png), f"PNG export needs kaleido ({why}); "
                                "use --html instead") from None
            output.write_bytes(args.png, image)
    return 0
