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


@dataclass
class Lanes:
    """Lane order: ranks grouped by host (hosts in order of their first rank)."""

    ranks: np.ndarray  # rank drawn in lane i
    lane_of_rank: np.ndarray  # lane of rank r
    hosts: list[str]  # host of lane i

    @classmethod
    def of(cls, trace: Trace) -> Lanes:
        r = trace.ranks.sort_values("rank")
        first = r.groupby("host", observed=True, sort=False)["rank"].transform("min")
        r = r.assign(first=first.to_numpy()).sort_values(["first", "rank"])
        ranks = r["rank"].to_numpy(np.int64)
        lane_of = np.zeros(max(trace.num_ranks, int(ranks.max(initial=-1)) + 1), np.int64)
        lane_of[ranks] = np.arange(len(ranks))
        return cls(ranks, lane_of, [str(h) for h in r["host"]])

    def labels(self) -> list[str]:
        return [f"{h} · rank {r}" for h, r in zip(self.hosts, self.ranks, strict=True)]


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
    _panels: Panels | None = field(default=None, repr=False)
    _wait_ns: np.ndarray | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _waits_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def build(cls, trace: Trace, label: str | None = None, *, skip_frames: str = "",
              group_by: str = "frame") -> TraceModel:
        index = StateIndex.build(trace.calls, trace.num_ranks)
        return cls(label or Path(trace.path).name, trace, index,
                   MessageIndex.build(trace.messages, index.origin), Lanes.of(trace),
                   Analysis(trace, skip_frames=skip_frames, group_by=group_by),
                   RegionIndex.build(trace.regions, trace.num_ranks, index))

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
        c = self.trace.comms
        hit = c[c["comm"] == comm]
        return str(hit["name"].iloc[0]) if len(hit) else ("-" if comm < 0 else f"comm {comm}")
