"""The predicted run as a Trace: the trace's tables with the replayed times.

Ops the scenario removed are left out, with their messages and collective rows; call
ids are renumbered. Point-to-point events sit at their call's Enter (posts) or Leave
(completions), as the interposer records them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mpiscope.analysis.simulate.engine import Timeline
from mpiscope.analysis.simulate.model import Machine, Placement
from mpiscope.analysis.simulate.program import Program
from mpiscope.archive.trace import Trace

_AT_ENTER = {"send", "isend", "irecv_request", "nbc_request"}


def predicted_trace(src: Trace, prog: Program, tl: Timeline, machine: Machine) -> Trace:
    keep = ~prog.removed
    kept_calls = prog.op_call[keep]
    new_id = np.full(len(src.calls) + 1, -1, np.int64)
    new_id[kept_calls] = np.arange(len(kept_calls))
    start = np.rint(tl.start[keep]).astype(np.int64)
    end = np.rint(tl.end[keep]).astype(np.int64)
    calls = src.calls.iloc[kept_calls].reset_index(drop=True)
    calls["call"] = np.arange(len(calls), dtype=np.int64)
    calls["start"], calls["end"] = start, end
    call_start = np.full(len(src.calls) + 1, 0, np.int64)
    call_end = np.full(len(src.calls) + 1, 0, np.int64)
    call_start[kept_calls], call_end[kept_calls] = start, end

    p = src.p2p
    p = p[new_id[p["call"].to_numpy()] >= 0].copy()
    enter = p["event"].astype(str).isin(_AT_ENTER).to_numpy()
    old = p["call"].to_numpy()
    p["time"] = np.where(enter, call_start[old], call_end[old])
    p["call"] = new_id[old]

    m = src.messages.iloc[prog.msg_row].reset_index(drop=True)
    for col in ("send_call", "recv_call", "send_complete_call", "recv_complete_call"):
        m[col] = new_id[m[col].to_numpy()]
    old_s, old_r = src.messages["send_call"].to_numpy()[prog.msg_row], \
        src.messages["recv_call"].to_numpy()[prog.msg_row]
    old_rc = src.messages["recv_complete_call"].to_numpy()[prog.msg_row]
    m["send_enter"] = call_start[old_s]
    m["send_time"] = call_start[old_s]
    m["recv_enter"] = call_start[old_r]
    m["recv_time"] = call_end[old_rc]
    m["recv_leave"] = call_end[old_rc]

    c = src.collectives
    c = c[new_id[c["call"].to_numpy()] >= 0].copy()
    old = c["call"].to_numpy()
    c["start"], c["end"] = call_start[old], call_end[old]
    c["call"] = new_id[old]

    ranks = src.ranks.sort_values("rank").reset_index(drop=True).copy()
    ranks["first_ns"] = 0
    ranks["last_ns"] = np.rint(tl.rank_end).astype(np.int64)
    if machine.nodes is not None:
        node = Placement.of(src, machine).node
        names = [f"node{n}" for n in range(int(node.max()) + 1)]
        ranks["host"] = pd.Categorical([names[n] for n in node], categories=names)
    empty = src.flushes.iloc[:0]
    return Trace(
        path=src.path, meta=replace(src.meta, duration_ns=int(ranks["last_ns"].max()),
                                    truncated_ranks=[]),
        ranks=ranks, comms=src.comms, calls=calls, regions=src.regions.iloc[:0], p2p=p,
        messages=m, collectives=c, flushes=empty, unmatched=src.unmatched.iloc[:0],
        callpaths=src.callpaths)
