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

import bisect
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope.analysis import breakdown
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
        name = np.where(s["kind"] == "compute", COMPUTE, s["function"].astype(str))
        before = np.where(s["kind"] == "compute", s["function"].astype(str), "")
        d = pd.DataFrame({"name": name, "callsite": s["callsite"].astype(str),
                          "before": before, "ns": (s["end"] - s["start"]).to_numpy()})
        g = d.groupby(["name", "callsite", "before"], sort=False)["ns"].sum().reset_index()
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
        here = (s["function"] == function).to_numpy() & (s["callsite"] == callsite).to_numpy()
        kind = s["kind"].to_numpy()
        keep = here & ((kind == "mpi") | (with_bursts & (kind == "compute")))
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


def _partners(trace: Trace, ws: WaitStates, off: np.ndarray) -> np.ndarray:
    """Per call: the rank that released it from its waiting (-1: it did not wait), by the
    kind of its wait state."""
    calls = trace.calls
    n = len(calls)
    code = ws.per_call["wait_kind"].cat.codes.to_numpy()
    waited = ws.per_call["wait_ns"].to_numpy() > 0
    partner = np.full(n, -1, dtype=np.int64)
    m = trace.messages
    if len(m):
        send_rank, recv_rank = m["send_rank"].to_numpy(), m["recv_rank"].to_numpy()
        rc, sc = m["recv_complete_call"].to_numpy(), m["send_complete_call"].to_numpy()
        ok = rc >= 0
        # a receive waits for the latest of the senders it completes
        sender, _ = _latest(rc[ok], m["send_enter"].to_numpy()[ok] + off[send_rank[ok]],
                            send_rank[ok], n)
        ls = code == KIND["late_sender"]
        partner[ls] = sender[ls]
        ok = sc >= 0
        receiver, _ = _latest(sc[ok], m["recv_enter"].to_numpy()[ok] + off[recv_rank[ok]],
                              recv_rank[ok], n)
        lr = code == KIND["late_receiver"]
        partner[lr] = receiver[lr]
    coll = trace.collectives
    if len(coll):
        rank, root = coll["rank"].to_numpy().astype(np.int64), coll["root"].to_numpy()
        start = coll["start"].to_numpy() + off[rank]
        # instance ids compacted to 0..size-1: ids are not bounded by the row count (a
        # truncated rank's collectives), and one array slot per id could take gigabytes
        ids, inst = np.unique(coll["instance"].to_numpy(), return_inverse=True)
        size = len(ids)
        last, _ = _latest(inst, start, rank, size)
        nonroot = rank != root
        last_nonroot, _ = _latest(inst[nonroot], start[nonroot], rank[nonroot], size)
        c = coll["call"].to_numpy()
        kc = code[c]
        who = np.select(
            [(kc == KIND["wait_at_barrier"]) | (kc == KIND["wait_at_nxn"]),
             kc == KIND["late_broadcast"], kc == KIND["early_reduce"]],
            [last[inst], root.astype(np.int64), last_nonroot[inst]], -1)
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
    order = np.lexsort((start, rank))
    rank, start, end, call = rank[order], start[order], end[order], call[order]
    lo = np.searchsorted(rank, np.arange(nranks), "left")
    hi = np.searchsorted(rank, np.arange(nranks), "right")
    return _Timeline(call, rank, start, np.maximum(end, start), lo, hi, begin, finish)


