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


def count_violations(m: pd.DataFrame, off: np.ndarray) -> int:
    """Messages of `m` received before they were sent with clocks shifted by `off`."""
    return int((_violations(m, off) > 0).sum()) if len(m) else 0


def pair_lead(m: pd.DataFrame) -> pd.DataFrame:
    """Per (send_rank, recv_rank): the largest send_time - recv_time of their messages;
    all the relaxation needs of them (a rank's share: the messages it sent)."""
    d = m["send_time"].to_numpy() - m["recv_time"].to_numpy()
    g = pd.Series(d).groupby([m["send_rank"].to_numpy(), m["recv_rank"].to_numpy()]).max()
    return pd.DataFrame({"send_rank": g.index.get_level_values(0).to_numpy(np.int64),
                         "recv_rank": g.index.get_level_values(1).to_numpy(np.int64),
                         "lead": g.to_numpy(np.int64)})


def relax(pairs: pd.DataFrame, n: int) -> np.ndarray:
    """Per-rank clock offsets: delay receivers until every message goes forward (`pairs`
    from `pair_lead`, concatenated over ranks; a pair's largest lead decides for all its
    messages, as the shift is the same for each). The least offsets that do it (a
    longest-path relaxation over the ranks), shifted so that some rank keeps its own
    clock; none (all zero) where no offsets can: leads around a cycle of ranks adding up
    to more than zero (each of two ranks received before the other sent) are no clock
    skew, which adds up to less than zero around any cycle, and shifting ranks for them
    only moves the whole run later (issue: a path past the run's end)."""
    off = np.zeros(n, dtype=np.int64)
    s, r = pairs["send_rank"].to_numpy(), pairs["recv_rank"].to_numpy()
    lead = pairs["lead"].to_numpy()
    for _ in range(n):  # a longest path has at most n - 1 edges
        need = lead + off[s] - off[r]
        if (need <= 0).all():
            return off - off.min()
        np.maximum.at(off, r[need > 0], (off[r] + need)[need > 0])
    if (lead + off[s] - off[r] <= 0).all():
        return off - off.min()
    return np.zeros(n, dtype=np.int64)


def shift_calls(df: pd.DataFrame, off: np.ndarray) -> pd.DataFrame:
    """calls or collectives with start/end on the corrected clock of their rank (the
    other columns shared, not copied: copy-on-write keeps the two tables apart)."""
    shift = off[df["rank"].to_numpy()]
    df = df.copy(deep=False)
    df["start"] = df["start"].to_numpy() + shift
    df["end"] = df["end"].to_numpy() + shift
    return df


def shift_messages(m: pd.DataFrame, off: np.ndarray) -> pd.DataFrame:
    so, ro = off[m["send_rank"].to_numpy()], off[m["recv_rank"].to_numpy()]
    m = m.copy(deep=False)
    for col in ("send_time", "send_enter"):
        m[col] = m[col].to_numpy() + so
    for col in ("recv_time", "recv_enter", "recv_leave"):
        m[col] = m[col].to_numpy() + ro
    return m


def detect_and_correct(trace: Trace) -> Corrected:
    m = trace.messages
    n = max(trace.num_ranks, 1)
    before = count_violations(m, np.zeros(n, dtype=np.int64))
    if before == 0:
        return Corrected(trace.calls, m, trace.collectives, SkewCorrection(0))
    off = relax(pair_lead(m), n)
    remaining = count_violations(m, off)
    offsets = {int(r): int(o) for r, o in enumerate(off) if o}
    return Corrected(shift_calls(trace.calls, off), shift_messages(m, off),
                     shift_calls(trace.collectives, off),
                     SkewCorrection(before, offsets, remaining))
