"""The breakdown, time bins, call sites and message statistics as per-rank partials.

Each `compute_*(run, ...)` gives exactly what the pandas `Analysis` gives (same rule
code: `analysis.breakdown`, `analysis.stats`, `analysis.callpaths`), with `run` mapping a
function over every rank's `RankSlice` (rank order): in a test
`lambda fn: [fn(s) for s in slices.all_of_trace(a.trace, a.wait_states)]`, on the Dask
engine `ranktasks.map_ranks(client, tables, fn)`.

What a rank returns, and so what the client holds (none of it grows with events):
- `compute_ranks`: one row of sums per rank;
- `compute_time_bins`: a first pass for the measured intervals (a row per rank; or
  `intervals` from `compute_ranks`), then 3 x bins sums per rank;
- `compute_callsites`: sums per (function, call site) and time per (function, call
  site, call path) of the rank: bounded by the program's call sites, not by its calls;
- `compute_messages`: counts and bytes per (path, size bucket); the medians and
  quantiles need order statistics of per-message values, so each rank writes its
  messages' values, sorted per group, to one file `scratch/messages/rank=R` (8 B per
  message and column; where each column's groups lie comes back with the task) and the
  client picks the order statistics across the ranks' memory-mapped files
  (`analysis.orderstats`: a group of up to `orderstats.GATHER` values is read whole, a
  larger one searched in the files), so the client reads at most GATHER values of a
  group at once.
"""

from __future__ import annotations

import functools
import mmap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from mpiscope import output
from mpiscope.analysis import breakdown, callpaths, orderstats, stats, waitstates
from mpiscope.engines.slices import RankSlice

T = TypeVar("T")
Run = Callable[[Callable[[RankSlice], Any]], list[Any]]


def _wait(s: RankSlice) -> np.ndarray:
    if s.waits is None:
        raise ValueError(f"rank {s.rank}: the slice has no wait states")
    return s.waits["wait_ns"].to_numpy()


def _own(df: pd.DataFrame, rank: int) -> pd.DataFrame:
    """The rows of `rank` of a per-rank frame computed on a slice (the small whole-trace
    tables, e.g. `ranks`, name every rank)."""
    return df[(df["rank"] == rank).to_numpy()]


# --- per-rank breakdown -----------------------------------------------------------------

def ranks_part(s: RankSlice) -> tuple[pd.DataFrame, dict[int, str]]:
    """The rank's breakdown sums (breakdown.rank_sums) and its host."""
    sums = breakdown.rank_sums(s.trace, _wait(s))
    hosts = s.trace.host_of()
    return sums.loc[[s.rank]], ({s.rank: hosts[s.rank]} if s.rank in hosts else {})


def compute_ranks(run: Run) -> pd.DataFrame:
    """`Analysis.ranks` (breakdown.per_rank)."""
    parts = run(ranks_part)
    hosts: dict[int, str] = {}
    for _sums, h in parts:
        hosts.update(h)
    return breakdown.ranks_frame(pd.concat([p for p, _h in parts]), hosts)


# --- wait states per rank -------------------------------------------------------------------

def waits_part(s: RankSlice) -> pd.DataFrame:
    """The rank's row of WaitStates.per_rank (the rule run on its own calls' waits)."""
    if s.waits is None:
        raise ValueError(f"rank {s.rank}: the slice has no wait states")
    calls = s.waits.assign(rank=s.trace.calls["rank"].to_numpy())  # per_call's columns
    own = waitstates.WaitStates(calls, skew=None)  # type: ignore[arg-type]
    return own.per_rank()


def compute_wait_states_per_rank(run: Run) -> pd.DataFrame:
    """`Analysis.wait_states.per_rank()` (the JSON's `wait_states_per_rank`), for a
    waits object that does not give it itself."""
    return pd.concat(run(waits_part))


# --- time bins ----------------------------------------------------------------------------

def interval_part(s: RankSlice) -> pd.DataFrame:
    """The rank's measured interval: rank, begin, end."""
    return _own(breakdown.intervals(s.trace), s.rank)


def bins_part(s: RankSlice, edges: np.ndarray) -> np.ndarray:
    """The rank's ns of mpi, sync, io per bin (3 x bins)."""
    return breakdown.bin_sums(s.trace, _wait(s), edges, interval_part(s))[0]


def compute_intervals(run: Run) -> pd.DataFrame:
    """breakdown.intervals of the whole trace, in rank order."""
    return pd.concat(run(interval_part), ignore_index=True)


def compute_time_bins(run: Run, bins: int = 50, intervals: pd.DataFrame | None = None
                      ) -> pd.DataFrame:
    """`Analysis.time_bins` (breakdown.time_bins): the bins span the whole run, so a
    first pass gets the intervals (skipped when given: `compute_intervals`)."""
    iv = compute_intervals(run) if intervals is None else intervals
    edges = breakdown.bin_edges(iv, bins)
    rows = run(functools.partial(bins_part, edges=edges))
    return breakdown.bins_frame(iv, edges, np.stack(rows) if rows else
                                np.zeros((0, 3, bins)))


# --- call sites ---------------------------------------------------------------------------

def sites_part(s: RankSlice, with_paths: bool) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The rank's call-site sums and, if the trace has call paths, its time per path."""
    return (stats.callsite_sums(s.trace, _wait(s)),
            callpaths.path_times(s.trace) if with_paths else None)


