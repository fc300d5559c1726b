"""The replay engine: runs a Program (program.py) and returns when each op starts and
ends and when each message arrives. `run` is the native engine (analyzer/native/
replay.c), `reference` the same algorithm in Python.

Ranks advance one at a time, each as far as it can: an op starts when the previous one
ends plus the computation between them, makes its posts (a send's arrival is known once
it is posted eagerly, or once its receive is posted for a rendezvous), and ends at
`max(start, its dependencies) + cost`, less the noise that waiting longer than on
the traced machine hides (`absorb`, at most that extra wait). A rank whose next op
depends on something not yet known waits while the others run; no rank able to move
means the program deadlocks (which a trace of a finished run cannot do, short of a
scenario removing a partner).
Times are float ns from the replay's start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpiscope.analysis.simulate.program import Program
from mpiscope.errors import UserError

NAN = float("nan")


@dataclass
class Timeline:
    start: np.ndarray  # per op
    end: np.ndarray
    arrival: np.ndarray  # per message of the program
    send_done: np.ndarray  # per message: when the send side was complete
    rank_end: np.ndarray  # per rank, with the computation after its last op

    @property
    def runtime_ns(self) -> float:
        return float(self.rank_end.max()) if len(self.rank_end) else 0.0


def _deadlock(ranks: list[int]) -> UserError:
    return UserError("whatif", f"the replay deadlocks: ranks {ranks[:8]} wait for messages "
                     "or collectives that never come (a partner removed?)")


def run(p: Program) -> Timeline:
    """The replay, by the native engine (analyzer/native/replay.c)."""
    from mpiscope.analysis.simulate import native

    def c(a: np.ndarray, dtype: type) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=dtype)

    n_msg = len(p.msg_row)
    out = {"start": np.empty(p.num_ops), "end": np.empty(p.num_ops),
           "arrival": np.empty(n_msg), "s_post": np.empty(n_msg),
           "rank_clock": np.empty(p.num_ranks)}
    i64, f64, u8 = np.int64, np.float64, np.uint8
    arrays = {
        "op_lo": c(p.op_lo, i64), "gap": c(p.gap, f64), "cost": c(p.cost, f64),
        "removed": c(p.removed, u8),
        "ps_ptr": c(p.post_send.ptr, i64), "ps_idx": c(p.post_send.idx, i64),
        "pr_ptr": c(p.post_recv.ptr, i64), "pr_idx": c(p.post_recv.idx, i64),
        "wr_ptr": c(p.wait_recv.ptr, i64), "wr_idx": c(p.wait_recv.idx, i64),
        "ws_ptr": c(p.wait_send.ptr, i64), "ws_idx": c(p.wait_send.idx, i64),
        "op_inst": c(p.op_inst, i64), "op_waits": c(p.op_waits_inst, u8),
        "eager": c(p.msg_eager, u8), "contended": c(p.msg_contended, u8),
        "lat": c(p.msg_latency, f64), "xfer": c(p.msg_xfer, f64),
        "msg_sender": c(p.msg_rank(p.msg_send_op), i64),
        "inst_size": c(p.inst_size, i64), "inst_cost": c(p.inst_cost, f64),
        "absorb": c(p.absorb, f64), "waited": c(p.waited, f64), **out}
    rc = native.run(arrays, {"nranks": p.num_ranks, "nops": p.num_ops, "nmsg": n_msg,
                             "ninst": len(p.inst_size)})
    if rc:
        raise _deadlock([rc - 1])
    send_done = np.where(p.msg_eager, out["s_post"], out["arrival"])
    return Timeline(out["start"], out["end"], out["arrival"], send_done,
                    out["rank_clock"] + p.trailing)


def reference(p: Program) -> Timeline:
    """The replay in Python: the algorithm as replay.c runs it, for the tests."""
    n_ops, n_msg = p.num_ops, len(p.msg_row)
    gap, cost = p.gap.tolist(), p.cost.tolist()
    removed = p.removed.tolist()
    ps_ptr, ps_idx = p.post_send.ptr.tolist(), p.post_send.idx.tolist()
    pr_ptr, pr_idx = p.post_recv.ptr.tolist(), p.post_recv.idx.tolist()
    wr_ptr, wr_idx = p.wait_recv.ptr.tolist(), p.wait_recv.idx.tolist()
    ws_ptr, ws_idx = p.wait_send.ptr.tolist(), p.wait_send.idx.tolist()
    op_inst, op_waits = p.op_inst.tolist(), p.op_waits_inst.tolist()
    eager, lat, xfer = p.msg_eager.tolist(), p.msg_latency.tolist(), p.msg_xfer.tolist()
    contended = p.msg_contended.tolist()
    msg_sender = p.op_rank()[p.msg_send_op].tolist() if n_msg else []
    inst_left = p.inst_size.tolist()
    inst_cost = p.inst_cost.tolist()
    absorb, waited = p.absorb.tolist(), p.waited.tolist()
    inst_max = [-np.inf] * len(inst_left)

    start = [NAN] * n_ops
    end = [NAN] * n_ops
    s_post = [NAN] * n_msg
    r_post = [NAN] * n_msg
    arrival = [NAN] * n_msg
    link_free = [0.0] * p.num_ranks

    def deliver(m: int, data_ready: float) -> float:
        if contended[m]:
            s = msg_sender[m]
            data_ready = max(data_ready, link_free[s])
            link_free[s] = data_ready + xfer[m]
        t = data_ready + lat[m] + xfer[m]
        arrival[m] = t
        return t

    lo = p.op_lo.tolist()
    cursor = lo[:-1]
    clock = [0.0] * p.num_ranks
    active = [r for r in range(p.num_ranks) if cursor[r] < lo[r + 1]]
    while active:
        moved = False
        still = []
        for r in active:
            i, stop, t = cursor[r], lo[r + 1], clock[r]
            while i < stop:
                t0 = start[i]
                if t0 != t0:  # not started yet: start it and make its posts
                    t0 = t + gap[i]
                    start[i] = t0
                    moved = True
                    if not removed[i]:
                        for j in range(ps_ptr[i], ps_ptr[i + 1]):
                            m = ps_idx[j]
                            s_post[m] = t0
                            if eager[m]:
                                deliver(m, t0)
                            elif r_post[m] == r_post[m]:
                                deliver(m, max(t0 + lat[m], r_post[m]) + lat[m])
                        for j in range(pr_ptr[i], pr_ptr[i + 1]):
                            m = pr_idx[j]
                            r_post[m] = t0
                            if not eager[m] and s_post[m] == s_post[m]:
                                deliver(m, max(s_post[m] + lat[m], t0) + lat[m])
                        k = op_inst[i]
                        if k >= 0:
                            inst_left[k] -= 1
                            if t0 > inst_max[k]:
                                inst_max[k] = t0
                ready = t0
                blocked = False
                for j in range(wr_ptr[i], wr_ptr[i + 1]):
                    a = arrival[wr_idx[j]]
                    if a != a:
                        blocked = True
                        break
                    if a > ready:
                        ready = a
                if not blocked:
                    for j in range(ws_ptr[i], ws_ptr[i + 1]):
                        a = arrival[ws_idx[j]]
                        if a != a:
                            blocked = True
                            break
                        if a > ready:
                            ready = a
                if not blocked and op_waits[i]:
                    k = op_inst[i]
                    if inst_left[k] > 0:
                        blocked = True
                    else:
                        a = inst_max[k] + inst_cost[k]
                        if a > ready:
                            ready = a
                if blocked:
                    break
                # noise hides behind waiting longer than on the traced machine
                t = ready + cost[i] - min(max(ready - t0 - waited[i], 0.0), absorb[i])
                end[i] = t
                i += 1
                moved = True
            if i != cursor[r] or t != clock[r]:
                moved = True
            cursor[r], clock[r] = i, t
            if i < stop:
                still.append(r)
        if not moved:
            raise _deadlock(still)
        active = still
    rank_end = np.array(clock) + p.trailing
    arr = np.array(arrival)
    send_done = np.where(p.msg_eager, np.array(s_post), arr)
    return Timeline(np.array(start), np.array(end), arr, send_done, rank_end)
