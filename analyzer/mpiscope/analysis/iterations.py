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

An iteration is anchored on a call that communicates, never on a local one (a datatype
constructor, Comm_rank, an attribute: localcalls.py): creating and freeing datatypes in
turn is no step of the program's communication, so where only local calls repeat no loop
is found. Local calls still count among an iteration's calls.

Besides sequences that repeat exactly, loops whose iterations hold mostly, not always,
the same calls are candidates (`_regular`), and the finest loop that fills the run wins:
a time step that does other communication every k-th step (LAMMPS rebuilding its
neighbour lists) is the step, not k steps.

The peer tells apart the three halo exchanges of one Himeno iteration, which run from
the same lines with different neighbours; where the peers make no period (they change
from iteration to iteration), call sites alone are used. Every rank must show the same
number of iterations. Iteration k on a rank spans from the first call of its k-th
repetition to the first call of the next.

The search runs rank by rank (`rank_calls`, `periods`, `rank_loop`: a rank's whole
outermost-call sequence at once, so it is bounded by the largest rank), then chooses
across ranks from a few numbers per rank (`search`); the breakdown per iteration sums
each rank's calls per iteration (`iteration_sums`, `combine_sums`). `detect` and
`per_iteration` run these parts on the whole trace; engines/rankloops.py runs the same
parts on one rank's slice each, on Dask workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from mpiscope.analysis import desched, localcalls
from mpiscope.analysis.breakdown import call_parts, io_completing
from mpiscope.analysis.order import by_rank_then_start
from mpiscope.archive.trace import Trace

POLLING = ("MPI_Test", "MPI_Iprobe", "MPI_Improbe")
MAX_GROUP = 16  # most repetitions of the most frequent call within one iteration tried
COUNT_LEVELS = 4  # most distinct call counts tried as the loop's anchor
COVERAGE = 0.9  # a loop must span this share of the longest repeating stretch found
DOMINANT = 0.5  # a loop spanning this share of a rank's calls ends the search there
HOLLOW = 0.1  # iterations computing less than this share of the mean are empty
REGULAR = 0.75  # share of an inexactly repeating loop's iterations of the common length


@dataclass
class Loop:
    callsite: str  # call site of the first call of each iteration ("" if none recorded)
    function: str  # its function
    iterations: int  # repetitions of the loop body; iterations - 1 spans lie between them
    ranks: np.ndarray  # every rank, in order: the rows of `starts`
    # ranks x iterations: start (ns) of each iteration's first call on each rank; span i
    # of a rank is starts[i]..starts[i + 1]. 8 bytes per rank and iteration: the Dask
    # client holds it at 10^7 rank-iterations and more, so no per-span table is kept
    starts: np.ndarray
    # function, callsite, ranks, calls (in the loop, all ranks), per_iteration (calls per
    # iteration, the least over the ranks), in_iterations (iterations it runs in, least
    # over the ranks), every (1: every iteration on every rank; k: only every k-th)
    sites: pd.DataFrame

    @property
    def bounds(self) -> pd.DataFrame:
        """rank, iteration, start, end (ns) of every span: a table built on each call
        (32 bytes per rank and iteration), for callers that want one."""
        n = max(self.iterations - 1, 0)
        return pd.DataFrame({"rank": np.repeat(self.ranks.astype(np.int64), n),
                             "iteration": np.tile(np.arange(n, dtype=np.int64), len(self.ranks)),
                             "start": self.starts[:, :-1].ravel(),
                             "end": self.starts[:, 1:].ravel()})

    def starts_by_rank(self) -> dict[int, np.ndarray]:
        """rank -> its row of `starts` (a view: nothing copied)."""
        return {int(r): row for r, row in zip(self.ranks, self.starts, strict=True)}

    def every(self, function: str, callsite: str) -> int | None:
        """1 if this call site runs in every iteration, k if only every k-th, else None."""
        s = self.sites
        hit = s[(s["function"] == function) & (s["callsite"] == callsite)]
        return int(hit["every"].iloc[0]) if len(hit) else None


