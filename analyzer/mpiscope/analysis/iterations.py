"""Main-loop detection: the program's iterations, from its repeating call sequence.

Each rank's outermost MPI calls (without Init/Finalize) are read as a sequence of
tokens: the call site (the function name where the trace records none, e.g. Score-P)
and the peer. The main loop is the shortest sequence that repeats back to back over the
steady state, i.e. the most frequent repeating period, once two kinds of calls are set
aside:

- calls that run only every k-th iteration (at most about half the iterations, such as
  a convergence check every 5th iteration or a barrier every 10th): they are recognised
  as such and listed in `Loop.sites` with their k;
- repeated polling (back-to-back MPI_Test* / MPI_Iprobe calls count once).

The peer tells apart the three halo exchanges of one Himeno iteration, which run from
the same lines with different neighbours; where the peers make no period (they change
from iteration to iteration), call sites alone are used. Every rank must show the same
number of iterations. Iteration k on a rank spans from the first call of its k-th
repetition to the first call of the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from mpiscope.analysis.breakdown import call_parts, io_completing
from mpiscope.archive.trace import Trace

POLLING = ("MPI_Test", "MPI_Iprobe", "MPI_Improbe")
MAX_GROUP = 16  # most repetitions of the most frequent call within one iteration tried
COUNT_LEVELS = 4  # most distinct call counts tried as the loop's anchor
COVERAGE = 0.9  # a loop must span this share of the longest repeating stretch found
DOMINANT = 0.5  # a loop spanning this share of a rank's calls ends the search there
HOLLOW = 0.1  # iterations computing less than this share of the mean are empty


@dataclass
class Loop:
    callsite: str  # call site of the first call of each iteration ("" if none recorded)
    function: str  # its function
    iterations: int  # repetitions of the loop body; `bounds` holds the iterations - 1 between
    bounds: pd.DataFrame  # rank, iteration, start, end (ns)
    # function, callsite, ranks, calls (in the loop, all ranks), per_iteration (calls per
    # iteration, the least over the ranks), in_iterations (iterations it runs in, least
    # over the ranks), every (1: every iteration on every rank; k: only every k-th)
    sites: pd.DataFrame

    def every(self, function: str, callsite: str) -> int | None:
        """1 if this call site runs in every iteration, k if only every k-th, else None."""
        s = self.sites
        hit = s[(s["function"] == function) & (s["callsite"] == callsite)]
        return int(hit["every"].iloc[0]) if len(hit) else None


@dataclass
class _Period:
    """A repeating stretch of one rank's filtered token sequence."""

    iterations: int
    span_ns: int
    starts: np.ndarray  # positions (in the rank's call sequence) of each iteration's 1st call
    stop: int  # position after the loop's last call (occasional calls included)
    hollow: bool  # many iterations have no computation in them (an inner loop)


def _runs(eq: np.ndarray) -> tuple[int, int]:
    """[a, b) of the longest run of True in eq (0, 0 if none)."""
    if not eq.any():
        return 0, 0
    d = np.diff(np.r_[0, eq.astype(np.int8), 0])
    a, b = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    i = int(np.argmax(b - a))
    return int(a[i]), int(b[i])


def _hollow(its: np.ndarray, busy: tuple[np.ndarray, np.ndarray]) -> bool:
    """True if a quarter or more of the iterations starting at `its` hold (next to) no
    computation while others do: repetitions of an inner loop of MPI calls (one rank's
    three Himeno halo exchanges), not iterations of the program's loop."""
    starts, cum = busy  # every outermost call's start; MPI time before each call
    at = np.searchsorted(starts, its)
    compute = np.diff(its) - np.diff(cum[at])
    mean = compute.mean() if len(compute) else 0
    return bool(mean > 0 and np.quantile(compute, 0.25) < HOLLOW * mean)


