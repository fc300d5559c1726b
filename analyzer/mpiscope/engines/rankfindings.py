"""Findings on the Dask engine: the rules of mpiscope.analysis.findings run as per-rank
passes over the rank slices (engines.slices) and combined on the client, with the
replays that estimate each saving bounded by an event budget.

    from mpiscope.engines import rankfindings
    found = rankfindings.find(run, ws, ranks, loop, critical_path)

`run(fn)` maps `fn` over every rank's slice, in rank order (in-process in tests, over the
workers in the Dask engine). Memory:
- detection: per rank on the workers; the client holds per call site aggregates and, per
  collective instance, only the instances that matter (redundancy candidates, those
  someone waited in): see analysis/findings.py.
- replays (the simulator: ~200 B per replayed event for its program and engine, peak RSS
  measured on synthetic traces of 0.5 and 1.9 x 10^6 replayed events, plus ~84 B per event
  for the calls, messages and collectives it reads): at most `budget_events` replayed
  events (a depth-0 call is one, a message two) are gathered into the client.
  - the trace has no more: it is gathered whole and replayed exactly as the pandas
    engine does (same savings, same messages);
  - else a window of whole iterations of the main loop holding at most the budget (at
    least one iteration), in its middle, is gathered and replayed on the machine fitted
    from it, and each saving scaled to the run: per removed call for the calls a
    scenario takes out (redundant calls, a collective run every k-th iteration), per
    iteration for the others. Without a main loop, a window of the run's time is used
    the same way, scaled by time. The findings' messages and evidence name the window
    and the scaling.
The default budget (DEFAULT_BUDGET_EVENTS) keeps a gathered replay near 1.2 GB, within a
2 GB process.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from mpiscope.analysis import findings, iterations, simulate
from mpiscope.analysis.critical_path import CriticalPath
from mpiscope.analysis.findings import Finding, Run
from mpiscope.analysis.simulate.scenario import Scenario
from mpiscope.archive.trace import Trace
from mpiscope.engines.slices import PerRank, Reduced
from mpiscope.errors import UserError
from mpiscope.numbers import seconds

REPLAY_BYTES_PER_EVENT = 200 + 84  # simulator program and engine + the tables it reads
DEFAULT_BUDGET_EVENTS = 4_000_000  # ~1.1 GB replayed: fits a 2 GB worker-sized process
GATHERED = ("calls", "messages", "collectives")  # the tables the replay reads
TIME_BINS = 200  # a window of the run's time is chosen on this grid
# message columns holding times (shifted with the window) and call ids (renumbered)
MESSAGE_TIMES = ("send_time", "recv_time", "send_enter", "recv_enter", "recv_leave")
MESSAGE_CALLS = ("send_call", "recv_call", "send_complete_call", "recv_complete_call")


def find(run: Run, ws: Any, ranks: pd.DataFrame, loop: iterations.Loop | None,
         critical_path: CriticalPath | None, *,
         budget_events: int = DEFAULT_BUDGET_EVENTS) -> list[Finding]:
    """The pandas engine's findings, detected per rank; `ws`: the wait states (anything
    with `.skew.offsets_ns`) or the clock offsets {rank: ns} themselves; `ranks`: the
    per-rank breakdown; savings replayed within `budget_events` (module doc)."""
    offsets = ws if isinstance(ws, dict) else ws.skew.offsets_ns
    replays = BoundedReplays(run, loop, budget_events)
    return findings.detect(run, offsets, ranks, loop, critical_path, replays)


# ------------------------------------------------------------------ per-rank passes
@dataclasses.dataclass
class Count:
    """Replayed events (a depth-0 call one, a message sent two) of one rank or several
    merged: in all, per interval between edges (None: no intervals, or ranks whose
    intervals differ in number), and the ranks' time span."""

    events: int
    per_interval: np.ndarray | None
    span: tuple[int, int]


def _count(s: Any, e: np.ndarray | None) -> Count:
    """The rank's Count, per interval between the edges `e` (None: no intervals)."""
    calls = s.trace.calls
    top = np.sort(calls["start"].to_numpy()[calls["depth"].to_numpy() == 0])
    sent = np.sort(calls["start"].to_numpy()[s.local(s.trace.messages["send_call"].to_numpy())])
    r = s.trace.ranks
    per = None
    if e is not None and len(e):
        per = np.diff(np.searchsorted(top, e)) + 2 * np.diff(np.searchsorted(sent, e))
    return Count(len(top) + 2 * len(sent), per,
                 (int(r["first_ns"].min()), int(r["last_ns"].max())))


def merge_counts(parts: list[Count]) -> Count:
    """The ranks' Counts added up (on the workers: the client gets one per interval, not
    one per rank and interval)."""
    per = [p.per_interval for p in parts]
    same = all(p is not None for p in per) and len({len(p) for p in per}) == 1  # type: ignore[arg-type]
    return Count(sum(p.events for p in parts), np.sum(per, axis=0) if same else None,
                 (min(p.span[0] for p in parts), max(p.span[1] for p in parts)))


def _counted(run: Run, fn: Any) -> Count:
    return merge_counts(run(Reduced(fn, merge_counts)))


