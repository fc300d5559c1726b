"""Wait states with Scalasca's definitions, per call (vectorized).

Every MPI call gets `wait_ns`, the part of it spent waiting for a late partner, and
`wait_kind`: late_sender, late_receiver, wait_at_barrier, wait_at_nxn, late_broadcast,
early_reduce. Non-blocking calls are done right: a Wait/Waitall is matched to the
messages it completed, and only the time before the partner even started counts as
waiting (the rest is transfer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope.analysis import skew
from mpiscope.archive.trace import Trace

NXN = {"MPI_Allreduce", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv",
       "MPI_Alltoallw", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block"}
ONE2ALL = {"MPI_Bcast", "MPI_Scatter", "MPI_Scatterv"}
ALL2ONE = {"MPI_Reduce", "MPI_Gather", "MPI_Gatherv"}
KINDS = ("late_sender", "late_receiver", "wait_at_barrier", "wait_at_nxn", "late_broadcast",
         "early_reduce")
KIND = {k: i for i, k in enumerate(KINDS)}  # codes of the wait_kind categorical


@dataclass
class WaitStates:
    per_call: pd.DataFrame  # call, rank, function, callsite, wait_ns, wait_kind
    skew: skew.SkewCorrection

    def totals(self) -> dict[str, float]:
        """Seconds per wait-state kind, summed over ranks."""
        s = self.per_call.groupby("wait_kind", observed=True)["wait_ns"].sum()
        return {k: float(s.get(k, 0)) / 1e9 for k in KINDS}

    def per_rank(self) -> pd.DataFrame:
        t = self.per_call.pivot_table(index="rank", columns="wait_kind", values="wait_ns",
                                      aggfunc="sum", fill_value=0, observed=False)
        return (t.reindex(columns=list(KINDS), fill_value=0) / 1e9).rename_axis(None, axis=1)

    def per_callsite(self) -> pd.DataFrame:
        w = self.per_call[self.per_call["wait_ns"] > 0]
        g = w.groupby(["function", "callsite", "wait_kind"], observed=True)["wait_ns"]
        return (g.agg(["count", "sum"]).rename(columns={"count": "calls", "sum": "wait_ns"})
                .reset_index().sort_values("wait_ns", ascending=False))


def _collective_waits(coll: pd.DataFrame, wait: np.ndarray, kind: np.ndarray) -> None:
    if coll.empty:
        return
    starts = coll["start"].to_numpy()
    dur = (coll["end"] - coll["start"]).to_numpy()
    fn_cat = coll["function"]
    inst = coll["instance"].to_numpy()
    last_in = coll.groupby("instance")["start"].transform("max").to_numpy()
    idx = coll["call"].to_numpy()
    # barrier and N×N: everyone waits for the last one to arrive
    barrier = (fn_cat == "MPI_Barrier").to_numpy()
    sync = barrier | fn_cat.isin(NXN).to_numpy()
    w = np.clip(last_in - starts, 0, dur)
    wait[idx[sync]] = w[sync]
    kind[idx[sync]] = np.where(barrier[sync], KIND["wait_at_barrier"], KIND["wait_at_nxn"])
    # one-to-all: non-roots that enter before the root wait for it (late broadcast)
    rank = coll["rank"].to_numpy()
    root = coll["root"].to_numpy()
    is_root = rank == root
    root_start = pd.Series(np.where(is_root, starts, np.iinfo(np.int64).max)).groupby(
        inst).transform("min").to_numpy()
    one = fn_cat.isin(ONE2ALL).to_numpy() & ~is_root & (root_start < np.iinfo(np.int64).max)
    wait[idx[one]] = np.clip(root_start[one] - starts[one], 0, dur[one])
    kind[idx[one]] = KIND["late_broadcast"]
    # all-to-one: the root waits for the last contributor (early reduce)
    nonroot_last = pd.Series(np.where(is_root, np.iinfo(np.int64).min, starts)).groupby(
        inst).transform("max").to_numpy()
    red = fn_cat.isin(ALL2ONE).to_numpy() & is_root
    wait[idx[red]] = np.clip(nonroot_last[red] - starts[red], 0, dur[red])
    kind[idx[red]] = KIND["early_reduce"]


def _p2p_waits(calls: pd.DataFrame, msgs: pd.DataFrame, wait: np.ndarray,
               kind: np.ndarray) -> None:
    if msgs.empty:
        return
    start = calls["start"].to_numpy()
    end = calls["end"].to_numpy()
    # late sender: the call completing the receive started before the send was posted
    rc = msgs["recv_complete_call"].to_numpy()
    ok = rc >= 0
    ls = np.clip(msgs["send_enter"].to_numpy()[ok] - start[rc[ok]], 0,
                 end[rc[ok]] - start[rc[ok]])
    ls_call = pd.Series(ls).groupby(rc[ok]).max()  # a Waitall waits for its latest sender
    # late receiver: the call completing the send waited for the receive to be posted
    sc = msgs["send_complete_call"].to_numpy()
    ok2 = sc >= 0
    # only if the send really blocked until then (rendezvous); an eager send leaves early
    lr = np.clip(msgs["recv_enter"].to_numpy()[ok2] - start[sc[ok2]], 0,
                 end[sc[ok2]] - start[sc[ok2]])
    lr = np.where(end[sc[ok2]] >= msgs["recv_enter"].to_numpy()[ok2], lr, 0)
    lr_call = pd.Series(lr).groupby(sc[ok2]).max()
    both = pd.concat([ls_call.rename("ls"), lr_call.rename("lr")], axis=1).fillna(0)
    ids = both.index.to_numpy()
    # a call completing a late receive waited for that sender: an eager send completed in
    # the same Waitall needs no receiver, so late sender takes precedence
    take_ls = (both["ls"].to_numpy() > 0) | (both["ls"].to_numpy() >= both["lr"].to_numpy())
    w = np.where(take_ls, both["ls"], both["lr"])
    pos = w > 0
    wait[ids[pos]] = w[pos]
    kind[ids[pos]] = np.where(take_ls[pos], KIND["late_sender"], KIND["late_receiver"])


def compute(trace: Trace) -> WaitStates:
    """Wait states of every call, after correcting clock skew between ranks."""
    corr = skew.detect_and_correct(trace)
    calls = corr.calls
    wait = np.zeros(len(calls), dtype=np.int64)
    kind = np.full(len(calls), -1, dtype=np.int8)  # -1: no waiting
    _p2p_waits(calls, corr.messages, wait, kind)
    _collective_waits(corr.collectives, wait, kind)
    per_call = pd.DataFrame({
        "call": calls["call"].to_numpy(), "rank": calls["rank"].to_numpy(),
        "function": calls["function"], "callsite": calls["callsite"],
        "wait_ns": wait, "wait_kind": pd.Categorical.from_codes(kind, categories=list(KINDS)),
    })
    return WaitStates(per_call, corr.correction)
