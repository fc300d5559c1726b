"""One served trace: its tables, the timeline indexes and the analyses, built once."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mpiscope.analysis.session import Analysis
from mpiscope.archive.trace import Trace
from mpiscope_webui.analysis import Panels
from mpiscope_webui.lod import StateIndex
from mpiscope_webui.regions import RegionIndex

ORDERS = ("host", "rank", "wait")  # lane orders: hosts in order of their first rank, rank
# number, most waiting first


def _key(rank: np.ndarray, thread: np.ndarray) -> np.ndarray:
    return (rank << 20) | np.clip(thread, 0, (1 << 20) - 1)


@dataclass
class Streams:
    """The (rank, thread) pairs drawn, rank-major: stream s is thread thread[s] of rank
    rank[s]. A trace with one thread per rank has stream r = rank r."""

    rank: np.ndarray  # int64
    thread: np.ndarray  # int64
    of_call: np.ndarray  # stream of each call (row of Trace.calls)

    @classmethod
    def of(cls, trace: Trace) -> Streams:
        """The threads that call MPI or have user regions, and thread 0 of every rank."""
        c = trace.calls
        rank = c["rank"].to_numpy(np.int64)
        thread = (c["thread"].to_numpy(np.int64) if "thread" in c.columns
                  else np.zeros(len(c), np.int64))
        reg = trace.regions
        rthread = (reg["thread"].to_numpy(np.int64) if "thread" in reg.columns
                   else np.zeros(len(reg), np.int64))
        n = max(trace.num_ranks, int(rank.max(initial=-1)) + 1)
        if not thread.any() and not rthread.any():
            return cls(np.arange(n, dtype=np.int64), np.zeros(n, np.int64), rank)
        rrank = reg["rank"].to_numpy(np.int64) if len(reg) else np.zeros(0, np.int64)
        key = np.unique(np.concatenate([_key(rank, thread), _key(rrank, rthread),
                                        np.arange(n, dtype=np.int64) << 20]))
        return cls(key >> 20, key & ((1 << 20) - 1),
                   np.searchsorted(key, _key(rank, thread)).astype(np.int64))

    def find(self, rank: np.ndarray, thread: np.ndarray) -> np.ndarray:
        """Stream of each (rank, thread); -1 for a pair that is none."""
        key = _key(self.rank, self.thread)
        want = _key(np.asarray(rank, np.int64), np.asarray(thread, np.int64))
        if not len(key):
            return np.full(len(want), -1, np.int64)
        at = np.clip(np.searchsorted(key, want), 0, len(key) - 1)
        return np.where(key[at] == want, at, -1)

    @property
    def threaded(self) -> bool:
        return bool(self.thread.any())

    def threads_of(self) -> np.ndarray:
        """Number of streams per rank."""
        return np.bincount(self.rank, minlength=int(self.rank.max(initial=-1)) + 1)


@dataclass(frozen=True)
class LaneSpec:
    """Which lanes a view draws: the ranks shown (None: all), their order, the ranks
    whose threads have a lane each (the others show their threads together), and the hosts
    whose ranks share one summary lane."""

    ranks: tuple[int, ...] | None = None
    order: str = "host"
    expanded: tuple[int, ...] = ()
    grouped: tuple[str, ...] = ()


@dataclass
class Lanes:
    """The lanes of a view, top to bottom. Lane i draws rank ranks[i]: all its threads
    (threads[i] = -1) or only thread threads[i] (an expanded rank has a lane per thread);
    or, where members[i] > 1, every rank of host hosts[i] shown (ranks[i] the first)."""

    ranks: np.ndarray  # rank drawn in lane i
    lane_of_rank: np.ndarray  # (first) lane of rank r, -1 where the rank is not shown
    hosts: list[str]  # host of lane i
    threads: np.ndarray = None  # thread of lane i, -1: the rank's threads together
    lane_of_stream: np.ndarray = None  # lane of each stream, -1 where not shown
    nthreads: np.ndarray = None  # threads (of all its ranks) in lane i
    members: np.ndarray = None  # ranks in lane i

    def __post_init__(self) -> None:
        n = len(self.ranks)
        if self.threads is None:
            self.threads = np.full(n, -1, np.int64)
        if self.nthreads is None:
            self.nthreads = np.ones(n, np.int64)
        if self.members is None:
            self.members = np.ones(n, np.int64)

    @classmethod
    def of(cls, trace: Trace, streams: Streams | None = None, spec: LaneSpec = LaneSpec(),
           wait_by_rank: np.ndarray | None = None) -> Lanes:
        return cls.of_ranks(trace.ranks, trace.num_ranks, streams or Streams.of(trace), spec,
                            wait_by_rank)

    @classmethod
    def of_ranks(cls, ranks: pd.DataFrame, num_ranks: int, streams: Streams,
                 spec: LaneSpec = LaneSpec(), wait_by_rank: np.ndarray | None = None
                 ) -> Lanes:
        """The lanes from the ranks table alone (rank, host): a trace in memory or out of
        core (ooc.py reads the cache's small ranks table)."""
        r = ranks.sort_values("rank")
        first = r.groupby("host", observed=True, sort=False)["rank"].transform("min")
        r = r.assign(first=first.to_numpy())
        if spec.order == "wait" and wait_by_rank is not None:
            w = np.zeros(len(r))
            rk = r["rank"].to_numpy(np.int64)
            ok = rk < len(wait_by_rank)
            w[ok] = wait_by_rank[rk[ok]]
            r = r.assign(w=-w).sort_values(["w", "rank"], kind="stable")
        elif spec.order == "rank":
            r = r.sort_values("rank", kind="stable")
        else:
            r = r.sort_values(["first", "rank"], kind="stable")
        if spec.ranks is not None:
            r = r[r["rank"].isin(spec.ranks)]
        nstream = len(streams.rank)
        count = streams.threads_of()
        n = max(num_ranks, len(count), int(r["rank"].max()) + 1 if len(r) else 0)
        lane_of = np.full(n, -1, np.int64)
        lane_of_stream = np.full(nstream, -1, np.int64)
        first_stream = np.searchsorted(streams.rank, np.arange(n))
        expanded, grouped = set(spec.expanded), set(spec.grouped)
        lr, lt, lh, ln, lm = [], [], [], [], []
        host_lane: dict[str, int] = {}
        for rank, host in zip(r["rank"].to_numpy(np.int64), r["host"], strict=True):
            k = int(count[rank]) if rank < len(count) else 0
            own = np.arange(first_stream[rank], first_stream[rank] + k)
            if str(host) in grouped:  # the host's lane, where its first rank comes
                lane = host_lane.setdefault(str(host), len(lr))
                if lane == len(lr):
                    lr.append(rank), lt.append(-1), lh.append(str(host)), ln.append(0)
                    lm.append(0)
                lane_of[rank] = lane
                lane_of_stream[own] = lane
                ln[lane] += max(k, 1)
                lm[lane] += 1
                continue
            lane_of[rank] = len(lr)
            lm += [1] * (k if k > 1 and rank in expanded else 1)
            if k > 1 and rank in expanded:
                for s in own:
                    lane_of_stream[s] = len(lr)
                    lr.append(rank), lt.append(int(streams.thread[s]))
                    lh.append(str(host)), ln.append(k)
            else:
                lane_of_stream[own] = len(lr)
                lr.append(rank), lt.append(-1), lh.append(str(host)), ln.append(max(k, 1))
        return cls(np.array(lr, np.int64), lane_of, lh, np.array(lt, np.int64),
                   lane_of_stream, np.array(ln, np.int64), np.array(lm, np.int64))

    def labels(self) -> list[str]:
        out = []
        for h, r, t, k, g in zip(self.hosts, self.ranks, self.threads, self.nthreads,
                                 self.members, strict=True):
            if g > 1:
                out.append(f"{h} · {g} ranks")
                continue
            tail = f" · thread {t}" if t >= 0 else (f" ({k} threads)" if k > 1 else "")
            out.append(f"{h} · rank {r}{tail}")
        return out


@dataclass
class MessageIndex:
    """Messages sorted by their earlier end point, for window queries."""

    lo: np.ndarray  # min(send_time, recv_time), sorted, relative to the state origin
    hi: np.ndarray
    row: np.ndarray  # row in Trace.messages
    max_span: int

    @classmethod
    def build(cls, messages: pd.DataFrame, origin: int) -> MessageIndex:
        s = messages["send_time"].to_numpy(np.int64) - origin
        r = messages["recv_time"].to_numpy(np.int64) - origin
        lo, hi = np.minimum(s, r), np.maximum(s, r)
        order = np.argsort(lo, kind="stable")
        span = int((hi - lo).max()) if len(lo) else 0
        return cls(lo[order], hi[order], order.astype(np.int64), span)

    def in_window(self, t0: int, t1: int) -> np.ndarray:
        a = np.searchsorted(self.lo, t0 - self.max_span, side="left")
        b = np.searchsorted(self.lo, t1, side="right")
        sel = np.flatnonzero(self.hi[a:b] >= t0) + a
        return self.row[sel]


@dataclass
class TraceModel:
    """Everything the app needs from one trace directory."""

    label: str
    trace: Trace
    index: StateIndex
    messages: MessageIndex
    lanes: Lanes
    session: Analysis  # the trace's analyses, each computed once for every view
    regions: RegionIndex | None = None  # user regions (Score-P), None if the trace has none
    streams: Streams | None = None  # (rank, thread) pairs; None: from the trace
    # the states keyed by stream (its `rank` is the stream): the lanes' level of detail.
    # The same object as `index` when every rank has one thread
    lane_index: StateIndex | None = None
    _lanes: dict = field(default_factory=dict, repr=False)
    _pos_in_index: np.ndarray | None = field(default=None, repr=False)
    _panels: Panels | None = field(default=None, repr=False)
    _wait_ns: np.ndarray | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _waits_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _lanes_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def build(cls, trace: Trace, label: str | None = None, *, skip_frames: str = "",
              group_by: str = "frame") -> TraceModel:
        index = StateIndex.build(trace.calls, trace.num_ranks)
        return cls(label or Path(trace.path).name, trace, index,
                   MessageIndex.build(trace.messages, index.origin), Lanes.of(trace),
                   Analysis(trace, skip_frames=skip_frames, group_by=group_by),
                   RegionIndex.build(trace.regions, trace.num_ranks, index))

    def __post_init__(self) -> None:
        if self.streams is None:
            self.streams = Streams.of(self.trace)
        if self.lane_index is None:
            self.lane_index = self.index if not self.streams.threaded else StateIndex.build(
                self.trace.calls.assign(rank=self.streams.of_call.astype(np.int32)),
                len(self.streams.rank))

    def lanes_for(self, spec: LaneSpec) -> Lanes:
        """The lanes a view draws (the default: every rank, threads together, by host)."""
        if spec == LaneSpec():
            return self.lanes
        wait = None
        if spec.order == "wait" and self._wait_ns is not None:
            wait = np.bincount(self.trace.calls["rank"].to_numpy(np.int64),
                               weights=self._wait_ns, minlength=self.trace.num_ranks)
        key = (spec, wait is not None)
        with self._lanes_lock:
            if key not in self._lanes:
                if len(self._lanes) > 32:
                    self._lanes.clear()
                self._lanes[key] = Lanes.of(self.trace, self.streams, spec, wait)
            return self._lanes[key]

    def index_positions(self, lane_positions: np.ndarray) -> np.ndarray:
        """Positions in `index` of states given by their position in `lane_index`."""
        if self.lane_index is self.index:
            return lane_positions
        if self._pos_in_index is None:
            pos_of_call = np.zeros(int(self.index.call.max(initial=-1)) + 1, np.int64)
            pos_of_call[self.index.call] = np.arange(len(self.index.call))
            self._pos_in_index = pos_of_call[self.lane_index.call]
        return self._pos_in_index[lane_positions]

    @property
    def duration(self) -> int:
        """Span of the timeline in ns (relative times run from 0 to this)."""
        return int(self.index.span - 2)

    def waits(self) -> np.ndarray:
        """Waiting time per call id, computed on first use. The wait states come first
        and on their own (well under a second where all analyses take several) because
        the timeline shades them: from then on every view does. If they fail, no call
        waits (the analysis tabs list the error)."""
        with self._waits_lock:
            if self._wait_ns is None:
                try:
                    w = self.session.wait_states.per_call["wait_ns"].to_numpy(np.int64)
                except Exception:  # noqa: BLE001 - kept by the session, shown by Panels
                    w = np.zeros(len(self.trace.calls), np.int64)
                self.index.wait = w[self.index.call]
                if self.lane_index is not self.index:
                    self.lane_index.wait = w[self.lane_index.call]
                self._wait_ns = w
            return self._wait_ns

    @property
    def waits_ready(self) -> bool:
        return self._wait_ns is not None

    @property
    def wait_ns(self) -> np.ndarray | None:
        """Waiting time per call id, None until the wait states are computed."""
        return self._wait_ns

    def analysis(self) -> Panels:
        """What the analysis tabs show (computed on first use, then shared by all
        sessions)."""
        self.waits()
        with self._lock:
            if self._panels is None:
                self._panels = Panels.of(self.session)
            return self._panels

    def call_row(self, call: int) -> pd.Series:
        return self.trace.calls.iloc[int(call)]

    def comm_name(self, comm: int) -> str:
        return comm_label(self.trace.comms, comm)


def comm_label(comms: pd.DataFrame, comm: int) -> str:
    """A communicator's name from a trace's comms table (in memory, or the cache's out
    of core)."""
    hit = comms[comms["comm"] == comm]
    return str(hit["name"].iloc[0]) if len(hit) else ("-" if comm < 0 else f"comm {comm}")
