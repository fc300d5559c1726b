"""The whole run's MPI function profiles per process, thread, communicator and tag, and
its messages per communicator and tag, rank by rank: what the web UI's Profiles tab shows
in memory (`window.Window.profile`, `message_profile`), for a trace served out of core.

Each rank's part is the in-memory code itself (`WindowIndex.of` on the rank's slice, its
whole-run window), so both modes count alike:
- a profile keyed by the rank (PER_PROCESS) is the ranks' profiles concatenated: every
  group lies on one rank, its min/median/max are of that rank's calls alone;
- one not keyed by it (ACROSS: per communicator, per tag; MESSAGES: each rank's sent
  messages) merges the ranks' groups: sums, min of mins, max of maxes; each rank writes
  its groups' per-call values (transfer times), sorted, to a scratch file (8 B each) and
  the medians are picked across the ranks' memory-mapped files (`analysis.orderstats`,
  as the Dask engine's message medians), so no process holds every rank's values at once.
Either way the rows are sorted as in memory (`window.sort_profile`, `sort_message_profile`).

    compute(run)          # run: fn(RankSlice) over every rank (engines.ranktasks, tests)
    from_cache(DIR)       # one rank at a time from the Parquet cache and the Dask
                          # engine's wait files (`<cache>/derived/waits`)

`from_cache` holds one rank's slice at a time; it reads the wait files that `mpiscope
analyze --engine dask` leaves (computing them once on an in-process Dask cluster if they
are missing), so the wait states are not computed twice.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mpiscope.analysis import orderstats, window
from mpiscope.analysis.waitstates import WaitStates
from mpiscope.archive import cache
from mpiscope.engines import ranktasks
from mpiscope.engines.daskcache import CacheTables, open_cache
from mpiscope.engines.slices import RankSlice
from mpiscope.errors import UserError

PER_PROCESS: tuple[tuple[str, ...], ...] = (("rank", "function"),
                                            ("rank", "thread", "function"))
ACROSS: tuple[tuple[str, ...], ...] = (("function", "comm"), ("function", "tag"))
MESSAGES = ("messages", "comm", "tag")  # `Window.message_profile()`: sent messages
ALL = PER_PROCESS + ACROSS + (MESSAGES,)
Run = Callable[[Callable[[RankSlice], Any]], list[Any]]


@dataclass(frozen=True)
class Runs:
    """A rank's part of a profile across ranks: its groups (row g: group g) and where
    their per-call values lie (group g: orderstats key g of the values in `file`)."""

    groups: pd.DataFrame
    keys: np.ndarray
    offsets: np.ndarray
    file: str


Each = Callable[[int, window.WindowIndex], None]  # also done with each rank's index


def part(s: RankSlice, by: Sequence[tuple[str, ...]], scratch: str | None = None,
         each: Each | None = None) -> list[pd.DataFrame | Runs]:
    """The rank's whole-run profile for each key tuple of `by` (or MESSAGES): a profile
    where the keys hold the rank, else its `Runs` (values written under `scratch`);
    `each(rank, index)` is called with the rank's window index (what else a caller
    keeps of each rank, without building the index twice)."""
    if s.waits is None:
        raise ValueError(f"rank {s.rank}: the slice has no wait states")
    ws = WaitStates(s.waits, skew=None)  # type: ignore[arg-type] - per_call is all it reads
    w = window.WindowIndex.of(s.trace, ws).whole()
    if each is not None:
        each(s.rank, w.index)
    out: list[pd.DataFrame | Runs] = []
    for i, b in enumerate(by):
        if "rank" in b:
            out.append(w.profile(b))
            continue
        if scratch is None:
            raise ValueError(f"a profile by {b} across ranks needs a scratch directory")
        groups, g = (w.message_profile_runs(b[1:]) if b[0] == "messages" else
                     w.profile_runs(b))
        f = Path(scratch) / f"rank={s.rank}-{i}.npy"
        np.save(f, np.ascontiguousarray(g.values, dtype=np.float64))
        out.append(Runs(groups, g.keys, g.offsets, str(f)))
    return out


def _merged(parts: list[Runs], by: tuple[str, ...], cols: list[str], agg: dict[str, str],
            median: str) -> pd.DataFrame:
    """The ranks' groups merged into one profile (unsorted): `agg` (column: how), the
    keys `by` (a communicator by its id: two may share a name) and column `median`, the
    median picked across the ranks' runs of the group (of ns, as in memory, then s)."""
    frames = [p.groups.assign(_part=i, _group=np.arange(len(p.groups)))
              for i, p in enumerate(parts) if len(p.groups)]
    if not frames:
        return pd.DataFrame(columns=cols)
    df = pd.concat(frames, ignore_index=True)
    keys = [("comm_id" if k == "comm" else k) for k in by]
    df["_gid"] = df.groupby(keys, sort=False, observed=True).ngroup()
    df = df.sort_values("_gid", kind="stable", ignore_index=True)
    g = df.groupby("_gid", sort=True)
    out = g.agg(**{k: (k, "first") for k in by},
                **{c: (c, how) for c, how in agg.items()}).reset_index(drop=True)
    groups = [orderstats.Groups(p.keys, p.offsets, np.load(p.file, mmap_mode="r"))
              for p in parts]
    part_of, group_of = df["_part"].to_numpy(), df["_group"].to_numpy()
    sizes = g.size().to_numpy()
    ends = np.cumsum(sizes)
    med = []
    for a, b in zip(ends - sizes, ends, strict=True):  # a merged group's rows
        runs = [groups[int(part_of[r])].run(int(group_of[r])) for r in range(a, b)]
        med.append(orderstats.median(runs) / 1e9)
    out[median] = med
    if "mean_s" in cols:
        out["mean_s"] = out["time_s"] / np.maximum(out["calls"], 1)
    return out[cols]


