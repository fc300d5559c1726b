"""Per-function and per-call-site statistics, message sizes and bandwidth, comm matrix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope.trace import Trace


def _outer(trace: Trace) -> pd.DataFrame:
    c = trace.calls
    return c.assign(dur=c["end"] - c["start"], bytes=c["bytes_sent"] + c["bytes_recv"])


def functions(trace: Trace) -> pd.DataFrame:
    """name, calls, time_s, mean_s, max_s, bytes — sorted by time."""
    g = _outer(trace).groupby("function", observed=True)
    df = pd.DataFrame({"calls": g.size(), "time_s": g["dur"].sum() / 1e9,
                       "mean_s": g["dur"].mean() / 1e9, "max_s": g["dur"].max() / 1e9,
                       "bytes": g["bytes"].sum()})
    return df.rename_axis("name").reset_index().sort_values("time_s", ascending=False,
                                                            ignore_index=True)


def callsites(trace: Trace, wait_ns: np.ndarray | None = None) -> pd.DataFrame:
    """function, callsite, calls, time_s, mean_s, max_s, bytes, wait_s."""
    c = _outer(trace)
    c["wait"] = wait_ns if wait_ns is not None else 0
    g = c.groupby(["function", "callsite"], observed=True)
    df = pd.DataFrame({"calls": g.size(), "time_s": g["dur"].sum() / 1e9,
                       "mean_s": g["dur"].mean() / 1e9, "max_s": g["dur"].max() / 1e9,
                       "bytes": g["bytes"].sum(), "wait_s": g["wait"].sum() / 1e9})
    return df.reset_index().sort_values("time_s", ascending=False, ignore_index=True)


def transfer_ns(trace: Trace) -> np.ndarray:
    """Per message: time from both sides being ready to the data having arrived."""
    m = trace.messages
    ready = np.maximum(m["send_enter"].to_numpy(), m["recv_enter"].to_numpy())
    return np.maximum(m["recv_time"].to_numpy() - ready, 1)


def message_sizes(trace: Trace) -> pd.DataFrame:
    """Power-of-two size buckets: messages, bytes, median transfer time, bandwidth.

    The bandwidth per bucket shows where the MPI library switches from eager to
    rendezvous (a step around 8-64 KiB)."""
    m = trace.messages
    if m.empty:
        return pd.DataFrame(columns=["bucket_lo", "bucket_hi", "messages", "bytes",
                                     "median_transfer_s", "bandwidth_MBps"])
    b = m["bytes"].to_numpy()
    lo = np.where(b > 0, 2 ** np.floor(np.log2(np.maximum(b, 1))), 0).astype(np.int64)
    t = transfer_ns(trace)
    df = pd.DataFrame({"lo": lo, "bytes": b, "t": t})
    g = df.groupby("lo")
    out = pd.DataFrame({"messages": g.size(), "bytes": g["bytes"].sum(),
                        "median_transfer_s": g["t"].median() / 1e9})
    out["bandwidth_MBps"] = g["bytes"].sum() / (g["t"].sum() / 1e9) / 1e6
    out = out.rename_axis("bucket_lo").reset_index()
    out.insert(1, "bucket_hi", np.maximum(out["bucket_lo"] * 2 - 1, 0))
    return out


def comm_matrix(trace: Trace) -> pd.DataFrame:
    """send_rank, recv_rank, messages, bytes."""
    g = trace.messages.groupby(["send_rank", "recv_rank"])
    return pd.DataFrame({"messages": g.size(), "bytes": g["bytes"].sum()}).reset_index()


def host_split(trace: Trace) -> pd.DataFrame:
    """Messages within a host vs between hosts, with achieved bandwidth for each."""
    m = trace.messages
    hosts = trace.host_of()
    if m.empty:
        return pd.DataFrame(columns=["path", "messages", "bytes", "bandwidth_MBps"])
    same = m["send_rank"].map(hosts).to_numpy() == m["recv_rank"].map(hosts).to_numpy()
    t = transfer_ns(trace)
    rows = []
    for path, sel in (("intra-node", same), ("inter-node", ~same)):
        if sel.any():
            big = sel & (m["bytes"].to_numpy() >= 65536)  # bandwidth from large messages
            use = big if big.any() else sel
            bw = m["bytes"].to_numpy()[use].sum() / (t[use].sum() / 1e9) / 1e6
            rows.append({"path": path, "messages": int(sel.sum()),
                         "bytes": int(m["bytes"].to_numpy()[sel].sum()), "bandwidth_MBps": bw})
    return pd.DataFrame(rows)


@dataclass
class Hockney:
    """t(n) = alpha + n / beta, fitted on the trace's own messages."""

    alpha_s: float
    beta_Bps: float

    def time(self, nbytes: float) -> float:
        return self.alpha_s + nbytes / self.beta_Bps


def fit_hockney(trace: Trace) -> Hockney | None:
    m = trace.messages
    if len(m) < 4:
        return None
    b = m["bytes"].to_numpy().astype(float)
    t = transfer_ns(trace) / 1e9
    # robust: medians per size bucket, then least squares on those
    df = pd.DataFrame({"k": np.floor(np.log2(np.maximum(b, 1))), "b": b, "t": t})
    med = df.groupby("k")[["b", "t"]].median()
    if len(med) >= 2:
        slope, intercept = np.polyfit(med["b"], med["t"], 1)
    else:
        slope, intercept = 0.0, float(med["t"].iloc[0])
    # a negative intercept (noise) falls back to the fastest message seen
    alpha = float(intercept) if intercept > 0 else float(t.min())
    beta = 1.0 / slope if slope > 0 else 1e12
    return Hockney(alpha, beta)


def flushes(trace: Trace) -> pd.DataFrame:
    """Per rank: the tracer's buffer flushes that took time (rank, flushes, seconds).

    They lie inside the measured run (as compute when outside MPI calls), so a large
    share means the trace itself distorts what it shows. Zero-length flush records
    (OTF2's own chunk writes while a batch was encoded) are not counted."""
    f = trace.flushes
    if f is None or not len(f):
        return pd.DataFrame({"rank": pd.Series(dtype=int), "flushes": pd.Series(dtype=int),
                             "seconds": pd.Series(dtype=float)})
    f = f[f["end"] > f["start"]]
    g = (f["end"] - f["start"]).groupby(f["rank"]).agg(["size", "sum"])
    return pd.DataFrame({"rank": g.index.astype(int), "flushes": g["size"].astype(int),
                         "seconds": g["sum"] / 1e9}).reset_index(drop=True)