def compute_callsites(run: Run, paths: callpaths.CallPaths
                      ) -> tuple[pd.DataFrame, dict[tuple[str, str], int]]:
    """(`Analysis.callsites`, `Analysis._best_paths`) in one pass; `paths` is the
    session's CallPaths (the slices' calls relabelled with it). The slices' function
    and callsite categories must be the whole trace's (as slices.of_trace and the cache
    give them): sites of equal time keep the pandas engine's order, by category code."""
    with_paths = bool(paths.frames)
    parts = run(functools.partial(sites_part, with_paths=with_paths))
    df = stats.callsites_frame(pd.concat([p for p, _t in parts], ignore_index=True))
    best = (callpaths.best_of(pd.concat([t for _p, t in parts], ignore_index=True))
            if with_paths and parts else {})
    return callpaths.name_sites(df, paths, best), best


# --- messages -----------------------------------------------------------------------------

@dataclass
class MessageStats:
    """The message results of `Analysis` (and the summary's switch evidence)."""

    sizes: pd.DataFrame  # message_sizes
    switches: list[stats.ProtocolSwitch]  # protocol_switches
    host_split: pd.DataFrame
    evidence: dict[str, int]  # stats.switch_evidence
    counts: dict[str, int]  # message_counts: the JSON's `messages`


@dataclass(frozen=True)
class _Column:
    """Where a column's sorted values lie in a rank's file: its groups' keys and
    offsets (orderstats.Groups), the values' dtype and their first byte."""

    keys: np.ndarray
    offsets: np.ndarray
    dtype: str
    at: int


def _values_path(scratch: Path, rank: int) -> Path:
    return Path(scratch) / "messages" / f"rank={rank}"


def _write_values(path: Path, arrays: stats.MessageArrays) -> dict[str, _Column]:
    """Every column's values, sorted per group, into one file (one per rank: a file
    per column and part, 24, cost 20 ms a rank to create, 7x the statistics)."""
    index = {}
    with output.scratch_path(path) as tmp, open(tmp, "wb") as f:
        at = 0
        for column in stats.GROUP_COLUMNS:
            g = arrays.group(column)
            v = np.ascontiguousarray(g.values)
            index[column] = _Column(g.keys, g.offsets, v.dtype.str, at)
            f.write(v.data)
            pad = -v.nbytes % 8  # each column's values 8-byte aligned
            f.write(b"\0" * pad)
            at += v.nbytes + pad
    return index


def messages_part(s: RankSlice, scratch: Path
                  ) -> tuple[int, pd.DataFrame, dict[str, int], dict[str, _Column]]:
    """The rank, its sent messages' counts and bytes per group (MessageArrays.sums), its
    message counts and where its values lie in scratch/messages/rank=R."""
    m = s.trace.messages
    arrays = stats.MessageArrays(m, s.trace.host_of())
    path = _values_path(scratch, s.rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    index = _write_values(path, arrays)
    return s.rank, arrays.sums(), stats.message_counts(m, s.trace.unmatched), index


class _RankFiles:
    """The ranks' sorted message values, memory-mapped: a group's runs without reading
    them."""

    def __init__(self, scratch: Path, ranks: list[int],
                 index: list[dict[str, _Column]]) -> None:
        self.files = [_values_path(scratch, r) for r in ranks]
        self.index = index
        self.maps: list[mmap.mmap | None] = [None] * len(ranks)
        self.groups: dict[str, list[orderstats.Groups]] = {}

    def _values(self, i: int, c: _Column) -> np.ndarray:
        dtype = np.dtype(c.dtype)
        count = int(c.offsets[-1]) if len(c.offsets) else 0
        if not count:
            return np.empty(0, dtype=dtype)
        mm = self.maps[i]
        if mm is None:
            with open(self.files[i], "rb") as f:
                mm = self.maps[i] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return np.frombuffer(mm, dtype=dtype, count=count, offset=c.at)

    def runs(self, column: str, key: int) -> list[np.ndarray]:
        if column not in self.groups:
            self.groups[column] = [
                orderstats.Groups(c.keys, c.offsets, self._values(i, c))
                for i, c in enumerate(ix[column] for ix in self.index)]
        return [g.run(key) for g in self.groups[column]]


def compute_messages(run: Run, scratch: Path, gather: int = orderstats.GATHER
                     ) -> MessageStats:
    """`Analysis.message_sizes`, `protocol_switches`, `host_split`, `message_counts`
    (and stats.switch_evidence). `scratch`: a directory the workers and the client
    share; `gather`: see orderstats.GATHER (a test makes it 0 to search the files)."""
    parts = run(functools.partial(messages_part, scratch=scratch))
    files = _RankFiles(scratch, [p[0] for p in parts], [p[3] for p in parts])
    mv = stats.MessageValues(pd.concat([p[1] for p in parts], ignore_index=True),
                             files.runs, gather)
    counts = {k: sum(p[2][k] for p in parts)
              for k in ("matched", "unmatched_sends", "unmatched_receives")}
    return MessageStats(stats.sizes_of(mv), stats.switches_of(mv), stats.host_split_of(mv),
                        stats.evidence_of(mv), counts)
