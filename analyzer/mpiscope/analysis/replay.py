"""Replay model used to estimate what running a collective less often would save.

Model (iteration-level replay): the trace is cut at every instance of one collective
call site. Per rank, `work` is the time from leaving instance j-1 to entering instance
j (computation and any other MPI). An instance synchronizes the ranks, so a block of
iterations ending in a kept instance costs max over ranks of the summed work, plus the
collective's own cost (the duration seen by the last rank to arrive, which does not
wait). Replaying the measured trace with every instance kept and with only every k-th
kept gives the saving. Other coupling between ranks (neighbour exchanges) is assumed
to keep its cost, so the estimate is an upper bound when work is imbalanced.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class ReplayResult:
    k: int
    instances: int
    measured_model_s: float  # replayed time with every instance kept
    replayed_s: float  # replayed time with every k-th instance kept
    saving_s: float


def every_kth(coll: pd.DataFrame, k: int) -> ReplayResult | None:
    """coll: the rows of `collectives` of one call site (all ranks)."""
    c = coll.sort_values(["rank", "start"])
    c = c.assign(j=c.groupby("rank").cumcount())
    prev_end = c.groupby("rank")["end"].shift(1)
    c = c.assign(work=(c["start"] - prev_end), dur=c["end"] - c["start"])
    c = c[c["j"] > 0]
    if c.empty:
        return None
    work = c.pivot_table(index="j", columns="rank", values="work", aggfunc="sum",
                         fill_value=0).sort_index()
    cost = c.groupby("j")["dur"].min().reindex(work.index).to_numpy()
    w = work.to_numpy(dtype=float)
    n = len(work)
    with_all = float((w.max(axis=1) + cost).sum())
    block = np.arange(n) // k
    kept_cost = cost[(np.arange(n) % k == k - 1) | (np.arange(n) == n - 1)]
    summed = pd.DataFrame(w).groupby(block).sum().to_numpy()
    without = float(summed.max(axis=1).sum() + kept_cost.sum())
    return ReplayResult(k, n, with_all / 1e9, without / 1e9, max(with_all - without, 0) / 1e9)
