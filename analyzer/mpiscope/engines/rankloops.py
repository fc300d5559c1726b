"""Main-loop detection and the breakdown per iteration, rank by rank (the Dask engine's).

    from mpiscope.engines import rankloops
    loop = rankloops.detect(run)                    # == iterations.detect(trace)
    table = rankloops.per_iteration(run, loop)      # == iterations.per_iteration(trace, loop, ws)
    lo, hi = rankloops.iteration_window(run, loop)  # == iterations.iteration_window(trace, loop)

`run(fn)` maps `fn(RankSlice)` over every rank of the trace and returns the results in
rank order: on the workers in the Dask engine, `[fn(s) for s in slices.all_of_trace(...)]`
in the tests. The slices' calls must be grouped as the session's (`Analysis.trace`,
relabelled by call paths), and `per_iteration` needs their `waits`.

The rules are those of `analysis/iterations.py`, which runs the same per-rank parts:

- `detect`: the loop is searched in one rank's whole sequence of outermost calls, so a
  task holds the largest rank's calls (its slice and a few int64 arrays of its length),
  never the trace. A first pass returns each rank's candidate periods (three numbers
  each, at most a few dozen); the client chooses the number of iterations every rank
  shows; a second pass returns each rank's iteration start times and per call site
  counts. If no period is common with peers told apart, both passes run again without.
- `per_iteration`: each rank's task gets its own iterations' starts (a `PerRank` pass;
  the client's Loop holds them, 8 bytes per iteration and rank) and returns its ns per
  iteration, merged on the workers.
- `iteration_window`: from the loop's bounds; without a loop each rank returns its
  first start and last end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import numpy as np
import pandas as pd

from mpiscope.analysis import iterations
from mpiscope.analysis.breakdown import io_completing
from mpiscope.engines.slices import PerRank, RankSlice, Reduced

T = TypeVar("T")
Runner = Callable[[Callable[[RankSlice], T]], list[T]]


@dataclass
class Found:
    """A rank's candidate periods (None: it made no outermost call)."""

    num_ranks: int  # of the trace, as every slice knows it
    candidates: list[iterations.Candidate] | None


def found_part(s: RankSlice, with_peer: bool, min_iterations: int) -> Found:
    """Pass 1 (on a worker): the rank's repeating stretches, as three numbers each."""
    rc = iterations.rank_calls(s.trace.calls)
    if rc is None:
        return Found(s.trace.num_ranks, None)
    return Found(s.trace.num_ranks,
                 [p.candidate() for p in iterations.periods(rc, with_peer, min_iterations)])


def loop_part(s: RankSlice, with_peer: bool, n: int,
              min_iterations: int) -> iterations.RankLoop:
    """Pass 2 (on a worker): the rank's share of the loop of `n` iterations (its periods
    found again: cheaper than shipping their positions to the client and back)."""
    rc = iterations.rank_calls(s.trace.calls)
    assert rc is not None, "pass 1 found calls on every rank"
    return iterations.rank_loop(rc, iterations.periods(rc, with_peer, min_iterations), n)


def detect(run: Runner, min_iterations: int = 3) -> iterations.Loop | None:
    """The main loop, equal to `iterations.detect` on the whole trace; None without one.

    Bounded by the largest rank: a task holds one rank's outermost-call sequence."""

    def found_of(with_peer: bool) -> tuple[list[list[iterations.Candidate] | None], int]:
        parts = run(partial(found_part, with_peer=with_peer, min_iterations=min_iterations))
        return [p.candidates for p in parts], (parts[0].num_ranks if parts else 0)

    def loops_of(with_peer: bool, n: int) -> list[iterations.RankLoop]:
        return run(partial(loop_part, with_peer=with_peer, n=n,
                           min_iterations=min_iterations))

    return iterations.search(found_of, loops_of)


def sums_part(s: RankSlice, starts: np.ndarray | None) -> pd.DataFrame | None:
    """The rank's ns per iteration, `starts` its row of `Loop.starts` (None if the loop
    has no iterations on it)."""
    if starts is None:
        return None
    if s.waits is None:
        raise ValueError("per_iteration needs the slices' wait states (RankSlice.waits)")
    c = s.trace.calls
    top = (c["depth"] == 0).to_numpy()
    frame = iterations.call_frame(c[top], s.waits["wait_ns"].to_numpy()[top],
                                  io_completing(s.trace))
    return iterations.iteration_sums(frame, s.rank, starts)


def per_iteration(run: Runner, loop: iterations.Loop | None) -> pd.DataFrame | None:
    """Seconds of compute / communication / synchronization / I/O per iteration, equal to
    `iterations.per_iteration` (None without a loop, as `Analysis.per_iteration`). Each
    rank's task gets its own row of the loop's starts."""
    if loop is None:
        return None
    parts = run(Reduced(PerRank(sums_part, loop.starts_by_rank()), merge_sums))
    return iterations.combine_sums([p for p in parts if p is not None])


def merge_sums(parts: list[pd.DataFrame | None]) -> pd.DataFrame | None:
    """Ranks' ns per iteration summed into one part (iterations x ranks rows before,
    iterations after), on the workers; None where no rank had iterations."""
    parts = [p for p in parts if p is not None]
    return iterations.merge_sums(parts) if parts else None


def extent_part(s: RankSlice) -> tuple[int, int] | None:
    return iterations.extent(s.trace.calls)


def iteration_window(run: Runner, loop: iterations.Loop | None,
                     count: int = 3) -> tuple[int, int]:
    """A few iterations of the main loop (ns), as `iterations.iteration_window`; the
    ranks are asked for their extent only without a loop of more than `count`."""
    return iterations.window(loop, lambda: run(extent_part), count)
