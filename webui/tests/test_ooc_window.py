"""Statistics of a window out of core (mpiscope_webui.oocwindow: the pyramid's whole
columns, the detail's edge pieces) equal those of the in-memory window
(mpiscope.analysis.window) on the same trace and windows: wide, narrow, on a column edge,
inside one long call, and for a rank set. The trace is built by construction to hold what
makes the two differ if either counts wrongly: calls on a second thread, calls of no
length, merged polling visits (a row standing for many calls), a call spanning many
columns, and enough calls for a pyramid of several levels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpiscope.analysis import stats
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder
from mpiscope_webui import ooctabs, oocwindow, pyramid

RANKS = 3
ROUNDS = 700  # of 4 calls each per rank: a pyramid of several levels
LONG = (1, 200_000, 900_000)  # rank 1's long MPI_Wait: (rank, start, end) in ns
ROW_GROUP = 512  # detail rows per row group


def build(out: Path) -> Path:
    rng = np.random.default_rng(7)
    tb = TraceBuilder(RANKS, hosts=["a", "a", "b"], threads=2)
    fh = tb.file("out.dat")
    for r in range(RANKS):
        tb.call(r, 0, 1_000, "MPI_Init")
        tb.enter(r, 1_200, "MPI_File_open")
        tb.io_create(r, 1_300, fh)
        tb.leave(r, 1_300, "MPI_File_open")
        t = 2_000 + 37 * r
        for i in range(ROUNDS):
            if r == LONG[0] and LONG[1] <= t < LONG[2]:
                tb.call(r, LONG[1], LONG[2], "MPI_Wait", callsite="long.c:1")
                t = LONG[2] + 50
            d = int(rng.integers(20, 400))
            # a collective: the late ranks make the others wait (synchronization)
            tb.collective(r, t, t + d, "MPI_Barrier" if i % 50 == 0 else "MPI_Allreduce",
                          sent=8, received=8, callsite="a.c:1")
            t += d + int(rng.integers(0, 300))
            if i % 97 == 0:  # I/O
                tb.io_call(r, t, t + 80, "MPI_File_write", fh, "write", 64, i)
                t += 90
            tb.call(r, t, t, "MPI_Comm_rank", callsite="a.c:2")  # of no length
            t += int(rng.integers(1, 50))
            for _ in range(3):  # polls completing nothing: one merged visit
                tb.call(r, t, t + 5, "MPI_Test", callsite="a.c:3")
                t += 5
            t += int(rng.integers(10, 200))
            if i % 5 == 0:  # the worker thread calls MPI too
                tb.call((r, 1), t - 100, t + 40, "MPI_Send", callsite="w.c:1")
        tb.call(r, t + 100, t + 600, "MPI_Finalize")
    return tb.write(out)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("oocwindow") / "t")


@pytest.fixture(scope="module")
def opened(trace_dir):
    d = trace_dir
    trace = reader.load(d)  # writes the Parquet cache the pyramid is built from
    assert (stats.polls(trace.calls) > 1).any(), "no merged polling visit to count"
    assert ((trace.calls["end"] == trace.calls["start"]).any()
            and (trace.calls["thread"] > 0).any())
    with pytest.MonkeyPatch.context() as mp:
        # row groups as a big trace has them per rank (several): the detail alone answers
        # only windows whose row groups the edge pieces read anyway
        mp.setattr(pyramid, "ROW_GROUP", ROW_GROUP)
        p = pyramid.Pyramid.open(d)
    assert p.levels >= 3 and all(len(p._groups[r][0]) > 4 for r in p.ranks)
    return Analysis(trace), p


def compare(opened, t0: int, t1: int, ranks=None) -> oocwindow.WindowStats:
    """The out-of-core profiles of [t0, t1) equal the in-memory ones: the same rows (name,
    calls) in the same order, the times to the ns."""
    mem, p = opened
    got = oocwindow.window_stats(p, t0, t1, ranks)
    w = mem.window(t0, t1, ranks)
    for by in (("function",), ("rank", "function")):
        want = w.profile(by)[[*(["name"] if by == ("function",) else list(by)),
                              *oocwindow.PROFILE_COLUMNS]]
        have = got.profile(by)
        assert len(want) > 0
        pd.testing.assert_frame_equal(have.drop(columns=["time_s", "mean_s"]),
                                      want.drop(columns=["time_s", "mean_s"]),
                                      check_dtype=False)
        assert np.allclose(have["time_s"], want["time_s"], rtol=0, atol=0.5e-9)
        assert np.allclose(have["mean_s"], want["mean_s"], rtol=1e-12, atol=1e-15)
    return got


def test_a_wide_window_is_mostly_the_pyramid(opened):
    _mem, p = opened
    t0, t1 = p.origin + p.span // 7, p.origin + p.span - p.span // 9
    got = compare(opened, t0, t1)
    assert got.level is not None and got.columns > oocwindow.COLUMNS // 2
    # the edge pieces are each under a column: a small share of the window's calls
    calls = int(got.calls.sum())
    assert got.edge_calls < calls / 10


def test_a_narrow_window_is_the_detail(opened):
    _mem, p = opened
    finest = p.span // p.cols(p.levels - 1)
    t0 = p.origin + p.span // 2 + 13
    got = compare(opened, t0, t0 + finest // 2)
    assert got.level is None and got.columns == 0
    # wider than a few columns, still within the row groups its edges read: no cells
    got = compare(opened, t0, t0 + finest * 5)
    assert got.level is None and got.calls_read <= 2 * ROW_GROUP * len(p.ranks)


def test_a_window_on_column_edges(opened):
    _mem, p = opened
    k = p.levels - 2
    e = p.edges(k) + p.origin
    c = p.cols(k)
    got = compare(opened, int(e[c // 4]), int(e[c // 4 + 300]))
    assert got.columns > 0
    # and one ending on an edge, starting inside a column
    compare(opened, int(e[c // 3]) + 7, int(e[c // 2]))


def test_a_window_inside_a_long_call_and_a_rank_set(opened):
    _mem, p = opened
    rank, s, e = LONG
    # the long call starts before the window and ends after it: counted once, its time
    # the window's
    got = compare(opened, p.origin + s + 10_000, p.origin + e - 10_000, ranks=[rank])
    assert got.profile()["name"].tolist() == ["MPI_Wait"]
    compare(opened, p.origin + s - 5_000, p.origin + e + 40_000, ranks=[0, 2])


def test_the_whole_run_for_a_rank_set(opened):
    _mem, p = opened
    got = compare(opened, p.origin, p.origin + p.span, ranks=[2])
    assert got.calls_read == 0  # whole columns of the coarsest level fit: no detail read


@pytest.fixture(scope="module")
def breakdown(opened, trace_dir) -> Iterator[oocwindow.WindowBreakdown]:
    """The per-rank files the out-of-core page's analysis leaves (the real child
    processes: the Dask engine's analysis, then the profiles' pass over each rank)."""
    r = ooctabs.Results(trace_dir, start=False)
    r._run()
    assert r.error is None and r.profiles_error is None, (r.error, r.profiles_error)
    assert r.breakdown is not None
    yield r.breakdown  # its files live as long as `r` (the server's Results)


def test_the_breakdown_of_a_window_equals_the_in_memory_one(opened, breakdown):
    """Per rank: total, compute, communication, synchronization and I/O of the window as
    the in-memory window computes them (to the ns), for the windows above and the whole
    run; the trace has waiting (late ranks at the collectives), barriers and I/O."""
    mem, p = opened
    e = p.edges(p.levels - 2) + p.origin
    rank, s, end = LONG
    windows = [(p.origin + p.span // 7, p.origin + p.span - p.span // 9, None),
               (p.origin + p.span // 2 + 13, p.origin + p.span // 2 + 500, None),
               (int(e[len(e) // 4]), int(e[len(e) // 4 + 300]), None),
               (p.origin + s + 10_000, p.origin + end - 10_000, [rank]),
               (p.origin + s - 5_000, p.origin + end + 40_000, [0, 2]),
               (p.origin - 1000, p.origin + p.span + 1000, None),  # past both ends
               (p.origin, p.origin + 300, None)]  # inside MPI_Init: nothing measured
    whole = mem.window(p.origin, p.origin + p.span).breakdown()
    for col in ("synchronization_s", "io_s"):
        assert (whole[col] > 0).all(), col  # the trace has both on every rank
    for t0, t1, ranks in windows:
        want = mem.window(t0, t1, ranks).breakdown()
        got = breakdown.frame(t0, t1, ranks)
        assert got["rank"].tolist() == want["rank"].tolist()
        assert got["host"].tolist() == want["host"].tolist()
        for col in ("total_s", "compute_s", "communication_s", "synchronization_s", "io_s"):
            assert np.allclose(got[col], want[col], rtol=0, atol=1.5e-9), (t0, t1, col)
