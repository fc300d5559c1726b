"""The findings' replays bounded by an event budget, for both engines.

Every finding's saving is a replay of the trace with the fix applied (findings.Replays).
Its cost (~200 B per replayed event for the simulator's program and engine, plus ~84 B per
event for the calls, messages and collectives it reads; CPU per scenario likewise) grows
with the trace, so a replay holds at most `budget_events` replayed events (a depth-0 call
is one, a message two):
- the trace has no more: it is replayed whole (the pandas engine's trace as it is, the
  Dask engine's gathered into the client: the same tables, the same savings);
- else a window of whole iterations of the main loop holding at most the budget (at least
  one iteration), in its middle, is replayed on the machine fitted from it, and each saving
  scaled to the run: per removed call for the calls a scenario takes out (redundant calls,
  a collective run every k-th iteration), per iteration for the others. Without a main
  loop, a window of the run's time is used the same way, scaled by time. The findings'
  messages and evidence name the window and the scaling.

Both engines choose the same window and replay the same window trace, so their findings
are equal at any size: `WindowedReplays` holds the choice and the scaling; how the events
are counted and the window cut is the engine's (`WholeTrace` here for the pandas engine's
tables in memory, engines.rankfindings per rank slice for Dask). The default budget keeps a
replay near 1.2 GB, within a 2 GB process, whatever the trace's size.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from mpiscope.analysis import findings, iterations, simulate
from mpiscope.analysis.critical_path import CriticalPath
from mpiscope.analysis.order import by_rank_then_start
from mpiscope.analysis.simulate.scenario import Scenario
from mpiscope.analysis.waitstates import WaitStates
from mpiscope.archive.trace import Trace
from mpiscope.errors import UserError
from mpiscope.numbers import seconds

REPLAY_BYTES_PER_EVENT = 200 + 84  # simulator program and engine + the tables it reads
DEFAULT_BUDGET_EVENTS = 4_000_000  # ~1.1 GB replayed: fits a 2 GB worker-sized process
GATHERED = ("calls", "messages", "collectives")  # the tables the replay reads
# the tables cut by rank (emptied in the window trace's template: not read by the replay)
PER_RANK = (*GATHERED, "regions", "p2p", "flushes", "unmatched", "rma", "rma_sync", "io",
            "threads")
TIME_BINS = 200  # a window of the run's time is chosen on this grid
# message columns holding times (shifted with the window) and call ids (renumbered)
MESSAGE_TIMES = ("send_time", "recv_time", "send_enter", "recv_enter", "recv_leave")
MESSAGE_CALLS = ("send_call", "recv_call", "send_complete_call", "recv_complete_call")
# columns of the calls the replay (analysis.simulate) never reads: a window trace is a
# copy, made without them (the rules read them from the whole trace)
UNREAD_CALL_COLUMNS = ("comm", "peer", "tag", "root", "coll_seq", "in_hash", "out_hash",
                       "prior_hash", "coll_op", "truncated")
# intervals per rank between edges: rank -> its edges (key -1: the same edges for all)
Edges = Mapping[int, np.ndarray]


@dataclasses.dataclass
class Count:
    """Replayed events (a depth-0 call one, a message sent two) of one rank or several
    merged: in all, per interval between edges (None: no intervals, or ranks whose
    intervals differ in number), and the ranks' time span."""

    events: int
    per_interval: np.ndarray | None
    span: tuple[int, int]


def merge_counts(parts: list[Count]) -> Count:
    """The ranks' Counts added up (on the Dask workers: the client gets one per interval,
    not one per rank and interval)."""
    per = [p.per_interval for p in parts]
    same = all(p is not None for p in per) and len({len(p) for p in per}) == 1  # type: ignore[arg-type]
    return Count(sum(p.events for p in parts), np.sum(per, axis=0) if same else None,
                 (min(p.span[0] for p in parts), max(p.span[1] for p in parts)))


def count_rank(top: np.ndarray, sent: np.ndarray, e: np.ndarray | None,
               span: tuple[int, int]) -> Count:
    """One rank's Count from the starts of its depth-0 calls and of the calls sending its
    messages (each sorted), per interval between the edges `e` (None: no intervals)."""
    per = None
    if e is not None and len(e):
        per = np.diff(np.searchsorted(top, e)) + 2 * np.diff(np.searchsorted(sent, e))
    return Count(len(top) + 2 * len(sent), per, span)


