"""`mpiscope scaling DIR... [--json OUT] [--html OUT | --png OUT]`: breakdown vs ranks."""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output

HELP = "compare runs of one program at several rank counts: breakdown shares vs ranks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", type=Path, nargs="+", metavar="DIR", help="trace directories")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the table as JSON")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--html", type=Path, metavar="OUT", help="write the plot as HTML")
    out.add_argument("--png", type=Path, metavar="OUT", help="write the plot as PNG (kaleido)")


def run(args: argparse.Namespace) -> int:
    from mpiscope.analysis import scaling
    from mpiscope.analysis.session import Analysis
    from mpiscope.archive import fom
    from mpiscope.render import scaling as show
    from mpiscope.render.loading import load_with_progress

    rows = [scaling.row(Analysis(load_with_progress(p)), fom.read(p)) for p in args.traces]
    scaling.same_program(rows)  # one line and exit 2 for runs that do not scale
    df = scaling.table(rows)
    show.print_table(df)
    if args.json:
        output.write_text(args.json,
                          df.to_json(orient="records", indent=2, double_precision=15))
    if args.html:
        show.write_html(df, args.html)
    elif args.png:
        show.write_png(df, args.png)
    return 0
