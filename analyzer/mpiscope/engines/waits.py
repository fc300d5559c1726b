"""Wait states rank by rank: the rules of `analysis.waitstates`, run as partials on
`RankSlice`s and combined on the client, giving what `waitstates.compute` gives.

    ws = waits.compute(run, scratch)     # run: maps fn over every rank's slice, rank order
    ws.totals(), ws.per_rank(), ws.per_callsite(), ws.skew   # as WaitStates
    ws.of_rank(r)                        # rank r's wait_ns, wait_kind (aligned with calls)

Passes (each one task per rank; what crosses to the client, and what it is bounded by):
1. clock skew: per (sender, receiver) pair the largest send-before-receive lead and the
   violation count (O(pairs of ranks that talk)); the client relaxes the per-rank
   offsets (O(ranks)) as `skew.relax` does for the pandas engine; a second count pass
   with the final offsets gives `remaining`.
2. instances: per collective instance (comm/sequence for non-blocking ones, window/
   sequence for fences) the latest start, the root's start, the latest non-root start.
   The combined table has a row per instance of the trace (not per event: a row per
   collective call of one rank), sent to every task of pass 3.
3. per rank: late sender (its calls completing receives, from the messages it
   received), late receiver (from the messages it sent), collectives, non-blocking
   collectives, fences; its wait_ns/wait_kind are written to `scratch/rank=R.parquet`.
   General active target and lock contention pair RMA synchronization events across
   ranks: the task returns only its RMA synchronization rows (group_sync and lock
   events), the RMA operations of windows it opened an access epoch (MPI_Win_start) on,
   and those calls' times and waits so far. The client runs the pandas rules on just
   these rows (bounded by the RMA synchronization events, not by the trace) and
4. patches the files of the ranks whose calls they changed.
The precedence (`waitstates._set`: the largest wait wins, the earlier rule on ties) is
kept by running the rules in the pandas engine's order on the same values.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpiscope import output
from mpiscope.analysis import skew, waitstates
from mpiscope.analysis.waitstates import KINDS
from mpiscope.engines.slices import RankSlice, Reduced

T = TypeVar("T")
Runner = Callable[[Callable[[RankSlice], T]], list[T]]
LOCK_EVENTS = ("request_lock", "acquire_lock", "release_lock")


def _n(s: RankSlice) -> int:
    return max(s.trace.num_ranks, 1)


# --- pass 1: clock skew ----------------------------------------------------------------

def skew_part(s: RankSlice) -> tuple[int, int, int, pd.DataFrame | None]:
    """(rank, ranks of the trace, violations as recorded, pair leads) of the messages
    the rank sent."""
    sent = s.trace.messages
    return (s.rank, _n(s), skew.count_violations(sent, np.zeros(_n(s), np.int64)),
            skew.pair_lead(sent) if len(sent) else None)


def remaining_part(s: RankSlice, off: np.ndarray) -> int:
    return skew.count_violations(s.trace.messages, off)


@dataclass
class Corrected:
    """A rank's tables on the skew-corrected clock."""

    calls: pd.DataFrame
    sent: pd.DataFrame
    received: pd.DataFrame
    collectives: pd.DataFrame
    sync: pd.DataFrame


def corrected(s: RankSlice, off: np.ndarray | None) -> Corrected:
    t = s.trace
    if off is None:
        return Corrected(t.calls, t.messages, s.received, t.collectives, t.rma_sync)
    sync = t.rma_sync
    # as waitstates._sync_corrected: a rank's sync events move with its calls (a rank
    # without calls keeps its clock)
    if len(sync) and len(t.calls):
        sync = sync.assign(time=sync["time"].to_numpy() + off[s.rank])
    return Corrected(skew.shift_calls(t.calls, off), skew.shift_messages(t.messages, off),
                     skew.shift_messages(s.received, off),
                     skew.shift_calls(t.collectives, off), sync)


# --- pass 2: instances of collectives, non-blocking collectives, fences ----------------