def _walk(tl: _Timeline, jump_to: np.ndarray, jump_at: np.ndarray, first: int,
          run_begin: int) -> list[tuple[int, int, int]]:
    """The path backwards as stretches (rank, from, to) of consecutive time on one rank.

    `jump_to`/`jump_at` per timeline row: the rank and time the walk continues at when
    it reaches that call (-1: the call did not wait, the walk goes on through it)."""
    # the previous waiting call at or before each row, within the rank (-1: none)
    idx = np.where(jump_to >= 0, np.arange(len(jump_to)), -1)
    prev = np.maximum.accumulate(idx) if len(idx) else idx
    prev = np.where(prev >= tl.lo[tl.rank], prev, -1).tolist()
    starts = tl.start.tolist()
    to, at = jump_to.tolist(), jump_at.tolist()
    lo = tl.lo.tolist()
    limit = tl.hi.tolist()  # rows not yet passed per rank: each rank is walked back once
    r, t = first, int(tl.finish[first])
    stretches = []
    while True:
        i = bisect.bisect_left(starts, t, lo[r], limit[r]) - 1
        j = prev[i] if i >= lo[r] else -1
        if j < 0:  # no earlier wait on this rank: back to its start (and MPI_Init)
            stretches.append((r, run_begin, t))
            return stretches
        tj = min(at[j], t)
        stretches.append((r, tj, t))
        limit[r] = j
        r, t = to[j], tj


def _pieces(tl: _Timeline, nranks: int, run_begin: int) -> tuple[np.ndarray, ...]:
    """Each rank's time cut into pieces: MPI_Init before its start, then alternately a
    compute burst and a call, the last burst up to its end. Returns per piece its
    boundaries `edge` (piece k of rank r = edge[base[r] + k] .. edge[base[r] + k + 1]),
    `kind` code, `row` (timeline row of the call, or of the call ending the burst; -1:
    none; -2: the rank's end) and per rank `base`."""
    n_calls = tl.hi - tl.lo
    n_edges = 2 * n_calls + 3  # run begin, rank begin, s0, e0, ..., rank end
    base = np.r_[0, np.cumsum(n_edges)[:-1]]
    edge = np.empty(int(n_edges.sum()), dtype=np.int64)
    kind = np.full(len(edge), KINDS.index("compute"), dtype=np.int8)
    row = np.full(len(edge), -2, dtype=np.int64)
    edge[base] = run_begin
    edge[base + 1] = tl.begin
    edge[base + n_edges - 1] = tl.finish
    kind[base] = KINDS.index("startup")
    row[base] = -1
    k = np.arange(len(tl.rank)) - tl.lo[tl.rank]  # position of the call within its rank
    pos = base[tl.rank] + 2 + 2 * k
    edge[pos], edge[pos + 1] = tl.start, tl.end
    kind[pos] = KINDS.index("mpi")
    row[pos] = np.arange(len(tl.rank))
    row[pos - 1] = np.arange(len(tl.rank))  # the burst before a call ends at that call
    for r in range(nranks):  # calls never overlap, but clipped ends may: keep edges in order
        e = edge[base[r]:base[r] + n_edges[r]]
        np.maximum.accumulate(e, out=e)
    return edge, kind, row, base, n_edges


