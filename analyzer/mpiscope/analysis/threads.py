"""Ranks with several threads calling MPI (MPI_THREAD_MULTIPLE; one OTF2 location each).

A rank's time breakdown (breakdown.py) is its main thread's (thread 0, the rank's first
location): its calls against its own time line, so the parts still add up to the rank's
total. What the other threads spent in MPI would overlap that time line, so it is not
folded in; it is reported beside it, per thread (`per_thread`), in the JSON's `threads`
and the summary.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mpiscope.analysis.stats import polls
from mpiscope.archive.trace import Trace

COLUMNS = ["rank", "thread", "name", "mpi_s", "calls"]


def main_thread(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls of each rank's main thread (all of them in a single-threaded trace)."""
    if "thread" not in calls.columns:
        return calls
    other = calls["thread"].to_numpy() != 0
    return calls[~other] if other.any() else calls


def on_main_thread(calls: pd.DataFrame) -> np.ndarray:
    """Mask of the rows `main_thread` keeps (for arrays aligned with the calls)."""
    if "thread" not in calls.columns:
        return np.ones(len(calls), dtype=bool)
    return calls["thread"].to_numpy() == 0


def per_thread(trace: Trace) -> pd.DataFrame:
    """rank, thread, name, mpi_s, calls: every thread's outermost MPI calls other than
    MPI_Init/MPI_Finalize (a merged polling visit as its calls), and the time in them
    (thread 0 included: the main thread)."""
    th = trace.threads
    c = trace.calls
    keep = (c["depth"].to_numpy() == 0) & ~c["kind"].isin(["init", "finalize"]).to_numpy()
    thread = c["thread"].to_numpy() if "thread" in c.columns else np.zeros(len(c), np.int16)
    df = pd.DataFrame({"rank": c["rank"].to_numpy()[keep], "thread": thread[keep],
                       "ns": (c["end"] - c["start"]).to_numpy()[keep], "n": polls(c)[keep]})
    # a merged polling visit counts as the calls it stands for
    g = df.groupby(["rank", "thread"])[["ns", "n"]].sum().rename(
        columns={"ns": "sum", "n": "size"})
    out = th[["rank", "thread", "name"]].copy()
    idx = pd.MultiIndex.from_arrays([out["rank"], out["thread"]])
    out["mpi_s"] = g["sum"].reindex(idx, fill_value=0).to_numpy() / 1e9
    out["calls"] = g["size"].reindex(idx, fill_value=0).to_numpy().astype(np.int64)
    return out[COLUMNS].reset_index(drop=True)


def multi_threaded(table: pd.DataFrame) -> bool:
    """Does any rank have threads besides its main one?"""
    return bool((table["thread"] > 0).any())
