"""Wait states with Scalasca's definitions, per call (vectorized).

Every MPI call gets `wait_ns`, the part of it spent waiting for a late partner, and
`wait_kind`: late_sender, late_receiver, wait_at_barrier, wait_at_nxn, late_broadcast,
early_reduce, wait_at_fence, late_post, early_wait, lock_contention. Non-blocking calls
are done right: a Wait/Waitall is matched to the messages and non-blocking collectives it
completed, and only the time before the partner even started counts as waiting (the rest
is transfer). RMA (Scalasca's terms): a fence is an N×N synchronization over the window's
communicator (its waiting also counts in `wait_at_nxn`); general active target has late
post (an origin's Start, or the RMA operation or Complete of its epoch where Start
returned at once, waiting for the target's Post) and early wait (the target's Wait
entered before the last origin's Complete); lock contention is the time a lock request
waited while another rank held a conflicting lock on the same target.

The rules are written per rank plus a combine (`instance_starts`/`combine_instances`
per collective instance, `p2p_rule` on a rank's calls and messages, ...): `compute` runs
them on the whole trace, `engines.waits` rank by rank on Dask workers; general active
target and lock contention run on the RMA synchronization rows (gathered there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope.analysis import skew
from mpiscope.archive.trace import Trace


def _with_large_count(names: set[str]) -> set[str]:
    """MPI_X and its MPI-4 large-count twin MPI_X_c, which the interposer records alike."""
    return names | {f"{n}_c" for n in names}


NXN = _with_large_count({"MPI_Allreduce", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
                         "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Reduce_scatter",
                         "MPI_Reduce_scatter_block"})
ONE2ALL = _with_large_count({"MPI_Bcast", "MPI_Scatter", "MPI_Scatterv"})
ALL2ONE = _with_large_count({"MPI_Reduce", "MPI_Gather", "MPI_Gatherv"})
KINDS = ("late_sender", "late_receiver", "wait_at_barrier", "wait_at_nxn", "late_broadcast",
         "early_reduce", "wait_at_fence", "late_post", "early_wait", "lock_contention")
# per-call kinds that also count in a broader total (`totals`): a fence is an N×N wait
ALSO_COUNTED_IN = {"wait_at_fence": "wait_at_nxn"}
# non-blocking collectives, by the waiting their completion can show (as the blocking ones)
NBC_BARRIER = {"MPI_Ibarrier"}
NBC_ONE2ALL = _with_large_count({"MPI_Ibcast", "MPI_Iscatter", "MPI_Iscatterv"})
NBC_ALL2ONE = _with_large_count({"MPI_Ireduce", "MPI_Igather", "MPI_Igatherv"})
NBC_NXN = _with_large_count({"MPI_Iallreduce", "MPI_Iallgather", "MPI_Iallgatherv",
                             "MPI_Ialltoall", "MPI_Ialltoallv", "MPI_Ialltoallw",
                             "MPI_Ireduce_scatter", "MPI_Ireduce_scatter_block"})
KIND = {k: i for i, k in enumerate(KINDS)}  # codes of the wait_kind categorical


def kind_sums(per_call: pd.DataFrame) -> pd.DataFrame:
    """wait_ns summed per rank and kind: index rank, a column per kind (int64). Ranks
    with calls but no waiting have a row of zeros. A rank's calls give its row."""
    codes = per_call["wait_kind"].cat.codes.to_numpy()
    rank = per_call["rank"].to_numpy()
    ok = codes >= 0
    g = pd.Series(per_call["wait_ns"].to_numpy()[ok]).groupby(
        [rank[ok], codes[ok]]).sum()
    ranks = pd.Index(np.unique(rank), name="rank")
    out = pd.DataFrame(0, index=ranks, columns=list(KINDS), dtype=np.int64)
    for (r, k), v in g.items():
        out.iat[ranks.get_loc(r), int(k)] = int(v)
    return out


def totals_of(sums: pd.DataFrame) -> dict[str, float]:
    """Seconds per wait-state kind, summed over ranks (`sums`: kind_sums of all ranks)."""
    out = {k: float(sums[k].sum()) / 1e9 for k in KINDS}
    for part, whole in ALSO_COUNTED_IN.items():
        out[whole] += out[part]
    return out


