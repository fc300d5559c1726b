"""Stable colours: a function keeps its colour across traces, runs and sessions, and the
parts of the time breakdown have one colour each, in the reports and the web UI alike."""

from __future__ import annotations

import zlib

# Well-separated colours (Tableau 20 reordered so neighbours contrast), none of them the
# compute background grey.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
    "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#393b79", "#637939", "#8c6d31",
    "#843c39", "#7b4173", "#3182bd",
)
# The functions users look at most get fixed, distinct colours.
FIXED = {
    "MPI_Allreduce": "#d62728", "MPI_Barrier": "#7f7f7f", "MPI_Send": "#1f77b4",
    "MPI_Recv": "#2ca02c", "MPI_Isend": "#17becf", "MPI_Irecv": "#98df8a",
    "MPI_Wait": "#ff7f0e", "MPI_Waitall": "#ffbb78", "MPI_Sendrecv": "#9467bd",
    "MPI_Bcast": "#8c564b", "MPI_Reduce": "#e377c2", "MPI_Init": "#c7c7c7",
    "MPI_Finalize": "#c7c7c7",
}
_HASHED = tuple(c for c in PALETTE if c not in set(FIXED.values()))
COMPUTE = "#ececec"  # lane background: time outside MPI
# The parts of the time breakdown (mpiscope.analysis.breakdown.PARTS) in every chart of
# them, reports and web UI alike: compute a darker grey than the lanes' (bars on white),
# communication and synchronization the blue and red the timeline gives MPI_Send and
# MPI_Allreduce; I/O an olive that none of the fixed function colours is.
PART_COLOURS = {"compute": "#b8b8b8", "communication": "#1f77b4", "synchronization": "#d62728",
                "io": "#bcbd22"}


def colour(function: str) -> str:
    if function in FIXED:
        return FIXED[function]
    # crc32 (not hash()) so the colour survives interpreter restarts; the fixed colours are
    # kept for their functions
    return _HASHED[zlib.crc32(function.encode()) % len(_HASHED)]


def blend(hex_colour: str, towards: str = COMPUTE, amount: float = 0.7) -> str:
    """`amount` of the way from hex_colour to `towards` (used for sparse summary cells)."""
    a = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(towards[i:i + 2], 16) for i in (1, 3, 5)]
    mix = [round(x + (y - x) * amount) for x, y in zip(a, b, strict=True)]
    return "#" + "".join(f"{v:02x}" for v in mix)