@dataclass
class Candidate:
    """What choosing the loop across ranks needs of a repeating stretch of one rank."""

    iterations: int
    span_ns: int
    hollow: bool  # many iterations have no computation in them (an inner loop)
    calls: int  # the rank's calls in the stretch (its span in calls, not in time)


@dataclass
class _Period(Candidate):
    """A repeating stretch of one rank's filtered token sequence."""

    starts: np.ndarray  # positions (in the rank's call sequence) of each iteration's 1st call
    stop: int  # position after the loop's last call (occasional calls included)

    def candidate(self) -> Candidate:
        return Candidate(self.iterations, self.span_ns, self.hollow, self.calls)


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
    starts, cum = busy  # every outermost call's start; time not computing before it
    at = np.searchsorted(starts, its)
    compute = np.diff(its) - np.diff(cum[at])
    mean = compute.mean() if len(compute) else 0
    return bool(mean > 0 and np.quantile(compute, 0.25) < HOLLOW * mean)


class _Sequence:
    """One rank's token sequence with what the stretch searches derive from it, made
    once per rank, not once per anchor and grouping tried (each is a pass over every
    call): each call's token count, an anchor's positions, the running sum of the calls'
    random words."""

    def __init__(self, tok: np.ndarray, counts: np.ndarray, anchorable: np.ndarray) -> None:
        self.tok, self.counts, self.anchorable = tok, counts, anchorable
        self._of_count = counts[tok]
        self._at: dict[int, np.ndarray] = {}
        self._cum: np.ndarray | None = None

    def kept(self, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """(positions, tokens) of the calls whose token occurs more than `threshold`
        times."""
        pos = np.flatnonzero(self._of_count > threshold)  # not kept: one per grouping
        return pos, self.tok[pos]

    def at(self, anchor: int) -> np.ndarray:
        if anchor not in self._at:
            self._at[anchor] = np.flatnonzero(self.tok == anchor)
        return self._at[anchor]

    def cum(self) -> np.ndarray:
        """The calls of a stretch as a multiset: the sum of a random word per call."""
        if self._cum is None:
            word = np.random.default_rng(0).integers(0, 2**63, len(self.counts),
                                                     dtype=np.uint64)
            self._cum = np.r_[np.uint64(0), np.cumsum(word[self.tok], dtype=np.uint64)]
        return self._cum


def _periods(tok: np.ndarray, start: np.ndarray, end: np.ndarray,
             busy: tuple[np.ndarray, np.ndarray], min_iterations: int,
             anchorable: np.ndarray) -> list[_Period]:
    """The repeating stretches of one rank: per anchor token (the most frequent first;
    only those `anchorable`, per token: communicating) and number m of its repetitions
    per iteration (fewest first), up to the first that computes in every iteration and
    fills most of the run."""
    counts = np.bincount(tok)
    first = np.full(len(counts), len(tok))
    np.minimum.at(first, tok, np.arange(len(tok)))
    # a local call's count is no anchor level (its token is never an anchor)
    counts_a = np.where(anchorable, counts, 0)
    levels = np.unique(counts_a[counts_a > min_iterations])[::-1][:COUNT_LEVELS]
    whole = int(end[-1] - start[0]) if len(tok) else 0
    found: list[_Period] = []
    seq = _Sequence(tok, counts, anchorable)
    # calls that repeat exactly, then calls that repeat with variations: a time step
    # whose calls change every k-th step repeats exactly only every k steps
    for stretch in (_exact, _regular):
        done = len(found)
        for level in levels:
            at_level = counts_a == level
            anchor = int(np.flatnonzero(at_level)[np.argmin(first[at_level])])
            for m in range(1, min(MAX_GROUP, int(level) // (min_iterations + 1)) + 1):
                starts, stop = stretch(seq, anchor, level, m, min_iterations)
                if starts is None:
                    continue
                p = _Period(len(starts), int(end[stop - 1] - start[starts[0]]),
                            _hollow(start[starts], busy), int(stop - starts[0]), starts,
                            stop)
                found.append(p)
                if not p.hollow and p.span_ns >= DOMINANT * whole:
                    break  # the loop that fills the run: coarser groupings add nothing
            if len(found) > done and not found[-1].hollow \
                    and found[-1].span_ns >= DOMINANT * whole:
                break
    return found


Stretch = tuple[np.ndarray, int] | tuple[None, None]


def _exact(seq: _Sequence, anchor: int, level: int, m: int, min_iterations: int
           ) -> Stretch:
    """The longest stretch in which the calls repeat exactly, every m-th `anchor` call
    starting an iteration: (positions of each iteration's first call, position after
    the loop's last call), or (None, None). Iterations open at the stretch's first
    `anchorable` (communicating) token."""
    # calls in at most about half of the iterations run every k-th: set aside
    pos, f = seq.kept(max(level / m / 2 + 1, 1))
    at = np.flatnonzero(f == anchor)
    if len(at) <= m:
        return None, None
    period = int(np.median(at[m:] - at[:-m]))
    if period <= 0 or period >= len(f):
        return None, None
    a, b = _runs(f[:-period] == f[period:])
    n = (b - a + period) // period if b > a else 0
    if n < min_iterations + 1:
        return None, None
    # local calls opening the stretch close each iteration instead (the last may lack
    # them): the iterations keep their number, shifted past those calls
    first = _first_communicating(f, seq.anchorable, a, period)
    # the loop ends before the next repeating call after it (occasional calls that close
    # the last iteration, e.g. a final reduction, still belong to it)
    nxt = min(first + period * n, b + period)
    return (pos[first + period * np.arange(n)],
            int(pos[nxt]) if nxt < len(pos) else len(seq.tok))


def _first_communicating(f: np.ndarray, anchorable: np.ndarray, a: int, period: int) -> int:
    """Position of the first `anchorable` token of f[a:a + period] (a if none)."""
    hit = np.flatnonzero(anchorable[f[a:a + period]])
    return a + int(hit[0]) if len(hit) else a


def _regular(seq: _Sequence, anchor: int, level: int, m: int, min_iterations: int
             ) -> Stretch:
    """The longest stretch in which every m-th `anchor` call opens an iteration that
    mostly holds the same calls as the one before, though not always: LAMMPS exchanges
    atoms and rebuilds its ghosts instead of sending ghost positions every 20th step, so
    no more than 19 steps repeat exactly. In the stretch, no iteration has under half or
    over twice the most common number of calls, and at least REGULAR of them hold the
    same calls as the one before (so an inner loop whose repetitions differ in turn, one
    Himeno halo exchange per dimension, is not taken for the loop). Its iterations open
    at the anchor itself, which is `anchorable`."""
    at = seq.at(anchor)
    if len(at) < m * (min_iterations + 1):
        return None, None
    # which of the anchor's calls opens a group of m: the one after the widest gaps
    gap_before = np.diff(at, prepend=at[0] - int(np.max(np.diff(at), initial=1)) - 1)
    phase = int(np.argmax([np.median(gap_before[o::m]) for o in range(m)]))
    opens = at[phase::m]
    gaps = np.diff(opens)
    if not len(gaps):
        return None, None
    mode = int(np.bincount(gaps).argmax())
    a, b = _runs((gaps * 2 >= mode) & (gaps <= 2 * mode))
    if b - a < min_iterations:
        return None, None
    cum = seq.cum()  # the calls of an iteration as a multiset
    calls = cum[opens[a + 1:b + 1]] - cum[opens[a:b]]
    same = (calls[1:] == calls[:-1]) & (gaps[a + 1:b] == gaps[a:b - 1])
    if len(same) and same.mean() < REGULAR:
        return None, None
    # b - a gaps between b - a + 1 openings; the last iteration is as long as the common one
    return opens[a:b + 1], min(int(opens[b]) + mode, len(seq.tok))


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
    # thread, run-queue delay samples at Enter and Leave (-1: none): None when the trace
    # holds no sample (other tracers, MPISCOPE_SCHED=off)
    sched: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def take(self, keep: np.ndarray | slice) -> _Calls:
        return _Calls(self.rank[keep], self.start[keep], self.end[keep], self.peer[keep],
                      self.function[keep], self.callsite[keep], self.functions,
                      self.callsites,
                      None if self.sched is None else tuple(a[keep] for a in self.sched))

    def waited_for_a_core(self) -> np.ndarray:
        """One rank's run-queue delay (ns) in the computation after each call (the last:
        0), as far as the tracer measured it; zeros when it did not or the rank's calls
        come from several threads (their gaps are not one thread's computation)."""
        out = np.zeros(len(self.start), np.int64)
        if self.sched is None or len(self.start) < 2:
            return out
        thread, at_enter, at_leave = self.sched
        if (thread != thread[0]).any():
            return out
        d = desched.gaps(self.start, self.end, at_enter, at_leave)
        if d is not None:
            out[:-1] = np.rint(d)
        return out

    def sites(self) -> np.ndarray:
        """Code of each call's call site, or of its function where none is recorded
        (Score-P traces)."""
        empty = np.r_[self.callsites == "", True][self.callsite]  # code -1: missing
        return np.where(empty, len(self.callsites) + self.function, self.callsite)


def _outermost(c: pd.DataFrame) -> _Calls:
    """Of a calls table (the whole trace's or one rank's)."""
    keep = ((c["depth"] == 0) & ~c["kind"].isin(["init", "finalize"])).to_numpy()
    rank, start = c["rank"].to_numpy()[keep], c["start"].to_numpy()[keep]
    by = by_rank_then_start(rank, start)
    take = slice(None) if by is None else by
    fn, cs = c["function"].cat, c["callsite"].cat

    def col(values: np.ndarray) -> np.ndarray:
        return values[keep][take].astype(np.int64)

    sched = None
    if desched.sampled(c):
        thread = c["thread"].to_numpy() if "thread" in c.columns else np.zeros(len(c), np.int64)
        sched = tuple(col(a) for a in (thread, *(c[k].to_numpy() for k in desched.COLUMNS)))
    return _Calls(col(c["rank"].to_numpy()), col(c["start"].to_numpy()),
                  col(c["end"].to_numpy()), col(c["peer"].to_numpy()),
                  col(fn.codes.to_numpy()), col(cs.codes.to_numpy()),
                  np.asarray(fn.categories.astype(str)), np.asarray(cs.categories.astype(str)),
                  sched)


# --- the per-rank part: both engines run it rank by rank (engines/rankloops.py on
# RankSlices), so a rank's whole call sequence is the largest thing held at once ---------

@dataclass
class RankCalls:
    """One rank's outermost calls as the loop is searched in them."""

    rank: int
    calls: _Calls  # back-to-back polling calls from one place merged into the first
    site: np.ndarray  # of each of `calls` (see _Calls.sites)
    # every outermost call's start; the time before it not spent computing: in MPI calls
    # and, where the tracer measured it, waiting for a core between them
    busy: tuple[np.ndarray, np.ndarray]


def _rank_calls(c: _Calls) -> RankCalls:
    """`c`: one rank's outermost calls (at least one)."""
    # the time not computing before each outermost call, to tell computing iterations
    # from inner loops: a step that waited for a core computed no more than the others
    idle = (c.end - c.start) + c.waited_for_a_core()
    busy = (c.start, np.r_[0, np.cumsum(idle)])
    site = c.sites()
    # back-to-back polling calls from one place count once
    polling = np.array([f.startswith(POLLING) for f in c.functions], dtype=bool)[c.function]
    same = np.r_[False, polling[1:] & (site[1:] == site[:-1])]
    if not same.any():  # nothing merges: the rank's arrays as they are, not copied
        return RankCalls(int(c.rank[0]), c, site, busy)
    return RankCalls(int(c.rank[0]), c.take(~same), site[~same], busy)


def rank_calls(calls: pd.DataFrame) -> RankCalls | None:
    """One rank's calls table as the loop is searched in it (None: no outermost calls)."""
    c = _outermost(calls)
    return _rank_calls(c) if len(c.rank) else None


def periods(rc: RankCalls, with_peer: bool, min_iterations: int) -> list[_Period]:
    """The repeating stretches of one rank, its tokens told apart by peer or not."""
    c = rc.calls
    peer = c.peer + 1  # -1 (none) -> 0
    # any one-to-one code of (site, peer) does: the tokens are renumbered in order of
    # appearance, so the rank's own largest peer gives what the whole trace's would
    tok = rc.site * (int(peer.max()) + 1) + peer if with_peer else rc.site
    # local calls apart from communicating ones of the same site (one Python line may
    # make both), so every token is wholly local or not
    local = localcalls.local_mask(c.functions)[c.function]
    codes = pd.factorize(tok * 2 + local)[0]
    anchorable = np.zeros(int(codes.max(initial=-1)) + 1, dtype=bool)
    anchorable[codes] = ~local
    return _periods(codes, c.start, c.end, rc.busy, min_iterations, anchorable)


@dataclass
class RankLoop:
    """One rank's share of the chosen loop."""

    rank: int
    starts: np.ndarray  # start (ns) of each iteration's first call
    function: str  # of the loop's first call on this rank
    callsite: str
    # per (function, call site) in the loop: pair (function code * len(callsites) +
    # call site code), calls, hit (iterations it runs in), every (see Loop.sites)
    sites: pd.DataFrame
    functions: np.ndarray  # the calls table's categories the codes refer to
    callsites: np.ndarray


def rank_loop(rc: RankCalls, found: list[_Period], n: int) -> RankLoop:
    """This rank's part of the loop of `n` iterations (`found`: its `periods`)."""
    c = rc.calls
    p = max((p for p in found if p.iterations == n), key=lambda p: p.span_ns)
    idx = np.arange(p.starts[0], p.stop)
    it = np.searchsorted(p.starts, idx, side="right") - 1
    # per (function, call site): calls, iterations it runs in, first and last of them
    pair = c.function[idx] * len(c.callsites) + c.callsite[idx]
    inverse, group = pd.factorize(pair)
    calls = np.bincount(inverse)
    hit = np.bincount(pd.unique(inverse * n + it) // n, minlength=len(group))
    lo_it = np.full(len(group), n)
    hi_it = np.zeros(len(group), dtype=np.int64)
    np.minimum.at(lo_it, inverse, it)
    np.maximum.at(hi_it, inverse, it)
    # every iteration, or only every k-th: the mean gap between the iterations it runs in
    # (a call site that runs in one iteration only is no part of the loop)
    each = (hit == n) | _closing(group // len(c.callsites), c.functions, hit, hi_it, n)
    keep = each | (hit > 1)
    every = np.where(each, 1,
                     np.maximum(np.rint((hi_it - lo_it) / np.maximum(hit - 1, 1)), 2))
    sites = pd.DataFrame({"pair": group, "calls": calls, "hit": hit,
                          "every": every.astype(int)})[keep]
    first = int(p.starts[0])
    return RankLoop(rc.rank, c.start[p.starts], str(c.functions[c.function[first]]),
                    str(c.callsites[c.callsite[first]]), sites, c.functions, c.callsites)


def _closing(function: np.ndarray, functions: np.ndarray, hit: np.ndarray,
             hi_it: np.ndarray, n: int) -> np.ndarray:
    """Per (function, call site) of a loop of `n` iterations: a local call in every
    iteration but the last. Iterations open past the local calls that begin a step
    (_exact), so these close every iteration but the last, which the run ends before."""
    local = localcalls.local_mask(functions)[function]
    return local & (hit == n - 1) & (hi_it == n - 2)


# --- the choice across ranks: small inputs, on the client -------------------------------

def _choose(per_rank: Sequence[Sequence[Candidate]]) -> int | None:
    """The most iterations that every rank shows over (nearly) its longest stretch, in
    time or in calls, preferring a period whose iterations all compute to one that is an
    inner loop. In calls too: a set-up phase stretched by descheduling (LAMMPS reading its
    input on a busy machine: 16 broadcasts over 99 ms) must not outlast the main loop
    (1272 calls over 83 ms) and hide it."""
    good: set[int] | None = None
    hollow: set[int] = set()
    for found in per_rank:
        if not found:
            return None
        longest = max(p.span_ns for p in found)
        most = max(p.calls for p in found)
        mine = {p.iterations for p in found
                if p.span_ns >= COVERAGE * longest or p.calls >= COVERAGE * most}
        good = mine if good is None else good & mine
        hollow |= {p.iterations for p in found if p.hollow}
    if not good:
        return None
    full = good - hollow
    return max(full) if full else max(good)


def _combine(parts: Sequence[RankLoop], n: int) -> Loop:
    """The Loop from every rank's part, in rank order."""

    def same(a: np.ndarray, b: np.ndarray) -> bool:  # the codes mean the same on each rank
        return a is b or np.array_equal(a, b)

    functions, callsites = parts[0].functions, parts[0].callsites
    if not all(same(p.functions, functions) and same(p.callsites, callsites) for p in parts):
        raise ValueError("the ranks' calls tables differ in their categories")
    per = pd.concat([p.sites for p in parts])
    sites = per.groupby("pair").agg(
        ranks=("calls", "size"), calls=("calls", "sum"), per_iteration=("calls", "min"),
        in_iterations=("hit", "min"), every=("every", "max")).reset_index()
    code = sites.pop("pair").to_numpy()
    sites.insert(0, "function", functions[code // len(callsites)])
    sites.insert(1, "callsite", callsites[code % len(callsites)])
    sites["per_iteration"] = sites["per_iteration"] / n
    sites = sites.sort_values(["every", "per_iteration"], ascending=[True, False],
                              kind="stable").reset_index(drop=True)
    return Loop(parts[0].callsite, parts[0].function, n,
                np.array([p.rank for p in parts], dtype=np.int64),
                np.stack([p.starts for p in parts]).astype(np.int64, copy=False), sites)


def search(found_of: Callable[[bool], tuple[list[list[Candidate] | None], int]],
           loops_of: Callable[[bool, int], list[RankLoop]]) -> Loop | None:
    """The loop, from the ranks' parts in rank order: `found_of(with_peer)` -> (each
    rank's candidates, None for a rank without calls; the trace's number of ranks),
    `loop_of(with_peer, n)` -> each rank's `rank_loop`. Every rank must show it."""
    for with_peer in (True, False):  # peers tell inner repetitions apart, if they repeat
        found, num_ranks = found_of(with_peer)
        if not found or len(found) != num_ranks or any(f is None for f in found):
            return None
        n = _choose([f for f in found if f is not None])
        if n is not None:
            return _combine(loops_of(with_peer, n), n)
    return None


def _cuts(ranks: np.ndarray) -> np.ndarray:
    """Boundaries of the rank blocks of a rank-sorted array."""
    return np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1], True])


def detect(trace: Trace, min_iterations: int = 3) -> Loop | None:
    c = _outermost(trace.calls)
    ranks = ([_rank_calls(c.take(slice(lo, hi))) for lo, hi in pairwise(_cuts(c.rank))]
             if len(c.rank) else [])
    del c  # what the ranks did not keep (their merged polling calls are copies)
    found: dict[bool, list[list[_Period]]] = {}

    def found_of(with_peer: bool) -> tuple[list[list[Candidate] | None], int]:
        found[with_peer] = [periods(rc, with_peer, min_iterations) for rc in ranks]
        return list(found[with_peer]), trace.num_ranks

    def loops_of(with_peer: bool, n: int) -> list[RankLoop]:
        return [rank_loop(rc, f, n) for rc, f in zip(ranks, found[with_peer], strict=True)]

    return search(found_of, loops_of)


# --- the breakdown per iteration --------------------------------------------------------

def call_frame(c: pd.DataFrame, wait: np.ndarray, io_calls: np.ndarray) -> pd.DataFrame:
    """rank, start, mpi, sync, io (ns) of the outermost calls `c` (depth 0) that waited
    `wait` (`io_calls`: breakdown.io_completing)."""
    dur = (c["end"] - c["start"]).to_numpy()
    return pd.DataFrame({"rank": c["rank"].to_numpy(), "start": c["start"].to_numpy(),
                         "mpi": dur, **call_parts(c, dur, wait, io_calls)})


def iteration_sums(f: pd.DataFrame, rank: int, starts: np.ndarray) -> pd.DataFrame:
    """One rank's ns per iteration: iteration, rank, total, mpi, sync, io (`f`: its
    `call_frame`; `starts`: its row of `Loop.starts`)."""
    start, end = starts[:-1], starts[1:]
    iteration = np.arange(len(start), dtype=np.int64)
    k = np.searchsorted(start, f["start"].to_numpy(), side="right") - 1
    ok = (k >= 0) & (f["start"].to_numpy() < end[np.clip(k, 0, None)])
    agg = pd.DataFrame({"iteration": iteration[k[ok]],
                        "mpi": f["mpi"].to_numpy()[ok], "sync": f["sync"].to_numpy()[ok],
                        "io": f["io"].to_numpy()[ok]})
    g = agg.groupby("iteration").sum()
    length = pd.Series(end - start, index=iteration)
    g = g.reindex(length.index, fill_value=0)
    return pd.DataFrame({"iteration": length.index, "rank": rank,
                         "total": length.to_numpy(), "mpi": g["mpi"].to_numpy(),
                         "sync": g["sync"].to_numpy(), "io": g["io"].to_numpy()})


def merge_sums(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The ranks' `iteration_sums` (or merged ones) added up per iteration: iteration,
    total, mpi, sync, io (ns), by iteration; merging merged parts gives the same."""
    return pd.concat(parts).groupby("iteration", as_index=False)[
        ["total", "mpi", "sync", "io"]].sum()


def combine_sums(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The per-iteration table from the ranks' `iteration_sums` (or `merge_sums` of them)."""
    df = merge_sums(parts)
    return pd.DataFrame({
        "iteration": df["iteration"], "compute_s": (df["total"] - df["mpi"]) / 1e9,
        "communication_s": (df["mpi"] - df["sync"] - df["io"]) / 1e9,
        "synchronization_s": df["sync"] / 1e9, "io_s": df["io"] / 1e9,
    }).reset_index(drop=True)


def per_iteration(trace: Trace, loop: Loop, ws) -> pd.DataFrame:
    """Seconds of compute / communication / synchronization / I/O per iteration (all ranks)."""
    c = trace.calls
    # the outermost calls' columns read, not every column of the calls copied
    c = c[["call", "rank", "start", "end", "function", "kind"]][(c["depth"] == 0).to_numpy()]
    wait = ws.per_call["wait_ns"].to_numpy()[c["call"].to_numpy()]
    frame = call_frame(c, wait, io_completing(trace))
    # each rank's rows in their order: one stable sort by rank (none when read back in
    # rank order), then a slice per rank, not a mask over every row per rank
    rank = frame["rank"].to_numpy()
    if len(rank) > 1 and not (rank[1:] >= rank[:-1]).all():
        order = np.argsort(rank, kind="stable")
        frame, rank = frame.take(order), rank[order]
    starts = loop.starts_by_rank()
    lo = np.searchsorted(rank, list(starts), side="left")
    hi = np.searchsorted(rank, list(starts), side="right")
    return combine_sums([iteration_sums(frame.iloc[a:z], r, row)
                         for (r, row), a, z in zip(starts.items(), lo, hi, strict=True)])


# --- the window the timelines open on ---------------------------------------------------

def extent(calls: pd.DataFrame) -> tuple[int, int] | None:
    """(first start, last end) of the calls, None without any."""
    return (int(calls["start"].min()), int(calls["end"].max())) if len(calls) else None


def window(loop: Loop | None, extents: Callable[[], list[tuple[int, int] | None]],
           count: int = 3) -> tuple[int, int]:
    """A few iterations of the main loop `loop` (ns), or the start of the run without one
    (`extents()`: the `extent` of each part of the calls, asked for only then)."""
    if loop is not None and loop.iterations > count:
        row = loop.starts_by_rank()[0]  # spans: len(row) - 1
        first = min(1, len(row) - 1 - count)
        return int(row[first]), int(row[first + count])
    known = [e for e in extents() if e is not None]
    lo = min(e[0] for e in known) if known else 0
    hi = max(e[1] for e in known) if known else 1
    return lo, lo + max((hi - lo) // 20, 1)


def iteration_window(trace: Trace, loop: Loop | None, count: int = 3) -> tuple[int, int]:
    """A few iterations of the main loop `loop` (ns), or the start of the run without one."""
    return window(loop, lambda: [extent(trace.calls)], count)
