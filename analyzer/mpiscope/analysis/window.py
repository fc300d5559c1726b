"""Statistics of a time window and a set of ranks: Vampir recomputes every display for the
window on screen, and so does the web UI, from this.

`WindowIndex.of(trace, wait_states)` sorts every call, user region and message once (by
start, resp. send time) beside the per-call values the statistics read; `index.query(t0,
t1, ranks)` then finds a window's calls with two binary searches (calls longer than a
look-back bound are kept aside, few by construction, so one long MPI_Init does not make
every window scan from the start) and its `Window` computes each table on first use.

What a window counts (the UI says so beside the tables):
- a call (or user region) is in the window if it overlaps it; its `time` is the part
  inside the window; `min/median/max` are of the whole calls' durations (a merged
  polling visit counts once, at its mean per MPI call); `calls` counts MPI calls (a
  merged visit its `polls`).
- breakdown: each rank's measured interval (breakdown.intervals) cut to the window, its
  outermost main-thread calls cut likewise; a call's waiting is its first `wait_ns` (as
  the timeline shades it), so the parts are cut the same way. Over the whole run this is
  breakdown.per_rank.
- wait states: each call's waiting part inside the window, by kind.
- messages: those sent inside the window whose sender or receiver is in the rank set.
- user regions: inclusive = time inside the region, exclusive = minus the time of the
  regions and outermost MPI calls directly inside it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from mpiscope.analysis import breakdown, calltree, orderstats, stats, threads, waitstates
from mpiscope.analysis.callpaths import CallPaths
from mpiscope.analysis.waitstates import WaitStates
from mpiscope.archive.trace import Trace

KEYS = ("rank", "thread", "function", "callsite", "comm", "tag", "callpath")  # what a
# profile groups by (callpath: the call path id, -1 where none was recorded)
LOOKBACK_SHARE = 1024  # calls longer than span / this are kept aside (few per rank)
CACHED_WINDOWS = 8
PROFILE_COLUMNS = ["calls", "time_s", "mean_s", "min_s", "median_s", "max_s", "wait_s",
                   "bytes"]


def _codes(column: pd.Series) -> tuple[list[str], np.ndarray]:
    """(labels, int32 code per row) of a categorical or string column."""
    cat = column.astype("category")
    codes = cat.cat.codes.to_numpy().astype(np.int32)
    labels = [str(x) for x in cat.cat.categories]
    if len(codes) and codes.min() < 0:  # missing values: their own label
        codes = np.where(codes < 0, len(labels), codes)
        labels.append("")
    return labels, codes


@dataclass
class _Calls:
    """One table of intervals (MPI calls or user regions), sorted by start."""

    start: np.ndarray
    end: np.ndarray
    row: np.ndarray  # row in the trace's table
    is_long: np.ndarray  # longer than the look-back: found through `long`, not the slice
    long: np.ndarray  # positions of the long ones
    lookback: int

    @classmethod
    def of(cls, start: np.ndarray, end: np.ndarray, span: int) -> tuple[_Calls, np.ndarray]:
        order = np.argsort(start, kind="stable")
        s, e = start[order], np.maximum(end[order], start[order])
        lookback = max(span // LOOKBACK_SHARE, 1)
        is_long = (e - s) > lookback
        return cls(s, e, order.astype(np.int64), is_long, np.flatnonzero(is_long),
                   lookback), order

    def overlapping(self, t0: int, t1: int) -> np.ndarray:
        """Positions of the intervals overlapping [t0, t1) (or of no length, inside it)."""
        a = int(np.searchsorted(self.start, t0 - self.lookback, side="left"))
        b = int(np.searchsorted(self.start, t1, side="left"))
        pos = np.arange(a, b, dtype=np.int64)
        s, e = self.start[a:b], self.end[a:b]
        pos = pos[((e > t0) | (s >= t0)) & ~self.is_long[a:b]]
        lg = self.long
        ls, le = self.start[lg], self.end[lg]
        return np.concatenate([pos, lg[(ls < t1) & ((le > t0) | (ls >= t0))]])


def _parents(rank: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray,
             r_rank: np.ndarray, r_thread: np.ndarray, r_start: np.ndarray,
             r_end: np.ndarray, r_depth: np.ndarray) -> np.ndarray:
    """For each interval, the innermost user region (row of the r_ arrays) on its rank and
    thread that contains it, -1 if none: per nesting level, the last region of that level
    starting no later, kept if it lasts past the interval's end."""
    out = np.full(len(start), -1, np.int64)
    if not len(r_start) or not len(start):
        return out
    # one sortable int64 key per (location, time): dense location codes times the span
    loc_all = np.concatenate([rank.astype(np.int64) * 65536 + thread,
                              r_rank.astype(np.int64) * 65536 + r_thread])
    _, code = np.unique(loc_all, return_inverse=True)
    loc, r_loc = code[:len(start)], code[len(start):]
    t_lo = int(min(start.min(), r_start.min()))
    width = int(max(end.max(), r_end.max())) - t_lo + 2
    if (int(code.max()) + 1) * width >= 2**62:  # cannot key: leave regions unnested
        return out
    key = loc * width + (start - t_lo)
    r_key = r_loc * width + (r_start - t_lo)
    for d in np.unique(r_depth):  # deeper levels later: the innermost region wins
        at = np.flatnonzero(r_depth == d)
        at = at[np.argsort(r_key[at], kind="stable")]
        i = np.searchsorted(r_key[at], key, side="right") - 1
        cand = at[np.maximum(i, 0)]
        ok = (i >= 0) & (r_loc[cand] == loc) & (r_end[cand] >= end)
        out = np.where(ok, cand, out)
    return out


