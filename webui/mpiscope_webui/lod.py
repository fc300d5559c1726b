"""Server-side level of detail for the timeline (Jumpshot's preview drawables, vectorized).

For a window [t0, t1) drawn `width_px` pixels wide, states at least `min_px` pixels long
are sent exactly; everything else is accounted in per-rank pixel bins as time per
function, drawn as one summary cell per bin in the colour of the dominant function.
Accounting is exact: per rank and function, exact states + summary cells = the time of
that function inside the window.

Two in-memory indexes make a query independent of the trace size:
- per (rank, function) runs sorted by start with a prefix sum of durations, so the time
  of a function up to any instant is one `searchsorted`; bin totals are differences;
- a pyramid of "long state" subsets (duration ≥ span / 2^k), sorted by (rank, start) with
  a running max of ends, so the states long enough to draw exactly in a window are found
  with two `searchsorted` calls per rank without touching the short ones.
Assumes one function's calls on one rank do not overlap (MPI calls do not nest in
themselves).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

LEVELS = 22  # pyramid depth: below span / 2^LEVELS per state we scan the window
MAX_EXACT = 6000  # states drawn one by one per view
MAX_CELLS = 160_000  # summary cells (lanes x bins) per view


@dataclass
class _Level:
    min_dur: int
    idx: np.ndarray  # positions in the (rank, start)-sorted state arrays
    kstart: np.ndarray  # rank * span + start, sorted
    kmaxend: np.ndarray  # running max of rank * span + end (sorted by construction)


@dataclass
class StateIndex:
    """Every MPI call of a trace as per-rank sorted arrays (times relative to `origin`)."""

    functions: list[str]
    num_ranks: int
    span: int  # > every relative time; key multiplier that keeps ranks apart
    origin: int
    start: np.ndarray  # int64, sorted by (rank, start)
    end: np.ndarray
    rank: np.ndarray  # int32
    fcode: np.ndarray  # int16 index into functions
    depth: np.ndarray  # int8
    call: np.ndarray  # int64 row id in Trace.calls
    wait: np.ndarray  # int64 waiting part of each call (ns)
    # (rank, function) runs for the prefix sums
    seg_start: np.ndarray = field(repr=False, default=None)  # rank*F+f keyed starts
    seg_end: np.ndarray = field(repr=False, default=None)
    seg_prefix: np.ndarray = field(repr=False, default=None)  # len n+1, cumulative durations
    levels: list[_Level] = field(repr=False, default_factory=list)

    @classmethod
    def build(cls, calls: pd.DataFrame, num_ranks: int,
              wait_ns: np.ndarray | None = None) -> StateIndex:
        functions, fcode = _function_codes(calls["function"])
        start = calls["start"].to_numpy(np.int64)
        end = np.maximum(calls["end"].to_numpy(np.int64), start)
        origin = int(start.min()) if len(start) else 0
        span = int(end.max() - origin) + 2 if len(end) else 2
        rank = calls["rank"].to_numpy(np.int32)
        # the reader's tables usually come sorted by (rank, start) already: check (10 ms)
        # before sorting (200 ms on 3 M calls)
        same_rank = rank[1:] == rank[:-1]
        ordered = bool(np.all((rank[1:] > rank[:-1]) | (same_rank & (start[1:] >= start[:-1]))))
        order = slice(None) if ordered else np.lexsort((start, rank))
        wait = (np.zeros(len(calls), np.int64) if wait_ns is None
                else np.asarray(wait_ns, np.int64)[calls["call"].to_numpy()])
        idx = cls(functions, int(num_ranks), span, origin,
                  start[order] - origin, end[order] - origin, rank[order], fcode[order],
                  calls["depth"].to_numpy(np.int8)[order],
                  calls["call"].to_numpy(np.int64)[order], wait[order])
        idx._build_segments()
        idx._build_levels()
        return idx

    def _build_segments(self) -> None:
        nf = max(len(self.functions), 1)
        seg = self.rank.astype(np.int64) * nf + self.fcode
        # the states are sorted by (rank, start): a stable sort by segment alone keeps them
        # by start within each segment, and is quickest on the narrowest integer type
        narrow = np.int16 if self.num_ranks * nf < 2**15 else np.int32
        order = np.argsort(seg.astype(narrow), kind="stable")
        s, e = self.start[order], self.end[order]
        self.seg_start = seg[order] * self.span + s
        self.seg_end = e
        self.seg_prefix = np.concatenate([[0], np.cumsum(e - s)])

    def _build_levels(self) -> None:
        dur = self.end - self.start
        keys_s = self.rank.astype(np.int64) * self.span + self.start
        keys_e = self.rank.astype(np.int64) * self.span + self.end
        self.levels = []
        prev = None
        for k in range(LEVELS + 1):
            min_dur = self.span >> k
            sel = np.flatnonzero(dur >= min_dur) if k < LEVELS else np.arange(len(dur))
            if k == LEVELS:
                min_dur = 0
            if prev is not None and len(sel) == len(prev.idx):
                prev.min_dur = min_dur  # same subset: keep one copy, valid down to here
                continue
            lvl = _Level(min_dur, sel, keys_s[sel], np.maximum.accumulate(keys_e[sel])
                         if len(sel) else keys_e[sel])
            self.levels.append(lvl)
            prev = lvl

    # -- queries -------------------------------------------------------------------------
    def time_upto(self, segs: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Time spent in segment (rank*F+f) up to each instant: shape (len(segs), len(t))."""
        t = np.clip(t, 0, self.span - 1)
        keys = (segs[:, None] * self.span + t[None, :]).ravel()
        i = np.searchsorted(self.seg_start, keys, side="right")  # states started by t
        base = np.searchsorted(self.seg_start, segs * self.span, side="left")
        base = np.repeat(base, len(t))
        done = self.seg_prefix[i] - self.seg_prefix[base]
        has = i > base
        last_end = self.seg_end[np.maximum(i - 1, 0)]
        running = np.where(has, np.maximum(last_end - np.tile(t, len(segs)), 0), 0)
        return (done - running).reshape(len(segs), len(t))

    def long_states(self, t0: int, t1: int, min_dur: int) -> np.ndarray:
        """Positions of the states with duration ≥ min_dur overlapping [t0, t1)."""
        # every state lies in [0, span - 2]: a window outside that (a pan off the trace)
        # or of no width has none, and clamping it would let one rank's key range reach
        # into its neighbour's (lo > hi below)
        lo_t, hi_t = max(int(t0), 0), min(int(t1), self.span - 1)
        if hi_t <= lo_t:
            return np.empty(0, np.int64)
        lvl = next(lv for lv in self.levels if lv.min_dur <= min_dur)
        ranks = np.arange(self.num_ranks, dtype=np.int64) * self.span
        lo = np.searchsorted(lvl.kmaxend, ranks + lo_t, side="right")
        hi = np.searchsorted(lvl.kstart, ranks + hi_t, side="left")
        n = np.maximum(hi - lo, 0)
        if n.sum() == 0:
            return np.empty(0, np.int64)
        pos = np.repeat(lo - np.concatenate([[0], np.cumsum(n)[:-1]]), n) + np.arange(n.sum())
        cand = lvl.idx[pos]
        s = np.maximum(self.start[cand], t0)
        e = np.minimum(self.end[cand], t1)
        return cand[(e - s >= max(min_dur, 1)) & (self.end[cand] > t0)]