def edges_of(edges: Edges | None, rank: int) -> np.ndarray | None:
    if edges is None:
        return None
    return edges.get(rank, edges.get(-1))


def cut_rows(calls: pd.DataFrame, lo: Mapping[int, int], hi: Mapping[int, int]) -> np.ndarray:
    """Which of `calls` (any ranks) start in [lo, hi) of their rank's window (key -1: all
    ranks)."""
    rank = calls["rank"].to_numpy()
    st = calls["start"].to_numpy()
    if -1 in lo and len(lo) == 1:
        return (st >= lo[-1]) & (st < hi[-1])
    ranks = np.unique(rank)
    if not len(ranks):
        return np.zeros(0, bool)
    top = int(ranks.max()) + 1
    a = np.full(top, np.iinfo(np.int64).max, np.int64)  # a rank without a window: none
    b = np.full(top, np.iinfo(np.int64).min, np.int64)
    for r in ranks:
        a[r] = lo.get(int(r), lo.get(-1, a[r]))
        b[r] = hi.get(int(r), hi.get(-1, b[r]))
    return (st >= a[rank]) & (st < b[rank])


def template(t: Trace) -> Trace:
    """`t` with its per-rank tables emptied: the window trace's small tables."""
    return dataclasses.replace(t, **{
        n: getattr(t, n).iloc[:0] for n in PER_RANK if getattr(t, n) is not None})


def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    out = pd.concat(frames, ignore_index=True)
    for col, dtype in frames[0].dtypes.items():
        # categories that differ between ranks' partitions: categorical again
        if isinstance(dtype, pd.CategoricalDtype) and out[col].dtype == object:
            out[col] = out[col].astype("category")
    return out


@dataclasses.dataclass
class Window:
    """Where the replay ran: per rank [lo, hi) of the calls' starts (key -1: all ranks)."""

    lo: dict[int, int]
    hi: dict[int, int]
    events: int
    what: str  # "iterations 21..40 of 60 of the main loop" / "3.1..4.6 s of the run's 9.2 s"
    scale: float  # the run's iterations (or time) over the window's
    iterations: int = 0  # of the main loop in the window (0: a time window)
    # global call id -> the window trace's row (sorted ids, their rows)
    ids: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))


def window_trace(small: Trace, calls: pd.DataFrame, messages: pd.DataFrame,
                 collectives: pd.DataFrame, w: Window) -> Trace:
    """The window's calls (rank order), the messages sent from them and their collective
    rows as a trace of its own: calls renumbered, times shifted to start at the window's
    earliest start, each rank ending at its window's end. `small`: the template. The
    frames are the caller's own (cut from the trace's): columns are replaced in them."""
    ids = calls["call"].to_numpy().astype(np.int64)  # ranks in order: sorted
    w.ids = ids

    def renumber(col: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(ids, col), max(len(ids) - 1, 0))
        ok = (col >= 0) & (ids[pos] == col) if len(ids) else np.zeros(len(col), bool)
        return np.where(ok, pos, -1)

    unread = [c for c in UNREAD_CALL_COLUMNS if c in calls.columns]
    if unread:  # WholeTrace.cut took only the read ones: no second copy of the window
        calls = calls.drop(columns=unread)
    t0 = min(w.lo.values())
    m = messages
    for col in MESSAGE_CALLS:
        m[col] = renumber(m[col].to_numpy())
    # a message whose receive lies outside the window is not replayed
    m = m[(m["send_call"] >= 0) & (m["recv_call"] >= 0)].reset_index(drop=True)
    for col in MESSAGE_TIMES:
        if col in m.columns:
            m[col] = m[col] - t0
    coll = collectives
    coll["call"] = renumber(coll["call"].to_numpy())
    calls["call"] = np.arange(len(calls))
    for df in (calls, coll):
        df["start"] = df["start"] - t0
        df["end"] = df["end"] - t0
    ranks = small.ranks.copy()
    ranks["first_ns"] = 0
    ranks["last_ns"] = [w.hi.get(int(r), w.hi.get(-1)) - t0 for r in ranks["rank"]]
    return dataclasses.replace(small, calls=calls, messages=m, collectives=coll, ranks=ranks)


def middle(per: np.ndarray, budget: int) -> tuple[int, int]:
    """[a, b): the widest window of intervals centred in the run that holds at most
    `budget` events (one interval at least)."""
    n = len(per)
    cs = np.r_[0, np.cumsum(per)]
    for width in range(n, 0, -1):
        a = (n - width) // 2
        if cs[a + width] - cs[a] <= budget:
            return a, a + width
    return n // 2, n // 2 + 1


