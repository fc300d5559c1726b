"""The critical path rank by rank: memory bounded by a few ranks, not by the trace.

    cp = rankcritical.compute(run, scratch, ws_skew)   # == critical_path.compute(trace, ws)

`run(fn)` maps `fn` over every rank's `RankSlice` (in rank order) and returns the
results: on the Dask engine the workers do it, in tests a list comprehension. The rules
are `analysis.critical_path`'s own functions; only who holds which rows differs:

1. `arrivals` (per rank): the rank's collective entries reduced per instance (its latest
   entry, and its latest as a non-root), written to `scratch/critical_path/
   arrivals-rank=R.npy` sorted by bucket (instance mod number of ranks).
2. `last_arrivers` (per rank R = bucket b, the b-th rank): reads bucket b's rows of every
   rank's arrivals file (memory-mapped, binary search) and reduces them with the same
   associative `critical_path.arrivals`: the last rank (and last non-root rank) to enter
   each instance of the bucket, to `last-bucket=b.npy`. A bucket holds about 1/n of all
   collective rows.
3. `timeline` (per rank): the rank's partners (the late sender of a receive from the
   messages it received, the late receiver of a send from those it sent, the last
   arriver of a collective from the bucket files of its instances), its timeline with the
   walk's jumps and the codes of each call's function and call site, written to
   `rank=R.npy` (ROW records); returned: a small `RankTimeline` without rows (interval,
   row count, the rank's distinct function and call site names, MPI_Init/Finalize).
4. The client (`combine`) walks backwards from the rank that finishes last: each step
   reads the current rank's rows through an LRU of at most `keep` ranks' files, which are
   memory-mapped (a visit costs a binary search, not a read of the rank), then labels the
   path's segments one visited rank at a time.

Bounds: a worker holds one rank's tables plus, in pass 2, 1/n of the collective rows; the
client holds per rank a few scalars and its names, at most `keep` mapped rank files, and
the path itself (its stretches and segments: the result, as in the pandas engine).
Pass 2 opens every rank's arrivals file once per bucket (n² opens for n ranks).
"""

from __future__ import annotations

import dataclasses
import functools
import mmap
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from mpiscope import output
from mpiscope.analysis import critical_path as cp
from mpiscope.analysis.skew import SkewCorrection
from mpiscope.engines.slices import RankSlice

T = TypeVar("T")
Runner = Callable[[Callable[[RankSlice], T]], list[T]]

SUBDIR = "critical_path"
KEEP = 4  # rank files the client's walk holds at once
ARRIVAL = np.dtype([("bucket", "i8"), ("inst", "i8"), ("kind", "i1"), ("t", "i8")])
LAST = np.dtype([("inst", "i8"), ("last", "i8"), ("last_nonroot", "i8")])
ALL, NONROOT = 0, 1  # ARRIVAL.kind: an entry of any rank / of a non-root rank


def _ranks(s: RankSlice) -> list[int]:
    """The ranks the runner maps over (those of the ranks table, as `slices`)."""
    return sorted(int(r) for r in s.trace.ranks["rank"].unique())


# collective instances are cut into buckets (instance mod buckets), each matched by the
# task of one rank: as many as ranks up to MIN_BUCKETS, more for a bigger trace (one per
# EVENTS_PER_BUCKET events), never more than ranks. Not one per rank: each bucket task
# opens every rank's arrivals file and each rank every bucket file its instances fall in,
# n^2 file maps for n ranks (a million at 1024 ranks).
MIN_BUCKETS = 64
EVENTS_PER_BUCKET = 2_000_000