def per_rank_of(sums: pd.DataFrame) -> pd.DataFrame:
    t = sums.copy()
    for part, whole in ALSO_COUNTED_IN.items():
        t[whole] = t[whole] + t[part]
    return t / 1e9


def callsite_sums(per_call: pd.DataFrame) -> pd.DataFrame:
    """Calls that waited, per (function, callsite, wait_kind): calls, wait_ns."""
    w = per_call[per_call["wait_ns"] > 0]
    g = w.groupby(["function", "callsite", "wait_kind"], observed=True)["wait_ns"]
    return g.agg(["count", "sum"]).rename(columns={"count": "calls", "sum": "wait_ns"})


def per_callsite_of(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The waiting per call site, largest first, from `callsite_sums` of every rank."""
    p = pd.concat([x.reset_index() for x in parts], ignore_index=True)
    g = p.groupby(["function", "callsite", "wait_kind"], observed=True)
    return (pd.DataFrame({"calls": g["calls"].sum(), "wait_ns": g["wait_ns"].sum()})
            .reset_index().sort_values("wait_ns", ascending=False))


@dataclass
class WaitStates:
    per_call: pd.DataFrame  # call, rank, function, callsite, wait_ns, wait_kind
    skew: skew.SkewCorrection

    def totals(self) -> dict[str, float]:
        """Seconds per wait-state kind, summed over ranks."""
        return totals_of(kind_sums(self.per_call))

    def per_rank(self) -> pd.DataFrame:
        return per_rank_of(kind_sums(self.per_call))

    def per_callsite(self) -> pd.DataFrame:
        return per_callsite_of([callsite_sums(self.per_call)])


BIG = np.iinfo(np.int64).max
SMALL = np.iinfo(np.int64).min


def instance_starts(keys: pd.DataFrame, start: np.ndarray, is_root: np.ndarray
                    ) -> pd.DataFrame:
    """Per collective instance (the rows of `keys`): last (max start), root_start (min
    start of a root, BIG if none), nonroot_last (max start of a non-root, SMALL if none).
    A rank's rows give its part; `combine_instances` of the parts gives the whole."""
    cols = list(keys.columns)
    df = keys.assign(last=start, root_start=np.where(is_root, start, BIG),
                     nonroot_last=np.where(is_root, SMALL, start))
    return df.groupby(cols, sort=False).agg(
        {"last": "max", "root_start": "min", "nonroot_last": "max"})


def combine_instances(parts: list[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=["last", "root_start", "nonroot_last"], dtype=np.int64)
    return pd.concat(parts).groupby(level=list(range(parts[0].index.nlevels)),
                                    sort=False).agg(
        {"last": "max", "root_start": "min", "nonroot_last": "max"})


def _lookup(agg: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """agg's row of each row of keys (aligned with keys)."""
    idx = (pd.MultiIndex.from_frame(keys) if keys.shape[1] > 1
           else pd.Index(keys.iloc[:, 0]))
    return agg.reindex(idx)


def collective_keys(coll: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    return coll[["instance"]], (coll["rank"] == coll["root"]).to_numpy()


def collective_rule(coll: pd.DataFrame, agg: pd.DataFrame, idx: np.ndarray,
                    wait: np.ndarray, kind: np.ndarray) -> None:
    """Waits of blocking collectives (`idx`: the rows of `wait` of coll's calls; `agg`:
    `instance_starts` of every rank's collectives)."""
    if coll.empty:
        return
    starts = coll["start"].to_numpy()
    dur = (coll["end"] - coll["start"]).to_numpy()
    fn_cat = coll["function"]
    keys, is_root = collective_keys(coll)
    a = _lookup(agg, keys)
    last_in = a["last"].to_numpy(np.int64)
    # barrier and N×N: everyone waits for the last one to arrive
    barrier = (fn_cat == "MPI_Barrier").to_numpy()
    sync = barrier | fn_cat.isin(NXN).to_numpy()
    w = np.clip(last_in - starts, 0, dur)
    wait[idx[sync]] = w[sync]
    kind[idx[sync]] = np.where(barrier[sync], KIND["wait_at_barrier"], KIND["wait_at_nxn"])
    # one-to-all: non-roots that enter before the root wait for it (late broadcast)
    root_start = a["root_start"].to_numpy(np.int64)
    one = fn_cat.isin(ONE2ALL).to_numpy() & ~is_root & (root_start < BIG)
    wait[idx[one]] = np.clip(root_start[one] - starts[one], 0, dur[one])
    kind[idx[one]] = KIND["late_broadcast"]
    # all-to-one: the root waits for the last contributor (early reduce)
    nonroot_last = a["nonroot_last"].to_numpy(np.int64)
    red = fn_cat.isin(ALL2ONE).to_numpy() & is_root
    wait[idx[red]] = np.clip(nonroot_last[red] - starts[red], 0, dur[red])
    kind[idx[red]] = KIND["early_reduce"]


def _collective_waits(coll: pd.DataFrame, wait: np.ndarray, kind: np.ndarray) -> None:
    if coll.empty:
        return
    keys, is_root = collective_keys(coll)
    agg = instance_starts(keys, coll["start"].to_numpy(), is_root)
    collective_rule(coll, agg, coll["call"].to_numpy(), wait, kind)


def p2p_rule(start: np.ndarray, end: np.ndarray, rc: np.ndarray, send_enter: np.ndarray,
             sc: np.ndarray, recv_enter: np.ndarray, wait: np.ndarray,
             kind: np.ndarray) -> None:
    """Late sender / late receiver. `rc`: the row (in start/end) of the call completing
    each receive, with its message's send_enter; `sc`: the call completing each send,
    with its message's recv_enter (only messages whose call is known). A rank's own
    calls with the messages it received (rc) and sent (sc) give its calls' waits."""
    if len(rc) == 0 and len(sc) == 0:
        return
    # late sender: the call completing the receive started before the send was posted
    ls = np.clip(send_enter - start[rc], 0, end[rc] - start[rc])
    ls_call = _max_per_call(len(start), rc, ls)  # a Waitall waits for its latest sender
    # late receiver: the call completing the send waited for the receive to be posted,
    # only if the send really blocked until then (rendezvous); an eager send leaves early
    lr = np.clip(recv_enter - start[sc], 0, end[sc] - start[sc])
    lr = np.where(end[sc] >= recv_enter, lr, 0)
    lr_call = _max_per_call(len(start), sc, lr)
    # a call completing a late receive waited for that sender: an eager send completed in
    # the same Waitall needs no receiver, so late sender takes precedence
    take_ls = (ls_call > 0) | (ls_call >= lr_call)
    w = np.where(take_ls, ls_call, lr_call)
    ids = np.flatnonzero(w > 0)
    wait[ids] = w[ids]
    kind[ids] = np.where(take_ls[ids], KIND["late_sender"], KIND["late_receiver"])


def _max_per_call(n: int, call: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Per call row 0..n-1: the largest `value` of its messages, 0 for a call with none."""
    out = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(out, call, value.astype(np.int64))
    return np.where(out == np.iinfo(np.int64).min, 0, out)


def completing(msgs: pd.DataFrame, call_col: str, time_col: str, offset: int = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """(row of the completing call, partner's time) of the messages whose call is known."""
    c = msgs[call_col].to_numpy()
    ok = c >= 0
    return c[ok] - offset, msgs[time_col].to_numpy()[ok]


def _p2p_waits(calls: pd.DataFrame, msgs: pd.DataFrame, wait: np.ndarray,
               kind: np.ndarray) -> None:
    if msgs.empty:
        return
    rc, se = completing(msgs, "recv_complete_call", "send_enter")
    sc, re_ = completing(msgs, "send_complete_call", "recv_enter")
    p2p_rule(calls["start"].to_numpy(), calls["end"].to_numpy(), rc, se, sc, re_, wait, kind)


def _set(wait: np.ndarray, kind: np.ndarray, calls: np.ndarray, w: np.ndarray,
         code: int | np.ndarray) -> None:
    """Record waits where they exceed what the call already has (one kind per call: its
    largest wait, as a Waitall keeps its latest sender)."""
    if len(calls) == 0:
        return
    df = pd.DataFrame({"call": calls, "w": w, "k": np.broadcast_to(code, len(calls))})
    df = df.sort_values("w", kind="stable").drop_duplicates("call", keep="last")
    c, w_, k_ = df["call"].to_numpy(), df["w"].to_numpy(), df["k"].to_numpy()
    more = w_ > wait[c]
    wait[c[more]] = w_[more]
    kind[c[more]] = k_[more]


def nbc_posts(start: np.ndarray, fn: np.ndarray, p2p: pd.DataFrame, offset: int = 0
              ) -> pd.DataFrame | None:
    """Completions of non-blocking collectives with their posting call (rows of
    start/fn: global call id - offset): done, enter, function, rank, comm, seq, peer.
    Per rank (a rank's p2p rows give its rows)."""
    if p2p.empty:
        return None
    ev = p2p["event"]
    req = p2p[(ev == "nbc_request").to_numpy()]
    done = p2p[(ev == "nbc_complete").to_numpy()]
    if req.empty or done.empty:
        return None
    # each completion's posting call: the latest request of that id on the rank before it
    r = req[["rank", "request", "time", "call"]].rename(columns={"call": "post", "time": "t"})
    d = done[["rank", "request", "time", "call", "comm", "peer"]].rename(
        columns={"call": "done", "time": "t"})
    r = r.sort_values("t", kind="stable")
    d = d.sort_values("t", kind="stable")
    m = pd.merge_asof(d, r, on="t", by=["rank", "request"], direction="backward")
    m = m[(m["post"].fillna(-1) >= 0) & (m["done"] >= 0)].copy()
    if m.empty:
        return None
    m["post"] = m["post"].astype(np.int64) - offset
    m["done"] = m["done"].to_numpy() - offset
    m["enter"] = start[m["post"].to_numpy()]
    m["function"] = fn[m["post"].to_numpy()]
    # instance: the n-th non-blocking collective on a communicator, per rank in post order
    m = m.sort_values(["rank", "enter"], kind="stable")
    m["seq"] = m.groupby(["rank", "comm"]).cumcount()
    return m


def nbc_instances(m: pd.DataFrame | None) -> pd.DataFrame | None:
    if m is None:
        return None
    return instance_starts(m[["comm", "seq"]], m["enter"].to_numpy(),
                           (m["rank"] == m["peer"]).to_numpy())


def nbc_rule(m: pd.DataFrame | None, agg: pd.DataFrame, start: np.ndarray, end: np.ndarray,
             wait: np.ndarray, kind: np.ndarray) -> None:
    """Non-blocking collectives completed in Wait/Test: the completing call cannot finish
    before the partners it depends on posted the collective; the time from its Enter to
    that post is waiting, the rest transfer (as for point-to-point)."""
    if m is None:
        return
    a = _lookup(agg, m[["comm", "seq"]])
    rank = m["rank"].to_numpy()
    root = m["peer"].to_numpy()
    fn = m["function"].astype(str).to_numpy()
    last = a["last"].to_numpy(np.int64)
    root_post = a["root_start"].to_numpy(np.int64)
    nonroot_last = a["nonroot_last"].to_numpy(np.int64)
    target = np.full(len(m), -1, dtype=np.int64)  # time the completion waited for
    code = np.full(len(m), -1, dtype=np.int8)
    nxn = np.isin(fn, list(NBC_NXN | NBC_BARRIER))
    target[nxn] = last[nxn]
    code[nxn] = np.where(np.isin(fn[nxn], list(NBC_BARRIER)), KIND["wait_at_barrier"],
                         KIND["wait_at_nxn"])
    one = np.isin(fn, list(NBC_ONE2ALL)) & (rank != root) & (root_post < BIG)
    target[one] = root_post[one]
    code[one] = KIND["late_broadcast"]
    red = np.isin(fn, list(NBC_ALL2ONE)) & (rank == root)
    target[red] = nonroot_last[red]
    code[red] = KIND["early_reduce"]
    ok = code >= 0
    dc = m["done"].to_numpy()[ok]
    w = np.clip(target[ok] - start[dc], 0, end[dc] - start[dc])
    _set(wait, kind, dc, w, code[ok])


def _nbc_waits(calls: pd.DataFrame, p2p: pd.DataFrame, wait: np.ndarray,
               kind: np.ndarray) -> None:
    start = calls["start"].to_numpy()
    m = nbc_posts(start, calls["function"].to_numpy(), p2p)
    if m is not None:
        nbc_rule(m, nbc_instances(m), start, calls["end"].to_numpy(), wait, kind)


def fence_rows(start: np.ndarray, end: np.ndarray, sync: pd.DataFrame, offset: int = 0
               ) -> pd.DataFrame | None:
    """The fences of `sync` (per rank): c (row of its call), win, seq (the k-th fence of
    the rank on the window), start, end."""
    f = sync[(sync["event"] == "fence").to_numpy() & (sync["call"] >= 0).to_numpy()]
    if f.empty:
        return None
    f = f.drop_duplicates("call")
    c = f["call"].to_numpy() - offset
    df = pd.DataFrame({"rank": f["rank"].to_numpy(), "win": f["win"].to_numpy(),
                       "start": start[c], "end": end[c], "c": c})
    df["seq"] = df.sort_values(["rank", "start"], kind="stable").groupby(
        ["rank", "win"]).cumcount()  # aligned back by index
    return df


def fence_instances(f: pd.DataFrame | None) -> pd.DataFrame | None:
    return None if f is None else f.groupby(["win", "seq"], sort=False)[["start"]].max()


def combine_fences(parts: list) -> pd.DataFrame | None:
    parts = [p for p in parts if p is not None]
    return pd.concat(parts).groupby(level=[0, 1], sort=False)[["start"]].max() if parts \
        else None


def fence_rule(f: pd.DataFrame | None, agg: pd.DataFrame | None, wait: np.ndarray,
               kind: np.ndarray) -> None:
    """MPI_Win_fence as N×N over the window's communicator: the k-th fence on a window
    waits, on every rank, for the last rank to enter its k-th fence."""
    if f is None or agg is None:
        return
    last = _lookup(agg, f[["win", "seq"]])["start"].to_numpy(np.int64)
    start, end = f["start"].to_numpy(), f["end"].to_numpy()
    _set(wait, kind, f["c"].to_numpy(), np.clip(last - start, 0, end - start),
         KIND["wait_at_fence"])


def _fence_waits(calls: pd.DataFrame, sync: pd.DataFrame, wait: np.ndarray,
                 kind: np.ndarray) -> None:
    f = fence_rows(calls["start"].to_numpy(), calls["end"].to_numpy(), sync)
    fence_rule(f, fence_instances(f), wait, kind)


def _gats_waits(calls: pd.DataFrame, sync: pd.DataFrame, rma: pd.DataFrame,
                wait: np.ndarray, kind: np.ndarray) -> None:
    """General active target (post/start/complete/wait), Scalasca's late post and early
    wait. Epochs pair up per (window, origin, target) in order: the target's n-th Post
    naming the origin with the origin's n-th Start naming the target; the Complete and
    the Wait that close them are the next ones on the same window and rank."""
    g = sync[(sync["event"] == "group_sync").to_numpy() & (sync["call"] >= 0).to_numpy()]
    if g.empty:
        return
    fn = calls["function"].to_numpy()
    start = calls["start"].to_numpy()
    end = calls["end"].to_numpy()
    g = g.drop_duplicates("call")
    gf = fn[g["call"].to_numpy()]
    rows = {name: g[gf == name] for name in ("MPI_Win_post", "MPI_Win_start",
                                             "MPI_Win_complete", "MPI_Win_wait",
                                             "MPI_Win_test")}

    def closing(opens: pd.DataFrame, closes: pd.DataFrame) -> dict[int, int]:
        """call of each opening event -> the call that closes its epoch (the next closing
        call on the same rank and window)."""
        out: dict[int, int] = {}
        if opens.empty or closes.empty:
            return out
        a = opens[["rank", "win", "call"]].assign(t=start[opens["call"].to_numpy()])
        b = closes[["rank", "win", "call"]].rename(columns={"call": "close"}).assign(
            t=end[closes["call"].to_numpy()])
        a = a.sort_values("t", kind="stable")
        b = b.sort_values("t", kind="stable")
        m = pd.merge_asof(a, b, on="t", by=["rank", "win"], direction="forward")
        for call, close in zip(m["call"], m["close"], strict=True):
            if close == close:  # not NaN
                out[int(call)] = int(close)
        return out

    complete_of = closing(rows["MPI_Win_start"], rows["MPI_Win_complete"])
    wait_of = closing(rows["MPI_Win_post"],
                      pd.concat([rows["MPI_Win_wait"], rows["MPI_Win_test"]]))
    # (win, origin, target) -> the n-th post / start calls
    posts: dict[tuple[int, int, int], list[int]] = {}
    starts: dict[tuple[int, int, int], list[int]] = {}
    for table, into, me_is in ((rows["MPI_Win_post"], posts, "target"),
                               (rows["MPI_Win_start"], starts, "origin")):
        t = table.assign(t=start[table["call"].to_numpy()]).sort_values("t", kind="stable")
        for r, w, call, members in zip(t["rank"], t["win"], t["call"], t["members"],
                                       strict=True):
            for other in members:
                key = (int(w), int(r), int(other)) if me_is == "origin" else (
                    int(w), int(other), int(r))
                into.setdefault(key, []).append(int(call))
    # the RMA calls of each (rank, window, target), in time order: candidates for the
    # late post of an epoch whose Start returned at once (the operation may block)
    ops = rma[rma["call"] >= 0]
    op_calls = {k: g["call"].to_numpy() for k, g in ops.groupby(
        [ops["rank"].to_numpy(), ops["win"].to_numpy(), ops["target"].to_numpy()])}
    late_calls, late_w = [], []
    last_complete: dict[int, int] = {}  # target's Wait call -> last origin Complete enter
    for key, st in starts.items():
        win, origin, target = key
        for post, origin_start in zip(posts.get(key, []), st, strict=False):
            post_enter = start[post]
            comp = complete_of.get(origin_start)
            # late post: the first call of the access epoch still running when the
            # target posted waited for it: Start, else an RMA operation, else Complete
            epoch = op_calls.get((origin, win, target), np.zeros(0, np.int64))
            hi = end[comp] if comp is not None else np.iinfo(np.int64).max
            epoch = epoch[(start[epoch] >= start[origin_start]) & (end[epoch] <= hi)]
            for call in (origin_start, *epoch.tolist(), comp):
                if call is not None and end[call] > post_enter:
                    late_calls.append(call)
                    late_w.append(min(max(post_enter - start[call], 0), end[call] - start[call]))
                    break
            tw = wait_of.get(post)
            if comp is not None and tw is not None:
                last_complete[tw] = max(last_complete.get(tw, start[comp]), start[comp])
    _set(wait, kind, np.asarray(late_calls, np.int64), np.asarray(late_w, np.int64),
         KIND["late_post"])
    if last_complete:
        tw = np.fromiter(last_complete, np.int64)
        lc = np.fromiter(last_complete.values(), np.int64)
        _set(wait, kind, tw, np.clip(lc - start[tw], 0, end[tw] - start[tw]),
             KIND["early_wait"])


def _last_conflicting_release(held: pd.DataFrame) -> np.ndarray:
    """Per lock held (`held`: rank, win, remote, lock_type, t_acq, t_rel), the last
    release at or before its acquisition of a conflicting lock (exclusive on either
    side: lock_type 0) another rank held on the same window and target; NaN where none.
    A release follows its acquisition, so it is the largest such t_rel: per (window,
    target) and other rank, one sorted search (not each lock against every other)."""
    n = len(held)
    best = np.full(n, -np.inf)
    rank = held["rank"].to_numpy()
    excl = held["lock_type"].to_numpy() == 0
    t_acq = held["t_acq"].to_numpy(np.float64)
    t_rel = held["t_rel"].to_numpy(np.float64)
    remote = held["remote"].to_numpy()
    for rows in held.groupby(["win", "remote"], sort=False).indices.values():
        if remote[rows[0]] < 0:
            continue
        for r in np.unique(rank[rows]):
            mine = rows[rank[rows] == r]
            mine = mine[~np.isnan(t_rel[mine])]
            others = rows[rank[rows] != r]
            if not len(mine) or not len(others):
                continue
            # an exclusive lock conflicts with any of r's, a shared one with r's exclusive
            for of, to in ((mine, others[excl[others]]),
                           (mine[excl[mine]], others[~excl[others]])):
                if not len(of) or not len(to):
                    continue
                rel = np.sort(t_rel[of])
                pos = np.searchsorted(rel, t_acq[to], side="right") - 1
                got = pos >= 0
                best[to[got]] = np.maximum(best[to[got]], rel[pos[got]])
    return np.where(np.isinf(best), np.nan, best)


def _lock_waits(calls: pd.DataFrame, sync: pd.DataFrame, wait: np.ndarray,
                kind: np.ndarray) -> None:
    """Lock contention, where the trace shows it (request and acquisition recorded): a
    request waited until another rank released a conflicting lock (exclusive on either
    side) on the same window and target; the waiting is charged to the call in which the
    lock was acquired."""
    ev = sync["event"]
    req = sync[(ev == "request_lock").to_numpy()]
    acq = sync[(ev == "acquire_lock").to_numpy()]
    rel = sync[(ev == "release_lock").to_numpy()]
    if req.empty or acq.empty or rel.empty:
        return
    key = ["rank", "win", "remote", "lock_id"]
    a = acq[[*key, "time", "call", "lock_type"]].sort_values("time", kind="stable")
    r = req[[*key, "time"]].rename(columns={"time": "t_req"}).assign(time=req["time"])
    r = r.sort_values("time", kind="stable")
    held = pd.merge_asof(a, r, on="time", by=key, direction="backward")
    held = held.rename(columns={"time": "t_acq"})
    rl = rel[[*key, "time"]].rename(columns={"time": "t_rel"}).assign(
        time=rel["time"]).sort_values("time", kind="stable")
    held = pd.merge_asof(held.assign(time=held["t_acq"]).sort_values("time"), rl, on="time",
                         by=key, direction="forward")
    start = calls["start"].to_numpy()
    end = calls["end"].to_numpy()
    released = _last_conflicting_release(held)
    t_req = held["t_req"].to_numpy(np.float64)
    call = held["call"].to_numpy(np.int64)
    # waited: a conflicting lock was released after the request, before the acquisition
    hit = np.flatnonzero((call >= 0) & (released > t_req))  # NaN compares False
    out_c = call[hit]
    first = np.maximum(t_req[hit].astype(np.int64), start[out_c])
    out_w = np.minimum(np.maximum(released[hit].astype(np.int64) - first, 0),
                       end[out_c] - start[out_c])
    _set(wait, kind, out_c, out_w.astype(np.int64), KIND["lock_contention"])


def _sync_corrected(trace: Trace, calls: pd.DataFrame) -> pd.DataFrame:
    """rma_sync rows with times on the corrected clock (as their calls)."""
    s = trace.rma_sync
    if s.empty or calls is trace.calls:
        return s
    shift = (calls["start"].to_numpy() - trace.calls["start"].to_numpy())
    by_rank = pd.Series(shift).groupby(calls["rank"].to_numpy()).first()
    return s.assign(time=s["time"].to_numpy() + by_rank.reindex(
        s["rank"].to_numpy()).fillna(0).to_numpy().astype(np.int64))


def compute(trace: Trace) -> WaitStates:
    """Wait states of every call, after correcting clock skew between ranks."""
    corr = skew.detect_and_correct(trace)
    calls = corr.calls
    wait = np.zeros(len(calls), dtype=np.int64)
    kind = np.full(len(calls), -1, dtype=np.int8)  # -1: no waiting
    _p2p_waits(calls, corr.messages, wait, kind)
    _collective_waits(corr.collectives, wait, kind)
    _nbc_waits(calls, trace.p2p, wait, kind)
    if len(trace.rma_sync):
        sync = _sync_corrected(trace, calls)
        _fence_waits(calls, sync, wait, kind)
        _gats_waits(calls, sync, trace.rma, wait, kind)
        _lock_waits(calls, sync, wait, kind)
    # the calls' own columns, not copies (copy-on-write keeps them apart): kept for the
    # whole session beside the calls table
    per_call = pd.DataFrame({
        "call": calls["call"], "rank": calls["rank"],
        "function": calls["function"], "callsite": calls["callsite"],
        "wait_ns": wait, "wait_kind": pd.Categorical.from_codes(kind, categories=list(KINDS)),
    }, copy=False)
    per_call.index = pd.RangeIndex(len(per_call))  # as before, whatever the calls' index
    return WaitStates(per_call, corr.correction)