def _cut(s: Any, lo: dict[int, int] | None, hi: dict[int, int] | None) -> dict[str, Any]:
    """The rank's calls (starting in [lo, hi) of its window, or all), the messages it sent
    from them and its collective calls among them; the first rank adds the small tables
    (`template`: made by every rank, it took 9 in 10 of the pass's time)."""
    t = s.trace
    calls = t.calls
    if lo is not None and hi is not None:
        a, b = lo.get(s.rank, lo.get(-1)), hi.get(s.rank, hi.get(-1))
        st = calls["start"].to_numpy()
        calls = calls[(st >= a) & (st < b)]
    ids = calls["call"].to_numpy()
    m, coll = t.messages, t.collectives
    out = {"calls": calls, "messages": m[np.isin(m["send_call"].to_numpy(), ids)],
           "collectives": coll[np.isin(coll["call"].to_numpy(), ids)]}
    if s.rank == int(t.ranks["rank"].min()):  # the per-rank tables empty (not read)
        per_rank = (*GATHERED, "regions", "p2p", "flushes", "unmatched", "rma", "rma_sync",
                    "io", "threads")
        out["template"] = dataclasses.replace(t, **{
            n: getattr(t, n).iloc[:0] for n in per_rank if getattr(t, n) is not None})
    return out


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    out = pd.concat(frames, ignore_index=True)
    for col, dtype in frames[0].dtypes.items():
        # categories that differ between ranks' partitions: categorical again
        if isinstance(dtype, pd.CategoricalDtype) and out[col].dtype == object:
            out[col] = out[col].astype("category")
    return out


def _template(parts: list[dict[str, Any]]) -> Trace:
    return next(p["template"] for p in parts if "template" in p)


def gather(run: Run) -> Trace:
    """The whole trace's calls, messages and collectives (with the small tables) in the
    client: what the replay reads, equal to the pandas engine's tables."""
    parts = run(partial(_cut, lo=None, hi=None))
    t = _template(parts)
    return dataclasses.replace(t, **{n: _concat([p[n] for p in parts]) for n in GATHERED})


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


def _window_trace(run: Run, w: Window) -> Trace:
    """The window's calls, their messages and collectives as a trace of its own: calls
    renumbered, times shifted to start at the window's earliest start, each rank ending
    at its window's end."""
    parts = run(partial(_cut, lo=w.lo, hi=w.hi))
    t = _template(parts)
    calls = _concat([p["calls"] for p in parts])
    ids = calls["call"].to_numpy().astype(np.int64)  # ranks in order: sorted
    w.ids = ids

    def renumber(col: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(ids, col), max(len(ids) - 1, 0))
        ok = (col >= 0) & (ids[pos] == col) if len(ids) else np.zeros(len(col), bool)
        return np.where(ok, pos, -1)

    t0 = min(w.lo.values())
    m = _concat([p["messages"] for p in parts])
    for col in MESSAGE_CALLS:
        m[col] = renumber(m[col].to_numpy())
    # a message whose receive lies outside the window is not replayed
    m = m[(m["send_call"] >= 0) & (m["recv_call"] >= 0)].reset_index(drop=True)
    for col in MESSAGE_TIMES:
        if col in m.columns:
            m[col] = m[col] - t0
    coll = _concat([p["collectives"] for p in parts])
    coll["call"] = renumber(coll["call"].to_numpy())
    calls["call"] = np.arange(len(calls))
    for df in (calls, coll):
        df["start"] = df["start"] - t0
        df["end"] = df["end"] - t0
    ranks = t.ranks.copy()
    ranks["first_ns"] = 0
    ranks["last_ns"] = [w.hi.get(int(r), w.hi.get(-1)) - t0 for r in ranks["rank"]]
    return dataclasses.replace(t, calls=calls, messages=m, collectives=coll, ranks=ranks)


def _middle(per: np.ndarray, budget: int) -> tuple[int, int]:
    """[a, b): the widest window of intervals centred in the run that holds at most
    `budget` events (one interval at least)."""
    n = len(per)
    cs = np.r_[0, np.cumsum(per)]
    for width in range(n, 0, -1):
        a = (n - width) // 2
        if cs[a + width] - cs[a] <= budget:
            return a, a + width
    return n // 2, n // 2 + 1


class BoundedReplays(findings.Replays):
    """`findings.Replays` on a gathered trace, or on a window of it (module doc): made on
    first use, so a run without findings gathers nothing."""

    def __init__(self, run: Run, loop: iterations.Loop | None, budget_events: int) -> None:
        self.run, self.loop, self.budget = run, loop, int(budget_events)
        self.window: Window | None = None
        self._prepared = False
        self._base = None

    def _prepare(self) -> None:
        if self._prepared:
            return
        self._prepared = True
        loop = self.loop
        # each rank's iteration edges: its row of the loop's starts
        edges = loop.starts_by_rank() if loop is not None and loop.iterations > 1 else None
        # each rank's task gets its own iteration edges only
        counted = _counted(self.run, PerRank(_count, edges) if edges is not None
                           else partial(_count, e=None))
        if counted.events <= self.budget:
            self.trace = gather(self.run)
            return
        if edges is not None and counted.per_interval is not None:
            per_it = counted.per_interval
            a, z = _middle(per_it, self.budget)
            lo = {r: int(e[a]) for r, e in edges.items()}
            hi = {r: int(e[z]) for r, e in edges.items()}
            n = loop.iterations
            self.window = Window(lo, hi, int(per_it[a:z].sum()),
                                 f"iterations {a + 1}..{z} of {n} of the main loop",
                                 n / (z - a), z - a)
        else:
            first, last = counted.span
            grid = np.linspace(first, last + 1, TIME_BINS + 1).astype(np.int64)
            per_bin = _counted(self.run, partial(_count, e=grid)).per_interval
            assert per_bin is not None
            a, z = _middle(per_bin, self.budget)
            self.window = Window({-1: int(grid[a])}, {-1: int(grid[z])},
                                 int(per_bin[a:z].sum()),
                                 f"{seconds((grid[a] - first) / 1e9)}.."
                                 f"{seconds((grid[z] - first) / 1e9)} of the run's "
                                 f"{seconds((last - first) / 1e9)}",
                                 (last - first) / max(grid[z] - grid[a], 1))
        self.trace = _window_trace(self.run, self.window)

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
