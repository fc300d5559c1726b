"""The run's critical path across ranks (Scalasca's definition).

Walk backwards from the rank that finishes last. Within a rank the path runs through its
compute bursts and MPI calls; at a call that waited for a partner (the wait states of
`waitstates`) it jumps to that partner at the moment the partner released it: a late
sender at its send's Enter, a late receiver at its receive's Enter, a barrier or N×N
collective at the last rank to arrive, a late broadcast at its root, an early reduce at
the last contributor. The rank's time from there up to the end of the waiting call is on
the path, its waiting is not. Where a rank has no earlier call, the path runs back
through its first compute burst to its start and, if another rank started earlier,
through its MPI_Init: the path covers the run from the first rank's start to the last
rank's end without gap or overlap, so its length is the run's length by construction.

Times are the clock-skew corrected ones the wait states use (the trace's own times when
no message travelled backwards). Only outermost MPI calls count, within each rank's
measured interval (end of MPI_Init .. start of MPI_Finalize).

The walk itself is sequential but steps from one waiting call to the previous one on a
rank (bisect on the call starts), so it loops once per rank switch; the path's pieces
(bursts and calls) are then cut out of the ranks' timelines with numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope.analysis import breakdown
from mpiscope.analysis.order import by_rank_then_start
from mpiscope.analysis.waitstates import KIND, WaitStates
from mpiscope.archive.trace import Trace

COMPUTE = "compute"
STARTUP = "MPI_Init"  # a rank's time before its MPI_Init returned
KINDS = ("startup", "compute", "mpi")  # codes of a segment's `kind`


@dataclass
class CriticalPath:
    """The path as time-ordered segments; `begin_ns`..`end_ns` is the run."""

    begin_ns: int
    end_ns: int
    # rank, start, end (ns), kind (startup/compute/mpi), function, callsite, call: for an
    # MPI call its function, call site and row id; for a compute burst "compute" and the
    # function and call site of the call that ends it (MPI_Finalize for the last burst),
    # call -1
    segments: pd.DataFrame
    num_ranks: int

    @property
    def length_ns(self) -> int:
        return self.end_ns - self.begin_ns

    @property
    def rank_switches(self) -> int:
        r = self.segments["rank"].to_numpy()
        return int((r[1:] != r[:-1]).sum())

    def profile(self) -> pd.DataFrame:
        """Time on the path per function and call site (largest first): `name` (MPI
        function, "compute" or MPI_Init), `callsite`, `before` (for compute: the function
        ending the burst, whose call site `callsite` is), `time_s`, `share`."""
        s = self.segments
        fn, fnames = _segment_codes(s["function"])
        cs, cnames = _segment_codes(s["callsite"])
        comp = s["kind"].cat.codes.to_numpy() == KINDS.index("compute")
        # grouped by codes, named after: millions of segments, a few hundred sites
        d = pd.DataFrame({"name": np.where(comp, -1, fn), "callsite": cs,
                          "before": np.where(comp, fn, -1),
                          "ns": (s["end"] - s["start"]).to_numpy()})
        g = d.groupby(["name", "callsite", "before"], sort=False)["ns"].sum().reset_index()
        names = np.append(fnames, "")  # code -1: the compute row's name / no `before`
        g["before"] = names[g["before"].to_numpy()]
        g["name"] = np.where(g["name"].to_numpy() < 0, COMPUTE, names[g["name"].to_numpy()])
        g["callsite"] = np.append(cnames, "")[g["callsite"].to_numpy()]
        g = g.sort_values(["ns", "name", "callsite"], ascending=[False, True, True],
                          kind="stable")
        return pd.DataFrame({"name": g["name"], "callsite": g["callsite"],
                             "before": g["before"], "time_s": g["ns"] / 1e9,
                             "share": g["ns"] / max(self.length_ns, 1)}).reset_index(drop=True)

    def per_rank(self) -> pd.DataFrame:
        """Per rank: `time_s` on the path, its `share`, and the compute and MPI parts
        (MPI_Init before the rank started counts as MPI)."""
        s = self.segments
        ns = (s["end"] - s["start"]).to_numpy()
        comp = np.where(s["kind"] == "compute", ns, 0)
        ranks = np.arange(self.num_ranks)
        rk = s["rank"].to_numpy()
        total = np.bincount(rk, weights=ns, minlength=self.num_ranks)
        compute = np.bincount(rk, weights=comp, minlength=self.num_ranks)
        return pd.DataFrame({"rank": ranks, "time_s": total / 1e9,
                             "share": total / max(self.length_ns, 1),
                             "compute_s": compute / 1e9, "mpi_s": (total - compute) / 1e9})

    def time_on(self, function: str, callsite: str, *, with_bursts: bool = False) -> float:
        """Seconds of the path inside calls of `function` at `callsite`, plus (with
        `with_bursts`) the compute bursts that end at such a call: the work a late rank
        did before it, which balancing would shorten."""
        s = self.segments
        fn, fnames = _segment_codes(s["function"])
        cs, cnames = _segment_codes(s["callsite"])
        f = np.flatnonzero(fnames == function)
        c = np.flatnonzero(cnames == callsite)
        if not len(f) or not len(c):
            return 0.0
        here = (fn == f[0]) & (cs == c[0])
        kind = s["kind"].cat.codes.to_numpy()
        keep = here & ((kind == KINDS.index("mpi")) |
                       (with_bursts & (kind == KINDS.index("compute"))))
        return float((s["end"].to_numpy()[keep] - s["start"].to_numpy()[keep]).sum() / 1e9)

    def to_dict(self, top: int | None = None) -> dict:
        """The contract's `critical_path`: length, the profile (`functions`), per rank."""
        prof = self.profile()
        if top is not None:
            prof = prof.head(top)
        rows = [{"name": r.name, "callsite": r.callsite, "time_s": float(r.time_s),
                 "share": float(r.share), **({"before": r.before} if r.before else {})}
                for r in prof.itertuples()]
        pr = self.per_rank()
        return {
            "length_s": self.length_ns / 1e9,
            "begin_s": self.begin_ns / 1e9, "end_s": self.end_ns / 1e9,
            "segments": int(len(self.segments)), "rank_switches": self.rank_switches,
            "compute_s": float(pr["compute_s"].sum()), "mpi_s": float(pr["mpi_s"].sum()),
            "functions": rows,
            "per_rank": [{"rank": int(r.rank), "time_s": float(r.time_s),
                          "share": float(r.share), "compute_s": float(r.compute_s),
                          "mpi_s": float(r.mpi_s)} for r in pr.itertuples()],
        }


