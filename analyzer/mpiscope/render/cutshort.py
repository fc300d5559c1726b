"""The stderr line that says a trace has ranks cut short: `analyze`, `scaling` and
`compare` print `cut_short_warning`, `serve` and the notebook façade too. Its sentence is
analysis.cutshort's, the one the analysis JSON's `warnings`, the comparison reports and
the web UI carry (render.runwarnings), so a user reads the same words wherever a trace of
a job that died (or a truncated `.evt`) turns up.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mpiscope.analysis.cutshort import cut_short_text


def cut_short_warning(path: Path | str, ranks: Sequence[int]) -> str | None:
    """The stderr line `mpiscope: warning: <path>: ranks cut short ...`, or None if no rank
    was cut short. `ranks` is `trace.meta.truncated_ranks`; `path` as the user gave it."""
    text = cut_short_text(ranks)
    return f"mpiscope: warning: {path}: {text}" if text else None
