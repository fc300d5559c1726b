"""Reading a trace at the terminal (`analyze`, `scaling`): what recovery did first, a
progress bar on stderr while it reads (a terminal only: a log gets no animation), and the
warning about ranks cut short after."""

from __future__ import annotations

from pathlib import Path

from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)

from mpiscope.archive import reader
from mpiscope.archive import recover as live
from mpiscope.archive.trace import Trace
from mpiscope.render import term
from mpiscope.render.cutshort import cut_short_warning


def load_with_progress(path: Path, use_cache: bool = True, recover: bool = True) -> Trace:
    """Read a trace with a progress display on stderr; warn about ranks cut short.
    `recover`: recover ranks killed outright first (False: the caller did)."""
    err = term.console(stderr=True)
    for line in live.before_reading(path) if recover else []:
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