def _atoms_of(raw: dict[str, np.ndarray], per_call: np.ndarray
              ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """(atom of each call, each key's value per atom, call positions ordered by atom then
    per-call value): once per trace. Keys combined one at a time, renumbered densely after
    each, so the combined code never outgrows the calls."""
    n = len(per_call)
    atom = np.zeros(n, np.int64)
    na = 1
    for k in KEYS:
        col = raw[k].astype(np.int64)
        if not n:
            break
        lo = int(col.min())
        r = int(col.max()) - lo + 1
        if r == 1:
            continue
        _, atom = _dense(atom * r + (col - lo), float(na) * r)
        na = int(atom.max()) + 1
    first = np.zeros(na if n else 0, np.int64)
    first[atom[::-1]] = np.arange(n - 1, -1, -1)  # an atom's first call
    keys = {k: raw[k][first].astype(np.int64) for k in KEYS}
    by_value = np.argsort(per_call, kind="stable")
    narrow = atom.astype(np.uint16) if na <= 65536 else atom
    order = by_value[np.argsort(narrow[by_value], kind="stable")]
    small = np.int32 if n < 2**31 else np.int64  # 8 B per call for both, not 16
    return atom.astype(small), keys, order.astype(small)


@dataclass
class WindowIndex:
    """Everything a window's statistics read, sorted once per trace."""

    num_ranks: int
    hosts: dict[int, str]
    functions: list[str]
    callsites: list[str]
    comm_names: dict[int, str]
    calls: _Calls
    rank: np.ndarray
    thread: np.ndarray
    fcode: np.ndarray
    scode: np.ndarray
    comm: np.ndarray
    tag: np.ndarray
    callpath: np.ndarray  # call path id, -1 none
    n: np.ndarray  # MPI calls each row stands for
    per_call: np.ndarray  # ns per MPI call (a merged visit's mean)
    nbytes: np.ndarray
    wait: np.ndarray  # waiting ns at the call's start
    wkind: np.ndarray  # waitstates.KINDS code, -1 none
    measured: np.ndarray  # counts in the breakdown (outermost, main thread, not Init/Fin.)
    sync: np.ndarray  # synchronization ns at the call's start (barrier: all of it)
    io: np.ndarray  # an I/O call (all of it is I/O)
    mpi_parent: np.ndarray  # innermost user region around the call (region position), -1
    iv_begin: np.ndarray  # measured interval per rank
    iv_end: np.ndarray
    span: tuple[int, int]
    # user regions
    regions: _Calls
    r_rank: np.ndarray
    r_fcode: np.ndarray
    r_names: list[str]
    r_parent: np.ndarray  # position of the enclosing region, -1
    # messages, by send time
    m_time: np.ndarray
    m_send: np.ndarray
    m_recv: np.ndarray
    m_bytes: np.ndarray
    m_transfer: np.ndarray
    m_comm: np.ndarray
    m_tag: np.ndarray
    # calls grouped by all of KEYS at once ("atoms", usually thousands for millions of
    # calls): every profile is a grouping of atoms (see _Atoms)
    atom: np.ndarray  # atom of each call
    atom_keys: dict[str, np.ndarray]  # per atom, each key's value (codes as in the calls)
    by_atom: np.ndarray  # call positions by atom, then per-call value, then start
    _cache: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _whole: Window | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(cls, trace: Trace, ws: WaitStates) -> WindowIndex:
        c = trace.calls
        start = c["start"].to_numpy(np.int64)
        end = np.maximum(c["end"].to_numpy(np.int64), start)
        # everything a window can hold: calls, user regions, the ranks' first/last events
        ends = [start, end, trace.regions["start"].to_numpy(np.int64),
                trace.regions["end"].to_numpy(np.int64),
                trace.ranks["first_ns"].to_numpy(np.int64),
                trace.ranks["last_ns"].to_numpy(np.int64)]
        ends = [a for a in ends if len(a)]
        lo = min(int(a.min()) for a in ends) if ends else 0
        hi = max(int(a.max()) for a in ends) if ends else 1
        calls, order = _Calls.of(start, end, hi - lo)
        c = c.iloc[order]
        functions, fcode = _codes(c["function"])
        callsites, scode = _codes(c["callsite"])
        n = stats.polls(c)
        dur = calls.end - calls.start
        pc = ws.per_call
        wait = np.minimum(pc["wait_ns"].to_numpy(np.int64)[order], dur)
        wkind = pc["wait_kind"].cat.codes.to_numpy().astype(np.int8)[order]
        parts = breakdown.call_parts(c, dur, wait, breakdown.io_completing(trace))
        measured = (threads.on_main_thread(c) & (c["depth"].to_numpy() == 0)
                    & ~c["kind"].isin(["init", "finalize"]).to_numpy())
        iv = breakdown.intervals(trace)
        nr = max(trace.num_ranks, int(iv["rank"].max()) + 1 if len(iv) else 0)
        iv_b, iv_e = np.zeros(nr, np.int64), np.zeros(nr, np.int64)
        iv_b[iv["rank"].to_numpy()] = iv["begin"].to_numpy()
        iv_e[iv["rank"].to_numpy()] = iv["end"].to_numpy()
        thread = (c["thread"].to_numpy(np.int32) if "thread" in c.columns
                  else np.zeros(len(c), np.int32))
        # user regions
        rg = trace.regions
        rs = rg["start"].to_numpy(np.int64)
        re_ = np.maximum(rg["end"].to_numpy(np.int64), rs)
        regions, rorder = _Calls.of(rs, re_, hi - lo)
        rg = rg.iloc[rorder]
        r_names, r_fcode = _codes(rg["function"]) if len(rg) else ([], np.empty(0, np.int32))
        r_rank = rg["rank"].to_numpy(np.int32)
        r_thread = (rg["thread"].to_numpy(np.int32) if "thread" in rg.columns
                    else np.zeros(len(rg), np.int32))
        r_depth = (rg["depth"].to_numpy(np.int64) if "depth" in rg.columns
                   else np.zeros(len(rg), np.int64))
        # a region's parent: the innermost one around it, of a shallower level
        r_parent = np.full(len(rg), -1, np.int64)
        for d in np.unique(r_depth):
            mine = np.flatnonzero(r_depth == d)
            up = np.flatnonzero(r_depth < d)
            if not len(up):
                continue
            got = _parents(r_rank[mine], r_thread[mine], regions.start[mine],
                           regions.end[mine], r_rank[up], r_thread[up], regions.start[up],
                           regions.end[up], r_depth[up])
            r_parent[mine] = np.where(got >= 0, up[np.maximum(got, 0)], -1)
        outer = np.flatnonzero(c["depth"].to_numpy() == 0)
        mpi_parent = np.full(len(c), -1, np.int64)
        mpi_parent[outer] = _parents(c["rank"].to_numpy(np.int32)[outer], thread[outer],
                                     calls.start[outer], calls.end[outer], r_rank, r_thread,
                                     regions.start, regions.end, r_depth)
        m = trace.messages
        mo = np.argsort(m["send_time"].to_numpy(np.int64), kind="stable")
        m = m.iloc[mo]
        comm_names = {int(k): str(v) for k, v in zip(trace.comms["comm"], trace.comms["name"],
                                                     strict=True)}
        per_call = dur / np.maximum(n, 1)
        return cls(
            nr, trace.host_of(), functions, callsites, comm_names, calls,
            c["rank"].to_numpy(np.int32), thread, fcode, scode,
            c["comm"].to_numpy(np.int32), c["tag"].to_numpy(np.int32),
            (c["callpath"].to_numpy(np.int32) if "callpath" in c.columns
             else np.full(len(c), -1, np.int32)), n,
            per_call,
            (c["bytes_sent"] + c["bytes_recv"]).to_numpy(np.int64), wait, wkind, measured,
            parts["sync"].astype(np.int64), parts["io"] > 0, mpi_parent, iv_b, iv_e, (lo, hi),
            regions, r_rank, r_fcode, r_names, r_parent,
            m["send_time"].to_numpy(np.int64), m["send_rank"].to_numpy(np.int32),
            m["recv_rank"].to_numpy(np.int32), m["bytes"].to_numpy(np.int64),
            stats._transfer(m).astype(np.int64), m["comm"].to_numpy(np.int32),
            m["tag"].to_numpy(np.int32), *_atoms_of(
                {"rank": c["rank"].to_numpy(np.int32), "thread": thread, "function": fcode,
                 "callsite": scode, "comm": c["comm"].to_numpy(np.int32),
                 "tag": c["tag"].to_numpy(np.int32),
                 "callpath": (c["callpath"].to_numpy(np.int32) if "callpath" in c.columns
                              else np.full(len(c), -1, np.int32))}, per_call))

    def message_rows(self) -> MessageRows:
        """Every message of the index, by send time (the arrays themselves, not copies)."""
        return MessageRows(self.m_time, self.m_send, self.m_recv, self.m_bytes,
                           self.m_transfer, self.m_comm, self.m_tag)

    def whole(self) -> Window:
        """The whole run's window, all ranks."""
        lo, hi = self.span
        return self.query(lo, hi + 1)

    def forget(self) -> None:
        """Drop the windows kept (benchmarks time each window from scratch)."""
        with self._lock:
            self._cache.clear()
            self._whole = None

    def query(self, t0: int, t1: int, ranks: Sequence[int] | None = None) -> Window:
        """The window [t0, t1) (ns, trace time) of the ranks given (None: all); the last
        few are kept (a tab switch asks for the same window again)."""
        t0, t1 = sorted((int(t0), int(t1)))
        rs = None if ranks is None else tuple(sorted({int(r) for r in ranks
                                                      if 0 <= int(r) < self.num_ranks}))
        # a window past the trace's ends holds what the trace holds: one key for all such
        # (the whole run's is asked for by every page and kept for good)
        lo, hi = self.span
        t0, t1 = max(t0, lo), max(min(t1, hi + 1), max(t0, lo) + 1)
        key = (t0, t1, rs)
        whole = t0 == lo and t1 == hi + 1 and rs is None
        with self._lock:
            if whole and self._whole is not None:
                return self._whole
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        w = Window(self, t0, t1, rs)
        with self._lock:
            if whole:
                self._whole = w
                return w
            self._cache[key] = w
            while len(self._cache) > CACHED_WINDOWS:
                self._cache.popitem(last=False)
        return w


DENSE_KEYS = 1 << 22  # key spaces up to this are grouped by counting, not by sorting


def _dense(key: np.ndarray, space: float) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys sorted, group code of each row), as np.unique(return_inverse) gives
    them; by counting where the key space is small (linear, no sort of the rows)."""
    if space > DENSE_KEYS or not len(key):
        return np.unique(key, return_inverse=True)
    counts = np.bincount(key, minlength=int(space))
    uniq = np.flatnonzero(counts)
    code = np.zeros(len(counts), np.int64)
    code[uniq] = np.arange(len(uniq))
    return uniq.astype(np.int64), code[key]


def _group_stats(inv: np.ndarray, ngroups: int, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """(min, median, max) of `values` per group code `inv` (0..ngroups-1); NaN where a
    group is empty. Groups sorted by a counting sort (radix on narrow codes), then each
    group's median by selection (linear), not a full sort of the values."""
    mins = np.full(ngroups, np.nan)
    meds = np.full(ngroups, np.nan)
    maxs = np.full(ngroups, np.nan)
    if not len(inv):
        return mins, meds, maxs
    narrow = inv.astype(np.uint16) if ngroups < 65536 else inv
    order = np.argsort(narrow, kind="stable")
    v = values[order].astype(np.float64)
    counts = np.bincount(inv, minlength=ngroups)
    ends = np.cumsum(counts)
    starts = ends - counts
    has = np.flatnonzero(counts)
    mins[has] = np.minimum.reduceat(v, starts[has])
    maxs[has] = np.maximum.reduceat(v, starts[has])
    for g in has:  # one selection per group: groups are few (functions x keys shown)
        part = v[starts[g]:ends[g]]
        k = len(part)
        if k == 1:
            meds[g] = part[0]
            continue
        lo_k, hi_k = (k - 1) // 2, k // 2
        sel = np.partition(part, (lo_k, hi_k))
        meds[g] = (sel[lo_k] + sel[hi_k]) / 2
    return mins, meds, maxs


