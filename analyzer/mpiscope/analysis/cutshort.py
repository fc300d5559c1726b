"""The one sentence that says a trace has ranks cut short (a job that died, a truncated
`.evt`), wherever it is said: the analysis JSON's `warnings` (session.Analysis.warnings),
the stderr line of `analyze`, `compare`, `scaling`, `serve` and the notebook façade
(render.cutshort), the comparison reports and the web UI (render.runwarnings). It lives in
the analysis layer because the JSON's warnings are written there and every other place
may import it.
"""

from __future__ import annotations

from collections.abc import Sequence

# how the sentence begins: a saved JSON's warning about ranks cut short is recognised by
# it (render.runwarnings), also in the wording of an older mpiscope
CUT_SHORT = "ranks cut short"
MOST_RANKS = 8  # named; the rest counted (a job that died on 1000 ranks cuts all short)


def ranks_text(ranks: Sequence[int], most: int = MOST_RANKS) -> str:
    """`1, 3` or `0, 1, ..., 7 and 992 more`."""
    shown = ", ".join(str(int(r)) for r in ranks[:most])
    return shown + (f" and {len(ranks) - most} more" if len(ranks) > most else "")


def cut_short_text(ranks: Sequence[int]) -> str | None:
    """`ranks cut short (no MPI_Finalize or truncated events): 1, 3; analyzed as far as
    their events go`, or None if no rank was cut short."""
    if not ranks:
        return None
    return (f"{CUT_SHORT} (no MPI_Finalize or truncated events): {ranks_text(ranks)}; "
            "analyzed as far as their events go")
