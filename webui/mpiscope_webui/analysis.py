"""The analyzer's results for one trace, as the views need them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mpiscope.archive.trace import Trace

OCCURRENCES_SHOWN = 5  # a finding zooms to its first few occurrences (instances)


@dataclass
class FindingView:
    kind: str
    function: str
    callsite: str
    message: str
    time_s: float
    estimated_savings_s: float
    calls: np.ndarray  # call ids of its occurrences
    window: tuple[float, float] | None  # seconds (trace time) of the first occurrences


@dataclass
class Analysis:
    wait_ns: np.ndarray  # per call id
    breakdown: pd.DataFrame  # rank, host, total_s, compute_s, communication_s, ...
    functions: pd.DataFrame  # name, calls, time_s, mean_s, max_s, bytes
    message_sizes: pd.DataFrame
    comm_matrix: pd.DataFrame
    findings: list[FindingView]
    errors: list[str] = field(default_factory=list)
    protocol_switches: list = field(default_factory=list)  # mpiscope.analysis.stats.ProtocolSwitch

    @classmethod
    def compute(cls, trace: Trace, waits: WaitStates | None = None) -> Analysis:
        """All analyses; `waits` if the wait states were computed already."""
        from mpiscope.analysis import breakdown, findings, stats

        w = waits or WaitStates.compute(trace)
        errors = list(w.errors)
        ws = w.result

        def attempt(what: str, fn, default):
            # one analysis failing must not take the timeline down with it
            try:
                return fn()
            except Exception as err:  # noqa: BLE001 - shown to the user, one line
                errors.append(f"{what}: {type(err).__name__}: {err}".splitlines()[0])
                return default

        empty = pd.DataFrame()
        bd = attempt("breakdown", lambda: breakdown.per_rank(trace, ws), empty) \
            if ws is not None else empty
        fn = attempt("functions", lambda: stats.functions(trace), empty)
        sizes = attempt("message sizes", lambda: stats.message_sizes(trace), empty)
        switches = attempt("protocol switch", lambda: stats.protocol_switches(trace), [])
        matrix = attempt("communication matrix", lambda: stats.comm_matrix(trace), empty)
        found = attempt("findings", lambda: findings.find(trace, ws), []) \
            if ws is not None else []
        views = [finding_view(trace, f) for f in found]
        return cls(w.wait_ns, bd, fn, sizes, matrix, views, errors, switches)


@dataclass
class WaitStates:
    """The wait states alone: the first analysis, since the timeline shades them."""

    result: object  # mpiscope.analysis.waitstates result, None if it failed
    wait_ns: np.ndarray  # per call id (zeros if it failed)
    errors: list[str]

    @classmethod
    def compute(cls, trace: Trace) -> WaitStates:
        from mpiscope.analysis import waitstates

        try:
            ws = waitstates.compute(trace)
        except Exception as err:  # noqa: BLE001 - shown to the user, one line
            return cls(None, np.zeros(len(trace.calls), np.int64),
                       [f"wait states: {type(err).__name__}: {err}".splitlines()[0]])
        return cls(ws, ws.per_call["wait_ns"].to_numpy(np.int64), [])


def _matches(column: pd.Series, value: str) -> np.ndarray:
    """column == value for a categorical column, on its codes (comparing 3 M strings took
    a second per finding)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        cats = column.cat.categories.astype(str)
        hit = np.flatnonzero(cats == value)
        return np.isin(column.cat.codes.to_numpy(), hit)
    return column.astype(str).to_numpy() == value


def finding_view(trace: Trace, f) -> FindingView:
    c = trace.calls
    sel = _matches(c["function"], f.function)
    if f.callsite:
        sel &= _matches(c["callsite"], f.callsite)
    rows = np.flatnonzero(sel)
    start = c["start"].to_numpy(np.int64)[rows]
    order = np.argsort(start, kind="stable")
    rows, start = rows[order], start[order]
    window = None
    if len(rows):
        ranks = max(len(np.unique(c["rank"].to_numpy()[rows])), 1)
        first = slice(0, OCCURRENCES_SHOWN * ranks)
        lo = int(start[first].min())
        hi = int(c["end"].to_numpy(np.int64)[rows[first]].max())
        pad = max((hi - lo) // 10, 1000)
        window = ((lo - pad) / 1e9, (hi + pad) / 1e9)
    return FindingView(f.kind, f.function, f.callsite, f.message, float(f.time_s),
                       float(f.estimated_savings_s), c["call"].to_numpy(np.int64)[rows], window)