def _periods(tok: np.ndarray, start: np.ndarray, end: np.ndarray,
             busy: tuple[np.ndarray, np.ndarray], min_iterations: int) -> list[_Period]:
    """The repeating stretches of one rank: per anchor token (the most frequent first)
    and number m of its repetitions per iteration (fewest first), up to the first that
    computes in every iteration and fills most of the run."""
    counts = np.bincount(tok)
    first = np.full(len(counts), len(tok))
    np.minimum.at(first, tok, np.arange(len(tok)))
    levels = np.unique(counts[counts > min_iterations])[::-1][:COUNT_LEVELS]
    whole = int(end[-1] - start[0]) if len(tok) else 0
    found: list[_Period] = []
    for level in levels:
        anchor = int(np.flatnonzero(counts == level)[np.argmin(first[counts == level])])
        for m in range(1, min(MAX_GROUP, int(level) // (min_iterations + 1)) + 1):
            # calls in at most about half of the iterations run every k-th: set aside
            keep = counts[tok] > max(level / m / 2 + 1, 1)
            pos = np.flatnonzero(keep)
            f = tok[pos]
            at = np.flatnonzero(f == anchor)
            if len(at) <= m:
                continue
            period = int(np.median(at[m:] - at[:-m]))
            if period <= 0 or period >= len(f):
                continue
            a, b = _runs(f[:-period] == f[period:])
            n = (b - a + period) // period if b > a else 0
            if n < min_iterations + 1:
                continue
            starts = pos[a + period * np.arange(n)]
            last = pos[a + period * n - 1]
            # the loop ends before the next repeating call after it (occasional calls that
            # close the last iteration, e.g. a final reduction, still belong to it)
            nxt = a + period * n
            stop = int(pos[nxt]) if nxt < len(pos) else len(tok)
            p = _Period(n, int(end[last] - start[starts[0]]), starts, stop,
                        _hollow(start[starts], busy))
            found.append(p)
            if not p.hollow and p.span_ns >= DOMINANT * whole:
                return found  # the loop that fills the run: coarser groupings add nothing
    return found


@dataclass
class _Calls:
    """The outermost calls (without Init/Finalize) as arrays, rank by rank in time order."""

    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray
    peer: np.ndarray
    function: np.ndarray  # codes into `functions`
    callsite: np.ndarray  # codes into `callsites`
    functions: np.ndarray
    callsites: np.ndarray

    def take(self, keep: np.ndarray) -> _Calls:
        return _Calls(self.rank[keep], self.start[keep], self.end[keep], self.peer[keep],
                      self.function[keep], self.callsite[keep], self.functions,
                      self.callsites)

    def sites(self) -> np.ndarray:
        """Code of each call's call site, or of its function where none is recorded
        (Score-P traces)."""
        empty = np.r_[self.callsites == "", True][self.callsite]  # code -1: missing
        return np.where(empty, len(self.callsites) + self.function, self.callsite)


def _outermost(trace: Trace) -> _Calls:
    c = trace.calls
    keep = ((c["depth"] == 0) & ~c["kind"].isin(["init", "finalize"])).to_numpy()
    rank, start = c["rank"].to_numpy()[keep], c["start"].to_numpy()[keep]
    order = slice(None)
    if len(rank) > 1 and not ((np.diff(rank) > 0)
                              | ((np.diff(rank) == 0) & (np.diff(start) >= 0))).all():
        order = np.lexsort((start, rank))  # the reader's order already
    fn, cs = c["function"].cat, c["callsite"].cat

    def col(values: np.ndarray) -> np.ndarray:
        return values[keep][order].astype(np.int64)

    return _Calls(col(c["rank"].to_numpy()), col(c["start"].to_numpy()),
                  col(c["end"].to_numpy()), col(c["peer"].to_numpy()),
                  col(fn.codes.to_numpy()), col(cs.codes.to_numpy()),
                  np.asarray(fn.categories.astype(str)), np.asarray(cs.categories.astype(str)))


def _choose(per_rank: dict[int, list[_Period]]) -> int | None:
    """The most iterations that every rank shows over (nearly) its longest stretch,
    preferring a period whose iterations all compute to one that is an inner loop."""
    good: set[int] | None = None
    hollow: set[int] = set()
    for found in per_rank.values():
        if not found:
            return None
        longest = max(p.span_ns for p in found)
        mine = {p.iterations for p in found if p.span_ns >= COVERAGE * longest}
        good = mine if good is None else good & mine
        hollow |= {p.iterations for p in found if p.hollow}
    if not good:
        return None
    full = good - hollow
    return max(full) if full else max(good)


def _cuts(ranks: np.ndarray) -> np.ndarray:
    """Boundaries of the rank blocks of a rank-sorted array."""
    return np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1], True])