def _segment_codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A segments column of names as (codes, names as str): comparisons and groupings
    on the codes (the column is categorical: `assemble`)."""
    c = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    return c.cat.codes.to_numpy(), np.asarray(c.cat.categories.astype(str), dtype=object)


def _latest(group: np.ndarray, time: np.ndarray, value: np.ndarray,
            size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group id (0..size-1): `value` and `time` of its row with the latest `time`
    (-1 where the group has no row)."""
    val = np.full(size, -1, dtype=np.int64)
    at = np.full(size, -1, dtype=np.int64)
    if len(group):
        order = np.lexsort((time, group))
        g = group[order]
        last = np.r_[g[1:] != g[:-1], True]
        val[g[last]] = value[order][last]
        at[g[last]] = time[order][last]
    return val, at


def arrivals(inst: np.ndarray, start: np.ndarray,
             rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per collective instance (sorted ids): the latest entry and the rank that made it
    (ties: the higher rank, then the later row). An associative reduction: applied to the
    results of parts (each rank's rows, in rank order) it gives the result of the whole,
    which is how the Dask engine finds last arrivers rank by rank."""
    inst = np.asarray(inst, dtype=np.int64)
    if not len(inst):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    order = np.lexsort((rank, start, inst))
    i = inst[order]
    last = np.r_[i[1:] != i[:-1], True]
    return i[last], np.asarray(start)[order][last], np.asarray(rank, np.int64)[order][last]


def lookup(ids: np.ndarray, values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """`values` of `keys` in sorted `ids` (-1 where a key is not among them)."""
    pos = np.clip(np.searchsorted(ids, keys), 0, max(len(ids) - 1, 0))
    if not len(ids):
        return np.full(len(keys), -1, dtype=np.int64)
    return np.where(ids[pos] == keys, values[pos], -1)


def last_arrivers(coll: pd.DataFrame, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per collective row: the last rank to enter its instance and the last non-root one
    (-1: none), on corrected starts."""
    rank = coll["rank"].to_numpy().astype(np.int64)
    inst = coll["instance"].to_numpy().astype(np.int64)
    start = coll["start"].to_numpy() + off[rank]
    nonroot = rank != coll["root"].to_numpy()
    ids, _, last = arrivals(inst, start, rank)
    ids_nr, _, last_nr = arrivals(inst[nonroot], start[nonroot], rank[nonroot])
    return lookup(ids, last, inst), lookup(ids_nr, last_nr, inst)


def partners(n: int, offset: int, waits: pd.DataFrame, received: pd.DataFrame,
             sent: pd.DataFrame, coll: pd.DataFrame, last: np.ndarray,
             last_nonroot: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Per call of ids `offset` .. `offset + n - 1` (one rank's, or the whole trace's with
    offset 0): the rank that released it from its waiting (-1: it did not wait), by the
    kind of its wait state. `waits`: wait_ns, wait_kind of these calls; `received` /
    `sent`: the messages they may complete as receiver / sender; `coll`: their collective
    rows with `last` / `last_nonroot` (`last_arrivers`) aligned."""
    code = waits["wait_kind"].cat.codes.to_numpy()
    waited = waits["wait_ns"].to_numpy() > 0
    partner = np.full(n, -1, dtype=np.int64)
    if len(received):
        rc = received["recv_complete_call"].to_numpy() - offset
        send_rank = received["send_rank"].to_numpy()
        ls = waited & (code == KIND["late_sender"])
        ok = (rc >= 0) & (rc < n)
        ok[ok] = ls[rc[ok]]  # only the late senders' receives are asked for
        # a receive waits for the latest of the senders it completes
        sender, _ = _latest(rc[ok], received["send_enter"].to_numpy()[ok]
                            + off[send_rank[ok]], send_rank[ok], n)
        partner[ls] = sender[ls]
    if len(sent):
        sc = sent["send_complete_call"].to_numpy() - offset
        recv_rank = sent["recv_rank"].to_numpy()
        lr = waited & (code == KIND["late_receiver"])
        ok = (sc >= 0) & (sc < n)
        ok[ok] = lr[sc[ok]]
        receiver, _ = _latest(sc[ok], sent["recv_enter"].to_numpy()[ok]
                              + off[recv_rank[ok]], recv_rank[ok], n)
        partner[lr] = receiver[lr]
    if len(coll):
        root = coll["root"].to_numpy()
        c = coll["call"].to_numpy() - offset
        kc = code[c]
        who = np.select(
            [(kc == KIND["wait_at_barrier"]) | (kc == KIND["wait_at_nxn"]),
             kc == KIND["late_broadcast"], kc == KIND["early_reduce"]],
            [last, root.astype(np.int64), last_nonroot], -1)
        partner[c] = np.where(kc >= KIND["wait_at_barrier"], who, partner[c])
    partner[~waited] = -1
    return partner


@dataclass
class _Timeline:
    """Every rank's outermost MPI calls (measured interval, corrected times), sorted by
    rank and start; `lo[r]:hi[r]` are rank r's rows."""

    call: np.ndarray
    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    begin: np.ndarray  # per rank: measured interval
    finish: np.ndarray


def _timeline(trace: Trace, off: np.ndarray, nranks: int) -> _Timeline:
    """The timeline of the trace's ranks (on one rank's slice: of that rank, the others
    have no rows and their begin/finish mean nothing)."""
    iv = breakdown.intervals(trace)
    begin = np.zeros(nranks, dtype=np.int64)
    finish = np.zeros(nranks, dtype=np.int64)
    r = iv["rank"].to_numpy()
    begin[r] = iv["begin"].to_numpy() + off[r]
    finish[r] = iv["end"].to_numpy() + off[r]
    c = trace.calls
    keep = ((c["depth"] == 0) & ~c["kind"].isin(["init", "finalize"])).to_numpy()
    rank = c["rank"].to_numpy()[keep].astype(np.int64)
    start = c["start"].to_numpy()[keep] + off[rank]
    end = c["end"].to_numpy()[keep] + off[rank]
    inside = (start >= begin[rank]) & (start <= finish[rank])
    call = c["call"].to_numpy()[keep][inside]
    rank, start, end = rank[inside], start[inside], np.minimum(end[inside], finish[rank[inside]])
    by = by_rank_then_start(rank, start)
    if by is not None:
        rank, start, end, call = rank[by], start[by], end[by], call[by]
    lo = np.searchsorted(rank, np.arange(nranks), "left")
    hi = np.searchsorted(rank, np.arange(nranks), "right")
    return _Timeline(call, rank, start, np.maximum(end, start), lo, hi, begin, finish)


# a rank's timeline rows as the walk reads them (one array; the Dask engine memory-maps
# it from a file): call id, corrected start/end, where the walk jumps at the call (rank,
# time; -1: it did not wait), `prev` the row of the previous waiting call at or before
# this one (-1: none), codes of the call's function and call site
ROW = np.dtype([("call", "i8"), ("start", "i8"), ("end", "i8"), ("jump_to", "i8"),
                ("jump_at", "i8"), ("prev", "i8"), ("fn", "i4"), ("cs", "i4")])


@dataclass
class RankTimeline:
    """One rank's share of the walk and of the path's labels."""

    rank: int
    begin: int  # measured interval (corrected)
    finish: int
    count: int  # timeline rows
    rows: np.ndarray | None  # ROW records by start (None: not loaded)
    fn_names: np.ndarray  # str of the function / call site of each code
    cs_names: np.ndarray
    # (call id, function, callsite) of the rank's first MPI_Init / MPI_Finalize call
    # (call -1: none)
    init: tuple[int, object, object]
    final: tuple[int, object, object]


@dataclass
class _Names:
    """Per call row of a calls table: codes of its function and call site, the names
    they stand for (as `str` of the value), and per rank its first init / finalize call."""

    fn: np.ndarray
    fn_names: np.ndarray
    cs: np.ndarray
    cs_names: np.ndarray
    init: dict[int, tuple[int, object, object]]
    final: dict[int, tuple[int, object, object]]


def _codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    # factorize numbers the values in order of appearance: a value's first row is where
    # the running maximum of the codes grows (no sort of the whole column)
    codes, _ = pd.factorize(col, use_na_sentinel=False)
    first = np.flatnonzero(np.r_[True, codes[1:] > np.maximum.accumulate(codes)[:-1]]) \
        if len(codes) else np.zeros(0, np.int64)
    # strings of the distinct values only: strings of a million-call table cost seconds
    return codes.astype(np.int32), col.take(first).astype(str).to_numpy()


def _names(calls: pd.DataFrame) -> _Names:
    fn, fn_names = _codes(calls["function"])
    cs, cs_names = _codes(calls["callsite"])
    kind = calls["kind"].to_numpy()
    ends: list[dict[int, tuple[int, object, object]]] = []
    for k in ("init", "finalize"):
        rows = np.flatnonzero(kind == k)
        rk = calls["rank"].to_numpy()[rows]
        _, first = np.unique(rk, return_index=True)  # a rank's first such call
        rows = rows[first]
        ends.append({int(r): (int(c), fn_names[fn[i]], cs_names[cs[i]]) for r, c, i in zip(
            rk[first], calls["call"].to_numpy()[rows], rows, strict=True)})
    return _Names(fn, fn_names, cs, cs_names, ends[0], ends[1])


def _rank_timeline(tl: _Timeline, r: int, partner: np.ndarray, wait: np.ndarray,
                   names: _Names, offset: int) -> RankTimeline:
    """Rank r's rows of `tl`; `partner`, `wait` and `names` are per call of ids
    offset.. (the whole trace's with offset 0, or one rank's)."""
    sl = slice(int(tl.lo[r]), int(tl.hi[r]))
    call = tl.call[sl]
    local = call - offset
    rows = np.empty(len(call), dtype=ROW)
    rows["call"], rows["start"], rows["end"] = call, tl.start[sl], tl.end[sl]
    rows["jump_to"] = partner[local]
    rows["jump_at"] = tl.start[sl] + wait[local]
    idx = np.where(rows["jump_to"] >= 0, np.arange(len(call)), -1)
    rows["prev"] = np.maximum.accumulate(idx) if len(idx) else idx
    rows["fn"], rows["cs"] = names.fn[local], names.cs[local]
    none = (-1, "", "")
    return RankTimeline(r, int(tl.begin[r]), int(tl.finish[r]), len(call), rows,
                        names.fn_names, names.cs_names, names.init.get(r, none),
                        names.final.get(r, none))


def num_ranks(trace: Trace) -> int:
    return max(int(trace.num_ranks), int(trace.ranks["rank"].max()) + 1 if len(trace.ranks)
               else 0, 1)


def offsets(skew_offsets: dict[int, int], nranks: int) -> np.ndarray:
    off = np.zeros(nranks, dtype=np.int64)
    for r, o in skew_offsets.items():
        off[r] = o
    return off


def _walk(timeline: Callable[[int], RankTimeline], first: int, t_end: int,
          run_begin: int) -> list[tuple[int, int, int]]:
    """The path backwards as stretches (rank, from, to) of consecutive time on one rank.

    `timeline(r)` gives rank r's rows; the walk steps from one waiting call of a rank to
    the previous one (binary search on the call starts) and jumps to the rank and time
    that released it, so it loops once per rank switch and reads only the ranks it
    visits."""
    limit: dict[int, int] = {}  # rows not yet passed per rank: each rank is walked back once
    r, t = first, t_end
    stretches = []
    while True:
        rows = timeline(r).rows
        assert rows is not None
        lim = limit.get(r, len(rows))
        i = int(np.searchsorted(rows["start"][:lim], t, "left")) - 1
        j = int(rows["prev"][i]) if i >= 0 else -1
        if j < 0:  # no earlier wait on this rank: back to its start (and MPI_Init)
            stretches.append((r, run_begin, t))
            return stretches
        tj = min(int(rows["jump_at"][j]), t)
        stretches.append((r, tj, t))
        limit[r] = j
        r, t = int(rows["jump_to"][j]), tj


def _pieces(rt: RankTimeline, run_begin: int) -> tuple[np.ndarray, ...]:
    """The rank's time cut into pieces: MPI_Init before its start, then alternately a
    compute burst and a call, the last burst up to its end. Returns per piece its
    boundaries `edge` (piece k = edge[k] .. edge[k + 1]), `kind` code and `row` (timeline
    row of the call, or of the call ending the burst; -1: none; -2: the rank's end)."""
    rows = rt.rows
    assert rows is not None
    n = len(rows)
    edge = np.empty(2 * n + 3, dtype=np.int64)  # run begin, rank begin, s0, e0, ..., end
    kind = np.full(len(edge), KINDS.index("compute"), dtype=np.int8)
    row = np.full(len(edge), -2, dtype=np.int64)
    edge[0], edge[1], edge[-1] = run_begin, rt.begin, rt.finish
    kind[0], row[0] = KINDS.index("startup"), -1
    pos = 2 + 2 * np.arange(n)
    edge[pos], edge[pos + 1] = rows["start"], rows["end"]
    kind[pos] = KINDS.index("mpi")
    row[pos] = np.arange(n)
    row[pos - 1] = np.arange(n)  # the burst before a call ends at that call
    # calls never overlap, but clipped ends may: keep edges in order
    np.maximum.accumulate(edge, out=edge)
    return edge, kind, row


def _rank_segments(rt: RankTimeline, s_from: np.ndarray, s_to: np.ndarray,
                   run_begin: int) -> dict[str, np.ndarray]:
    """The labelled segments of stretches (s_from..s_to) on one rank, with `stretch`
    (index into the arrays given) and `piece` to order them as the walk found them."""
    edge, kind, row = _pieces(rt, run_begin)
    npieces = len(edge) - 1
    # pieces of each stretch: the first piece holding `from` to the last holding `to`
    first_p = np.clip(np.searchsorted(edge, s_from, "right") - 1, 0, npieces - 1)
    last_p = np.clip(np.searchsorted(edge, s_to, "left") - 1, 0, npieces - 1)
    count = np.maximum(last_p - first_p + 1, 0)
    which = np.repeat(np.arange(len(s_from)), count)
    piece = np.repeat(first_p, count) + (np.arange(count.sum()) - np.repeat(
        np.cumsum(count) - count, count))
    start = np.maximum(edge[piece], s_from[which])
    end = np.minimum(edge[piece + 1], s_to[which])
    ok = end > start
    piece, start, end, which = piece[ok], start[ok], end[ok], which[ok]
    k, rw = kind[piece], row[piece]
    # labels: for a burst the call ending it; MPI_Init and MPI_Finalize at the rank's ends.
    # As codes into the rank's names and four more (strings for millions of segments
    # cost seconds): its init and finalize names, the start-up label, none
    rows = rt.rows
    assert rows is not None
    # the three fields read, not whole records gathered (56 bytes each, per segment)
    at_row = np.maximum(rw, 0) if len(rows) else None

    def field(name: str) -> np.ndarray:
        return rows[name][at_row] if at_row is not None else np.zeros(len(rw), ROW[name])

    call = np.where(rw >= 0, field("call"), -1)
    init_call, init_fn, init_cs = rt.init
    final_call, final_fn, final_cs = rt.final
    end_call = np.where(rw == -1, init_call, final_call)
    labelled = (rw >= 0) | (end_call >= 0)

    def label(codes: np.ndarray, names: np.ndarray, init: object, final: object,
              startup: str) -> tuple[np.ndarray, np.ndarray]:
        n = len(names)
        end = np.where(rw == -1, n, n + 1)
        code = np.where(labelled, np.where(rw >= 0, codes, end),
                        np.where(rw == -1, n + 2, n + 3))
        table = np.empty(n + 4, dtype=object)
        table[:n] = names
        table[n:] = [init, final, startup, ""]
        return code.astype(np.int32), table

    fn, fn_table = label(field("fn"), rt.fn_names, init_fn, final_fn, STARTUP)
    cs, cs_table = label(field("cs"), rt.cs_names, init_cs, final_cs, "")
    return {"rank": np.full(len(start), rt.rank, dtype=np.int32), "start": start,
            "end": end, "kind": k, "function": fn, "callsite": cs,
            "call": np.where(k == KINDS.index("mpi"), call, -1), "stretch": which,
            "piece": piece, "function_names": fn_table, "callsite_names": cs_table}


def _labels(parts: list[dict[str, np.ndarray]], col: str, order: np.ndarray
            ) -> pd.Categorical:
    """The parts' `col` codes (each into its own name table) in `order`, as one
    categorical of the names used, sorted (as pd.Categorical of the strings gives)."""
    if not parts:
        return pd.Categorical(np.empty(0, object))
    tables = [p[f"{col}_names"] for p in parts]
    shift = np.cumsum([0] + [len(t) for t in tables[:-1]])
    codes = np.concatenate([p.pop(col) + np.int32(o)
                            for p, o in zip(parts, shift, strict=True)])[order]
    names = np.concatenate(tables).astype(str)
    used = np.flatnonzero(np.bincount(codes, minlength=len(names)))
    cats, inv = np.unique(names[used], return_inverse=True)
    lookup = np.zeros(len(names), np.int32)
    lookup[used] = inv
    return pd.Categorical.from_codes(lookup[codes], categories=pd.Index(cats.astype(object)))


def assemble(timeline: Callable[[int], RankTimeline], begin: np.ndarray,
             finish: np.ndarray, count: np.ndarray) -> CriticalPath:
    """The path from the ranks' timelines: `timeline(r)` gives rank r's (read as the walk
    reaches it), `begin`, `finish`, `count` (timeline rows) are per rank 0..n-1."""
    nranks = len(begin)
    has_time = (finish > begin) | (count > 0)
    ranks = np.flatnonzero(has_time) if has_time.any() else np.arange(nranks)
    run_begin = int(begin[ranks].min())
    first = int(ranks[np.argmax(finish[ranks])])
    run_end = int(finish[first])
    st = np.array(_walk(timeline, first, run_end, run_begin), dtype=np.int64).reshape(-1, 3)
    st = st[st[:, 2] > st[:, 1]]
    parts = []
    for r in dict.fromkeys(st[:, 0].tolist()):  # one rank at a time, in the walk's order
        sel = np.flatnonzero(st[:, 0] == r)
        seg = _rank_segments(timeline(r), st[sel, 1], st[sel, 2], run_begin)
        seg["stretch"] = sel[seg["stretch"]]
        parts.append(seg)
    # each column joined, then put in time order, one at a time: the parts' arrays are
    # let go as they are joined (the path of a long run has millions of segments)

    def joined(col: str) -> np.ndarray:
        return (np.concatenate([p.pop(col) for p in parts]) if parts
                else np.empty(0, np.int64))

    start = joined("start")
    order = np.lexsort((joined("piece"), joined("stretch"), start))  # time order
    start = start[order]
    segments = pd.DataFrame({
        "rank": joined("rank")[order].astype(np.int32), "start": start,
        "end": joined("end")[order],
        "kind": pd.Categorical.from_codes(joined("kind")[order].astype(np.int8),
                                          categories=list(KINDS)),
        # categorical: millions of segments name a few hundred functions and call sites
        "function": _labels(parts, "function", order),
        "callsite": _labels(parts, "callsite", order),
        "call": joined("call")[order]}, copy=False)
    return CriticalPath(run_begin, run_end, segments, nranks)


def compute(trace: Trace, ws: WaitStates) -> CriticalPath:
    """The critical path of the run, from the wait states of every call (every rank's
    timeline in memory; `engines.rankcritical` computes the same rank by rank)."""
    nranks = num_ranks(trace)
    off = offsets(ws.skew.offsets_ns, nranks)
    tl = _timeline(trace, off, nranks)
    coll = trace.collectives
    last, last_nonroot = last_arrivers(coll, off)
    partner = partners(len(trace.calls), 0, ws.per_call, trace.messages, trace.messages,
                       coll, last, last_nonroot, off)
    wait = ws.per_call["wait_ns"].to_numpy()
    names = _names(trace.calls)
    ranks = {r: _rank_timeline(tl, r, partner, wait, names, 0) for r in range(nranks)}
    return assemble(ranks.__getitem__, tl.begin, tl.finish, tl.hi - tl.lo)


def finding_fields(path: CriticalPath, kind: str, function: str, callsite: str) -> dict:
    """What a finding adds about the path: the time of the path in its calls (for
    load imbalance also in the bursts before them: the late rank's extra work), its
    share, and whether it lies on the path at all: off it, fixing it cannot shorten
    the run."""
    on = path.time_on(function, callsite, with_bursts=kind == "load_imbalance")
    return {"on_critical_path": on > 0, "critical_path_s": on,
            "critical_path_share": on / max(path.length_ns / 1e9, 1e-18)}