def _function_codes(column: pd.Series) -> tuple[list[str], np.ndarray]:
    """(names, int16 code per row) of the functions that occur, in category order."""
    fn = column.astype("category")
    codes = fn.cat.codes.to_numpy()
    if len(codes) and codes.min() < 0:  # missing names: let pandas sort it out
        fn = fn.cat.remove_unused_categories()
        return [str(x) for x in fn.cat.categories], fn.cat.codes.to_numpy(np.int16)
    # which categories occur, by counting (pandas' remove_unused_categories sorts the codes)
    used = np.flatnonzero(np.bincount(codes, minlength=len(fn.cat.categories)))
    remap = np.zeros(len(fn.cat.categories), np.int16)
    remap[used] = np.arange(len(used))
    return [str(fn.cat.categories[i]) for i in used], remap[codes]


@dataclass
class LodView:
    """What one timeline view sends: exact states + per-pixel summary cells."""

    t0: int  # window, ns relative to the index origin
    t1: int
    width_px: int
    functions: list[str]
    visible: np.ndarray  # function codes included (hidden ones are left out entirely)
    states: np.ndarray  # positions in the StateIndex of the states drawn exactly
    state_start: np.ndarray  # clipped to the window
    state_end: np.ndarray
    edges: np.ndarray  # int64 bin edges, len nbins + 1
    # residual time per (rank, visible function, bin) after the exact states, int64
    summary: np.ndarray
    threshold_ns: int  # states at least this long (clipped) are exact

    @property
    def nbins(self) -> int:
        return len(self.edges) - 1

    @property
    def dominant(self) -> np.ndarray:
        """(rank, bin) function code of the dominant function, -1 where the bin is empty."""
        busy = self.summary.sum(axis=1)
        dom = self.visible[np.argmax(self.summary, axis=1)] if len(self.visible) else busy * 0
        return np.where(busy > 0, dom, -1)

    @property
    def busy_fraction(self) -> np.ndarray:
        width = np.diff(self.edges).astype(float)
        return self.summary.sum(axis=1) / np.maximum(width, 1)[None, :]

    def summary_cells(self) -> int:
        return int((self.summary.sum(axis=1) > 0).sum())

    def time_by_rank_function(self, index: StateIndex) -> np.ndarray:
        """(ranks, functions) ns accounted in this view: exact states + summary cells."""
        out = np.zeros((index.num_ranks, len(self.functions)), np.int64)
        np.add.at(out, (index.rank[self.states], index.fcode[self.states]),
                  self.state_end - self.state_start)
        out[:, self.visible] += self.summary.sum(axis=2)
        return out