def detect(trace: Trace, min_iterations: int = 3) -> Loop | None:
    c = _outermost(trace)
    if len(c.rank) == 0 or len(np.unique(c.rank)) != trace.num_ranks:
        return None
    # MPI time before each outermost call, to tell computing iterations from inner loops
    busy = {int(c.rank[lo]): (c.start[lo:hi], np.r_[0, np.cumsum(c.end[lo:hi] - c.start[lo:hi])])
            for lo, hi in pairwise(_cuts(c.rank))}
    site = c.sites()
    # back-to-back polling calls from one place count once
    polling = np.array([f.startswith(POLLING) for f in c.functions], dtype=bool)[c.function]
    same = np.r_[False, polling[1:] & (site[1:] == site[:-1]) & (c.rank[1:] == c.rank[:-1])]
    c, site = c.take(~same), site[~same]
    cut = _cuts(c.rank)
    peer = c.peer + 1  # -1 (none) -> 0
    for with_peer in (True, False):  # peers tell inner repetitions apart, if they repeat
        tok = site * (int(peer.max()) + 1) + peer if with_peer else site
        per_rank = {int(c.rank[lo]): _periods(pd.factorize(tok[lo:hi])[0], c.start[lo:hi],
                                              c.end[lo:hi], busy[int(c.rank[lo])],
                                              min_iterations)
                    for lo, hi in pairwise(cut)}
        n = _choose(per_rank)
        if n is not None:
            return _loop(c, cut, per_rank, n)
    return None


