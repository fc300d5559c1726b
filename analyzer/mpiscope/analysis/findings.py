"""Findings: concrete, located improvement opportunities ranked by estimated savings.

Kinds (the contract's definitions):
- redundant_collective: a collective whose input and result hashes equal those of the
  previous call from the same call site on the same communicator on every rank, or a
  barrier directly after a synchronizing collective on the same communicator.
- frequent_collective: a small collective run every iteration of the main loop from one
  call site at a notable share of run time; saving replayed by the simulator
  (mpiscope.analysis.simulate) on the machine fitted from the trace, with the collective
  run every k-th iteration, k the smallest of FREQUENT_KS that gets 90% of their best.
- message_aggregation: bursts of small back-to-back messages between one pair; saving
  (m-1)*alpha per burst with alpha from a Hockney fit on the trace's own messages.
- load_imbalance: ranks waiting at a synchronizing call site because others are late;
  the waiting is attributed to the rank(s) that caused it (the late sender of each
  message, the last rank to arrive at each collective), weighted by the time it cost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mpiscope.analysis import iterations, simulate, stats
from mpiscope.analysis.simulate.scenario import CallSite, CollectiveEvery, Scenario
from mpiscope.analysis.waitstates import ALL2ONE, NXN, ONE2ALL, WaitStates
from mpiscope.archive.trace import Trace

SYNCHRONIZING = NXN | {"MPI_Barrier"}
SMALL_COLLECTIVE_BYTES = 1024  # per rank and call
SMALL_MESSAGE_BYTES = 4096
MIN_BURST = 3
NOTABLE_SHARE = 0.02  # of the summed rank time
FREQUENT_KS = (2, 5, 10, 20, 50)  # every k-th iteration: the k tried (2 k <= iterations)
FREQUENT_MIN_ITERATIONS = 20  # a loop this long at least, for a collective to be frequent
FREQUENT_ENOUGH = 0.9  # of the best saving: the smallest k that gets it is proposed


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
    # the frames of the call path, innermost first (`callsite` is the one chosen to name
    # it: docs/callpaths.md); [callsite] where no path was recorded
    callpath: list[str] = field(default_factory=list)
    # what the analysis grouped the calls by (callsite, or callsite and path): not output
    group: str = field(default="", repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("group")
        return d


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def where(function: str, callsite: str) -> str:
    """`MPI_Allreduce at x.c:5`, or a plain statement that the trace has no call site."""
    return f"{function} at {callsite}" if callsite else f"{function} (no call site recorded)"


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
    # 2) a barrier right after a synchronizing collective on the same comm, nothing between;
    # unprovable when the tracer filtered calls out: one may have run in between
    if trace.meta.filtered:
        return out
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
            f"{where(str(function), str(callsite))} is provably redundant in "
            f"{_plural(int(g['instance'].nunique()), 'instance')}: {why}; removing it saves "
            f"its transfer time (~{saving:.3g} s).",
            {"proof": proof, "instances": int(g["instance"].nunique()),
             "ranks": sorted(int(r) for r in g["rank"].unique())}))
    return found


def _every_kth(trace: Trace, function: str, callsite: str, per_iteration: int,
               iterations: int) -> tuple[int, simulate.Replay, dict[int, float]] | None:
    """(k, the replay without change, saving per k tried) of running a collective every
    k-th iteration (keeping one of k * per_iteration calls), k as the module doc says."""
    ks = [k for k in FREQUENT_KS if 2 * k <= iterations]
    if not ks:
        return None
    base = simulate.replay(trace)
    site = CallSite(function, callsite)
    saving = {k: base.replayed_s - simulate.predicted_s(
        trace, Scenario(collective_every=(CollectiveEvery(site, k * per_iteration),)),
        base.fitted) for k in ks}
    best = max(saving.values())
    k = next(k for k in ks if saving[k] >= FREQUENT_ENOUGH * best)
    return k, base, saving


def frequent_collectives(trace: Trace, loop: iterations.Loop | None,
                         total_rank_ns: float) -> list[Finding]:
    if loop is None or loop.iterations < FREQUENT_MIN_ITERATIONS:
        return []
    coll = _with_callsite(trace, trace.collectives)
    coll = coll[coll["function"] != "MPI_Barrier"]
    found = []
    for (callsite, function), g in coll.groupby(["callsite", "function"], observed=True):
        site = loop.sites[(loop.sites["function"] == function)
                          & (loop.sites["callsite"] == callsite)]
        # only a collective in every iteration on every rank calling it: one that already
        # runs only every k-th iteration is not frequent
        if (site.empty or int(site["every"].iloc[0]) != 1
                or int(site["ranks"].iloc[0]) < g["rank"].nunique()):
            continue
        per_iteration = max(int(round(float(site["per_iteration"].iloc[0]))), 1)
        size = (g["bytes_sent"] + g["bytes_recv"]).mean()
        time_ns = float((g["end"] - g["start"]).sum())
        share = time_ns / max(total_rank_ns, 1)
        if size > SMALL_COLLECTIVE_BYTES or share < NOTABLE_SHARE:
            continue
        tried = _every_kth(trace, str(function), str(callsite), per_iteration,
                           loop.iterations)
        if tried is None:
            continue
        k, base, saving = tried
        times = "" if per_iteration == 1 else f"{per_iteration} times "
        found.append(Finding(
            "frequent_collective", str(function), str(callsite), len(g), time_ns / 1e9,
            max(saving[k], 0.0),
            f"{where(str(function), str(callsite))} runs {times}in every iteration of the "
            f"main loop ({loop.iterations} iterations; {g.groupby('rank').size().min()} calls "
            f"per rank, {size:.0f} B, {share:.1%} of rank time). Running it every k={k}-th "
            f"iteration saves ~{max(saving[k], 0.0):.3g} s (replayed: the trace's ranks with "
            "their messages and collectives on the machine fitted from its own timings).",
            {"k": k, "share": share, "bytes_per_call": float(size),
             "iterations": loop.iterations, "per_iteration": per_iteration,
             "model": "simulate (fitted machine)", "replayed_with_all_s": base.replayed_s,
             "replayed_every_k_s": base.replayed_s - saving[k],
             "saving_by_k_s": {int(j): float(v) for j, v in saving.items()}}))
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
            f"{_plural(len(bursts), 'burst')} of {bursts['m'].mean():.1f} small messages "
            f"(mean {g['bytes'].mean():.0f} B) between one pair from "
            f"{where(str(function), str(callsite))}; sending each "
            f"burst as one message saves (m-1)*alpha with alpha={model.alpha_s * 1e6:.2f} us "
            f"(Hockney fit t = alpha + n/beta on this trace, beta={model.beta_Bps / 1e6:.0f} "
            "MB/s).",
            {"bursts": int(len(bursts)), "mean_burst": float(bursts["m"].mean()),
             "alpha_s": model.alpha_s, "beta_Bps": model.beta_Bps,
             "top_pairs": [[int(a), int(b), int(n)] for (a, b), n in pairs.head(5).items()]}))
    return found


WAITING_KINDS = ["wait_at_barrier", "wait_at_nxn", "late_sender", "late_broadcast",
                 "early_reduce"]


def _last_per_group(group: np.ndarray, time: np.ndarray, value: np.ndarray,
                    size: int) -> np.ndarray:
    """Per group id (0..size-1): `value` of its row with the latest `time` (-1: none)."""
    out = np.full(size, -1, dtype=np.int64)
    order = np.lexsort((time, group))
    g = group[order]
    last = np.r_[g[1:] != g[:-1], True] if len(g) else np.zeros(0, dtype=bool)
    out[g[last]] = value[order][last]
    return out


def _culprits(trace: Trace, ws: WaitStates) -> np.ndarray:
    """Per call: the rank it waited for (-1: none). The latest sender of the messages a
    receive completes, the last rank to enter a barrier or N×N collective, the root of a
    broadcast, the last contributor to a reduce; on the clock-skew corrected times the
    wait states were computed from."""
    calls = trace.calls
    off = np.zeros(max(int(trace.num_ranks), 1), dtype=np.int64)
    for r, o in ws.skew.offsets_ns.items():
        off[r] = o
    culprit = np.full(len(calls), -1, dtype=np.int64)
    m = trace.messages
    m = m[m["recv_complete_call"] >= 0]
    if len(m):
        rc = m["recv_complete_call"].to_numpy()
        begin = calls["start"].to_numpy()[rc] + off[m["recv_rank"].to_numpy()]
        late = m["send_enter"].to_numpy() + off[m["send_rank"].to_numpy()] - begin
        latest = _last_per_group(rc, late, m["send_rank"].to_numpy(), len(calls))
        culprit[latest >= 0] = latest[latest >= 0]
    coll = trace.collectives
    if len(coll):
        rank, root = coll["rank"].to_numpy(), coll["root"].to_numpy()
        start = coll["start"].to_numpy() + off[rank]
        inst = coll["instance"].to_numpy()
        size = int(inst.max()) + 1
        last = _last_per_group(inst, start, rank, size)[inst]
        nonroot = rank != root
        last_nonroot = _last_per_group(inst[nonroot], start[nonroot], rank[nonroot],
                                       size)[inst]
        fn = coll["function"].astype(str).to_numpy()
        who = np.where(np.isin(fn, list(ONE2ALL)), root,
                       np.where(np.isin(fn, list(ALL2ONE)), last_nonroot, last))
        culprit[coll["call"].to_numpy()] = who
    return culprit


def _ranks(seconds: pd.Series) -> str:
    return ", ".join(f"rank {r} {s:.3g} s" for r, s in seconds.items())


def _imbalance_text(function: str, callsite: str, wait_s: float, kind: str,
                    by_rank: pd.Series, caused: pd.Series, compute: pd.Series) -> str:
    """Who is late, who waits and how much; "computes longer" only where it does."""
    text = (f"ranks wait {wait_s:.3g} s in {where(function, callsite)} "
            f"({kind.replace('_', ' ')})")
    if caused.empty:
        return text + f"; waiting: {_ranks(by_rank.head(3))}."
    late = int(caused.index[0])
    others = f"; next: {_ranks(caused.iloc[1:3])}" if len(caused) > 1 else ""
    text += (f": rank {late} is late, causing {caused.iloc[0]:.3g} s of it "
             f"({caused.iloc[0] / wait_s:.0%}{others}); waiting: {_ranks(by_rank.head(3))}. ")
    extra = float(compute.get(late, np.nan) - compute.mean())
    if extra > 0:
        return text + (f"Rank {late} computes longer: {extra:.3g} s more than the mean "
                       "rank over the run. Balancing the work would save about the mean "
                       "wait per rank.")
    return text + (f"Rank {late} does not compute longer than the others "
                   f"({compute.get(late, np.nan):.3g} s vs the mean {compute.mean():.3g} s "
                   "over the run), so its delay comes from elsewhere, e.g. its own "
                   "communication or waiting before this call. Removing the delay would "
                   "save about the mean wait per rank.")


def load_imbalance(trace: Trace, ws: WaitStates, breakdown: pd.DataFrame,
                   total_rank_ns: float) -> list[Finding]:
    pc = ws.per_call
    waits = pc[(pc["wait_ns"] > 0) & pc["wait_kind"].isin(WAITING_KINDS)]
    if waits.empty:
        return []
    calls = trace.calls
    compute = breakdown.set_index("rank")["compute_s"]
    waits = waits.assign(culprit=_culprits(trace, ws)[waits["call"].to_numpy()])
    found = []
    for (function, callsite), g in waits.groupby(["function", "callsite"], observed=True):
        total_wait = float(g["wait_ns"].sum())
        if total_wait < NOTABLE_SHARE * total_rank_ns:
            continue
        by_rank = g.groupby("rank")["wait_ns"].sum().sort_values(ascending=False) / 1e9
        caused_ns = (g[g["culprit"] >= 0].groupby("culprit")["wait_ns"].sum()
                     .sort_values(ascending=False, kind="stable"))
        caused = caused_ns / 1e9
        saving = total_wait / 1e9 / max(int(trace.num_ranks), 1)  # all arrive at the mean
        sel = calls.loc[g["call"].to_numpy()]
        kinds = g["wait_kind"].astype(str).value_counts()
        late_rank = int(caused.index[0]) if len(caused) else None
        late_share = float(caused_ns.iloc[0] / total_wait) if len(caused) else None
        found_text = _imbalance_text(str(function), str(callsite), total_wait / 1e9,
                                     kinds.index[0], by_rank, caused, compute)
        found.append(Finding(
            "load_imbalance", str(function), str(callsite), len(g),
            float((sel["end"] - sel["start"]).sum() / 1e9), saving, found_text,
            {"late_rank": late_rank, "late_share": late_share,
             "caused_by_rank_s": {int(r): float(s) for r, s in caused.items()},
             "wait_by_rank_s": {int(r): float(s) for r, s in by_rank.items()},
             "wait_kinds": {str(k): int(v) for k, v in kinds.items()},
             "compute_by_rank_s": {int(r): float(s) for r, s in compute.items()}}))
    return found


def find(trace: Trace, ws: WaitStates, breakdown: pd.DataFrame,
         loop: iterations.Loop | None) -> list[Finding]:
    """All findings, ranked by estimated savings (largest first), from the trace's wait
    states, per-rank breakdown and main loop (an analysis session computes each once)."""
    total_rank_ns = float(breakdown["total_s"].sum() * 1e9)
    found = (redundant_collectives(trace, ws)
             + frequent_collectives(trace, loop, total_rank_ns)
             + message_aggregation(trace)
             + load_imbalance(trace, ws, breakdown, total_rank_ns))
    return sorted(found, key=lambda f: f.estimated_savings_s, reverse=True)