def query(index: StateIndex, t0: int, t1: int, width_px: int, *, hidden: set[str] = frozenset(),
          min_px: float = 1.0, max_exact: int = MAX_EXACT,
          max_cells: int = MAX_CELLS, edges: np.ndarray | None = None,
          shown: np.ndarray | None = None) -> LodView:
    """The level-of-detail view of [t0, t1) (ns relative to index.origin). `edges`: bin
    edges to use instead of one bin per pixel (e.g. a pyramid's columns, see pyramid.py);
    the window is then edges[0]..edges[-1]. `shown`: per index rank, whether it is drawn
    (the exact states of the others are left out, so they take none of max_exact)."""
    if edges is not None:
        t0, t1 = int(edges[0]), int(edges[-1])
    t0, t1 = sorted((int(t0), int(t1)))  # a reversed window is the same window
    t1 = max(t1, t0 + 1)
    width_px = max(int(width_px), 1)
    nf = len(index.functions)
    visible = np.array([i for i, f in enumerate(index.functions) if f not in hidden], np.int64)
    # pixel bins, coarser only when lanes x pixels would exceed the cell budget
    nbins = int(max(1, min(width_px, max_cells // max(index.num_ranks, 1))))
    if edges is None:
        edges = t0 + np.round(np.linspace(0, t1 - t0, nbins + 1)).astype(np.int64)
    edges = np.unique(np.asarray(edges, np.int64))
    nbins = len(edges) - 1
    ns_per_px = (t1 - t0) / width_px
    threshold = max(int(np.ceil(min_px * ns_per_px)), 1)

    states = index.long_states(t0, t1, threshold)
    if len(visible) < nf:
        states = states[np.isin(index.fcode[states], visible)]
    if shown is not None:
        states = states[shown[index.rank[states]]]
    s = np.maximum(index.start[states], t0)
    e = np.minimum(index.end[states], t1)
    if len(states) > max_exact:  # keep the longest; the rest goes to the summary
        keep = np.sort(np.argpartition(-(e - s), max_exact)[:max_exact]) if max_exact > 0 \
            else np.empty(0, np.int64)
        threshold = int((e - s)[keep].min()) if len(keep) else int((e - s).max()) + 1
        states, s, e = states[keep], s[keep], e[keep]

    # total time per (rank, visible function, bin) from the prefix sums
    ranks = np.arange(index.num_ranks, dtype=np.int64)
    segs = (ranks[:, None] * max(nf, 1) + visible[None, :]).ravel()
    upto = index.time_upto(segs, edges)
    total = np.diff(upto, axis=1).reshape(index.num_ranks, len(visible), nbins)
    # minus what the exact states cover in each bin
    if len(states):
        slot = np.searchsorted(visible, index.fcode[states])
        cell = (index.rank[states].astype(np.int64) * len(visible) + slot) * nbins
        b0 = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, nbins - 1)
        b1 = np.clip(np.searchsorted(edges, e, side="left") - 1, 0, nbins - 1)
        cover = np.zeros(total.size + 1, np.int64)  # whole bins covered, difference array
        full = b1 > b0 + 1
        np.add.at(cover, cell[full] + b0[full] + 1, 1)
        np.add.at(cover, cell[full] + b1[full], -1)
        flat = total.reshape(-1)
        width = np.tile(np.diff(edges), index.num_ranks * len(visible))
        flat -= np.cumsum(cover[:-1]).astype(np.int64) * width
        single = b0 == b1
        np.add.at(flat, cell[single] + b0[single], -(e - s)[single])
        two = ~single
        np.add.at(flat, cell[two] + b0[two], -(edges[b0[two] + 1] - s[two]))
        np.add.at(flat, cell[two] + b1[two], -(e[two] - edges[b1[two]]))
    if shown is not None:  # the streams not drawn have no cells either
        total[~shown[: len(total)]] = 0
    return LodView(t0, t1, width_px, index.functions, visible, states, s, e, edges, total,
                   threshold)
