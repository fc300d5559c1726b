"""Per-function and per-call-site statistics, message sizes and bandwidth, comm matrix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from mpiscope.analysis import orderstats
from mpiscope.archive.trace import Trace


def polls(c: pd.DataFrame) -> np.ndarray:
    """MPI calls each row stands for (`polls`: a merged polling visit stands for many);
    1 each where a table has no such column."""
    return (c["polls"].to_numpy(np.int64) if "polls" in c.columns
            else np.ones(len(c), np.int64))


def _outer(trace: Trace, *keys: str) -> pd.DataFrame:
    """The calls' `keys` columns with dur, bytes, n (calls a row stands for) and
    per_call: a narrow frame of what the sums read, not the whole calls table copied."""
    c = trace.calls
    start = c["start"].to_numpy()
    dur = c["end"].to_numpy() - start
    n = polls(c)
    # a merged visit's calls each took its mean: their longest is not known
    return pd.DataFrame({**{k: c[k] for k in keys}, "dur": dur,
                         "bytes": c["bytes_sent"].to_numpy() + c["bytes_recv"].to_numpy(),
                         "n": n, "per_call": dur / n}, index=c.index, copy=False)


def functions(trace: Trace) -> pd.DataFrame:
    """name, calls, time_s, mean_s, max_s, bytes — sorted by time. `calls` counts every
    MPI call, those a merged polling visit stands for included."""
    g = _outer(trace, "function").groupby("function", observed=True)
    calls = g["n"].sum()
    df = pd.DataFrame({"calls": calls, "time_s": g["dur"].sum() / 1e9,
                       "mean_s": g["dur"].sum() / calls / 1e9,
                       "max_s": g["per_call"].max() / 1e9, "bytes": g["bytes"].sum()})
    return df.rename_axis("name").reset_index().sort_values("time_s", ascending=False,
                                                            ignore_index=True)


def uninterpreted(trace: Trace) -> pd.DataFrame:
    """name, calls, time_s of every MPI function in the trace that the analysis treats
    only as time (kind `other`: no wait states, matching or findings look inside it),
    sorted by time. Nested calls are listed too: they are present, and uninterpreted."""
    c = trace.calls
    other = (c["kind"] == "other").to_numpy()
    # sums per function code (a trace of datatype bookkeeping has millions of such rows)
    codes, names = pd.factorize(c["function"], use_na_sentinel=False)
    codes = codes[other]
    present = np.bincount(codes, minlength=len(names)) > 0
    dur = (c["end"].to_numpy() - c["start"].to_numpy())[other]
    ns = np.zeros(len(names), np.int64)
    np.add.at(ns, codes, dur)
    calls = np.zeros(len(names), np.int64)
    np.add.at(calls, codes, polls(c)[other])
    df = pd.DataFrame({"name": np.asarray(names.astype(str), dtype=object)[present],
                       "calls": calls[present], "time_s": ns[present] / 1e9})
    return df.sort_values(["time_s", "name"], ascending=[False, True], ignore_index=True)


def callsite_sums(trace: Trace, wait_ns: np.ndarray | None = None) -> pd.DataFrame:
    """function, callsite (categorical), calls, dur, max, bytes, wait (ns): the sums
    `callsites` reads, of a whole trace or one rank's slice (`wait_ns` row for row)."""
    c = _outer(trace, "function", "callsite")
    c["wait"] = wait_ns if wait_ns is not None else 0
    g = c.groupby(["function", "callsite"], observed=True)
    return pd.DataFrame({"calls": g["n"].sum(), "dur": g["dur"].sum(),
                         "max": g["per_call"].max(), "bytes": g["bytes"].sum(),
                         "wait": g["wait"].sum()}).reset_index()