def _nbc(s: RankSlice, c: Corrected) -> pd.DataFrame | None:
    return waitstates.nbc_posts(c.calls["start"].to_numpy(), c.calls["function"].to_numpy(),
                                s.trace.p2p, s.call_offset)


def _fences(s: RankSlice, c: Corrected) -> pd.DataFrame | None:
    if not len(c.sync):
        return None
    return waitstates.fence_rows(c.calls["start"].to_numpy(), c.calls["end"].to_numpy(),
                                 c.sync, s.call_offset)


def instances_part(s: RankSlice, off: np.ndarray | None) -> tuple:
    c = corrected(s, off)
    coll = c.collectives
    keys, is_root = waitstates.collective_keys(coll)
    return (waitstates.instance_starts(keys, coll["start"].to_numpy(), is_root),
            waitstates.nbc_instances(_nbc(s, c)), waitstates.fence_instances(_fences(s, c)))


def combine_instances(parts: list[tuple]) -> tuple:
    """Per collective, non-blocking collective and fence instance: the latest, root and
    non-root starts of the ranks' parts (merged parts merge again the same way)."""
    return (waitstates.combine_instances([p[0] for p in parts]),
            waitstates.combine_instances([p[1] for p in parts if p[1] is not None]),
            waitstates.combine_fences([p[2] for p in parts]))


@dataclass
class Plan:
    """What every pass-3 task needs: small (per rank, per instance)."""

    off: np.ndarray | None
    collectives: pd.DataFrame
    nbc: pd.DataFrame
    fences: pd.DataFrame | None
    scratch: str


# --- pass 3: each rank's waits ---------------------------------------------------------

def _path(scratch: str | Path, rank: int) -> Path:
    return Path(scratch) / f"rank={rank}.parquet"


def write_rank(scratch: str | Path, rank: int, wait: np.ndarray, kind: np.ndarray) -> None:
    """One rank's waits, aligned with its calls, written atomically."""
    table = pa.table({"wait_ns": pa.array(wait, pa.int64()), "kind": pa.array(kind, pa.int8())})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    output.write_bytes(_path(scratch, rank), buf.getvalue())


def read_rank(scratch: str | Path, rank: int) -> pd.DataFrame:
    """wait_ns (int64), wait_kind (categorical of KINDS) of one rank's calls."""
    t = pq.ParquetFile(_path(scratch, rank)).read(use_threads=False)
    return frame(t.column("wait_ns").to_numpy(), t.column("kind").to_numpy())


def frame(wait: np.ndarray, kind: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"wait_ns": np.asarray(wait, np.int64),
                         "wait_kind": pd.Categorical.from_codes(kind, categories=list(KINDS))})


def _summary(s: RankSlice, wait: np.ndarray, kind: np.ndarray) -> tuple:
    """(kind_sums row, callsite_sums) of the rank: what totals/per_rank/per_callsite add."""
    calls = s.trace.calls
    pc = pd.DataFrame({"rank": calls["rank"].to_numpy(), "function": calls["function"],
                       "callsite": calls["callsite"]}).assign(**frame(wait, kind))
    return waitstates.kind_sums(pc), waitstates.callsite_sums(pc)


def _in_rank(rows: np.ndarray, n: int) -> np.ndarray:
    return (rows >= 0) & (rows < n)


def waits_part(s: RankSlice, plan: Plan) -> dict[str, Any]:
    c = corrected(s, plan.off)
    calls = c.calls
    n = len(calls)
    start, end = calls["start"].to_numpy(), calls["end"].to_numpy()
    wait = np.zeros(n, dtype=np.int64)
    kind = np.full(n, -1, dtype=np.int8)
    # the same rules in the same order as waitstates.compute
    rc, se = waitstates.completing(c.received, "recv_complete_call", "send_enter",
                                   s.call_offset)
    sc, re_ = waitstates.completing(c.sent, "send_complete_call", "recv_enter",
                                    s.call_offset)
    ok_r, ok_s = _in_rank(rc, n), _in_rank(sc, n)
    waitstates.p2p_rule(start, end, rc[ok_r], se[ok_r], sc[ok_s], re_[ok_s], wait, kind)
    coll = c.collectives
    waitstates.collective_rule(coll, plan.collectives,
                               coll["call"].to_numpy() - s.call_offset, wait, kind)
    m = _nbc(s, c)
    if m is not None:
        waitstates.nbc_rule(m, plan.nbc, start, end, wait, kind)
    if len(c.sync):
        waitstates.fence_rule(_fences(s, c), plan.fences, wait, kind)
    write_rank(plan.scratch, s.rank, wait, kind)
    return {"summary": _summary(s, wait, kind), "rma": _rma_rows(s, c, wait, kind)}