FUNCTION_AGG = {"calls": "sum", "time_s": "sum", "min_s": "min", "max_s": "max",
                "wait_s": "sum", "bytes": "sum"}
MESSAGE_COLUMNS = ["messages", "bytes", "median_transfer_s"]


def combine(parts: list[list[pd.DataFrame | Runs]], by: Sequence[tuple[str, ...]]
            ) -> dict[tuple[str, ...], pd.DataFrame]:
    """The ranks' parts as one profile per key tuple, sorted as in memory."""
    out = {}
    for i, b in enumerate(by):
        mine = [p[i] for p in parts]
        runs = [r for r in mine if isinstance(r, Runs)]
        if "rank" in b:
            frames = [f for f in mine if isinstance(f, pd.DataFrame) and len(f)]
            df = (pd.concat(frames, ignore_index=True) if frames else
                  pd.DataFrame(columns=[*b, *window.PROFILE_COLUMNS]))
        elif b[0] == "messages":
            keys = b[1:]
            df = _merged(runs, keys, [*keys, *MESSAGE_COLUMNS],
                         {"messages": "sum", "bytes": "sum"}, "median_transfer_s")
            out[b] = window.sort_message_profile(df)
            continue
        else:
            df = _merged(runs, b, [*b, *window.PROFILE_COLUMNS], FUNCTION_AGG, "median_s")
        out[b] = window.sort_profile(df, b)
    return out


def compute(run: Run, by: Sequence[tuple[str, ...]] = ALL, each: Each | None = None
            ) -> dict[tuple[str, ...], pd.DataFrame]:
    """The profiles of the whole run by each key tuple of `by`, `run` mapping a function
    over every rank's slice (with its wait states); the ranks' values for the medians
    across ranks go to a temporary directory, removed when done."""
    by = tuple(tuple(b) for b in by)
    with tempfile.TemporaryDirectory(prefix="mpiscope-profiles-") as scratch:
        return combine(run(functools.partial(part, by=by, scratch=scratch, each=each)), by)


def _waits_dir(t: CacheTables) -> Path:
    """The Dask engine's per-rank wait files of this cache, computed if missing."""
    d = t.dir / cache.DERIVED / "waits"
    if d.is_dir():
        return d
    from distributed import Client

    with Client(processes=False, n_workers=1, threads_per_worker=os.cpu_count() or 1,
                dashboard_address=None) as client:
        rt = ranktasks.RankTasks(client, t)
        try:
            return Path(rt.wait_states.scratch)
        finally:
            rt.close()


def from_cache(trace_dir: Path | str, by: Sequence[tuple[str, ...]] = ALL,
               each: Each | None = None) -> dict[tuple[str, ...], pd.DataFrame]:
    """`compute` over the trace's Parquet cache, one rank's slice at a time, in this
    process."""
    t = open_cache(trace_dir)
    if t is None:
        raise UserError(str(trace_dir), "no current Parquet cache of this trace")
    waits = _waits_dir(t)
    # a slice carries the messages its rank received; the profiles do not read them, and
    # without the receivers' files the slice would cut them from the whole messages
    # table: a directory that may not exist gives each rank none (ranktasks.received_of)
    received = (str(t.dir / cache.DERIVED / "received-by-receiver")
                if t.partitioned("messages") else None)
    src = ranktasks.Source(str(t.dir), str(t.trace_dir), t.manifest, received, None,
                           waits=str(waits))
    ranks = t.ranks_of("calls")

    def run(fn: Callable[[RankSlice], Any]) -> list[Any]:
        return [fn(ranktasks.build_slice(src, r)) for r in ranks]

    return compute(run, by, each)