def callsites_frame(sums: pd.DataFrame) -> pd.DataFrame:
    """`callsites` from `callsite_sums` (of every rank, concatenated)."""
    g = sums.groupby(["function", "callsite"], observed=True)
    s = pd.DataFrame({"calls": g["calls"].sum(), "dur": g["dur"].sum(),
                      "max": g["max"].max(), "bytes": g["bytes"].sum(),
                      "wait": g["wait"].sum()})
    # the exact mean: ns sums stay below 2^53, so sum / count is what pandas' mean gives
    df = pd.DataFrame({"calls": s["calls"], "time_s": s["dur"] / 1e9,
                       "mean_s": s["dur"] / s["calls"] / 1e9, "max_s": s["max"] / 1e9,
                       "bytes": s["bytes"], "wait_s": s["wait"] / 1e9})
    return df.reset_index().sort_values("time_s", ascending=False, ignore_index=True)


def callsites(trace: Trace, wait_ns: np.ndarray | None = None) -> pd.DataFrame:
    """function, callsite, calls, time_s, mean_s, max_s, bytes, wait_s."""
    return callsites_frame(callsite_sums(trace, wait_ns))


def transfer_ns(trace: Trace) -> np.ndarray:
    """Per message: time from both sides being ready to the data having arrived."""
    return _transfer(trace.messages)


def _transfer(m: pd.DataFrame) -> np.ndarray:
    ready = np.maximum(m["send_enter"].to_numpy(), m["recv_enter"].to_numpy())
    return np.maximum(m["recv_time"].to_numpy() - ready, 1)


SIZE_COLUMNS = ["bucket_lo", "bucket_hi", "messages", "bytes", "median_transfer_s",
                "p90_transfer_s", "bandwidth_MBps"]


def _size_bucket(nbytes: np.ndarray) -> np.ndarray:
    """Lower bound of the power-of-two bucket of each size (0 for empty messages)."""
    return np.where(nbytes > 0, 2 ** np.floor(np.log2(np.maximum(nbytes, 1))),
                    0).astype(np.int64)


PATHS = ("intra-node", "inter-node")
LARGE = 65536  # bytes: host_split's bandwidth comes from messages this large where any
TRANSFER_QUANTILE = 0.9  # message_sizes' p90_transfer_s


def _same_host(m: pd.DataFrame, hosts: dict[int, str]) -> np.ndarray:
    """Per message: both ranks on one host (a rank of unknown host is on none)."""
    s, r = m["send_rank"].to_numpy(), m["recv_rank"].to_numpy()
    n = max([*hosts, int(s.max(initial=-1)), int(r.max(initial=-1))]) + 1
    names = {h: i for i, h in enumerate(dict.fromkeys(hosts.values()))}
    code = np.full(n, -1, dtype=np.int64)  # host per rank by array lookup, not a map
    code[list(hosts)] = [names[h] for h in hosts.values()]
    return (code[s] == code[r]) & (code[s] >= 0)


GROUP_COLUMNS = ("t", "rate", *(f"{c}/{p}" for p in PATHS for c in ("n", "t", "rate")))


class MessageArrays:
    """Per message (of all messages, or one rank's sent ones) what the statistics read:
    bytes, transfer ns, size bucket, same host; computed once."""

    def __init__(self, m: pd.DataFrame, hosts: dict[int, str]) -> None:
        self.b = m["bytes"].to_numpy()
        self.t = _transfer(m)
        self.lo = _size_bucket(self.b)
        self.same = _same_host(m, hosts)

    def sums(self) -> pd.DataFrame:
        """path (index into PATHS), lo (size bucket), large, messages, bytes: the counts
        and sums per group (they add up over ranks)."""
        df = pd.DataFrame({"path": np.where(self.same, 0, 1).astype(np.int8), "lo": self.lo,
                           "large": self.b >= LARGE, "bytes": self.b})
        g = df.groupby(["path", "lo", "large"])
        return pd.DataFrame({"messages": g.size(), "bytes": g["bytes"].sum()}).reset_index()

    def group(self, column: str) -> orderstats.Groups:
        """The values the statistics take medians and quantiles of, sorted per group,
        one of GROUP_COLUMNS: `t` (transfer ns) and `rate` (MB/s) per size bucket; per
        path p, `n/p` (bytes) and `t/p` per size bucket of its non-empty messages (the
        protocol switch's points) and `rate/p` per large (1) or not (0) (host_split)."""
        b, key = self.b, self.lo
        name, _, path = column.partition("/")
        sel = np.ones(len(b), dtype=bool)
        if path:
            sel = self.same if path == PATHS[0] else ~self.same
            if name == "rate":
                key = (b >= LARGE).astype(np.int64)
            else:
                sel = sel & (b > 0)
        values = {"t": self.t, "rate": b / self.t * 1e3, "n": b}[name]
        return orderstats.Groups.of(key[sel], values[sel])


