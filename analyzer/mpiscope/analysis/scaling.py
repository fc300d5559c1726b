"""Scaling study: the time breakdown of one program's runs at several rank counts.

Each run contributes one row: its rank count, wall time (the longest rank's measured
interval) and the shares of compute, communication and synchronization in the summed
rank time. Synchronization growing with the rank count is the classic result.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mpiscope.analysis.breakdown import PARTS
from mpiscope.analysis.session import Analysis


@dataclass
class ScalingRow:
    trace: str
    ranks: int
    wall_s: float
    compute_s: float  # summed over ranks
    communication_s: float
    synchronization_s: float
    io_s: float = 0.0

    @property
    def shares(self) -> dict[str, float]:
        total = self.compute_s + self.communication_s + self.synchronization_s + self.io_s
        return {p: getattr(self, f"{p}_s") / total if total else 0.0 for p in PARTS}


def row(analysis: Analysis) -> ScalingRow:
    """One run's row from its analysis session."""
    return row_from_breakdown(str(analysis.trace.path), analysis.ranks)


def row_from_breakdown(trace: str, ranks: pd.DataFrame) -> ScalingRow:
    """One run's row from its per-rank breakdown (e.g. an analysis already made)."""
    return ScalingRow(trace, len(ranks), float(ranks["total_s"].max()),
                      float(ranks["compute_s"].sum()), float(ranks["communication_s"].sum()),
                      float(ranks["synchronization_s"].sum()),
                      float(ranks["io_s"].sum()) if "io_s" in ranks else 0.0)


def table(rows: list[ScalingRow]) -> pd.DataFrame:
    """One line per run, sorted by rank count, with seconds and shares of each part."""
    df = pd.DataFrame([{"trace": r.trace, "ranks": r.ranks, "wall_s": r.wall_s,
                        **{f"{p}_s": getattr(r, f"{p}_s") for p in PARTS},
                        **{f"{p}_share": s for p, s in r.shares.items()}} for r in rows])
    return df.sort_values(["ranks", "trace"], ignore_index=True)
