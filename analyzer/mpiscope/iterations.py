"""Main-loop detection: the program's iterations, from its repeating call-site sequence.

The loop marker is a call site that every rank executes the same number of times: the
rarest repeating one whose count divides every other repeating site's count (the loop's
period; ties: the earliest in the loop body). `iterations` is how often it ran;
iteration k on a rank spans from its k-th to its (k+1)-th call at the marker.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope.trace import Trace


@dataclass
class Loop:
    callsite: str
    function: str
    iterations: int  # times the marker ran; `bounds` holds the iterations - 1 between them
    bounds: pd.DataFrame  # rank, iteration, start, end (ns)


def detect(trace: Trace, min_iterations: int = 3) -> Loop | None:
    c = trace.calls
    c = c[(c["depth"] == 0) & ~c["kind"].isin(["init", "finalize"]) & (c["callsite"] != "")]
    if c.empty:
        return None
    counts = c.groupby(["callsite", "rank"], observed=True).size().unstack(fill_value=0)
    nranks = trace.num_ranks
    same = counts[(counts.nunique(axis=1) == 1) & (counts.shape[1] == nranks)]
    if same.empty:
        return None
    n = same.iloc[:, 0]
    n = n[n >= min_iterations + 1]
    if n.empty:
        return None
    # the loop's period: the rarest repeating call site whose count divides every other
    # repeating site's count (a halo exchange called 3x per iteration repeats 3x as often)
    best = next((k for k in sorted(n.unique()) if (n % k == 0).all()), n.max())
    candidates = n[n == best].index
    first = c[c["callsite"].isin(candidates)].groupby("callsite", observed=True)["start"].min()
    marker = first.idxmin()
    rows = c[c["callsite"] == marker].sort_values(["rank", "start"])
    starts = rows["start"].to_numpy()
    ranks = rows["rank"].to_numpy()
    it = rows.groupby("rank").cumcount().to_numpy()
    nxt = np.roll(starts, -1)
    last = np.r_[ranks[1:] != ranks[:-1], True]
    bounds = pd.DataFrame({"rank": ranks, "iteration": it, "start": starts, "end": nxt})
    bounds = bounds[~last].reset_index(drop=True)
    function = str(rows["function"].iloc[0])
    return Loop(str(marker), function, int(best), bounds)


def per_iteration(trace: Trace, loop: Loop, ws) -> pd.DataFrame:
    """Seconds of compute / communication / synchronization per iteration (all ranks)."""
    c = trace.calls
    c = c[(c["depth"] == 0)]
    wait = ws.per_call["wait_ns"].to_numpy()[c["call"].to_numpy()]
    barrier = (c["function"] == "MPI_Barrier").to_numpy()
    dur = (c["end"] - c["start"]).to_numpy()
    sync = np.where(barrier, dur, np.minimum(wait, dur))
    frame = pd.DataFrame({"rank": c["rank"].to_numpy(), "start": c["start"].to_numpy(),
                          "mpi": dur, "sync": sync})
    out = []
    for rank, b in loop.bounds.groupby("rank"):
        f = frame[frame["rank"] == rank]
        k = np.searchsorted(b["start"].to_numpy(), f["start"].to_numpy(), side="right") - 1
        ok = (k >= 0) & (f["start"].to_numpy() < b["end"].to_numpy()[np.clip(k, 0, None)])
        agg = pd.DataFrame({"iteration": b["iteration"].to_numpy()[k[ok]],
                            "mpi": f["mpi"].to_numpy()[ok], "sync": f["sync"].to_numpy()[ok]})
        g = agg.groupby("iteration").sum()
        length = pd.Series((b["end"] - b["start"]).to_numpy(), index=b["iteration"].to_numpy())
        g = g.reindex(length.index, fill_value=0)
        out.append(pd.DataFrame({"iteration": length.index, "rank": rank,
                                 "total": length.to_numpy(), "mpi": g["mpi"].to_numpy(),
                                 "sync": g["sync"].to_numpy()}))
    df = pd.concat(out).groupby("iteration")[["total", "mpi", "sync"]].sum()
    return pd.DataFrame({
        "iteration": df.index, "compute_s": (df["total"] - df["mpi"]) / 1e9,
        "communication_s": (df["mpi"] - df["sync"]) / 1e9, "synchronization_s": df["sync"] / 1e9,
    }).reset_index(drop=True)
