"""The one wording of "this trace has ranks cut short", for every place that warns about it.

`analyze`, `scaling` and `compare` print `cut_short_warning` on stderr, `serve` shows it
too, and the comparison reports (HTML, Markdown; render.runwarnings) carry
`cut_short_text`, so a user reads the same sentence wherever a trace of a job that died
(or a truncated `.evt`) turns up.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def cut_short_text(ranks: Sequence[int]) -> str | None:
    """`ranks cut short (...): 1, 3; analyzing as far as the trace goes`, or None if none."""
    if not ranks:
        return None
    listed = ", ".join(str(int(r)) for r in ranks)
    return (f"ranks cut short (no MPI_Finalize or truncated events): {listed}; "
            "analyzing as far as the trace goes")


def cut_short_warning(path: Path | str, ranks: Sequence[int]) -> str | None:
    """The stderr line `mpiscope: warning: <path>: ranks cut short ...`, or None if no rank
    was cut short. `ranks` is `trace.meta.truncated_ranks`; `path` as the user gave it."""
    text = cut_short_text(ranks)
    return f"mpiscope: warning: {path}: {text}" if text else None

