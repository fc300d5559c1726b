"""The warnings shown with a run's figures (comparison reports, web UI): the analysis
session's `warnings` (what `analyze` prints and its JSON carries), so a reader is told what
the analysis dropped, clamped or distrusts. The one about ranks cut short is written in
analysis.cutshort's wording (the JSON's and the CLI's stderr line's), also where a JSON
saved by an older mpiscope words it otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mpiscope.analysis.comparison import Comparison, RunSummary
from mpiscope.analysis.cutshort import CUT_SHORT, cut_short_text


@dataclass(frozen=True)
class Shown:
    text: str
    cut_short: bool  # the ranks-cut-short one (its own CSS class in the HTML report)


def shown(warnings: Sequence[str] | None, truncated: Sequence[int]) -> list[Shown]:
    """The session's `warnings` (None: a JSON saved before they existed) as shown, in its
    order; `truncated`: the ranks cut short (`meta.truncated_ranks`), named even then."""
    cut = cut_short_text(truncated)
    if warnings is None:
        return [Shown(cut, True)] if cut else []
    return [Shown(cut, True) if cut and str(w).startswith(CUT_SHORT) else Shown(str(w), False)
            for w in warnings]


@dataclass(frozen=True)
class RunWarning:
    run: RunSummary
    text: str
    cut_short: bool


def report_warnings(cmp: Comparison) -> list[RunWarning]:
    """Both runs' warnings, run A's first."""
    return [RunWarning(run, w.text, w.cut_short) for run in (cmp.a, cmp.b)
            for w in shown(run.report.get("warnings"), run.truncated_ranks)]