def compute(trace: Trace, ws: WaitStates) -> CriticalPath:
    """The critical path of the run, from the wait states of every call."""
    nranks = max(int(trace.num_ranks), int(trace.ranks["rank"].max()) + 1 if len(trace.ranks)
                 else 0, 1)
    off = np.zeros(nranks, dtype=np.int64)
    for r, o in ws.skew.offsets_ns.items():
        off[r] = o
    tl = _timeline(trace, off, nranks)
    has_time = (tl.finish > tl.begin) | (tl.hi > tl.lo)
    ranks = np.flatnonzero(has_time) if has_time.any() else np.arange(nranks)
    run_begin = int(tl.begin[ranks].min())
    first = int(ranks[np.argmax(tl.finish[ranks])])
    run_end = int(tl.finish[first])

    partner = _partners(trace, ws, off)[tl.call]
    wait = ws.per_call["wait_ns"].to_numpy()[tl.call]
    stretches = _walk(tl, partner, tl.start + wait, first, run_begin)

    edge, kind, row, base, n_edges = _pieces(tl, nranks, run_begin)
    st = np.array(stretches, dtype=np.int64).reshape(-1, 3)
    st = st[st[:, 2] > st[:, 1]]
    s_rank, s_from, s_to = st[:, 0], st[:, 1], st[:, 2]
    # pieces of each stretch: the first piece holding `from` to the last holding `to`
    first_p = np.empty(len(st), dtype=np.int64)
    last_p = np.empty(len(st), dtype=np.int64)
    for r in np.unique(s_rank):
        sel = s_rank == r
        e = edge[base[r]:base[r] + n_edges[r]]
        npieces = n_edges[r] - 1
        first_p[sel] = base[r] + np.clip(np.searchsorted(e, s_from[sel], "right") - 1, 0,
                                         npieces - 1)
        last_p[sel] = base[r] + np.clip(np.searchsorted(e, s_to[sel], "left") - 1, 0,
                                        npieces - 1)
    count = np.maximum(last_p - first_p + 1, 0)
    which = np.repeat(np.arange(len(st)), count)
    piece = np.repeat(first_p, count) + (np.arange(count.sum()) - np.repeat(
        np.cumsum(count) - count, count))
    seg_start = np.maximum(edge[piece], s_from[which])
    seg_end = np.minimum(edge[piece + 1], s_to[which])
    ok = seg_end > seg_start
    piece, seg_start, seg_end, seg_rank = piece[ok], seg_start[ok], seg_end[ok], s_rank[which][ok]
    order = np.argsort(seg_start, kind="stable")
    piece, seg_start, seg_end, seg_rank = (piece[order], seg_start[order], seg_end[order],
                                           seg_rank[order])
    segments = _label(trace, tl, seg_rank, seg_start, seg_end, kind[piece], row[piece])
    return CriticalPath(run_begin, run_end, segments, nranks)


def _label(trace: Trace, tl: _Timeline, rank: np.ndarray, start: np.ndarray, end: np.ndarray,
           kind: np.ndarray, row: np.ndarray) -> pd.DataFrame:
    """The segments with the function and call site of their call (for a burst: of the
    call ending it; MPI_Init and MPI_Finalize for the rank's start and end)."""
    calls = trace.calls
    call = np.where(row >= 0, tl.call[np.maximum(row, 0)], -1)
    c = calls[calls["kind"].isin(["init", "finalize"])]
    init = c[c["kind"] == "init"].groupby("rank", observed=True)["call"].first()
    final = c[c["kind"] == "finalize"].groupby("rank", observed=True)["call"].first()
    init_call = pd.Series(rank).map(init).fillna(-1).astype(np.int64).to_numpy()
    final_call = pd.Series(rank).map(final).fillna(-1).astype(np.int64).to_numpy()
    named = np.where(row >= 0, call, np.where(row == -1, init_call, final_call))
    has = named >= 0
    # names of the segments' calls only: strings of a million-call table cost seconds
    take = np.maximum(named, 0)
    fn = calls["function"].take(take).astype(str).to_numpy()
    cs = calls["callsite"].take(take).astype(str).to_numpy()
    function = np.where(has, fn, np.where(row == -1, STARTUP, ""))
    callsite = np.where(has, cs, "")
    return pd.DataFrame({
        "rank": rank.astype(np.int32), "start": start, "end": end,
        "kind": pd.Categorical.from_codes(kind, categories=list(KINDS)),
        "function": function, "callsite": callsite,
        "call": np.where(kind == KINDS.index("mpi"), call, -1)})


def finding_fields(path: CriticalPath, kind: str, function: str, callsite: str) -> dict:
    """What a finding adds about the path: the time of the path in its calls (for
    load imbalance also in the bursts before them: the late rank's extra work), its
    share, and whether it lies on the path at all: off it, fixing it cannot shorten
    the run."""
    on = path.time_on(function, callsite, with_bursts=kind == "load_imbalance")
    return {"on_critical_path": on > 0, "critical_path_s": on,
            "critical_path_share": on / max(path.length_ns / 1e9, 1e-18)}