@dataclass
class MessageValues:
    """What the message statistics are computed from: `sums` (MessageArrays.sums of all
    messages, or of every rank concatenated) and `runs(column, group)`, the sorted runs
    of that group's values (MessageArrays.group: one run in memory, or one per rank)."""

    sums: pd.DataFrame
    runs: Callable[[str, int], list[np.ndarray]]
    gather: int = orderstats.GATHER

    @classmethod
    def of(cls, trace: Trace) -> MessageValues:
        arrays = MessageArrays(trace.messages, trace.host_of())
        groups: dict[str, orderstats.Groups] = {}

        def runs(column: str, key: int) -> list[np.ndarray]:
            if column not in groups:  # only the columns a statistic reads
                groups[column] = arrays.group(column)
            return [groups[column].run(key)]

        return cls(arrays.sums(), runs)

    def median(self, column: str, key: int, scale: float = 1.0) -> float:
        return orderstats.median(self.runs(column, key), self.gather, scale)


def sizes_of(mv: MessageValues) -> pd.DataFrame:
    """`message_sizes` from the message values."""
    if mv.sums.empty:
        return pd.DataFrame(columns=SIZE_COLUMNS)
    g = mv.sums.groupby("lo")
    out = pd.DataFrame({"messages": g["messages"].sum(), "bytes": g["bytes"].sum()})
    lo = out.index.to_numpy()
    out["median_transfer_s"] = [mv.median("t", k) / 1e9 for k in lo]
    out["p90_transfer_s"] = [orderstats.quantile(mv.runs("t", k), TRANSFER_QUANTILE,
                                                 mv.gather) / 1e9 for k in lo]
    out["bandwidth_MBps"] = [mv.median("rate", k) for k in lo]
    out = out.rename_axis("bucket_lo").reset_index()
    out.insert(1, "bucket_hi", np.maximum(out["bucket_lo"] * 2 - 1, 0))
    return out[SIZE_COLUMNS]


def message_sizes(trace: Trace) -> pd.DataFrame:
    """Power-of-two size buckets: messages, bytes, median and 90th percentile of the
    transfer time, and the achieved bandwidth as the median of the messages' own rates
    (bytes / transfer time).

    A median, not total bytes / total time: one message that waited (a receive posted
    long before its Wait) would otherwise pull a whole bucket down by 10x. The bandwidth
    per bucket shows where the MPI library switches from eager to rendezvous (a dip
    around 4-64 KiB); `protocol_switches` finds it."""
    return sizes_of(MessageValues.of(trace))


# Eager/rendezvous switch (protocol_switches). Evidence needed before we name one:
SWITCH_MIN_MESSAGES = 3  # messages in a size bucket for its median to count
SWITCH_MIN_BELOW = 4  # size buckets below the switch, to know the trend
SWITCH_MIN_ABOVE = 2  # size buckets from the switch on: a step, not one slow size
SWITCH_JUMP = 1.25  # the switch's bucket takes >= this times what the trend predicts,
SWITCH_STEP = 1.5  # and >= this many latencies (alpha) more: a handshake is a round trip
SWITCH_PERSIST = 1.0  # the next bucket is still >= this many latencies above the trend

