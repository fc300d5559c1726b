"""`mpiscope compare DIR_A DIR_B --html OUT.html [--md OUT.md]`: did the fix work?"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mpiscope.cli import engine

HELP = "compare two traced runs (before/after) and write a self-contained report"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=Path, metavar="DIR_A", help="trace of the baseline run")
    p.add_argument("b", type=Path, metavar="DIR_B", help="trace of the changed run")
    p.add_argument("--html", type=Path, help="write the HTML report here")
    p.add_argument("--md", type=Path, help="write a Markdown summary here (PR comment)")
    p.add_argument("--json", type=Path, metavar="OUT",
                   help="write predicted vs measured, the explanation and both runs' "
                   "iterations as JSON here")
    p.add_argument("--label-a", default=None, help="name of run A (default: its directory)")
    p.add_argument("--label-b", default=None, help="name of run B (default: its directory)")
    from mpiscope.cli.analyze import add_callpath_arguments

    add_callpath_arguments(p)
    engine.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    from mpiscope import output
    from mpiscope.analysis.comparison import compare_traces
    from mpiscope.analysis.explanation import explain
    from mpiscope.archive import recover
    from mpiscope.render import explain as explained
    from mpiscope.render import html, markdown, summary, term
    from mpiscope.render.cutshort import cut_short_warning

    console = term.console(stderr=True)
    for path in (args.a, args.b):
        for line in recover.before_reading(path):
            console.print(line, highlight=False, soft_wrap=True, markup=False)
    engine.prepare(args, [args.a, args.b])  # --engine dask: the caches built on the cluster
    cmp = compare_traces(args.a, args.b, args.label_a, args.label_b,
                         skip_frames=args.skip_frames, group_by=args.group_by)
    for path, run in ((args.a, cmp.a), (args.b, cmp.b)):
        warning = cut_short_warning(path, run.truncated_ranks)
        if warning:  # the reports say it too (render.runwarnings)
            console.print(warning, highlight=False, soft_wrap=True, markup=False)
    ex = explain(cmp)
    if args.html:
        html.write_html(cmp, args.html, ex=ex)
        console.print(f"report: {args.html}")
    if args.md:
        markdown.write_markdown(cmp, args.md, ex)
        console.print(f"summary: {args.md}")
    if args.json:
        output.make_parent(args.json)
        output.write_text(args.json, json.dumps(explained.to_dict(cmp, ex), indent=2,
                                                default=float))
        console.print(f"json: {args.json}")
    summary.print_comparison(cmp)
    explained.print_explanation(ex)
    return 0
