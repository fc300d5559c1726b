"""Findings on the Dask engine: the rules of mpiscope.analysis.findings run as per-rank
passes over the rank slices (engines.slices) and combined on the client, with the
replays that estimate each saving bounded by an event budget (analysis.replaywindow: the
same window and savings as the pandas engine's).

    from mpiscope.engines import rankfindings
    found = rankfindings.find(run, ws, ranks, loop, critical_path)

`run(fn)` maps `fn` over every rank's slice, in rank order (in-process in tests, over the
workers in the Dask engine). Memory:
- detection: per rank on the workers; the client holds per call site aggregates and, per
  collective instance, only the instances that matter (redundancy candidates, those
  someone waited in): see analysis/findings.py.
- replays: at most `budget_events` replayed events are gathered into the client, the
  whole trace or a window of it (analysis/replaywindow.py): each rank counts its events
  per iteration and cuts its share of the window.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from mpiscope.analysis import findings, iterations
from mpiscope.analysis.critical_path import CriticalPath
from mpiscope.analysis.findings import Finding, Run
from mpiscope.analysis.replaywindow import (
    DEFAULT_BUDGET_EVENTS,
    GATHERED,
    Count,
    Edges,
    Window,
    WindowedReplays,
    concat,
    count_rank,
    cut_rows,
    merge_counts,
    template,
    window_trace,
)
from mpiscope.archive.trace import Trace
from mpiscope.engines.slices import PerRank, Reduced

__all__ = ["DEFAULT_BUDGET_EVENTS", "BoundedReplays", "find", "gather"]


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
def _count(s: Any, e: np.ndarray | None) -> Count:
    """The rank's Count, per interval between the edges `e` (None: no intervals)."""
    calls = s.trace.calls
    top = np.sort(calls["start"].to_numpy()[calls["depth"].to_numpy() == 0])
    sent = np.sort(calls["start"].to_numpy()[s.local(s.trace.messages["send_call"].to_numpy())])
    r = s.trace.ranks
    return count_rank(top, sent, e, (int(r["first_ns"].min()), int(r["last_ns"].max())))


def _counted(run: Run, fn: Any) -> Count:
    return merge_counts(run(Reduced(fn, merge_counts)))


def _cut(s: Any, lo: dict[int, int] | None, hi: dict[int, int] | None) -> dict[str, Any]:
    """The rank's calls (starting in [lo, hi) of its window, or all), the messages it sent
    from them and its collective calls among them; the first rank adds the small tables
    (`template`: made by every rank, it took 9 in 10 of the pass's time)."""
    t = s.trace
    calls = t.calls
    if lo is not None and hi is not None:
        calls = calls[cut_rows(calls, lo, hi)]
    ids = calls["call"].to_numpy()
    m, coll = t.messages, t.collectives
    out = {"calls": calls, "messages": m[np.isin(m["send_call"].to_numpy(), ids)],
           "collectives": coll[np.isin(coll["call"].to_numpy(), ids)]}
    if s.rank == int(t.ranks["rank"].min()):  # the per-rank tables empty (not read)
        out["template"] = template(t)
    return out


def _template(parts: list[dict[str, Any]]) -> Trace:
    return next(p["template"] for p in parts if "template" in p)


def gather(run: Run) -> Trace:
    """The whole trace's calls, messages and collectives (with the small tables) in the
    client: what the replay reads, equal to the pandas engine's tables."""
    parts = run(partial(_cut, lo=None, hi=None))
    t = _template(parts)
    return dataclasses.replace(t, **{n: concat([p[n] for p in parts]) for n in GATHERED})


class BoundedReplays(WindowedReplays):
    """The replays on the trace gathered from the rank slices, or on a window of it
    (analysis/replaywindow.py)."""

    def __init__(self, run: Run, loop: iterations.Loop | None, budget_events: int) -> None:
        super().__init__(loop, budget_events)
        self.run = run

    def count(self, edges: Edges | None) -> Count:
        if edges is None:
            return _counted(self.run, partial(_count, e=None))
        if set(edges) == {-1}:  # the same edges for every rank
            return _counted(self.run, partial(_count, e=edges[-1]))
        # each rank's task gets its own iteration edges only
        return _counted(self.run, PerRank(_count, edges))

    def whole(self) -> Trace:
        return gather(self.run)

    def cut(self, w: Window) -> Trace:
        parts = self.run(partial(_cut, lo=w.lo, hi=w.hi))
        return window_trace(_template(parts), concat([p["calls"] for p in parts]),
                            concat([p["messages"] for p in parts]),
                            concat([p["collectives"] for p in parts]), w)
