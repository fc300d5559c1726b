"""Assemble the analyses of one trace into the contract's JSON (and more)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from mpiscope.analysis import breakdown, findings, iterations, stats, waitstates
from mpiscope.archive.trace import Trace


def _records(df: pd.DataFrame) -> list[dict]:
    # pandas rounds to 10 decimals by default, which drops sub-ns digits of seconds
    # and makes the JSON's parts no longer add up to its totals.
    return json.loads(df.to_json(orient="records", double_precision=15))


@dataclass
class AnalysisReport:
    trace: Trace
    ranks: pd.DataFrame
    functions: pd.DataFrame
    callsites: pd.DataFrame
    wait_states: waitstates.WaitStates
    findings: list[findings.Finding]
    message_sizes: pd.DataFrame
    comm_matrix: pd.DataFrame
    host_split: pd.DataFrame
    time_bins: pd.DataFrame
    flushes: pd.DataFrame
    loop: iterations.Loop | None
    per_iteration: pd.DataFrame | None
    protocol_switches: list[stats.ProtocolSwitch] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        t = self.trace
        ws = self.wait_states.totals()
        u = t.unmatched
        return {
            "meta": {"program": t.meta.program, "cmdline": t.meta.cmdline,
                     "mpi_library": t.meta.mpi_library, "start_time": t.meta.start_time,
                     "creator": t.meta.creator, "num_ranks": t.meta.num_ranks,
                     "duration_s": t.meta.duration_ns / 1e9,
                     "truncated_ranks": t.meta.truncated_ranks, "trace": str(t.path),
                     "measured_interval": "per rank: end of MPI_Init .. start of "
                     "MPI_Finalize (first/last event where they are missing)"},
            "ranks": _records(self.ranks),
            "functions": _records(self.functions),
            "callsites": _records(self.callsites),
            "wait_states": {f"{k}_s": v for k, v in ws.items()},
            "wait_states_per_rank": _records(self.wait_states.per_rank().reset_index(
                names="rank")),
            "findings": [f.to_dict() for f in self.findings],
            "message_sizes": _records(self.message_sizes),
            "protocol_switches": [p.to_dict() for p in self.protocol_switches],
            "comm_matrix": _records(self.comm_matrix),
            "host_split": _records(self.host_split),
            "time_bins": _records(self.time_bins),
            "buffer_flushes": {"count": int(self.flushes["flushes"].sum()),
                               "seconds": float(self.flushes["seconds"].sum()),
                               "per_rank": _records(self.flushes)},
            "main_loop": ({"callsite": self.loop.callsite, "function": self.loop.function,
                           "iterations": self.loop.iterations} if self.loop else None),
            "iterations": _records(self.per_iteration) if self.per_iteration is not None
            else [],
            "messages": {"matched": int(len(t.messages)),
                         "unmatched_sends": int((u["event"].isin(["send", "isend"])).sum()),
                         "unmatched_receives": int((u["event"].isin(["recv", "irecv"])).sum())},
            "clock_skew": {"violations": self.wait_states.skew.violations,
                           "offsets_ns": {str(k): v for k, v in
                                          self.wait_states.skew.offsets_ns.items()},
                           "remaining": self.wait_states.skew.remaining},
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def analyze(trace: Trace) -> AnalysisReport:
    ws = waitstates.compute(trace)
    ranks = breakdown.per_rank(trace, ws)
    loop = iterations.detect(trace)
    return AnalysisReport(
        trace=trace, ranks=ranks, functions=stats.functions(trace),
        callsites=stats.callsites(trace, ws.per_call["wait_ns"].to_numpy()),
        wait_states=ws, findings=findings.find(trace, ws, ranks, loop),
        message_sizes=stats.message_sizes(trace), comm_matrix=stats.comm_matrix(trace),
        host_split=stats.host_split(trace), time_bins=breakdown.time_bins(trace, ws),
        flushes=stats.flushes(trace),
        loop=loop, per_iteration=iterations.per_iteration(trace, loop, ws) if loop else None,
        protocol_switches=stats.protocol_switches(trace),
    )
