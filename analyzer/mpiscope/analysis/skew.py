"""Clock skew between ranks: detect receives that complete before their send began and
shift ranks' clocks so that no message travels backwards in time."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mpiscope.archive.trace import Trace


@dataclass
class SkewCorrection:
    violations: int  # messages received before they were sent, as recorded
    offsets_ns: dict[int, int] = field(default_factory=dict)  # rank -> shift applied
    remaining: int = 0  # violations left after the correction


@dataclass
class Corrected:
    calls: pd.DataFrame
    messages: pd.DataFrame
    collectives: pd.DataFrame
    correction: SkewCorrection


def _violations(m: pd.DataFrame, off: np.ndarray) -> np.ndarray:
    s = m["send_time"].to_numpy() + off[m["send_rank"].to_numpy()]
    r = m["recv_time"].to_numpy() + off[m["recv_rank"].to_numpy()]
    return s - r  # > 0: the receive completed before the send happened


def detect_and_correct(trace: Trace, max_rounds: int = 8) -> Corrected:
    m = trace.messages
    n = max(trace.num_ranks, 1)
    off = np.zeros(n, dtype=np.int64)
    before = int((_violations(m, off) > 0).sum()) if len(m) else 0
    if before == 0:
        return Corrected(trace.calls, m, trace.collectives, SkewCorrection(0))
    recv = m["recv_rank"].to_numpy()
    for _ in range(max_rounds):  # relax: delay receivers until every message goes forward
        need = _violations(m, off)
        if (need <= 0).all():
            break
        per_rank = pd.Series(need).groupby(recv).max()
        per_rank = per_rank[per_rank > 0]
        off[per_rank.index.to_numpy()] += per_rank.to_numpy()
    remaining = int((_violations(m, off) > 0).sum())

    calls = trace.calls.copy()
    shift = off[calls["rank"].to_numpy()]
    calls["start"] += shift
    calls["end"] += shift
    m = m.copy()
    so, ro = off[m["send_rank"].to_numpy()], off[m["recv_rank"].to_numpy()]
    for col in ("send_time", "send_enter"):
        m[col] += so
    for col in ("recv_time", "recv_enter", "recv_leave"):
        m[col] += ro
    coll = trace.collectives.copy()
    cs = off[coll["rank"].to_numpy()]
    coll["start"] += cs
    coll["end"] += cs
    offsets = {int(r): int(o) for r, o in enumerate(off) if o}
    return Corrected(calls, m, coll, SkewCorrection(before, offsets, remaining))