def _rma_rows(s: RankSlice, c: Corrected, wait: np.ndarray, kind: np.ndarray
              ) -> dict[str, pd.DataFrame] | None:
    """The rank's rows general active target and lock contention pair across ranks."""
    sync = c.sync
    if not len(sync):
        return None
    ev = sync["event"]
    g = (ev == "group_sync").to_numpy() & (sync["call"] >= 0).to_numpy()
    lk = ev.isin(LOCK_EVENTS).to_numpy()
    if not (g.any() or lk.any()):
        return None
    rows = sync[g | lk]
    fn = c.calls["function"].to_numpy()
    gcalls = sync["call"].to_numpy()[g]
    opened = sync["win"].to_numpy()[g][fn[gcalls - s.call_offset] == "MPI_Win_start"]
    rma = s.trace.rma
    ops = rma[(rma["call"] >= 0).to_numpy() & rma["win"].isin(opened).to_numpy()]
    ids = np.unique(np.concatenate([rows["call"].to_numpy(), ops["call"].to_numpy()]))
    ids = ids[ids >= 0]
    loc = ids - s.call_offset
    calls = pd.DataFrame({"call": ids, "rank": s.rank, "function": c.calls["function"].iloc[loc],
                          "start": c.calls["start"].to_numpy()[loc],
                          "end": c.calls["end"].to_numpy()[loc],
                          "wait": wait[loc], "kind": kind[loc]})
    return {"sync": rows, "rma": ops, "calls": calls.reset_index(drop=True)}


