"""Scaling study: the time breakdown of one program's runs at several rank counts.

Each run contributes one row: its rank count, wall time (the longest rank's measured
interval) and the shares of compute, communication and synchronization in the summed
rank time. Synchronization growing with the rank count is the classic result. Against the
smallest run (fewest ranks; the fastest of them if several): speed-up = its wall time /
the run's, parallel efficiency = speed-up × its ranks / the run's ranks.

Runs of different programs or problem sizes do not scale one into the other: `same_program`
refuses them (program: the executable's name recorded in the trace; problem size: the
`size` figure of merit the program printed, e.g. Himeno's JSON line, where there is one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd

from mpiscope.analysis.breakdown import PARTS
from mpiscope.analysis.session import Analysis
from mpiscope.errors import UserError


@dataclass
class ScalingRow:
    trace: str
    ranks: int
    wall_s: float
    compute_s: float  # summed over ranks
    communication_s: float
    synchronization_s: float
    io_s: float = 0.0
    program: str | None = None  # the executable recorded in the trace
    size: str | None = None  # the problem size the program printed (figures of merit)

    @property
    def shares(self) -> dict[str, float]:
        total = self.compute_s + self.communication_s + self.synchronization_s + self.io_s
        return {p: getattr(self, f"{p}_s") / total if total else 0.0 for p in PARTS}


def row(analysis: Analysis, figures: dict | None = None) -> ScalingRow:
    """One run's row from its analysis session (and the figures of merit its program
    printed, for the problem size)."""
    r = row_from_breakdown(str(analysis.overview.path), analysis.ranks)
    r.program = analysis.overview.meta.program or None
    size = (figures or {}).get("size")
    r.size = None if size is None else str(size)
    return r


def _name(program: str) -> str:
    return PurePath(program).name or program


def same_program(rows: list[ScalingRow]) -> None:
    """Raise a one-line UserError if the runs are of different programs (by executable
    name) or problem sizes; runs that recorded neither are let through."""
    programs: dict[str, list[str]] = {}
    for r in rows:
        if r.program:
            programs.setdefault(_name(r.program), []).append(r.trace)
    if len(programs) > 1:
        listed = "; ".join(f"{p} ({', '.join(t)})" for p, t in programs.items())
        raise UserError(None, f"runs of different programs: {listed}; scaling compares one "
                        "program at several rank counts")
    sizes: dict[str, list[str]] = {}
    for r in rows:
        if r.size is not None:
            sizes.setdefault(r.size, []).append(r.trace)
    if len(sizes) > 1:
        listed = "; ".join(f"size {s} ({', '.join(t)})" for s, t in sizes.items())
        raise UserError(None, f"runs of different problem sizes: {listed}; scaling compares "
                        "one problem at several rank counts")


def row_from_breakdown(trace: str, ranks: pd.DataFrame) -> ScalingRow:
    """One run's row from its per-rank breakdown (e.g. an analysis already made)."""
    return ScalingRow(trace, len(ranks), float(ranks["total_s"].max()),
                      float(ranks["compute_s"].sum()), float(ranks["communication_s"].sum()),
                      float(ranks["synchronization_s"].sum()),
                      float(ranks["io_s"].sum()) if "io_s" in ranks else 0.0)


def table(rows: list[ScalingRow]) -> pd.DataFrame:
    """One line per run, sorted by rank count, with seconds and shares of each part, and
    `speedup` and `efficiency` against the smallest run."""
    df = pd.DataFrame([{"trace": r.trace, "ranks": r.ranks, "wall_s": r.wall_s,
                        **{f"{p}_s": getattr(r, f"{p}_s") for p in PARTS},
                        **{f"{p}_share": s for p, s in r.shares.items()}} for r in rows])
    df = df.sort_values(["ranks", "trace"], ignore_index=True)
    if df.empty:
        return df.assign(speedup=[], efficiency=[])
    fewest = int(df["ranks"].min())
    base = float(df.loc[df["ranks"] == fewest, "wall_s"].min())
    wall = df["wall_s"].to_numpy()
    df["speedup"] = [base / w if w > 0 else float("nan") for w in wall]
    df["efficiency"] = df["speedup"] * fewest / df["ranks"]
    return df
