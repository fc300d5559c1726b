"""Findings: concrete, located improvement opportunities ranked by estimated savings.

Kinds (the contract's definitions):
- redundant_collective: a collective whose input and result hashes equal those of the
  previous call from the same call site on the same communicator on every rank, or a
  barrier directly after a synchronizing collective on the same communicator.
- frequent_collective: a small collective run every iteration of the main loop from one
  call site at a notable share of run time; saving from `replay.every_kth`.
- message_aggregation: bursts of small back-to-back messages between one pair; saving
  (m-1)*alpha per burst with alpha from a Hockney fit on the trace's own messages.
- load_imbalance: ranks waiting at a synchronizing call site because others are late.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mpiscope import iterations, replay, stats
from mpiscope.trace import Trace
from mpiscope.waitstates import NXN, WaitStates

SYNCHRONIZING = NXN | {"MPI_Barrier"}
SMALL_COLLECTIVE_BYTES = 1024  # per rank and call
SMALL_MESSAGE_BYTES = 4096
MIN_BURST = 3
NOTABLE_SHARE = 0.02  # of the summed rank time
FREQUENT_K = 10


@dataclass
class Finding:
    kind: str
    function: str
    callsite: str
    calls: int
    time_s: float
    estimated_savings_s: float
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _with_callsite(trace: Trace, coll: pd.DataFrame) -> pd.DataFrame:
    # categorical take: no per-row string conversion on large traces
    cs = trace.calls["callsite"].take(coll["call"].to_numpy()).to_numpy()
    return coll.assign(callsite=cs)


def _transfer_saving(rows: pd.DataFrame, wait: np.ndarray) -> float:
    """Wall time saved by removing these calls: their non-waiting part on the slowest
    rank (the waiting would move to the next synchronization)."""
    own = (rows["end"] - rows["start"]).to_numpy() - wait[rows["call"].to_numpy()]
    return float(pd.Series(np.maximum(own, 0)).groupby(rows["rank"].to_numpy()).sum().max()
                 / 1e9)


def redundant_collectives(trace: Trace, ws: WaitStates) -> list[Finding]:
    coll = _with_callsite(trace, trace.collectives)
    if coll.empty:
        return []
    wait = ws.per_call["wait_ns"].to_numpy()
    out: list[Finding] = []
    # 1) same input and result as the previous call from this call site and communicator
    c = coll[(coll["in_hash"] != 0) & (coll["out_hash"] != 0)]
    # previous call of the same (rank, call site, comm, function): sort by key, then time
    key = c.groupby(["rank", "callsite", "comm", "function"], observed=True,
                    sort=False).ngroup().to_numpy()
    order = np.lexsort((c["start"].to_numpy(), key))
    k, ih, oh = key[order], c["in_hash"].to_numpy()[order], c["out_hash"].to_numpy()[order]
    same_sorted = np.r_[False, (k[1:] == k[:-1]) & (ih[1:] == ih[:-1]) & (oh[1:] == oh[:-1])]
    same = np.empty(len(c), dtype=bool)
    same[order] = same_sorted
    # proved only if so on every rank of the instance
    proved = pd.Series(same).groupby(c["instance"].to_numpy()).transform("all").to_numpy()
    out += _group_redundant(c[proved], wait,
                            "input and result equal those of the previous call from this "
                            "call site on the same communicator (recorded hashes)",
                            "hash")
    # 2) a barrier right after a synchronizing collective on the same comm, nothing between
    calls = trace.calls[trace.calls["depth"] == 0].sort_values(["rank", "start"])
    fn = calls["function"]
    prev_fn = fn.groupby(calls["rank"].to_numpy(), observed=True).shift(1)
    prev_comm = calls["comm"].groupby(calls["rank"].to_numpy()).shift(1)
    hit = (fn == "MPI_Barrier") & prev_fn.isin(SYNCHRONIZING) & (prev_comm == calls["comm"])
    after = calls.loc[hit, ["call", "function"]].assign(prev=prev_fn[hit])
    b = coll.merge(after[["call", "prev"]], on="call")
    if not b.empty:
        n_in = coll.groupby("instance").size()
        ok = b.groupby("instance")["call"].transform("size") == n_in.reindex(
            b["instance"]).to_numpy()
        b = b[ok.to_numpy()]
        for prev, g in b.groupby("prev"):
            out += _group_redundant(g, wait, f"barrier directly follows {prev} on the same "
                                    "communicator with no MPI call in between", "barrier_after")
    return out


def _group_redundant(rows: pd.DataFrame, wait: np.ndarray, why: str,
                     proof: str) -> list[Finding]:
    found = []
    for (function, callsite), g in rows.groupby(["function", "callsite"]):
        saving = _transfer_saving(g, wait)
        found.append(Finding(
            "redundant_collective", str(function), str(callsite), len(g),
            float((g["end"] - g["start"]).sum() / 1e9), saving,
            f"{function} at {callsite} is provably redundant in {g['instance'].nunique()} "
            f"instances: {why}; removing it saves its transfer time (~{saving:.3g} s).",
            {"proof": proof, "instances": int(g["instance"].nunique()),
             "ranks": sorted(int(r) for r in g["rank"].unique())}))
    return found


def frequent_collectives(trace: Trace, loop: iterations.Loop | None,
                         total_rank_ns: float, k: int = FREQUENT_K) -> list[Finding]:
    if loop is None or loop.iterations < 2 * k:
        return []
    coll = _with_callsite(trace, trace.collectives)
    coll = coll[coll["function"] != "MPI_Barrier"]
    found = []
    per_rank = coll.groupby(["callsite", "function", "rank"]).size()
    for (callsite, function), counts in per_rank.groupby(level=[0, 1]):
        if not callsite or counts.min() < loop.iterations:
            continue
        g = coll[(coll["callsite"] == callsite) & (coll["function"] == function)]
        size = (g["bytes_sent"] + g["bytes_recv"]).mean()
        time_ns = float((g["end"] - g["start"]).sum())
        share = time_ns / max(total_rank_ns, 1)
        if size > SMALL_COLLECTIVE_BYTES or share < NOTABLE_SHARE:
            continue
        r = replay.every_kth(g, k)
        if r is None:
            continue
        found.append(Finding(
            "frequent_collective", str(function), str(callsite), len(g), time_ns / 1e9,
            r.saving_s,
            f"{function} at {callsite} runs every iteration ({int(counts.min())} times per "
            f"rank, {size:.0f} B, {share:.1%} of rank time). Running it every k={k}-th "
            f"iteration saves ~{r.saving_s:.3g} s (iteration-level replay: ranks run their "
            "measured work independently between the kept calls, which synchronize them).",
            {"k": k, "share": share, "bytes_per_call": float(size),
             "iterations": loop.iterations, "model": "replay.every_kth",
             "replayed_with_all_s": r.measured_model_s, "replayed_every_k_s": r.replayed_s}))
    return found


def message_aggregation(trace: Trace) -> list[Finding]:
    m = trace.messages
    model = stats.fit_hockney(trace)
    if m.empty or model is None:
        return []
    calls = trace.calls
    # ordinal of each call among its rank's outermost calls: back-to-back = consecutive
    outer = calls[calls["depth"] == 0].sort_values(["rank", "start"])
    ordinal = np.full(len(calls), -1, dtype=np.int64)
    ordinal[outer["call"].to_numpy()] = outer.groupby("rank").cumcount().to_numpy()
    s = m.assign(o=ordinal[m["send_call"].to_numpy()],
                 callsite=calls["callsite"].take(m["send_call"].to_numpy()).to_numpy(),
                 function=calls["function"].take(m["send_call"].to_numpy()).to_numpy())
    s = s[(s["bytes"] <= SMALL_MESSAGE_BYTES) & (s["o"] >= 0)]
    s = s.sort_values(["send_rank", "recv_rank", "o"])
    pair = s["send_rank"].astype(np.int64) * 1_000_003 + s["recv_rank"]
    new = (pair.diff() != 0) | (s["o"].diff() != 1)
    s = s.assign(burst=new.cumsum())
    size = s.groupby("burst")["burst"].transform("size")
    s = s[size >= MIN_BURST]
    if s.empty:
        return []
    found = []
    for (function, callsite), g in s.groupby(["function", "callsite"]):
        bursts = g.groupby("burst").agg(m=("bytes", "size"), b=("bytes", "sum"))
        saving = float(((bursts["m"] - 1) * model.alpha_s).sum())
        # saving is spread over the sending ranks, which work in parallel
        saving /= max(g["send_rank"].nunique(), 1)
        sc = g["send_call"].to_numpy()
        time_s = float((calls["end"].to_numpy()[sc] - calls["start"].to_numpy()[sc]).sum()
                       / 1e9)
        pairs = g.groupby(["send_rank", "recv_rank"]).size().sort_values(ascending=False)
        found.append(Finding(
            "message_aggregation", str(function), str(callsite), len(g), time_s, saving,
            f"{len(bursts)} bursts of {bursts['m'].mean():.1f} small messages "
            f"(mean {g['bytes'].mean():.0f} B) between one pair from {callsite}; sending each "
            f"burst as one message saves (m-1)*alpha with alpha={model.alpha_s * 1e6:.2f} us "
            f"(Hockney fit t = alpha + n/beta on this trace, beta={model.beta_Bps / 1e6:.0f} "
            "MB/s).",
            {"bursts": int(len(bursts)), "mean_burst": float(bursts["m"].mean()),
             "alpha_s": model.alpha_s, "beta_Bps": model.beta_Bps,
             "top_pairs": [[int(a), int(b), int(n)] for (a, b), n in pairs.head(5).items()]}))
    return found


def _last_arrivers(trace: Trace) -> pd.DataFrame:
    """instance -> rank that entered last (the one the others waited for)."""
    coll = trace.collectives
    if coll.empty:
        return pd.DataFrame(columns=["instance", "rank", "callsite"])
    last = coll.loc[coll.groupby("instance")["start"].idxmax(), ["instance", "rank", "call"]]
    return last.assign(callsite=trace.calls["callsite"].take(last["call"].to_numpy())
                       .to_numpy())


def load_imbalance(trace: Trace, ws: WaitStates, breakdown: pd.DataFrame,
                   total_rank_ns: float) -> list[Finding]:
    pc = ws.per_call
    waits = pc[(pc["wait_ns"] > 0) & pc["wait_kind"].isin(
        ["wait_at_barrier", "wait_at_nxn", "late_sender", "late_broadcast", "early_reduce"])]
    if waits.empty:
        return []
    calls = trace.calls
    compute = breakdown.set_index("rank")["compute_s"]
    last = _last_arrivers(trace)
    found = []
    for (function, callsite), g in waits.groupby(["function", "callsite"], observed=True):
        total_wait = float(g["wait_ns"].sum())
        if total_wait < NOTABLE_SHARE * total_rank_ns:
            continue
        by_rank = g.groupby("rank")["wait_ns"].sum().sort_values(ascending=False) / 1e9
        saving = total_wait / 1e9 / max(int(trace.num_ranks), 1)  # all arrive at the mean
        late = last[last["callsite"] == str(callsite)]["rank"].value_counts()
        if len(late):  # a collective: who entered last
            late_rank, late_share = int(late.index[0]), float(late.iloc[0] / late.sum())
        else:  # point-to-point: the senders of the messages these calls waited for
            m = trace.messages
            senders = m[m["recv_complete_call"].isin(g["call"])]["send_rank"].value_counts()
            late_rank = int(senders.index[0]) if len(senders) else int(compute.idxmax())
            late_share = float("nan")
        sel = calls.loc[g["call"].to_numpy()]
        kinds = g["wait_kind"].astype(str).value_counts()
        share_txt = "" if np.isnan(late_share) else f", last to arrive in {late_share:.0%}"
        found.append(Finding(
            "load_imbalance", str(function), str(callsite), len(g),
            float((sel["end"] - sel["start"]).sum() / 1e9), saving,
            f"ranks wait {total_wait / 1e9:.3g} s in {function} at {callsite} "
            f"({kinds.index[0].replace('_', ' ')}) because others compute longer: rank "
            f"{late_rank} is late (computes {compute[late_rank] - compute.mean():+.3g} s vs "
            f"the mean{share_txt}); most waiting: "
            + ", ".join(f"rank {r} {s:.3g} s" for r, s in by_rank.head(3).items())
            + ". Balancing the work would save about the mean wait per rank.",
            {"late_rank": late_rank,
             "late_share": None if np.isnan(late_share) else late_share,
             "wait_by_rank_s": {int(r): float(s) for r, s in by_rank.items()},
             "wait_kinds": {str(k): int(v) for k, v in kinds.items()},
             "compute_by_rank_s": {int(r): float(s) for r, s in compute.items()}}))
    return found


def find(trace: Trace, ws: WaitStates | None = None, breakdown: pd.DataFrame | None = None,
         loop: iterations.Loop | None = None) -> list[Finding]:
    """All findings, ranked by estimated savings (largest first)."""
    from mpiscope import breakdown as bd
    from mpiscope import waitstates

    ws = ws if ws is not None else waitstates.compute(trace)
    breakdown = breakdown if breakdown is not None else bd.per_rank(trace, ws)
    loop = loop if loop is not None else iterations.detect(trace)
    total_rank_ns = float(breakdown["total_s"].sum() * 1e9)
    found = (redundant_collectives(trace, ws)
             + frequent_collectives(trace, loop, total_rank_ns)
             + message_aggregation(trace)
             + load_imbalance(trace, ws, breakdown, total_rank_ns))
    return sorted(found, key=lambda f: f.estimated_savings_s, reverse=True)
