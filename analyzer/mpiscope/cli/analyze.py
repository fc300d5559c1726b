"""`mpiscope analyze DIR [--json OUT] [--top N]`: where the time goes, and what to fix."""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope.cli import engine

HELP = "analyze a trace: time breakdown, wait states, findings"


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return value


def add_callpath_arguments(p: argparse.ArgumentParser) -> None:
    """--skip-frames and --group-by (analyze, compare, serve)."""
    p.add_argument("--skip-frames", metavar="GLOBS", default="",
                   help="comma-separated globs on function/frame names of wrapper layers "
                   "that call sites should not name, e.g. 'message_passing::*,"
                   "LAMMPS_NS::Comm*' (wrappers reached from many call paths are also "
                   "detected)")
    p.add_argument("--group-by", choices=("frame", "path"), default="frame",
                   help="group call-site results by the chosen frame (default) or by the "
                   "whole call path")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, metavar="DIR", help="trace directory (or traces.otf2)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the analysis as JSON")
    p.add_argument("--top", type=positive_int, default=10, help="rows in the summary tables")
    p.add_argument("--ranks", choices=("summary", "all"), default="summary",
                   help="the per-rank table: beyond 16 ranks, min/median/max and the "
                   "outlying ranks (summary, the default), or every rank (all)")
    p.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    add_callpath_arguments(p)
    engine.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    from mpiscope import output
    from mpiscope.analysis.session import Analysis
    from mpiscope.archive import recover
    from mpiscope.render import summary, term
    from mpiscope.render.loading import load_with_progress

    err = term.console(stderr=True)

    def analyze(path: Path) -> Analysis:
        # killed ranks first: the engine is chosen for the trace their recovery completes
        for line in recover.before_reading(path):
            err.print(line, highlight=False, soft_wrap=True, markup=False)
        if engine.use_dask(args, path):
            from mpiscope.engines import dask_engine
            from mpiscope.render.cutshort import cut_short_warning

            analysis = dask_engine.analyze(path, engine.spec(args),
                                           skip_frames=args.skip_frames,
                                           group_by=args.group_by)
            warning = cut_short_warning(path, analysis.tables.meta.truncated_ranks)
            if warning:
                err.print(warning, highlight=False, soft_wrap=True, markup=False)
            return analysis
        return Analysis(load_with_progress(path, not args.no_cache, recover=False),
                        skip_frames=args.skip_frames, group_by=args.group_by)

    # the jobs it spawned (DIR/spawn-N, their own MPI_COMM_WORLDs) are read as part of it
    analysis = analyze(args.trace).read_spawned(analyze)
    summary.print_summary(analysis, term.console(), top=args.top,
                          every_rank=args.ranks == "all")
    if args.json:
        output.write_text(args.json, analysis.to_json())
    return 0
