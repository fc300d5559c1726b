"""One rank's share of a trace: the unit a Dask task analyzes.

Every analysis the Dask engine runs on the workers is written as
`partial(RankSlice, ...) -> small value` per rank plus `combine(list of partials) -> the
pandas engine's result`. A `RankSlice` holds one rank's rows of the per-rank tables and
the small whole-trace tables, so a worker's memory is bounded by the largest rank, not by
the trace.

Two ways to get one, giving equal slices:
- `of_trace(trace, rank, ws)`: cut from a whole trace in memory (the pandas engine's
  tables; what tests compare against);
- `engines.dask_engine` builds it on a worker from the partitioned Parquet cache.

Invariants the partials may rely on (`mpiscope.load` gives them): `calls` is sorted by
rank and `calls.call` is the row number, so a rank's calls are the contiguous global ids
`call_offset .. call_offset + len(calls) - 1`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mpiscope.archive.trace import Trace

# tables with a row per rank event, cut by their `rank` column (messages: see RankSlice)
PER_RANK = ("calls", "regions", "p2p", "collectives", "flushes", "unmatched", "rma",
            "rma_sync", "io")


@dataclass
class RankSlice:
    rank: int
    # rank's rows of PER_RANK tables, `threads` of the rank, the messages it sent; meta,
    # ranks, comms, windows, files, callpaths whole
    trace: Trace
    received: pd.DataFrame  # the messages it received (recv_rank == rank)
    call_offset: int  # global call id of trace.calls' first row
    # aligned with trace.calls row for row: wait_ns (int64), wait_kind (categorical of
    # waitstates.KINDS); None before the wait states are known
    waits: pd.DataFrame | None = None

    def local(self, call: np.ndarray) -> np.ndarray:
        """Row numbers in this slice's calls of global call ids of this rank."""
        return np.asarray(call, dtype=np.int64) - self.call_offset


@dataclass(frozen=True)
class PerRank:
    """`fn(slice, args[slice.rank])` (None for a rank without one): a pass whose ranks
    each need their own share of a large value. A runner may call it as any function of
    a slice; the Dask runner sends each rank's task its own argument only (`for_rank`),
    not the whole mapping."""

    fn: Callable[[RankSlice, Any], Any]
    args: Mapping[int, Any]

    def __call__(self, s: RankSlice) -> Any:
        return self.fn(s, self.args.get(s.rank))

    def for_rank(self, rank: int) -> Callable[[RankSlice], Any]:
        """The pass of rank `rank` alone, carrying only its argument."""
        return PerRank(self.fn, {rank: self.args[rank]} if rank in self.args else {})


@dataclass(frozen=True)
class Reduced:
    """A pass whose per-rank results `combine` merges, associatively (merging merged
    results gives the same), so a runner may merge them where they are made: the list
    `run(Reduced(fn, combine))` returns is the per-rank results or fewer, already merged,
    and `combine` of it is the pass's result either way. The Dask runner merges on the
    workers in a tree, so the client never holds every rank's result at once."""

    fn: Callable[[RankSlice], Any]
    combine: Callable[[list], Any]

    def __call__(self, s: RankSlice) -> Any:
        return self.fn(s)


def _rows(df: pd.DataFrame, column: str, rank: int) -> pd.DataFrame:
    if df is None or df.empty or column not in df.columns:
        return df
    return df[(df[column] == rank).to_numpy()].reset_index(drop=True)


def of_trace(trace: Trace, rank: int, ws=None) -> RankSlice:
    """Rank `rank`'s slice of a whole trace (with its wait states from `ws`, a
    `waitstates.WaitStates` of the same trace, if given)."""
    cut = {name: _rows(getattr(trace, name), "rank", rank) for name in PER_RANK}
    cut["threads"] = _rows(trace.threads, "rank", rank)
    cut["messages"] = _rows(trace.messages, "send_rank", rank)
    part = dataclasses.replace(trace, **cut)
    is_rank = (trace.calls["rank"] == rank).to_numpy()
    first = np.flatnonzero(is_rank)
    offset = int(trace.calls["call"].to_numpy()[first[0]]) if len(first) else 0
    waits = None
    if ws is not None:
        pc = ws.per_call
        waits = pd.DataFrame({"wait_ns": pc["wait_ns"].to_numpy()[is_rank],
                              "wait_kind": pc["wait_kind"][is_rank].reset_index(drop=True)})
    return RankSlice(rank, part, _rows(trace.messages, "recv_rank", rank), offset, waits)


def all_of_trace(trace: Trace, ws=None) -> list[RankSlice]:
    """Every rank's slice, in rank order."""
    return [of_trace(trace, int(r), ws) for r in sorted(trace.ranks["rank"].unique())]
