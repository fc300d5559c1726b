"""`mpiscope compare DIR_A DIR_B --html OUT.html [--md OUT.md]`: did the fix work?"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "compare two traced runs (before/after) and write a self-contained report"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=Path, metavar="DIR_A", help="trace of the baseline run")
    p.add_argument("b", type=Path, metavar="DIR_B", help="trace of the changed run")
    p.add_argument("--html", type=Path, help="write the HTML report here")
    p.add_argument("--md", type=Path, help="write a Markdown summary here (PR comment)")
    p.add_argument("--label-a", default=None, help="name of run A (default: its directory)")
    p.add_argument("--label-b", default=None, help="name of run B (default: its directory)")
    from mpiscope.cli.analyze import add_callpath_arguments

    add_callpath_arguments(p)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from mpiscope.analysis.comparison import compare_traces
    from mpiscope.archive import recover
    from mpiscope.render import html, markdown, summary
    from mpiscope.render.cutshort import cut_short_warning

    console = Console(stderr=True)
    for path in (args.a, args.b):
        for line in recover.before_reading(path):
            console.print(line, highlight=False, soft_wrap=True, markup=False)
    cmp = compare_traces(args.a, args.b, args.label_a, args.label_b,
                         skip_frames=args.skip_frames, group_by=args.group_by)
    for path, run in ((args.a, cmp.a), (args.b, cmp.b)):
        warning = cut_short_warning(path, run.truncated_ranks)
        if warning:  # the reports say it too (cutshort.cut_short_notes)
            console.print(warning, highlight=False, soft_wrap=True, markup=False)
    if args.html:
        html.write_html(cmp, args.html)
        console.print(f"report: {args.html}")
    if args.md:
        markdown.write_markdown(cmp, args.md)
        console.print(f"summary: {args.md}")
    summary.print_comparison(cmp)
    return 0