class WindowedReplays(findings.Replays):
    """`findings.Replays` on the whole trace, or on a window of it (module doc): chosen on
    first use, so a run without findings counts and cuts nothing. An engine gives
    `count` (the replayed events, per interval between edges), `whole` (the trace's
    replayed tables) and `cut` (the window trace)."""

    def __init__(self, loop: iterations.Loop | None, budget_events: int) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # set by _prepare
        self.loop, self.budget = loop, int(budget_events)
        self.window: Window | None = None
        self._prepared = False

    # --- the engine's part
    def count(self, edges: Edges | None) -> Count:
        raise NotImplementedError

    def whole(self) -> Trace:
        raise NotImplementedError

    def cut(self, w: Window) -> Trace:
        raise NotImplementedError

    # --- the window's choice
    def _prepare(self) -> None:
        if self._prepared:
            return
        self._prepared = True
        loop = self.loop
        # each rank's iteration edges: its row of the loop's starts
        edges = loop.starts_by_rank() if loop is not None and loop.iterations > 1 else None
        counted = self.count(edges)
        if counted.events <= self.budget:
            self.trace = self.whole()
            return
        if edges is not None and counted.per_interval is not None:
            per_it = counted.per_interval
            a, z = middle(per_it, self.budget)
            lo = {r: int(e[a]) for r, e in edges.items()}
            hi = {r: int(e[z]) for r, e in edges.items()}
            n = loop.iterations  # type: ignore[union-attr]
            self.window = Window(lo, hi, int(per_it[a:z].sum()),
                                 f"iterations {a + 1}..{z} of {n} of the main loop",
                                 n / (z - a), z - a)
        else:
            first, last = counted.span
            grid = np.linspace(first, last + 1, TIME_BINS + 1).astype(np.int64)
            per_bin = self.count({-1: grid}).per_interval
            assert per_bin is not None
            a, z = middle(per_bin, self.budget)
            self.window = Window({-1: int(grid[a])}, {-1: int(grid[z])},
                                 int(per_bin[a:z].sum()),
                                 f"{seconds((grid[a] - first) / 1e9)}.."
                                 f"{seconds((grid[z] - first) / 1e9)} of the run's "
                                 f"{seconds((last - first) / 1e9)}",
                                 (last - first) / max(grid[z] - grid[a], 1))
        self.trace = self.cut(self.window)

    @property
    def base(self) -> simulate.BaseRun:
        self._prepare()
        return super().base

    @property
    def replayed(self) -> str:  # type: ignore[override]
        self._prepare()
        if self.window is None:
            return findings.REPLAYED
        w = self.window
        return (f"replayed on {w.what} ({w.events} events, within the budget of "
                f"{self.budget}) on the machine fitted from them, the saving scaled to the "
                f"run per removed call, else by x{w.scale:.3g}")

    @property
    def model(self) -> str:  # type: ignore[override]
        self._prepare()
        if self.window is None:
            return findings.MODEL
        return (f"simulate (fitted machine), window: {self.window.what}, scaled "
                f"x{self.window.scale:.3g}")

    @property
    def replayed_s(self) -> float:
        """The run's replay, or its window's scaled to the run."""
        s = self.base.replayed_s
        return s if self.window is None else s * self.window.scale

    def scale(self) -> float:
        """A window's replay is scaled to the run already (its saving per removed call or
        by the window's share): no second scale."""
        self._prepare()
        return super().scale() if self.window is None else 1.0

    def saving(self, scenario: Scenario) -> float | None:
        self._prepare()
        w = self.window
        if w is None:
            return super().saving(scenario)
        scale = w.scale
        if scenario.remove_calls:
            ids = np.asarray(scenario.remove_calls, np.int64)
            pos = np.minimum(np.searchsorted(w.ids, ids), max(len(w.ids) - 1, 0))
            inside = pos[w.ids[pos] == ids] if len(w.ids) else pos[:0]
            if not len(inside):
                self.why_none = (f"none of them lies in the replayed window ({w.what}), "
                                 "so no saving is stated")
                return None
            scale = len(ids) / len(inside)
            scenario = dataclasses.replace(scenario, remove_calls=tuple(int(p) for p in inside))
        if scenario.collective_every and self.loop is not None and w.iterations:
            scale = self._every_scale(scenario)
        try:
            saved = super().saving(scenario)
        except UserError:
            saved = None
        if saved is None:
            self.why_none = findings.WHY_NONE
            return None
        return float(saved * scale)

    def _every_scale(self, scenario: Scenario) -> float:
        """Calls a collective-every-K scenario removes in the run over those in the
        window (one of K kept, and the last): its saving per removed call."""
        loop, w = self.loop, self.window
        assert loop is not None and w is not None
        every = scenario.collective_every[0]
        site = loop.sites[(loop.sites["function"] == every.site.function)
                          & (loop.sites["callsite"] == every.site.callsite)]
        per_it = float(site["per_iteration"].iloc[0]) if len(site) else 1.0
        n_run = round(loop.iterations * per_it)
        n_win = round(w.iterations * per_it)
        removed_run = n_run - math.ceil(n_run / every.k)
        removed_win = n_win - math.ceil(n_win / every.k)
        return removed_run / removed_win if removed_win > 0 else w.scale