def _loop(c: _Calls, cut: np.ndarray, per_rank: dict[int, list[_Period]], n: int) -> Loop:
    bounds, member, iteration = [], [], []
    for lo, (rank, found) in zip(cut[:-1], per_rank.items(), strict=True):
        p = max((p for p in found if p.iterations == n), key=lambda p: p.span_ns)
        its = c.start[lo + p.starts]
        bounds.append(pd.DataFrame({"rank": rank, "iteration": np.arange(n - 1),
                                    "start": its[:-1], "end": its[1:]}))
        member.append(np.arange(lo + p.starts[0], lo + p.stop))
        iteration.append(np.searchsorted(p.starts, np.arange(p.starts[0], p.stop),
                                         side="right") - 1)
    first = int(member[0][0])
    idx, it = np.concatenate(member), np.concatenate(iteration)
    # per (function, call site, rank): calls, iterations it runs in, first and last of them
    pair = c.function[idx] * len(c.callsites) + c.callsite[idx]
    nranks = int(c.rank.max()) + 1
    inverse, group = pd.factorize(pair * nranks + c.rank[idx])
    calls = np.bincount(inverse)
    hit = np.bincount(pd.unique(inverse * n + it) // n, minlength=len(group))
    lo_it = np.full(len(group), n)
    hi_it = np.zeros(len(group), dtype=np.int64)
    np.minimum.at(lo_it, inverse, it)
    np.maximum.at(hi_it, inverse, it)
    # every iteration, or only every k-th: the mean gap between the iterations it runs in
    # (a call site that runs in one iteration only is no part of the loop)
    keep = (hit == n) | (hit > 1)
    every = np.where(hit == n, 1,
                     np.maximum(np.rint((hi_it - lo_it) / np.maximum(hit - 1, 1)), 2))
    per = pd.DataFrame({"pair": group // nranks, "calls": calls, "hit": hit,
                        "every": every.astype(int)})[keep]
    sites = per.groupby("pair").agg(
        ranks=("calls", "size"), calls=("calls", "sum"), per_iteration=("calls", "min"),
        in_iterations=("hit", "min"), every=("every", "max")).reset_index()
    code = sites.pop("pair").to_numpy()
    sites.insert(0, "function", c.functions[code // len(c.callsites)])
    sites.insert(1, "callsite", c.callsites[code % len(c.callsites)])
    sites["per_iteration"] = sites["per_iteration"] / n
    sites = sites.sort_values(["every", "per_iteration"], ascending=[True, False],
                              kind="stable").reset_index(drop=True)
    return Loop(str(c.callsites[c.callsite[first]]), str(c.functions[c.function[first]]), n,
                pd.concat(bounds, ignore_index=True), sites)


def per_iteration(trace: Trace, loop: Loop, ws) -> pd.DataFrame:
    """Seconds of compute / communication / synchronization / I/O per iteration (all ranks)."""
    c = trace.calls
    c = c[(c["depth"] == 0)]
    wait = ws.per_call["wait_ns"].to_numpy()[c["call"].to_numpy()]
    dur = (c["end"] - c["start"]).to_numpy()
    frame = pd.DataFrame({"rank": c["rank"].to_numpy(), "start": c["start"].to_numpy(),
                          "mpi": dur, **call_parts(c, dur, wait, io_completing(trace))})
    out = []
    for rank, b in loop.bounds.groupby("rank"):
        f = frame[frame["rank"] == rank]
        k = np.searchsorted(b["start"].to_numpy(), f["start"].to_numpy(), side="right") - 1
        ok = (k >= 0) & (f["start"].to_numpy() < b["end"].to_numpy()[np.clip(k, 0, None)])
        agg = pd.DataFrame({"iteration": b["iteration"].to_numpy()[k[ok]],
                            "mpi": f["mpi"].to_numpy()[ok], "sync": f["sync"].to_numpy()[ok],
                            "io": f["io"].to_numpy()[ok]})
        g = agg.groupby("iteration").sum()
        length = pd.Series((b["end"] - b["start"]).to_numpy(), index=b["iteration"].to_numpy())
        g = g.reindex(length.index, fill_value=0)
        out.append(pd.DataFrame({"iteration": length.index, "rank": rank,
                                 "total": length.to_numpy(), "mpi": g["mpi"].to_numpy(),
                                 "sync": g["sync"].to_numpy(), "io": g["io"].to_numpy()}))
    df = pd.concat(out).groupby("iteration")[["total", "mpi", "sync", "io"]].sum()
    return pd.DataFrame({
        "iteration": df.index, "compute_s": (df["total"] - df["mpi"]) / 1e9,
        "communication_s": (df["mpi"] - df["sync"] - df["io"]) / 1e9,
        "synchronization_s": df["sync"] / 1e9, "io_s": df["io"] / 1e9,
    }).reset_index(drop=True)


def iteration_window(trace: Trace, loop: Loop | None, count: int = 3) -> tuple[int, int]:
    """A few iterations of the main loop `loop` (ns), or the start of the run without one."""
    if loop is not None and loop.iterations > count:
        b = loop.bounds[loop.bounds["rank"] == 0].sort_values("iteration")
        first = min(1, len(b) - count)
        return int(b["start"].iloc[first]), int(b["end"].iloc[first + count - 1])
    c = trace.calls
    lo = int(c["start"].min()) if len(c) else 0
    hi = int(c["end"].max()) if len(c) else 1
    return lo, lo + max((hi - lo) // 20, 1)
