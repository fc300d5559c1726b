"""The analyzer's results for one trace, as the views need them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mpiscope.trace import Trace

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

    @classmethod
    def compute(cls, trace: Trace) -> Analysis:
        from mpiscope import breakdown, findings, stats, waitstates

        errors: list[str] = []

        def attempt(what: str, fn, default):
            # one analysis failing must not take the timeline down with it
            try:
                return fn()
            except Exception as err:  # noqa: BLE001 - shown to the user, one line
                errors.append(f"{what}: {type(err).__name__}: {err}".splitlines()[0])
                return default

        ws = attempt("wait states", lambda: waitstates.compute(trace), None)
        wait = (ws.per_call["wait_ns"].to_numpy(np.int64) if ws is not None
                else np.zeros(len(trace.calls), np.int64))
        empty = pd.DataFrame()
        bd = attempt("breakdown", lambda: breakdown.per_rank(trace, ws), empty) \
            if ws is not None else empty
        fn = attempt("functions", lambda: stats.functions(trace), empty)
        sizes = attempt("message sizes", lambda: stats.message_sizes(trace), empty)
        matrix = attempt("communication matrix", lambda: stats.comm_matrix(trace), empty)
        found = attempt("findings", lambda: findings.find(trace, ws), []) \
            if ws is not None else []
        views = [finding_view(trace, f) for f in found]
        return cls(wait, bd, fn, sizes, matrix, views, errors)


def finding_view(trace: Trace, f) -> FindingView:
    c = trace.calls
    sel = c["function"].astype(str).to_numpy() == f.function
    if f.callsite:
        sel &= c["callsite"].astype(str).to_numpy() == f.callsite
    hits = c[sel].sort_values("start")
    window = None
    if len(hits):
        ranks = max(hits["rank"].nunique(), 1)
        first = hits.iloc[: OCCURRENCES_SHOWN * ranks]
        lo, hi = int(first["start"].min()), int(first["end"].max())
        pad = max((hi - lo) // 10, 1000)
        window = ((lo - pad) / 1e9, (hi + pad) / 1e9)
    return FindingView(f.kind, f.function, f.callsite, f.message, float(f.time_s),
                       float(f.estimated_savings_s), hits["call"].to_numpy(np.int64), window)