@dataclass
class _Atoms:
    """A window's calls grouped by all of KEYS at once ("atoms": usually a few thousand
    where the window has millions of calls): each atom's sums, and its calls' per-call
    values sorted within it, contiguous. Every profile groups atoms, never the calls
    again; its medians select from the concatenated runs of its groups' atoms."""

    keys: dict[str, np.ndarray]  # per atom: each key's code (int64)
    calls: np.ndarray  # float64 sums per atom: MPI calls, ns inside, waiting ns, bytes
    inside: np.ndarray
    wait: np.ndarray
    nbytes: np.ndarray
    first: np.ndarray  # atom's run in `values`: [first, first + count)
    count: np.ndarray
    values: np.ndarray  # per-call ns, atom by atom, ascending within an atom

    def __len__(self) -> int:
        return len(self.count)

    @classmethod
    def of(cls, w: Window) -> _Atoms:
        ix, pos = w.index, w.pos
        na = len(ix.atom_keys["rank"])
        atom = ix.atom[pos]
        count = np.bincount(atom, minlength=na)
        first = np.cumsum(count) - count
        # the window's calls by atom, by value within one: the trace's order kept to the
        # window's calls (linear in the trace) when the window holds much of it, else
        # the window's calls sorted (value, then a radix sort on narrow atom codes)
        if len(pos) * 4 > len(ix.atom):
            inside = np.zeros(len(ix.atom), bool)
            inside[pos] = True
            order = ix.by_atom[inside[ix.by_atom]]
            values = ix.per_call[order]
        else:
            v = ix.per_call[pos]
            by_value = np.argsort(v, kind="stable")
            narrow = atom.astype(np.uint16) if na <= 65536 else atom
            values = v[by_value[np.argsort(narrow[by_value], kind="stable")]]
        here = np.flatnonzero(count)  # the atoms this window holds

        def sums(weights: np.ndarray) -> np.ndarray:
            return np.bincount(atom, weights=weights, minlength=na)[here]

        return cls({k: v[here] for k, v in ix.atom_keys.items()}, sums(ix.n[pos]),
                   sums(w.inside), sums(w._wait_inside()), sums(ix.nbytes[pos]),
                   first[here], count[here], values.astype(np.float64))

    def group_stats(self, inv: np.ndarray, ng: int) -> tuple[np.ndarray, ...]:
        """(min, median, max) of the per-call values of each group of atoms (`inv`: the
        group of each atom); NaN where a group is empty."""
        mins = np.full(ng, np.nan)
        meds = np.full(ng, np.nan)
        maxs = np.full(ng, np.nan)
        has = self.count > 0
        if not has.any():
            return mins, meds, maxs
        v, first, count = self.values, self.first, self.count
        np.fmin.at(mins, inv[has], v[first[has]])
        np.fmax.at(maxs, inv[has], v[first[has] + count[has] - 1])
        gcount = np.bincount(inv, weights=count, minlength=ng).astype(np.int64)
        single = np.bincount(inv[has], minlength=ng) == 1
        # a group of one atom: its middle values, already in order
        one = np.flatnonzero(single)
        if len(one):
            atom_of = np.zeros(ng, np.int64)
            atom_of[inv[has]] = np.flatnonzero(has)
            a = atom_of[one]
            k = count[a]
            meds[one] = (v[first[a] + (k - 1) // 2] + v[first[a] + k // 2]) / 2
        many = np.flatnonzero(~single & (gcount > 0))
        if not len(many):
            return mins, meds, maxs
        # the runs of the atoms of the other groups, group by group, then one selection
        # per group (groups are few: what a table shows)
        sel = np.flatnonzero(np.isin(inv, many) & has)
        sel = sel[np.argsort(inv[sel], kind="stable")]
        lens = count[sel]
        starts = np.cumsum(lens) - lens
        idx = np.repeat(first[sel] - starts, lens) + np.arange(int(lens.sum()))
        vals = v[idx]
        g_at = inv[sel]
        g_end = np.cumsum(np.bincount(g_at, weights=lens, minlength=ng).astype(np.int64))
        g_start = g_end - gcount
        for g in many:
            part = vals[g_start[g]:g_end[g]]
            k = len(part)
            lo_k, hi_k = (k - 1) // 2, k // 2
            sel_v = np.partition(part, (lo_k, hi_k))
            meds[g] = (sel_v[lo_k] + sel_v[hi_k]) / 2
        return mins, meds, maxs


@dataclass(frozen=True)
class MessageRows:
    """Messages, a row each: what a window's message tables read. The tables are sums and
    order statistics, so the rows may come in any order (out of core: rank by rank)."""

    time: np.ndarray  # send time, ns
    send: np.ndarray
    recv: np.ndarray
    nbytes: np.ndarray
    transfer: np.ndarray  # ns (stats._transfer)
    comm: np.ndarray
    tag: np.ndarray

    def __len__(self) -> int:
        return len(self.time)

    def take(self, sel: np.ndarray) -> MessageRows:
        return MessageRows(*(getattr(self, f.name)[sel] for f in fields(self)))


def comm_matrix(m: MessageRows, num_ranks: int) -> pd.DataFrame:
    """send_rank, recv_rank, messages, bytes of the messages `m`, by sender then receiver
    (`num_ranks`: above every rank)."""
    nr = max(int(num_ranks), 1)
    pair = m.send.astype(np.int64) * nr + m.recv
    # by counting where the pairs are few, by sorting where N x N would not fit
    hit, inv = _dense(pair, float(nr) * nr)
    return pd.DataFrame({"send_rank": hit // nr, "recv_rank": hit % nr,
                         "messages": np.bincount(inv, minlength=len(hit)).astype(np.int64),
                         "bytes": np.bincount(inv, weights=m.nbytes,
                                              minlength=len(hit)).astype(np.int64)})


def message_sizes(m: MessageRows) -> pd.DataFrame:
    """stats.message_sizes' table of the messages `m`."""
    if not len(m):
        return pd.DataFrame(columns=stats.SIZE_COLUMNS)
    b, t = m.nbytes, m.transfer
    lo = stats._size_bucket(b)
    uniq, inv = np.unique(lo, return_inverse=True)
    ng = len(uniq)
    _, med_t, _ = _group_stats(inv, ng, t)
    _, med_rate, _ = _group_stats(inv, ng, b / t * 1e3)
    p90 = [float(np.quantile(t[inv == g], stats.TRANSFER_QUANTILE)) for g in range(ng)]
    df = pd.DataFrame({"bucket_lo": uniq, "bucket_hi": np.maximum(uniq * 2 - 1, 0),
                       "messages": np.bincount(inv, minlength=ng),
                       "bytes": np.bincount(inv, weights=b, minlength=ng).astype(np.int64),
                       "median_transfer_s": med_t / 1e9,
                       "p90_transfer_s": np.asarray(p90) / 1e9,
                       "bandwidth_MBps": med_rate})
    return df[stats.SIZE_COLUMNS]


def message_groups(m: MessageRows, by: tuple[str, ...], comm_names: dict[int, str]
                   ) -> tuple[pd.DataFrame, np.ndarray, dict[str, np.ndarray]]:
    """(the message profile of `m` by `by` (comm and/or tag) unsorted, the group of each
    message, each key's code per group)."""
    raw = {"comm": m.comm.astype(np.int64), "tag": m.tag.astype(np.int64)}
    key = np.zeros(len(m), np.int64)
    lows, radix = [], []
    for k in by:
        col = raw[k]
        lo = int(col.min()) if len(col) else 0
        r = int(col.max()) - lo + 1 if len(col) else 1
        key = key * r + (col - lo)
        lows.append(lo)
        radix.append(r)
    uniq, inv = _dense(key, float(np.prod(radix, dtype=np.float64)))
    ng = len(uniq)
    _, med, _ = _group_stats(inv, ng, m.transfer)
    out: dict[str, object] = {}
    rest = uniq.copy()
    for k, lo, r in reversed(list(zip(by, lows, radix, strict=True))):
        out[k] = rest % r + lo
        rest //= r
    codes = {k: out[k] for k in by}
    out = dict(codes)
    if "comm" in out:
        out["comm"] = [comm_names.get(int(i), f"comm {i}") for i in out["comm"]]
    df = pd.DataFrame({**out, "messages": np.bincount(inv, minlength=ng).astype(np.int64),
                       "bytes": np.bincount(inv, weights=m.nbytes,
                                            minlength=ng).astype(np.int64),
                       "median_transfer_s": med / 1e9})
    return df, inv, codes


MESSAGE_KEYS = ("comm", "tag")


def message_keys(by: Sequence[str]) -> tuple[str, ...]:
    """`by` checked: some of MESSAGE_KEYS."""
    by = tuple(by)
    if not by or any(k not in MESSAGE_KEYS for k in by):
        raise ValueError("message profile keys: comm, tag")
    return by


def sort_profile(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """A profile's rows in the order shown: largest time first, ties by the keys (a
    profile put together from per-rank parts is sorted the same way)."""
    return df.sort_values(["time_s", *df.columns[:len(by)]],
                          ascending=[False] + [True] * len(by), ignore_index=True)


def sort_message_profile(df: pd.DataFrame) -> pd.DataFrame:
    """A message profile's rows in the order shown: most bytes first."""
    return df.sort_values("bytes", ascending=False, ignore_index=True)


class Window:
    """The statistics of one window; each table computed on first use, then kept."""

    def __init__(self, index: WindowIndex, t0: int, t1: int,
                 ranks: tuple[int, ...] | None) -> None:
        self.index, self.t0, self.t1, self.ranks = index, t0, t1, ranks
        ix = index
        self.rank_mask = np.ones(ix.num_ranks, bool)
        if ranks is not None:
            self.rank_mask[:] = False
            self.rank_mask[list(ranks)] = True
        pos = ix.calls.overlapping(t0, t1)
        if ranks is not None:
            pos = pos[self.rank_mask[ix.rank[pos]]]
        self.pos = pos
        s, e = ix.calls.start[pos], ix.calls.end[pos]
        self.inside = np.minimum(e, t1) - np.maximum(s, t0)  # ns of each call in the window
        self._tables: dict[object, object] = {}
        self._lock = threading.RLock()  # a table may read another one (re-entrant)

    def _kept(self, key: object, make):
        with self._lock:
            if key not in self._tables:
                self._tables[key] = make()
            return self._tables[key]

    @property
    def seconds(self) -> float:
        return (self.t1 - self.t0) / 1e9

    # -- profiles ----------------------------------------------------------------------
    def profile(self, by: Sequence[str] = ("function",)) -> pd.DataFrame:
        """The MPI calls in the window grouped by `by` (of KEYS): the key columns (function
        names as `name` for `("function",)` alone, the functions table's column), calls,
        time_s (inside the window), mean_s (time per call), min_s, median_s, max_s (whole
        calls), wait_s (waiting inside the window), bytes. Largest time first."""
        by = tuple(by)
        if not by or any(k not in KEYS for k in by):
            raise ValueError(f"profile keys must be some of {KEYS}")
        return self._kept(("profile", by), lambda: self._profile(by))

    def _atoms(self) -> _Atoms:
        """The window's calls grouped once by every key at once (kept: each profile
        merges these groups instead of grouping the calls again)."""
        return self._kept("atoms", lambda: _Atoms.of(self))

    def _profile(self, by: tuple[str, ...]) -> pd.DataFrame:
        return sort_profile(self._grouped(by)[0], by)

    def profile_runs(self, by: Sequence[str]) -> tuple[pd.DataFrame, orderstats.Groups]:
        """What merging the profiles of parts of a trace (its ranks) needs: the profile
        by `by` unsorted (row g is group g; with `comm` also `comm_id`, the
        communicator's id: two may share a name) and each group's per-call values (ns),
        ascending (key g), for the medians across the parts (orderstats)."""
        by = tuple(by)
        if not by or any(k not in KEYS for k in by):
            raise ValueError(f"profile keys must be some of {KEYS}")
        df, inv, decoded, at = self._grouped(by)
        if "comm" in by:
            df.insert(by.index("comm") + 1, "comm_id", decoded[by.index("comm")])
        return df, orderstats.Groups.of(np.repeat(inv, at.count), at.values)

    def _grouped(self, by: tuple[str, ...]
                 ) -> tuple[pd.DataFrame, np.ndarray, list[np.ndarray], _Atoms]:
        """(the profile unsorted, the group of each atom, each key's code per group,
        the atoms)."""
        ix, at = self.index, self._atoms()
        cols = [at.keys[k] for k in by]
        # one integer key per group (mixed radix of the columns' codes, offset to >= 0)
        key = np.zeros(len(at), np.int64)
        lows, radix = [], []
        for col in cols:
            lo = int(col.min()) if len(col) else 0
            r = (int(col.max()) - lo + 1) if len(col) else 1
            key = key * r + (col - lo)
            lows.append(lo)
            radix.append(r)
        uniq, inv = np.unique(key, return_inverse=True)  # atoms are few: sorting is cheap
        ng = len(uniq)
        calls = np.bincount(inv, weights=at.calls, minlength=ng).astype(np.int64)
        time_ns = np.bincount(inv, weights=at.inside, minlength=ng)
        wait_ns = np.bincount(inv, weights=at.wait, minlength=ng)
        nbytes = np.bincount(inv, weights=at.nbytes, minlength=ng).astype(np.int64)
        mn, md, mx = at.group_stats(inv, ng)
        out: dict[str, object] = {}
        rest = uniq.copy()
        decoded = []
        for lo, r in zip(reversed(lows), reversed(radix), strict=True):
            decoded.append(rest % r + lo)
            rest //= r
        decoded.reverse()
        for k, codes in zip(by, decoded, strict=True):
            if k == "function":
                out["name" if by == ("function",) else "function"] = \
                    [ix.functions[i] for i in codes]
            elif k == "callsite":
                out["callsite"] = [ix.callsites[i] for i in codes]
            elif k == "comm":
                out["comm"] = [ix.comm_names.get(int(i), "-" if i < 0 else f"comm {i}")
                               for i in codes]
            else:
                out[k] = codes.astype(np.int64)
        df = pd.DataFrame({**out, "calls": calls, "time_s": time_ns / 1e9,
                           "mean_s": time_ns / np.maximum(calls, 1) / 1e9, "min_s": mn / 1e9,
                           "median_s": md / 1e9, "max_s": mx / 1e9, "wait_s": wait_ns / 1e9,
                           "bytes": nbytes})
        return df, inv, decoded, at

    def call_tree(self, paths: CallPaths) -> calltree.CallTree:
        """The window's call tree (analysis.calltree), metric × call path × rank."""
        return self._kept(("calltree", id(paths)), lambda: calltree.build(
            self.profile(calltree.BY), paths, self.index.num_ranks))

    def functions(self) -> pd.DataFrame:
        """The functions table of the window (profile by function)."""
        return self.profile(("function",))

    def durations(self, function: str) -> tuple[np.ndarray, np.ndarray]:
        """(ns per MPI call, MPI calls) of each of the window's calls of `function`, as
        the profiles count them: whole calls, a merged polling visit once at its mean per
        call, weighing its `polls` (the weights sum to the functions table's `calls`)."""
        ix = self.index
        try:
            code = ix.functions.index(function)
        except ValueError:  # not a function of this trace
            return np.empty(0), np.empty(0, np.int64)
        sel = self.pos[ix.fcode[self.pos] == code]
        return ix.per_call[sel].astype(np.float64), ix.n[sel].astype(np.int64)

    def _wait_inside(self) -> np.ndarray:
        """Each call's waiting (at its start) inside the window; kept: every table reads it."""
        return self._kept("wait_inside", self._wait_in)

    def _wait_in(self) -> np.ndarray:
        ix, pos = self.index, self.pos
        s = ix.calls.start[pos]
        return np.maximum(np.minimum(s + ix.wait[pos], self.t1) - np.maximum(s, self.t0), 0)

    # -- breakdown and wait states ----------------------------------------------------------
    def breakdown(self) -> pd.DataFrame:
        """The per-rank breakdown of the window (breakdown.per_rank's columns) for the
        ranks in the set."""
        return self._kept("breakdown", self._breakdown)

    def _breakdown(self) -> pd.DataFrame:
        ix = self.index
        ranks = np.flatnonzero(self.rank_mask)
        lo = np.maximum(ix.iv_begin, self.t0)
        hi = np.maximum(np.minimum(ix.iv_end, self.t1), lo)
        pos = self.pos[ix.measured[self.pos]]
        r = ix.rank[pos]
        s0, e0 = ix.calls.start[pos], ix.calls.end[pos]
        s = np.clip(s0, lo[r], hi[r])
        e = np.clip(e0, lo[r], hi[r])
        mpi = e - s
        sync = np.maximum(np.minimum(s0 + ix.sync[pos], hi[r]) - s, 0)
        io = np.where(ix.io[pos], mpi, 0)
        nr = ix.num_ranks
        sums = pd.DataFrame({
            "begin": lo[ranks], "end": hi[ranks],
            "mpi": np.bincount(r, weights=mpi, minlength=nr)[ranks].astype(np.int64),
            "sync": np.bincount(r, weights=sync, minlength=nr)[ranks].astype(np.int64),
            "io": np.bincount(r, weights=io, minlength=nr)[ranks].astype(np.int64)},
            index=pd.Index(ranks, name="rank"))
        return breakdown.ranks_frame(sums, ix.hosts)

    def wait_states(self) -> pd.DataFrame:
        """Per rank in the set: seconds of each wait-state kind inside the window
        (waitstates.KINDS; a fence's waiting also counts as N×N, as in the totals)."""
        return self._kept("waits", self._waits)

    def _waits(self) -> pd.DataFrame:
        ix, pos = self.index, self.pos
        w = self._wait_inside()
        k = ix.wkind[pos].astype(np.int64)
        ok = (k >= 0) & (w > 0)
        nk = len(waitstates.KINDS)
        nr = ix.num_ranks
        grid = np.bincount(ix.rank[pos][ok].astype(np.int64) * nk + k[ok], weights=w[ok],
                           minlength=nr * nk).reshape(nr, nk)
        ranks = np.flatnonzero(self.rank_mask)
        df = pd.DataFrame(grid[ranks].astype(np.int64), columns=list(waitstates.KINDS),
                          index=pd.Index(ranks, name="rank"))
        return waitstates.per_rank_of(df).reset_index()

    def wait_totals(self) -> dict[str, float]:
        """Seconds per wait-state kind in the window, summed over the rank set."""
        df = self.wait_states()
        return {k: float(df[k].sum()) for k in waitstates.KINDS}

    # -- messages ------------------------------------------------------------------------
    def _sent_range(self) -> tuple[int, int]:
        """The messages sent in [t0, t1): a range of the index's (sorted by send time)."""
        ix = self.index
        return (int(np.searchsorted(ix.m_time, self.t0, side="left")),
                int(np.searchsorted(ix.m_time, self.t1, side="left")))

    def _messages(self) -> np.ndarray:
        ix = self.index
        sel = np.arange(*self._sent_range(), dtype=np.int64)
        if self.ranks is not None:
            sel = sel[self.rank_mask[ix.m_send[sel]] | self.rank_mask[ix.m_recv[sel]]]
        return sel

    def message_rows(self) -> MessageRows:
        """The messages of the window: sent inside it, their sender or receiver in the
        rank set."""
        return self._kept("mrows", self._message_rows)

    def _message_rows(self) -> MessageRows:
        ix = self.index
        a, b = self._sent_range()
        if self.ranks is None:  # a range: views of the index's arrays (the whole run's
            # window is kept for good; a copy would double the messages' memory)
            return MessageRows(*(getattr(ix.message_rows(), f.name)[a:b]
                                 for f in fields(MessageRows)))
        return ix.message_rows().take(self._messages())

    def comm_matrix(self) -> pd.DataFrame:
        """send_rank, recv_rank, messages, bytes of the messages sent in the window."""
        return self._kept("matrix", lambda: comm_matrix(self.message_rows(),
                                                        self.index.num_ranks))

    def message_sizes(self) -> pd.DataFrame:
        """stats.message_sizes' table of the messages sent in the window."""
        return self._kept("sizes", lambda: message_sizes(self.message_rows()))

    def message_profile(self, by: Sequence[str] = MESSAGE_KEYS) -> pd.DataFrame:
        """Messages sent in the window per communicator and/or tag: messages, bytes,
        median transfer (s)."""
        by = message_keys(by)
        return self._kept(("mprofile", by), lambda: sort_message_profile(message_groups(
            self.message_rows(), by, self.index.comm_names)[0]))

    def message_profile_runs(self, by: Sequence[str] = MESSAGE_KEYS
                             ) -> tuple[pd.DataFrame, orderstats.Groups]:
        """As `profile_runs`, for `message_profile`: the profile unsorted (row g is group
        g; with `comm` also `comm_id`) and each group's transfer times (ns), ascending."""
        by = message_keys(by)
        m = self.message_rows()
        df, inv, codes = message_groups(m, by, self.index.comm_names)
        if "comm" in by:
            df.insert(by.index("comm") + 1, "comm_id", codes["comm"])
        return df, orderstats.Groups.of(inv, m.transfer.astype(np.float64))

    # -- user regions --------------------------------------------------------------------
    def regions(self, by_rank: bool = False) -> pd.DataFrame:
        """User regions in the window (Score-P traces): name (and rank), calls,
        inclusive_s, exclusive_s (inside the window), min/median/max of the whole
        regions' inclusive time. Empty for a trace without user regions."""
        return self._kept(("regions", by_rank), lambda: self._regions(by_rank))

    def _regions(self, by_rank: bool) -> pd.DataFrame:
        ix = self.index
        cols = ["name", "calls", "inclusive_s", "exclusive_s", "min_s", "median_s", "max_s"]
        if by_rank:
            cols.insert(1, "rank")
        if not len(ix.r_rank):
            return pd.DataFrame(columns=cols)
        pos = ix.regions.overlapping(self.t0, self.t1)
        pos = pos[self.rank_mask[ix.r_rank[pos]]]
        s, e = ix.regions.start[pos], ix.regions.end[pos]
        incl = (np.minimum(e, self.t1) - np.maximum(s, self.t0)).astype(np.float64)
        # exclusive: minus what the children (regions and outermost MPI calls) spend
        # inside the window; a child in the window has its parent in it too
        excl_by_pos = np.zeros(len(ix.r_rank))
        excl_by_pos[pos] = incl
        par = ix.r_parent[pos]
        has = par >= 0
        np.subtract.at(excl_by_pos, par[has], incl[has])
        cpar = ix.mpi_parent[self.pos]
        has = cpar >= 0
        np.subtract.at(excl_by_pos, cpar[has], self.inside[has].astype(np.float64))
        excl = excl_by_pos[pos]
        key = ix.r_fcode[pos].astype(np.int64)
        if by_rank:
            key = key * ix.num_ranks + ix.r_rank[pos]
        uniq, inv = np.unique(key, return_inverse=True)
        ng = len(uniq)
        mn, md, mx = _group_stats(inv, ng, (e - s).astype(np.float64))
        out: dict[str, object] = {}
        fc = uniq // ix.num_ranks if by_rank else uniq
        out["name"] = [ix.r_names[int(i)] for i in fc]
        if by_rank:
            out["rank"] = uniq % ix.num_ranks
        df = pd.DataFrame({**out, "calls": np.bincount(inv, minlength=ng),
                           "inclusive_s": np.bincount(inv, weights=incl, minlength=ng) / 1e9,
                           "exclusive_s": np.bincount(inv, weights=excl, minlength=ng) / 1e9,
                           "min_s": mn / 1e9, "median_s": md / 1e9, "max_s": mx / 1e9})
        return df.sort_values("inclusive_s", ascending=False, ignore_index=True)[cols]
