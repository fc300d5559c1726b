"""`mpiscope analyze DIR [--json OUT] [--top N]`: where the time goes, and what to fix."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "analyze a trace: time breakdown, wait states, findings"


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, metavar="DIR", help="trace directory (or traces.otf2)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the analysis as JSON")
    p.add_argument("--top", type=positive_int, default=10, help="rows in the summary tables")
    p.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")


def load_with_progress(path: Path, use_cache: bool = True):
    """Read a trace with a progress display on stderr; warn about ranks cut short."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    from mpiscope.archive import reader, recover
    from mpiscope.render.cutshort import cut_short_warning

    err = Console(stderr=True)
    for line in recover.before_reading(path):
        err.print(line, highlight=False, soft_wrap=True, markup=False)
    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                   TaskProgressColumn(), TimeRemainingColumn(), console=err, transient=True)

    def show(step: str) -> None:
        # drawn at once: the steps are few (events come in 1M-event chunks), and a fast
        # read would otherwise end before the bar's next timed refresh
        total = getattr(step, "total", None)
        if total:  # decoding events: a bar of events read
            bar.update(task, description=f"reading {path}: events", completed=step.done,
                       total=total, refresh=True)
        else:  # the other steps are short: their name, the bar pulsing
            bar.update(task, description=f"reading {path}: {step}", refresh=True)

    if not err.is_terminal:  # a pipe or a log file gets the results, not the animation
        trace = reader.load(path, use_cache=use_cache)
    else:
        with bar:
            task = bar.add_task(f"reading {path}", total=None)
            trace = reader.load(path, use_cache=use_cache, progress=show)
    warning = cut_short_warning(path, trace.meta.truncated_ranks)
    if warning:
        err.print(warning, highlight=False, soft_wrap=True, markup=False)
    return trace


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from mpiscope import output
    from mpiscope.analysis.session import Analysis
    from mpiscope.render import summary

    analysis = Analysis(load_with_progress(args.trace, not args.no_cache))
    summary.print_summary(analysis, Console(), top=args.top)
    if args.json:
        output.write_text(args.json, analysis.to_json())
    return 0
