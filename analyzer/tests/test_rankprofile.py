"""The profiles rank by rank (engines/rankprofile.py) equal the in-memory whole run's
(window.Window.profile, message_profile): per process and thread (the ranks' profiles
concatenated) and per communicator and tag, MPI functions and messages (merged across
ranks, medians from the ranks' value files), from
slices cut from the trace in memory and from the Parquet cache one rank at a time, on a
generated trace and on one whose worker threads call MPI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpiscope.analysis import window
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope.engines import rankprofile, slices
from mpiscope_testing.lanetrace import WORKER_SEND
from mpiscope_testing.lanetrace import build as build_lanes

TIMES = ["time_s", "mean_s", "min_s", "median_s", "max_s", "wait_s"]


def same(got: pd.DataFrame, want: pd.DataFrame, by: tuple[str, ...]) -> None:
    """Equal keys, counts and bytes; times within float sums' rounding; the same order
    (by time, resp. bytes for messages)."""
    if by[0] == "messages":
        by, counts, times, order = by[1:], ["messages", "bytes"], ["median_transfer_s"], "bytes"
    else:
        counts, times, order = ["calls", "bytes"], TIMES, "time_s"
    assert list(got.columns) == list(want.columns) == [
        *by, *(counts[:1] + ["bytes", "median_transfer_s"] if order == "bytes" else
               window.PROFILE_COLUMNS)]
    assert len(got) == len(want) > 0
    keys = [*by, *counts]
    g = got.set_index(list(by)).loc[want.set_index(list(by)).index].reset_index()
    assert g[keys].values.tolist() == want[keys].values.tolist()
    for col in times:
        assert g[col].to_numpy() == pytest.approx(want[col].to_numpy(), rel=1e-9,
                                                  abs=1e-12), col
    assert np.all(np.diff(got[order].to_numpy()) <= 1e-12)


@pytest.fixture(scope="module")
def lanes(tmp_path_factory) -> Path:
    return build_lanes(tmp_path_factory.mktemp("rankprofile") / "t")


@pytest.mark.parametrize("which", ["synth", "threads"])
def test_rank_by_rank_equals_the_whole_run_in_memory(synth_trace, lanes, which):
    d = synth_trace(ranks=6, events=40000) if which == "synth" else lanes
    a = Analysis(reader.load(d))
    whole = a.window_index.whole()
    sliced = rankprofile.compute(
        lambda fn: [fn(s) for s in slices.all_of_trace(a.trace, a.wait_states)])
    cached = rankprofile.from_cache(d)  # computes the wait files: no Dask run left them
    for by in rankprofile.ALL:
        want = (whole.message_profile(by[1:]) if by == rankprofile.MESSAGES else
                whole.profile(by))
        same(sliced[by], want, by)
        same(cached[by], want, by)
    if which == "synth":  # every call counted once, on its rank
        got = cached[("rank", "function")]
        assert got["calls"].sum() == len(a.trace.calls)
        assert sorted(got["rank"].unique()) == list(range(6))
    else:
        r, t = WORKER_SEND[0]
        per_thread = cached[("rank", "thread", "function")].set_index(
            ["rank", "thread", "function"])
        assert per_thread.loc[(r, t, "MPI_Ssend"), "calls"] == 1


def test_medians_across_ranks_are_of_every_rank_s_calls(tmp_path):
    """Two ranks' calls of one function and tag: the merged group's median is of all six
    durations, not a median of the ranks' medians."""
    from mpiscope_testing.tracegen import TraceBuilder

    durs = {0: [10, 20, 30], 1: [40, 50, 1000]}  # medians 20 and 50; of all six: 35
    tb = TraceBuilder(2)
    for r, ds in durs.items():
        tb.call(r, 0, 5, "MPI_Init")
        t = 100
        for d in ds:
            tb.call(r, t, t + d, "MPI_Barrier")
            t += 2000
        tb.call(r, t, t + 5, "MPI_Finalize")
    d = tb.write(tmp_path / "t")
    reader.load(d)  # the Parquet cache
    got = rankprofile.from_cache(d)[("function", "tag")].set_index("function")
    assert got.loc["MPI_Barrier", "calls"] == 6
    assert got.loc["MPI_Barrier", "median_s"] == pytest.approx(35e-9)
    assert (got.loc["MPI_Barrier", "min_s"], got.loc["MPI_Barrier", "max_s"]) == \
        pytest.approx((10e-9, 1000e-9))