def rma_updates(parts: list[dict[str, pd.DataFrame] | None]) -> dict[int, pd.DataFrame]:
    """General active target and lock contention on the gathered rows: per rank, the
    calls whose waits changed (call, wait, kind)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return {}
    sync = pd.concat([p["sync"] for p in parts], ignore_index=True)
    rma = pd.concat([p["rma"] for p in parts], ignore_index=True)
    calls = pd.concat([p["calls"] for p in parts], ignore_index=True)
    ids = calls["call"].to_numpy()  # sorted: ranks in order, each one's ids sorted

    def compact(df: pd.DataFrame) -> pd.DataFrame:
        c = df["call"].to_numpy()
        pos = np.where(c >= 0, np.searchsorted(ids, c), c)
        return df.assign(call=pos.astype(df["call"].dtype))

    wait = calls["wait"].to_numpy().copy()
    kind = calls["kind"].to_numpy().copy()
    sync_c = compact(sync)
    waitstates._gats_waits(calls, sync_c, compact(rma), wait, kind)
    waitstates._lock_waits(calls, sync_c, wait, kind)
    changed = (wait != calls["wait"].to_numpy()) | (kind != calls["kind"].to_numpy())
    ch = pd.DataFrame({"call": ids[changed], "rank": calls["rank"].to_numpy()[changed],
                       "wait": wait[changed], "kind": kind[changed]})
    return {int(r): g.reset_index(drop=True) for r, g in ch.groupby("rank")}


def patch_part(s: RankSlice, scratch: str, updates: dict[int, pd.DataFrame]) -> tuple | None:
    """Pass 4: apply the RMA pairing's changes to the rank's file; its new summary."""
    u = updates.get(s.rank)
    if u is None:
        return None
    w = read_rank(scratch, s.rank)
    wait = w["wait_ns"].to_numpy().copy()
    kind = w["wait_kind"].cat.codes.to_numpy().astype(np.int8)
    loc = u["call"].to_numpy() - s.call_offset
    wait[loc] = u["wait"].to_numpy()
    kind[loc] = u["kind"].to_numpy()
    write_rank(scratch, s.rank, wait, kind)
    return _summary(s, wait, kind)


# --- the result ------------------------------------------------------------------------

@dataclass
class DistWaitStates:
    """`waitstates.WaitStates` of a trace whose per-call waits stay in per-rank files."""

    skew: skew.SkewCorrection
    sums: pd.DataFrame  # waitstates.kind_sums of every rank
    callsites: list[pd.DataFrame]  # waitstates.callsite_sums of every rank
    scratch: Path
    ranks: list[int]
    # the trace's calls (call, rank, function, callsite) for `per_call`, when asked
    calls_of: Callable[[], pd.DataFrame] | None = None
    _per_call: pd.DataFrame | None = field(default=None, repr=False)

    def totals(self) -> dict[str, float]:
        return waitstates.totals_of(self.sums)

    def per_rank(self) -> pd.DataFrame:
        return waitstates.per_rank_of(self.sums)

    def per_callsite(self) -> pd.DataFrame:
        return waitstates.per_callsite_of(self.callsites)

    def of_rank(self, rank: int) -> pd.DataFrame:
        return read_rank(self.scratch, rank)

    @property
    def per_call(self) -> pd.DataFrame:
        """The whole trace's per-call waits in the client (only for the analyses that
        still need them: memory grows with the trace)."""
        if self._per_call is None:
            if self.calls_of is None:
                raise RuntimeError("per_call needs the trace's calls")
            c = self.calls_of()
            w = [read_rank(self.scratch, r) for r in self.ranks]
            w = pd.concat(w, ignore_index=True) if w else frame(np.zeros(0), np.zeros(0, np.int8))
            self._per_call = pd.DataFrame({
                "call": c["call"].to_numpy(), "rank": c["rank"].to_numpy(),
                "function": c["function"], "callsite": c["callsite"],
                "wait_ns": w["wait_ns"].to_numpy(), "wait_kind": w["wait_kind"]})
        return self._per_call


def compute(run: Runner, scratch: Path | str,
            calls_of: Callable[[], pd.DataFrame] | None = None) -> DistWaitStates:
    """Wait states of every call (files under `scratch`, which every task can write)."""
    scratch = str(scratch)
    first = run(skew_part)
    ranks = [r for r, _n, _v, _p in first]
    n = max((k for _r, k, _v, _p in first), default=1)
    before = sum(v for _r, _n, v, _p in first)
    off = None
    correction = skew.SkewCorrection(0)
    if before:
        pairs = [p for _r, _n, _v, p in first if p is not None]
        off = skew.relax(pd.concat(pairs, ignore_index=True), n)
        remaining = sum(run(functools.partial(remaining_part, off=off)))
        correction = skew.SkewCorrection(
            before, {int(r): int(o) for r, o in enumerate(off) if o}, remaining)
    # per collective instance: O(instances) once combined, O(ranks x instances) before,
    # so the parts are combined where they are made (a tree on the workers)
    inst = run(Reduced(functools.partial(instances_part, off=off), combine_instances))
    plan = Plan(off, *combine_instances(inst), scratch)
    parts = run(functools.partial(waits_part, plan=plan))
    summaries = [p["summary"] for p in parts]
    updates = rma_updates([p["rma"] for p in parts])
    if updates:
        patched = run(functools.partial(patch_part, scratch=scratch, updates=updates))
        summaries = [new if new is not None else old
                     for old, new in zip(summaries, patched, strict=True)]
    sums = pd.concat([x[0] for x in summaries]) if summaries else waitstates.kind_sums(
        pd.DataFrame({"rank": [], "wait_ns": [], "wait_kind": frame([], [])["wait_kind"]}))
    return DistWaitStates(correction, sums, [x[1] for x in summaries], Path(scratch), ranks,
                          calls_of)