class WholeTrace(WindowedReplays):
    """The pandas engine's replays: the trace's tables in memory, counted and cut as the
    Dask engine does per rank (`calls` sorted by rank with `call` its row number, as
    `mpiscope.load` gives them)."""

    def __init__(self, trace: Trace, loop: iterations.Loop | None,
                 budget_events: int = DEFAULT_BUDGET_EVENTS) -> None:
        super().__init__(loop, budget_events)
        self.source = trace

    def count(self, edges: Edges | None) -> Count:
        t = self.source
        calls = t.calls
        rank = calls["rank"].to_numpy()
        start = calls["start"].to_numpy()
        top = calls["depth"].to_numpy() == 0
        send = t.messages["send_call"].to_numpy()
        ranks = t.ranks
        span = (int(ranks["first_ns"].min()), int(ranks["last_ns"].max()))
        if edges is None:  # the total alone
            return Count(int(top.sum()) + 2 * len(send), None, span)
        # each rank's depth-0 starts and sending calls' starts, sorted within the rank
        # (in order already when the calls are, as a trace read back has them)
        top_rank, top_start = _by_rank_then_start(rank[top], start[top])
        sent_rank, sent_start = _by_rank_then_start(rank[send], start[send])
        counts = []
        for r in (int(r) for r in ranks["rank"]):
            a, b = np.searchsorted(top_rank, [r, r + 1])
            c, d = np.searchsorted(sent_rank, [r, r + 1])
            counts.append(count_rank(top_start[a:b], sent_start[c:d], edges_of(edges, r),
                                     span))
        return merge_counts(counts) if counts else Count(0, None, span)

    def whole(self) -> Trace:
        return self.source

    def cut(self, w: Window) -> Trace:
        t = self.source
        keep = cut_rows(t.calls, w.lo, w.hi)
        read = [c for c in t.calls.columns if c not in UNREAD_CALL_COLUMNS]
        calls = t.calls.loc[keep, read]
        kept = np.zeros(len(t.calls) + 1, bool)  # by call id (= row); -1: the last, False
        kept[:-1] = keep
        m, coll = t.messages, t.collectives
        # the Dask engine's order: each rank's rows in turn (a stable sort by rank)
        m = m[kept[m["send_call"].to_numpy()]]
        m = m.iloc[np.argsort(m["send_rank"].to_numpy(), kind="stable")]
        coll = coll[kept[coll["call"].to_numpy()]]
        coll = coll.iloc[np.argsort(coll["rank"].to_numpy(), kind="stable")]
        return window_trace(template(t), calls.reset_index(drop=True),
                            m.reset_index(drop=True), coll.reset_index(drop=True), w)


def _by_rank_then_start(rank: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = by_rank_then_start(rank, start)
    return (rank, start) if o is None else (rank[o], start[o])


def find(trace: Trace, ws: WaitStates, breakdown: pd.DataFrame,
         loop: iterations.Loop | None, path: CriticalPath | None = None, *,
         budget_events: int | None = None) -> list[findings.Finding]:
    """The pandas engine's findings: `findings.find`, its savings replayed within
    `budget_events` (default DEFAULT_BUDGET_EVENTS; module doc)."""
    budget = DEFAULT_BUDGET_EVENTS if budget_events is None else budget_events
    return findings.find(trace, ws, breakdown, loop, path, WholeTrace(trace, loop, budget))