def _buckets(s: RankSlice) -> int:
    r = s.trace.ranks
    nranks = len(_ranks(s))
    events = int(r["events"].sum()) if "events" in r.columns else 0
    return max(1, min(nranks, max(MIN_BUCKETS, -(-events // EVENTS_PER_BUCKET))))


def _save(path: Path, arr: np.ndarray) -> None:
    with output.scratch_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, arr)


def _map(path: Path, dtype: np.dtype) -> np.ndarray:
    """The records of a .npy file we wrote, memory-mapped (np.load's header parsing costs
    about a millisecond per call, and the walk maps a rank again at every visit after it
    was dropped)."""
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    # .npy: magic, version (major, minor), header length (2 bytes in 1.0, 4 after), header
    size = 2 if mm[6] == 1 else 4
    start = 8 + size + int.from_bytes(mm[8:8 + size], "little")
    count = (len(mm) - start) // dtype.itemsize
    if not count:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(mm, dtype=dtype, count=count, offset=start)


def arrivals(s: RankSlice, scratch: Path, skew_offsets: dict[int, int]) -> int:
    """Pass 1: the rank's latest entry per collective instance (and as a non-root),
    on corrected times, by bucket; returns its row count."""
    coll = s.trace.collectives
    nb = _buckets(s)
    rank = coll["rank"].to_numpy().astype(np.int64)
    inst = coll["instance"].to_numpy().astype(np.int64)
    start = coll["start"].to_numpy() + skew_offsets.get(s.rank, 0)
    nonroot = rank != coll["root"].to_numpy()
    parts = []
    for kind, sel in ((ALL, slice(None)), (NONROOT, nonroot)):
        ids, t, _ = cp.arrivals(inst[sel], start[sel], rank[sel])
        rec = np.empty(len(ids), dtype=ARRIVAL)
        rec["bucket"], rec["inst"], rec["kind"], rec["t"] = ids % nb, ids, kind, t
        parts.append(rec)
    rec = np.concatenate(parts)
    rec = rec[np.lexsort((rec["kind"], rec["inst"], rec["bucket"]))]
    _save(scratch / f"arrivals-rank={s.rank}.npy", rec)
    return len(rec)


def last_arrivers(s: RankSlice, scratch: Path) -> int:
    """Pass 2: for bucket b (this rank's position among the ranks; ranks past the
    number of buckets have none), the last rank and last non-root rank to enter each
    instance, from every rank's arrivals; returns the bucket's instance count."""
    ranks = _ranks(s)
    b = ranks.index(s.rank)
    if b >= _buckets(s):
        return 0
    got, of = [], []
    for q in ranks:  # in rank order: ties go to the higher rank as in the pandas engine
        a = _map(scratch / f"arrivals-rank={q}.npy", ARRIVAL)
        lo, hi = np.searchsorted(a["bucket"], [b, b + 1])
        got.append(np.array(a[lo:hi]))
        of.append(np.full(hi - lo, q, dtype=np.int64))
    rec, rank = np.concatenate(got), np.concatenate(of)
    a_ = rec["kind"] == ALL
    n_ = rec["kind"] == NONROOT
    ids, _, last = cp.arrivals(rec["inst"][a_], rec["t"][a_], rank[a_])
    ids_nr, _, last_nr = cp.arrivals(rec["inst"][n_], rec["t"][n_], rank[n_])
    out = np.empty(len(ids), dtype=LAST)
    out["inst"], out["last"] = ids, last
    out["last_nonroot"] = cp.lookup(ids_nr, last_nr, ids)
    _save(scratch / f"last-bucket={b}.npy", out)
    return len(out)


def _collective_lasts(s: RankSlice, scratch: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per collective row of the rank: last and last non-root rank of its instance."""
    inst = s.trace.collectives["instance"].to_numpy().astype(np.int64)
    bucket = inst % _buckets(s)
    last = np.full(len(inst), -1, dtype=np.int64)
    last_nr = np.full(len(inst), -1, dtype=np.int64)
    order = np.argsort(bucket, kind="stable")
    for sel in np.split(order, np.flatnonzero(np.diff(bucket[order])) + 1):
        if not len(sel):
            continue
        f = _map(scratch / f"last-bucket={int(bucket[sel[0]])}.npy", LAST)
        last[sel] = cp.lookup(f["inst"], f["last"], inst[sel])
        last_nr[sel] = cp.lookup(f["inst"], f["last_nonroot"], inst[sel])
    return last, last_nr


def timeline(s: RankSlice, scratch: Path,
             skew_offsets: dict[int, int]) -> tuple[cp.RankTimeline, int]:
    """Pass 3: the rank's timeline with its partners to `rank=R.npy`; returns it without
    its rows, and the trace's rank count."""
    assert s.waits is not None, "the critical path needs the wait states of the slice"
    t = s.trace
    nranks = cp.num_ranks(t)
    off = cp.offsets(skew_offsets, nranks)
    last, last_nr = _collective_lasts(s, scratch)
    partner = cp.partners(len(t.calls), s.call_offset, s.waits, s.received, t.messages,
                          t.collectives, last, last_nr, off)
    tl = cp._timeline(t, off, nranks)
    rt = cp._rank_timeline(tl, s.rank, partner, s.waits["wait_ns"].to_numpy(),
                           cp._names(t.calls), s.call_offset)
    # the client needs only the names the rank's timeline uses
    assert rt.rows is not None
    rows = rt.rows
    fn_used, rows["fn"] = np.unique(rows["fn"], return_inverse=True)
    cs_used, rows["cs"] = np.unique(rows["cs"], return_inverse=True)
    _save(scratch / f"rank={s.rank}.npy", rows)
    return dataclasses.replace(rt, rows=None, fn_names=rt.fn_names[fn_used],
                               cs_names=rt.cs_names[cs_used]), nranks


class RankFiles:
    """The walk's view of the ranks: rank r's timeline with its rows memory-mapped from
    its file, at most `keep` ranks held (least recently used dropped first)."""

    def __init__(self, scratch: Path, summaries: dict[int, cp.RankTimeline], nranks: int,
                 keep: int = KEEP) -> None:
        self.scratch, self.summaries, self.keep = scratch, summaries, max(keep, 1)
        self.nranks = nranks
        self.held: OrderedDict[int, cp.RankTimeline] = OrderedDict()
        self.loads = 0  # files mapped so far
        self.peak = 0  # most ranks held at once

    def __call__(self, r: int) -> cp.RankTimeline:
        if r in self.held:
            self.held.move_to_end(r)
            return self.held[r]
        while len(self.held) >= self.keep:
            self.held.popitem(last=False)
        rt = self.summaries.get(r)
        if rt is None:  # a rank without a slice: no time, no calls (as in the pandas engine)
            rt = cp.RankTimeline(r, 0, 0, 0, None, np.empty(0, object), np.empty(0, object),
                                 (-1, "", ""), (-1, "", ""))
        rows = (_map(self.scratch / f"rank={r}.npy", cp.ROW) if rt.count
                else np.empty(0, dtype=cp.ROW))
        self.loads += 1
        self.held[r] = dataclasses.replace(rt, rows=rows)
        self.peak = max(self.peak, len(self.held))
        return self.held[r]


def combine(summaries: list[cp.RankTimeline], scratch: Path, nranks: int,
            keep: int = KEEP) -> tuple[cp.CriticalPath, RankFiles]:
    """The path from the ranks' summaries and files (and the rank view, for its counts)."""
    by_rank = {rt.rank: rt for rt in summaries}
    begin = np.zeros(nranks, dtype=np.int64)
    finish = np.zeros(nranks, dtype=np.int64)
    count = np.zeros(nranks, dtype=np.int64)
    for r, rt in by_rank.items():
        begin[r], finish[r], count[r] = rt.begin, rt.finish, rt.count
    files = RankFiles(scratch, by_rank, nranks, keep)
    return cp.assemble(files, begin, finish, count), files


def compute(run: Runner, scratch: Path, skew: SkewCorrection, *,
            keep: int = KEEP) -> cp.CriticalPath:
    """`critical_path.compute` of the trace `run` maps over, rank by rank: per-rank
    files under `scratch/critical_path` (shared by the client and the workers), the
    walk on the client holding at most `keep` ranks' files."""
    return compute_with_files(run, scratch, skew, keep=keep)[0]


def compute_with_files(run: Runner, scratch: Path, skew: SkewCorrection, *,
                       keep: int = KEEP) -> tuple[cp.CriticalPath, RankFiles]:
    d = Path(scratch) / SUBDIR
    d.mkdir(parents=True, exist_ok=True)
    offsets = {int(r): int(o) for r, o in skew.offsets_ns.items()}
    run(functools.partial(arrivals, scratch=d, skew_offsets=offsets))
    run(functools.partial(last_arrivers, scratch=d))
    parts = run(functools.partial(timeline, scratch=d, skew_offsets=offsets))
    summaries = [rt for rt, _ in parts]
    nranks = max((n for _, n in parts), default=1)
    for f in [*d.glob("arrivals-rank=*.npy"), *d.glob("last-bucket=*.npy")]:
        f.unlink(missing_ok=True)  # intermediate: only the rank files are read from now on
    return combine(summaries, d, nranks, keep)
