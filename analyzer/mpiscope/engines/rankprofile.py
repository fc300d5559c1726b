"""The whole run's per-process profiles (MPI functions per rank, per rank and thread), rank
by rank: what the web UI's Profiles tab shows in memory (`window.Window.profile`), for a
trace served out of core.

A profile keyed by the rank is a sum of per-rank profiles: every group lies on one rank,
so its min/median/max are of that rank's calls alone. Each rank's part is the in-memory
code itself (`WindowIndex.of` on the rank's slice, its whole-run window's `profile`), so
both modes count alike; the parts are concatenated and sorted as one profile
(`window.sort_profile`).

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mpiscope.analysis import window
from mpiscope.analysis.waitstates import WaitStates
from mpiscope.archive import cache
from mpiscope.engines import ranktasks
from mpiscope.engines.daskcache import CacheTables, open_cache
from mpiscope.engines.slices import RankSlice
from mpiscope.errors import UserError

PER_PROCESS: tuple[tuple[str, ...], ...] = (("rank", "function"),
                                            ("rank", "thread", "function"))
Run = Callable[[Callable[[RankSlice], Any]], list[Any]]


def part(s: RankSlice, by: Sequence[tuple[str, ...]] = PER_PROCESS) -> list[pd.DataFrame]:
    """The rank's whole-run profile for each key tuple of `by` (each starts with rank)."""
    if s.waits is None:
        raise ValueError(f"rank {s.rank}: the slice has no wait states")
    ws = WaitStates(s.waits, skew=None)  # type: ignore[arg-type] - per_call is all it reads
    w = window.WindowIndex.of(s.trace, ws).whole()
    return [w.profile(b) for b in by]


def combine(parts: list[list[pd.DataFrame]], by: Sequence[tuple[str, ...]] = PER_PROCESS
            ) -> dict[tuple[str, ...], pd.DataFrame]:
    """The ranks' parts as one profile per key tuple, sorted as in memory."""
    out = {}
    for i, b in enumerate(by):
        if "rank" not in b:
            raise ValueError(f"a profile by {b} is not a sum of per-rank profiles")
        frames = [p[i] for p in parts if len(p[i])]
        df = (pd.concat(frames, ignore_index=True) if frames else
              pd.DataFrame(columns=[*b, *window.PROFILE_COLUMNS]))
        out[b] = window.sort_profile(df, b)
    return out


def compute(run: Run, by: Sequence[tuple[str, ...]] = PER_PROCESS
            ) -> dict[tuple[str, ...], pd.DataFrame]:
    """The per-process profiles of the whole run, `run` mapping a function over every
    rank's slice (with its wait states)."""
    by = tuple(tuple(b) for b in by)
    return combine(run(functools.partial(part, by=by)), by)


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


def from_cache(trace_dir: Path | str, by: Sequence[tuple[str, ...]] = PER_PROCESS
               ) -> dict[tuple[str, ...], pd.DataFrame]:
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

    return compute(run, by)
