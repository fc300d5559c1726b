"""Per-rank time breakdown: compute, communication, synchronization, I/O (the contract's terms).

The measured interval of a rank runs from the end of MPI_Init to the start of
MPI_Finalize (set-up and tear-down are not the program's work); traces without them use
the rank's first and last event.
- compute = time outside MPI calls
- synchronization = MPI_Barrier time + the waiting part of every other MPI call
- I/O = time in MPI-IO calls (kind `io`: MPI_File_*), waiting inside them included
- communication = the rest of the time inside MPI calls
A rank with several threads calling MPI: its main thread's calls (threads.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope.analysis import desched, threads
from mpiscope.analysis.waitstates import WaitStates
from mpiscope.archive.trace import Trace

# of a rank's time, as `<part>_s`; they add up to total_s
PARTS = ("compute", "communication", "synchronization", "io")
PART_LABELS = {"compute": "compute", "communication": "communication",
               "synchronization": "synchronization", "io": "I/O"}  # for people


def intervals(trace: Trace) -> pd.DataFrame:
    """rank, begin, end (ns) of each rank's measured interval."""
    c = trace.calls
    r = trace.ranks.set_index("rank")
    begin = pd.Series(r["first_ns"], dtype=np.int64)
    end = pd.Series(r["last_ns"], dtype=np.int64)
    if len(trace.regions):
        first_region = trace.regions.groupby("rank")["start"].min()
        begin = begin.combine(first_region, min, fill_value=np.iinfo(np.int64).max)
    inits = c[c["kind"] == "init"].groupby("rank")["end"].max()
    finals = c[c["kind"] == "finalize"].groupby("rank")["start"].min()
    begin.loc[inits.index] = inits
    end.loc[finals.index] = finals
    return pd.DataFrame({"rank": begin.index.astype(np.int32), "begin": begin.to_numpy(),
                         "end": np.maximum(end.to_numpy(), begin.to_numpy())})


@dataclass(frozen=True)
class Measured:
    """The outermost MPI calls clipped to their rank's measured interval (arrays, row for
    row): rank, start, end, and the ns of each part (mpi = end - start)."""

    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray
    mpi: np.ndarray
    sync: np.ndarray
    io: np.ndarray


def _measured_calls(trace: Trace, wait: np.ndarray, iv: pd.DataFrame) -> Measured:
    """Outermost MPI calls clipped to the measured interval, with their waiting part
    (`wait`: ns per row of trace.calls)."""
    c = trace.calls
    keep = np.flatnonzero(threads.on_main_thread(c) & (c["depth"] == 0).to_numpy()
                          & ~c["kind"].isin(["init", "finalize"]).to_numpy())
    # per-rank bounds by array lookup (ranks are 0..n-1), not a pandas join per call;
    # arrays of the kept rows only, not a filtered copy of the table
    n = int(iv["rank"].max()) + 1 if len(iv) else 0
    lo = np.zeros(n, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)
    lo[iv["rank"].to_numpy()] = iv["begin"].to_numpy()
    hi[iv["rank"].to_numpy()] = iv["end"].to_numpy()
    rk = c["rank"].to_numpy()[keep]
    start = np.clip(c["start"].to_numpy()[keep], lo[rk], hi[rk])
    end = np.clip(c["end"].to_numpy()[keep], lo[rk], hi[rk])
    dur = end - start
    barrier, io = _part_masks(c, io_completing(trace))
    sync, io_ns = _split(barrier[keep], io[keep], dur, np.asarray(wait)[keep])
    return Measured(rk, start, end, dur, sync, io_ns)


def io_completing(trace: Trace) -> np.ndarray:
    """Row ids of the calls that complete MPI-IO operations without being MPI-IO calls
    (the MPI_Wait/Test of an MPI_File_iwrite …): their time is I/O too."""
    io = trace.io
    return np.unique(io["complete_call"].to_numpy()[io["complete_call"].to_numpy() >= 0])


