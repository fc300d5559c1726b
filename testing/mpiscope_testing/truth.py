"""Ground truth from a real run's own timestamps, computed without mpiscope's analysis.

How long a sleep really lasts, and when a busy machine lets a rank reach its next call,
varies from run to run: a test of a real traced run compares what mpiscope says with
what the same trace shows (Scalasca's definitions, applied here directly to the reader's
tables), never with what the program was meant to do. The runs are on one host, so there
is no clock skew to correct (the tests that use these check `skew.remaining == 0` or
compare with uncorrected times where the analysis corrects none).

    from mpiscope_testing import truth
    waits, culprits = truth.nxn(trace, "MPI_Allreduce")  # per call: waiting (ns), for whom
    waits, culprits = truth.late_sender(trace)           # per receiving call: the same
    truth.at_callsite(trace, waits, "app.c:12")          # their sum there (s)
    truth.caused(trace, waits, culprits, "app.c:12")     # that sum per culprit (s)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mpiscope.archive.trace import Trace


def nxn(trace: Trace, function: str) -> tuple[pd.Series, pd.Series]:
    """Per call of the N x N collective `function` (indexed by call id): the last rank's
    entry into its instance minus its own, at most its duration (ns); and that last rank."""
    c = trace.collectives[trace.collectives["function"] == function]
    last_in = c.groupby("instance")["start"].transform("max")
    wait = np.clip(last_in - c["start"], 0, c["end"] - c["start"])
    last = c.loc[c.groupby("instance")["start"].idxmax(), ["instance", "rank"]]
    culprit = c["instance"].map(last.set_index("instance")["rank"])
    index = c["call"].to_numpy()
    return (pd.Series(wait.to_numpy(np.int64), index=index, name="wait_ns"),
            pd.Series(culprit.to_numpy(np.int64), index=index, name="culprit"))


def late_sender(trace: Trace) -> tuple[pd.Series, pd.Series]:
    """Per call completing received messages (indexed by call id): how long it ran before
    the last of them was sent (its sender entered the send), at most its duration (ns);
    and that sender."""
    m = trace.messages.sort_values("send_enter", kind="stable")
    last = m.groupby("recv_complete_call").tail(1).set_index("recv_complete_call")
    calls = trace.calls.set_index("call").loc[last.index]
    wait = np.clip(last["send_enter"] - calls["start"], 0, calls["end"] - calls["start"])
    index = last.index.to_numpy()
    return (pd.Series(wait.to_numpy(np.int64), index=index, name="wait_ns"),
            pd.Series(last["send_rank"].to_numpy(np.int64), index=index, name="culprit"))


def at_callsite(trace: Trace, waits: pd.Series, callsite: str) -> float:
    """The summed waiting (s) of the calls of `waits` made from `callsite`."""
    sites = trace.calls.set_index("call")["callsite"].astype(str)
    return float(waits[sites.loc[waits.index].to_numpy() == callsite].sum()) / 1e9


def caused(trace: Trace, waits: pd.Series, culprits: pd.Series, callsite: str
           ) -> dict[int, float]:
    """The summed waiting (s) of the calls of `waits` made from `callsite`, per culprit
    (only those who caused some)."""
    sites = trace.calls.set_index("call")["callsite"].astype(str)
    here = (sites.loc[waits.index].to_numpy() == callsite) & (waits.to_numpy() > 0)
    per = waits[here].groupby(culprits[here].to_numpy()).sum() / 1e9
    return {int(r): float(s) for r, s in per.items()}


def by_rank(trace: Trace, waits: pd.Series) -> pd.Series:
    """The summed waiting (s) of the calls of `waits`, per rank."""
    ranks = trace.calls.set_index("call")["rank"]
    return waits.groupby(ranks.loc[waits.index].to_numpy()).sum() / 1e9


def mpi_time(trace: Trace, function: str | None = None) -> pd.Series:
    """Per rank (s): the time in outermost MPI calls (of `function` only, if given),
    MPI_Init and MPI_Finalize left out (the breakdown's measured interval)."""
    c = trace.calls[(trace.calls["depth"] == 0)
                    & ~trace.calls["function"].isin(["MPI_Init", "MPI_Init_thread",
                                                     "MPI_Finalize"])]
    if function is not None:
        c = c[c["function"] == function]
    return (c["end"] - c["start"]).groupby(c["rank"]).sum() / 1e9
