"""User regions (Score-P's instrumented functions, the `regions` table) in the timeline.

Drawn as Jumpshot nests states: in each rank's lane a region is a bar, each nesting level
slimmer than its parent, and the MPI calls inside sit on top of them, slimmer still. So
the outermost region (usually `main`) frames the lane, and an MPI state's height says how
deep in the program's call tree it was made.

Level of detail as for MPI states: a view gets the regions at least a pixel long
(found through the same long-state pyramid, `lod.StateIndex.long_states`, so the cost of a
view does not grow with the trace), at most MAX_REGIONS of them, the longest; shorter
ones are left out (their enclosing regions are drawn) and the status line says from
which length on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope_webui.lod import StateIndex

MAX_REGIONS = 4000  # region bars per view
R_HALF = 0.46  # half height of an outermost region: the lane's height
R_STEP = 0.05  # each nesting level of regions is this much slimmer
R_MIN = 0.22  # ... down to this
MPI_INSIDE = 0.05  # an MPI state is this much slimmer than its innermost region
BAND = 0.05  # what a region's children leave of it above and below them: where hover hits


def region_half(nest: np.ndarray | int) -> np.ndarray:
    """Half height (in lanes) of a region at user-region nesting level `nest`."""
    return np.maximum(R_HALF - R_STEP * np.asarray(nest, np.float64), R_MIN)


def _open_at(kstart: np.ndarray, kend_sorted: np.ndarray, base: np.ndarray,
             base_end: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """How many intervals are open at each key (started at or before it, not ended by it);
    kstart/kend_sorted are rank-keyed and sorted, base/base_end the first position of
    each key's rank in them."""
    opened = np.searchsorted(kstart, keys, side="right") - base
    closed = np.searchsorted(kend_sorted, keys, side="right") - base_end
    return np.maximum(opened - closed, 0)


@dataclass
class RegionIndex:
    """A trace's user regions, ready for window queries."""

    index: StateIndex  # the regions as states; times relative to index.origin
    offset: int  # index.origin - the MPI index's origin (add to go to MPI-relative time)
    nest: np.ndarray  # user-region nesting level per index position (0 = outermost)
    mpi_enclosing: np.ndarray  # per MPI StateIndex position: user regions open at its start

    @property
    def row(self) -> np.ndarray:
        """Row in Trace.regions per index position."""
        return self.index.call

    @classmethod
    def build(cls, regions: pd.DataFrame, num_ranks: int, mpi: StateIndex) -> RegionIndex | None:
        if not len(regions):
            return None
        # call = row position: hover and click name a region by it
        table = regions.assign(call=np.arange(len(regions), dtype=np.int64))
        idx = StateIndex.build(table, num_ranks)
        span = idx.span
        rank = idx.rank.astype(np.int64)
        kstart = rank * span + idx.start  # sorted: the index is ordered by (rank, start)
        kend = np.sort(rank * span + idx.end)
        ranks = np.arange(num_ranks, dtype=np.int64) * span
        first = np.searchsorted(kstart, ranks, side="left")
        first_end = np.searchsorted(kend, ranks, side="left")
        # the table's depth counts every open region, MPI ones included: count user
        # regions alone, as they are drawn
        pos = np.arange(len(kstart), dtype=np.int64)
        nest = (pos - first[rank]) - (np.searchsorted(kend, kstart, side="right")
                                      - first_end[rank])
        offset = idx.origin - mpi.origin
        t = mpi.start - offset  # MPI call starts in the regions' time frame
        mrank = mpi.rank.astype(np.int64)
        inside = (t >= 0) & (t < span)
        keys = mrank * span + np.clip(t, 0, span - 1)
        enclosing = np.where(inside, _open_at(kstart, kend, first[mrank], first_end[mrank],
                                              keys), 0)
        return cls(idx, int(offset), np.maximum(nest, 0).astype(np.int16),
                   enclosing.astype(np.int16))

    def mpi_half(self, positions: np.ndarray, half: np.ndarray) -> np.ndarray:
        """MPI states' half heights, slimmer than the innermost region around them."""
        enc = self.mpi_enclosing[positions]
        inner = region_half(np.maximum(enc - 1, 0)) - MPI_INSIDE
        return np.where(enc > 0, np.minimum(half, inner), half)


@dataclass
class RegionView:
    """The regions one timeline view draws."""

    positions: np.ndarray  # in RegionIndex.index
    start: np.ndarray  # clipped to the window, ns relative to the MPI origin
    end: np.ndarray
    threshold_ns: int  # regions at least this long (clipped) are drawn, shorter ones not


def query(ri: RegionIndex, t0: int, t1: int, width_px: int,
          max_regions: int = MAX_REGIONS) -> RegionView:
    """The regions of [t0, t1) (ns relative to the MPI origin) at least a pixel long."""
    t0, t1 = sorted((int(t0), int(t1)))
    t1 = max(t1, t0 + 1)
    threshold = max(int(np.ceil((t1 - t0) / max(int(width_px), 1))), 1)
    a, b = t0 - ri.offset, t1 - ri.offset
    idx = ri.index
    pos = idx.long_states(a, b, threshold)
    s = np.maximum(idx.start[pos], a)
    e = np.minimum(idx.end[pos], b)
    if len(pos) > max_regions:  # keep the longest
        keep = np.sort(np.argpartition(-(e - s), max_regions)[:max_regions])
        threshold = int((e - s)[keep].min())
        pos, s, e = pos[keep], s[keep], e[keep]
    return RegionView(pos, s + ri.offset, e + ri.offset, threshold)