def _part_masks(c: pd.DataFrame, io_calls: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `c`: a barrier; all I/O (an MPI-IO call, or one of `io_calls`)."""
    barrier = (c["function"] == "MPI_Barrier").to_numpy()
    io = (c["kind"] == "io").to_numpy().copy()
    if io_calls is not None and len(io_calls):
        io |= np.isin(c["call"].to_numpy(), io_calls)
    return barrier, io


def _split(barrier: np.ndarray, io: np.ndarray, dur: np.ndarray,
           wait: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sync, io) ns of calls lasting `dur` that waited `wait` (see call_parts)."""
    sync = np.where(barrier, dur, np.minimum(wait, dur))
    return np.where(io, 0, sync), np.where(io, dur, 0)


def call_parts(c: pd.DataFrame, dur: np.ndarray, wait: np.ndarray,
               io_calls: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The synchronization and I/O parts (ns) of calls lasting `dur` that waited `wait`:
    a barrier is all synchronization, an MPI-IO call (or a Wait/Test completing MPI-IO
    operations, `io_calls`) all I/O (its waiting included, as the contract defines
    I/O), any other call waits for `wait` at most."""
    sync, io = _split(*_part_masks(c, io_calls), dur, wait)
    return {"sync": sync, "io": io}


def rank_sums(trace: Trace, wait: np.ndarray) -> pd.DataFrame:
    """Per rank (index): begin, end of its measured interval and the ns of its calls
    inside it: mpi, sync, io. `trace` is a whole trace or one rank's slice (a rank's
    sums need only its own rows), `wait` the calls' waiting ns, row for row."""
    iv = intervals(trace)
    m = _measured_calls(trace, wait, iv)
    out = iv.set_index("rank")
    # sums per rank in int64 (exact in any order), by array position, not a groupby
    ranks = out.index.to_numpy().astype(np.int64)
    where = np.full(max(int(ranks.max(initial=-1)), int(m.rank.max(initial=-1))) + 1, -1)
    where[ranks] = np.arange(len(ranks))
    at = where[m.rank]
    ok = at >= 0
    for name in ("mpi", "sync", "io"):
        col = np.zeros(len(ranks), dtype=np.int64)
        np.add.at(col, at[ok], getattr(m, name)[ok].astype(np.int64))
        out[name] = col
    # the main thread's time runnable but waiting for a CPU (NaN: not measured)
    d = desched.between(trace.calls, iv["rank"].to_numpy(), np.zeros(len(iv), np.int64),
                        iv["begin"].to_numpy(), iv["end"].to_numpy())
    out["desched"] = np.nan if d is None else d
    return out


def ranks_frame(sums: pd.DataFrame, hosts: dict[int, str]) -> pd.DataFrame:
    """The per-rank breakdown from `rank_sums` (of every rank, in rank order)."""
    total = (sums["end"] - sums["begin"]).astype(np.int64)
    mpi = np.minimum(sums["mpi"].astype(np.int64), total)
    io = np.minimum(sums["io"].astype(np.int64), mpi)
    sync = np.minimum(sums["sync"].astype(np.int64), mpi - io)
    return pd.DataFrame({
        "rank": sums.index.astype(int), "host": [hosts.get(r, "?") for r in sums.index],
        "total_s": total / 1e9, "compute_s": (total - mpi) / 1e9,
        "communication_s": (mpi - sync - io) / 1e9, "synchronization_s": sync / 1e9,
        "io_s": io / 1e9,
        # not a part: time inside the parts above that the rank's main thread was
        # runnable but waiting for a CPU (the tracer's run-queue delay), null if unmeasured
        "descheduled_s": (sums["desched"].to_numpy(np.float64) / 1e9
                          if "desched" in sums.columns else np.nan),
    }).reset_index(drop=True)


def per_rank(trace: Trace, ws: WaitStates) -> pd.DataFrame:
    """rank, host, total_s, compute_s, communication_s, synchronization_s, io_s,
    descheduled_s."""
    return ranks_frame(rank_sums(trace, ws.per_call["wait_ns"].to_numpy()), trace.host_of())


def bin_edges(iv: pd.DataFrame, bins: int) -> np.ndarray:
    """`bins` equal bins over the whole run: the earliest begin to the latest end."""
    lo, hi = int(iv["begin"].min()), int(iv["end"].max())
    return np.linspace(lo, max(hi, lo + 1), bins + 1)


def bin_sums(trace: Trace, wait: np.ndarray, edges: np.ndarray, iv: pd.DataFrame
             ) -> np.ndarray:
    """ns of mpi, sync, io per rank and bin, shape (ranks of `iv` in rank order, 3,
    bins): each call spread over the bins it overlaps (exactly, by overlap length). A
    rank's row needs only its own rows, so a rank's slice (with `iv` its interval) gives
    its row of the whole trace's, bit for bit (the same additions in the same order)."""
    m = _measured_calls(trace, wait, iv)
    ranks = np.sort(iv["rank"].to_numpy())
    bins = len(edges) - 1
    out = np.zeros((len(ranks), 3, bins))
    if not len(m.rank):
        return out
    row = np.searchsorted(ranks, m.rank)
    lo, width = edges[0], edges[1] - edges[0]
    s, e = m.start, m.end
    frac_sync = np.divide(m.sync, np.maximum(m.mpi, 1))
    frac_io = np.divide(m.io, np.maximum(m.mpi, 1))
    b0 = np.clip(((s - lo) // width).astype(int), 0, bins - 1)
    b1 = np.clip(((e - lo) // width).astype(int), 0, bins - 1)
    # one bincount per part over the (call, bin) pairs of every k in turn: the same
    # additions in the same order as adding k by k into zeros (np.add.at), much cheaper
    idx, w_mpi, w_sync, w_io = [], [], [], []
    for k in range(int((b1 - b0).max()) + 1):
        b = b0 + k
        ok = b <= b1
        bb, rr = b[ok], row[ok]
        ov = np.minimum(e[ok], edges[bb + 1]) - np.maximum(s[ok], edges[bb])
        ov = np.maximum(ov, 0)
        idx.append(rr * bins + bb)
        w_mpi.append(ov)
        w_sync.append(ov * frac_sync[ok])
        w_io.append(ov * frac_io[ok])
    flat = np.concatenate(idx)
    size = len(ranks) * bins
    for part, w in enumerate((w_mpi, w_sync, w_io)):
        out[:, part, :] = np.bincount(flat, weights=np.concatenate(w).astype(np.float64),
                                      minlength=size).reshape(len(ranks), bins)
    return out


def bins_frame(iv: pd.DataFrame, edges: np.ndarray, sums: np.ndarray) -> pd.DataFrame:
    """The breakdown over time from every rank's `bin_sums` (stacked in rank order)."""
    lo = edges[0]
    mpi, sync, io = sums.sum(axis=0)
    # rank-time available per bin: ranks alive in it
    alive = np.zeros(len(edges) - 1)
    iv = iv.sort_values("rank", kind="stable")
    for b_, e_ in zip(iv["begin"], iv["end"], strict=True):
        alive += np.clip(np.minimum(e_, edges[1:]) - np.maximum(b_, edges[:-1]), 0, None)
    return pd.DataFrame({
        "t0_s": (edges[:-1] - lo) / 1e9, "t1_s": (edges[1:] - lo) / 1e9,
        "compute_s": (alive - mpi) / 1e9, "communication_s": (mpi - sync - io) / 1e9,
        "synchronization_s": sync / 1e9, "io_s": io / 1e9,
    })


def time_bins(trace: Trace, ws: WaitStates, bins: int = 50) -> pd.DataFrame:
    """The breakdown over time: seconds of each part per bin, summed over ranks."""
    iv = intervals(trace)
    edges = bin_edges(iv, bins)
    return bins_frame(iv, edges, bin_sums(trace, ws.per_call["wait_ns"].to_numpy(), edges, iv))