@dataclass
class ProtocolSwitch:
    """Where per-message transfer time jumps above the latency/bandwidth trend of the
    smaller sizes: the MPI library's switch from eager to rendezvous (or its limit
    between two copy mechanisms), on one path (intra-node or inter-node)."""

    path: str
    bytes: int  # first size with the jump (median size of its bucket)
    last_below_bytes: int  # largest size still on the trend: the limit lies in between
    transfer_s: float  # median transfer time at `bytes`
    predicted_s: float  # what the trend of the smaller sizes predicts there
    alpha_s: float  # that trend: t = alpha + n / beta
    beta_Bps: float
    sizes_below: int  # size buckets the trend was fitted on
    sizes_above: int  # size buckets from the switch on

    @property
    def jump(self) -> float:
        return self.transfer_s / self.predicted_s

    def to_dict(self) -> dict:
        d = {**asdict(self), "jump": self.jump}
        if not np.isfinite(self.beta_Bps):  # a flat trend: JSON has no Infinity
            d["beta_Bps"] = None
        return d


def _trend(n: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(alpha, seconds per byte) of t = alpha + n * s, least squares on relative errors
    so the many small, latency-bound sizes count as much as the few large ones."""
    if len(n) < 2 or np.ptp(n) == 0:
        return float(np.median(t)), 0.0
    slope, alpha = np.polyfit(n, t, 1, w=1 / t)
    if slope < 0:  # latency-bound sizes with noise: flat
        return float(np.median(t)), 0.0
    if alpha < 0:  # bandwidth-bound: through the origin, relative errors again
        w2 = 1 / t ** 2
        return 0.0, float(np.sum(w2 * n * t) / np.sum(w2 * n * n))
    return float(alpha), float(slope)


def _size_points(mv: MessageValues, path: str) -> tuple[np.ndarray, np.ndarray]:
    """(median size, median time in s) of each size bucket of non-empty messages on
    `path` with enough messages to count."""
    s = mv.sums[(mv.sums["path"] == PATHS.index(path)) & (mv.sums["lo"] > 0)]
    count = s.groupby("lo")["messages"].sum()
    lo = count.index.to_numpy()[count.to_numpy() >= SWITCH_MIN_MESSAGES]
    return (np.array([mv.median(f"n/{path}", k) for k in lo], dtype=float),
            np.array([mv.median(f"t/{path}", k, scale=1e9) for k in lo], dtype=float))


def _switch(path: str, n: np.ndarray, t: np.ndarray) -> ProtocolSwitch | None:
    """The switch on `path` from its size points (n, t): `_size_points`."""
    best: ProtocolSwitch | None = None
    for j in range(SWITCH_MIN_BELOW, len(n) - SWITCH_MIN_ABOVE + 1):
        alpha, slope = _trend(n[:j], t[:j])
        latency = alpha if alpha > 0 else float(t[:j].min())
        pred = alpha + slope * n[j:j + 2]
        step, after = t[j:j + 2] - pred
        if (t[j] >= SWITCH_JUMP * pred[0] and step >= SWITCH_STEP * latency
                and after >= SWITCH_PERSIST * latency):
            cand = ProtocolSwitch(
                path=path, bytes=int(n[j]), last_below_bytes=int(n[j - 1]),
                transfer_s=float(t[j]), predicted_s=float(pred[0]), alpha_s=alpha,
                beta_Bps=1 / slope if slope > 0 else float("inf"), sizes_below=j,
                sizes_above=len(n) - j)
            # under load a size just below the switch may pass too: the switch is
            # where the step is sharpest
            if best is None or cand.jump > best.jump:
                best = cand
    return best


def _paths_with_messages(mv: MessageValues) -> list[str]:
    have = set(mv.sums["path"].tolist())
    return [p for i, p in enumerate(PATHS) if i in have]


def evidence_of(mv: MessageValues) -> dict[str, int]:
    """`switch_evidence` from the message values."""
    return {p: len(_size_points(mv, p)[0]) for p in _paths_with_messages(mv)}


def switch_evidence(trace: Trace) -> dict[str, int]:
    """Per path with messages: how many size buckets hold enough messages to show a
    switch. With >= SWITCH_MIN_BELOW + SWITCH_MIN_ABOVE of them and no switch found, the
    trace shows none: its transfer times follow one latency/bandwidth trend (a real run
    may have none, e.g. when the MPI library's large-message copy is as fast per byte as
    its eager one); with fewer, it cannot tell."""
    return evidence_of(MessageValues.of(trace))


def switches_of(mv: MessageValues) -> list[ProtocolSwitch]:
    """`protocol_switches` from the message values."""
    found = (_switch(p, *_size_points(mv, p)) for p in PATHS)
    return [s for s in found if s is not None]


def protocol_switches(trace: Trace) -> list[ProtocolSwitch]:
    """The eager/rendezvous switch per path (intra-node, inter-node), where the trace
    shows it.

    Per path, messages go into power-of-two size buckets (>= SWITCH_MIN_MESSAGES each;
    the bucket's median size and median transfer time). For each candidate bucket with
    >= SWITCH_MIN_BELOW buckets below it and one above, the trend t = alpha + n / beta
    is fitted on all buckets below; the candidate qualifies if its time is >=
    SWITCH_JUMP times the trend's prediction and >= SWITCH_STEP latencies (alpha) above
    it, and the next bucket is still >= SWITCH_PERSIST latencies above the trend (a
    rendezvous adds a handshake, a round trip, to every larger message; one slow size
    is noise). Of the qualifying candidates the one with the largest jump (time /
    prediction) is the switch. Paths are apart because their limits differ (shared
    memory ~4 KiB, TCP ~64 KiB in Open MPI)."""
    return switches_of(MessageValues.of(trace))


def message_counts(messages: pd.DataFrame, unmatched: pd.DataFrame) -> dict[str, int]:
    """The JSON's `messages`: matched, unmatched sends and receives (of a whole trace,
    or one rank's sent messages and unmatched events: they add up)."""
    ev = unmatched["event"]
    return {"matched": int(len(messages)),
            "unmatched_sends": int(ev.isin(["send", "isend"]).sum()),
            "unmatched_receives": int(ev.isin(["recv", "irecv"]).sum())}


def comm_matrix(trace: Trace) -> pd.DataFrame:
    """send_rank, recv_rank, messages, bytes, transfer_s (summed time from each send event
    to its receive event; 0 where clocks put the receive first)."""
    m = trace.messages
    m = m.assign(transfer_s=np.maximum(m["recv_time"] - m["send_time"], 0) / 1e9)
    g = m.groupby(["send_rank", "recv_rank"])
    return pd.DataFrame({"messages": g.size(), "bytes": g["bytes"].sum(),
                         "transfer_s": g["transfer_s"].sum()}).reset_index()


def host_split_of(mv: MessageValues) -> pd.DataFrame:
    """`host_split` from the message values."""
    if mv.sums.empty:
        return pd.DataFrame(columns=["path", "messages", "bytes", "bandwidth_MBps"])
    rows = []
    for p in _paths_with_messages(mv):
        s = mv.sums[mv.sums["path"] == PATHS.index(p)]
        big = bool(s["large"].any())  # bandwidth from large messages
        runs = mv.runs(f"rate/{p}", 1) if big else [*mv.runs(f"rate/{p}", 0),
                                                     *mv.runs(f"rate/{p}", 1)]
        rows.append({"path": p, "messages": int(s["messages"].sum()),
                     "bytes": int(s["bytes"].sum()),
                     "bandwidth_MBps": orderstats.median(runs, mv.gather)})
    return pd.DataFrame(rows)


def host_split(trace: Trace) -> pd.DataFrame:
    """Messages within a host vs between hosts, with achieved bandwidth for each: the
    median of the large messages' own rates (as in `message_sizes`, so one message that
    waited cannot pull the figure down), from all messages where none is large."""
    return host_split_of(MessageValues.of(trace))


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
