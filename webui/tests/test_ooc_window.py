"""Statistics of a window out of core (mpiscope_webui.oocwindow: the pyramid's whole
columns, the detail's edge pieces; each rank's measured calls; each rank's sent messages)
equal those of the in-memory window (mpiscope.analysis.window) on the same trace and
windows: wide, narrow, on a column edge, inside one long call, and for a rank set. The
trace is built by construction to hold what makes the two differ if either counts
wrongly: calls on a second thread, calls of no length, merged polling visits (a row
standing for many calls), a call spanning many columns, enough calls for a pyramid of
several levels, and messages around a ring on two communicators and four tags, of sizes
from 0 B to 4 MB (many size buckets)."""

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
from mpiscope_webui import ooctabs, oocwindow, pyramid, windowstats

RANKS = 3
ROUNDS = 700  # of 4 calls each per rank: a pyramid of several levels
LONG = (1, 200_000, 900_000)  # rank 1's long MPI_Wait: (rank, start, end) in ns
ROW_GROUP = 512  # detail rows per row group


def build(out: Path) -> Path:
    rng = np.random.default_rng(7)
    tb = TraceBuilder(RANKS, hosts=["a", "a", "b"], threads=2)
    fh = tb.file("out.dat")
    halo = tb.comm([2, 0, 1], name="halo")
    for r in range(RANKS):
        tb.call(r, 0, 1_000, "MPI_Init")
        tb.enter(r, 1_200, "MPI_File_open")
        tb.io_create(r, 1_300, fh)
        tb.leave(r, 1_300, "MPI_File_open")
        t = 2_000 + 37 * r
        for i in range(ROUNDS):
            # the long call where the rank gets near it: a round lasts < 2 us, so the
            # previous one ended before it starts
            if r == LONG[0] and LONG[1] - 2_000 <= t < LONG[2]:
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
            if i % 3 == 0:  # around the ring: to the next rank, from the previous one
                comm = halo if i % 2 else tb.world
                tag, nbytes = i % 4, (0 if i % 69 == 0 else 1 << (i % 23))
                tb.send_call(r, t, t + 30, (r + 1) % RANKS, tag, nbytes, comm=comm,
                             callsite="p.c:1")
                t += 40
                tb.recv_call(r, t, t + 60, (r - 1) % RANKS, tag, nbytes, comm=comm,
                             callsite="p.c:2")
                t += 70
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
def results(opened, trace_dir) -> Iterator[ooctabs.Results]:
    """The analysis the out-of-core page runs, with the per-rank files it leaves (the real
    child processes: the Dask engine's analysis, then the profiles' pass over each rank)."""
    r = ooctabs.Results(trace_dir, start=False)
    r._run()
    assert r.error is None and r.profiles_error is None, (r.error, r.profiles_error)
    assert r.breakdown is not None and r.messages is not None
    yield r  # its files live as long as `r` (the server's Results)


@pytest.fixture(scope="module")
def breakdown(results) -> oocwindow.WindowBreakdown:
    return results.breakdown


def windows(p: pyramid.Pyramid) -> list[tuple[int, int, list[int] | None]]:
    """The windows above (and rank sets), past the trace's ends, inside MPI_Init."""
    e = p.edges(p.levels - 2) + p.origin
    rank, s, end = LONG
    return [(p.origin + p.span // 7, p.origin + p.span - p.span // 9, None),
            (p.origin + p.span // 2 + 13, p.origin + p.span // 2 + 500, None),
            (p.origin + p.span // 2 + 13, p.origin + p.span // 2 + 20_000, None),
            (int(e[len(e) // 4]), int(e[len(e) // 4 + 300]), None),
            (p.origin + s + 10_000, p.origin + end - 10_000, [rank]),
            (p.origin + s - 5_000, p.origin + end + 40_000, [0, 2]),
            (p.origin - 1000, p.origin + p.span + 1000, None),  # past both ends
            (p.origin, p.origin + 300, None)]  # inside MPI_Init: nothing measured


def test_the_breakdown_of_a_window_equals_the_in_memory_one(opened, breakdown):
    """Per rank: total, compute, communication, synchronization and I/O of the window as
    the in-memory window computes them (to the ns), for the windows above and the whole
    run; the trace has waiting (late ranks at the collectives), barriers and I/O."""
    mem, p = opened
    whole = mem.window(p.origin, p.origin + p.span).breakdown()
    for col in ("synchronization_s", "io_s"):
        assert (whole[col] > 0).all(), col  # the trace has both on every rank
    for t0, t1, ranks in windows(p):
        want = mem.window(t0, t1, ranks).breakdown()
        got = breakdown.frame(t0, t1, ranks)
        assert got["rank"].tolist() == want["rank"].tolist()
        assert got["host"].tolist() == want["host"].tolist()
        for col in ("total_s", "compute_s", "communication_s", "synchronization_s", "io_s"):
            assert np.allclose(got[col], want[col], rtol=0, atol=1.5e-9), (t0, t1, col)


def test_the_messages_of_a_window_equal_the_in_memory_ones(opened, results):
    """The communication matrix, the message sizes and the messages per communicator and
    tag of a window and rank set out of core (each rank's sent messages, a range read per
    rank) are the in-memory window's, value for value, row for row: for the windows above,
    one from a message's send time to another's, a rank set that drops a third of the ring,
    and the whole run of a rank set; and the tabs show them (the Messages tab; under
    Profiles, its messages table)."""
    mem, p = opened
    sent = results.messages
    run = (ooctabs.RUN_NS[0], ooctabs.RUN_NS[1])
    whole = mem.window(p.origin, p.origin + p.span + 1)
    # a window from one message's send time to another's: the first in, the second out
    times = np.sort(whole.message_rows().time)
    a, b = int(times[len(times) // 3]), int(times[2 * len(times) // 3])
    assert a < b and times[2 * len(times) // 3 - 1] < b
    cases = [*windows(p), (p.origin + p.span // 7, p.origin + p.span - p.span // 9, [1]),
             (a, b, None), (a, b, [2]), (*run, [1]), (*run, [0, 2])]
    seen = set()
    for t0, t1, ranks in cases:
        w = (mem.window(p.origin, p.origin + p.span + 1, ranks) if (t0, t1) == run
             else mem.window(t0, t1, ranks))
        got = sent.tables(t0, t1, ranks, p.num_ranks)
        pd.testing.assert_frame_equal(got.matrix, w.comm_matrix())
        pd.testing.assert_frame_equal(got.sizes, w.message_sizes())
        pd.testing.assert_frame_equal(sent.profile(t0, t1, ranks), w.message_profile())
        assert got.messages == len(w.message_rows())
        seen.add(got.messages)
    assert len(whole.message_sizes()) > 10 and (whole.message_sizes()["bucket_lo"] == 0).any()
    assert set(whole.message_profile()["comm"]) == {"halo", "MPI_COMM_WORLD"}
    # the windows hold none, a few, many, all: and rank 1 alone drops the messages 2 -> 0
    assert 0 in seen and len(whole.message_rows()) in seen and len(seen) >= 6
    one = sent.tables(*run, [1], p.num_ranks).matrix
    assert set(zip(one["send_rank"], one["recv_rank"], strict=True)) == {(0, 1), (1, 2)}

    t0, t1, ranks = cases[0]
    scope = ooctabs.Scope((t0, t1), None)
    shown = ooctabs.tab(results, "messages", scope, p)
    want = mem.window(t0, t1)
    for name, df in (("matrix", want.comm_matrix()), ("message-sizes", want.message_sizes())):
        table = next(n for n in shown if getattr(n, "id", None) == {"type": "otable",
                                                                      "name": name})
        assert table.data == windowstats.shown(df)[0]  # as the in-memory table shows it
    assert "the window" in shown[0].children and not any(
        "ooc-note" in (getattr(n, "className", "") or "") for n in shown)
    prof = ooctabs.tab(results, "profiles", scope, p)
    table = next(n for n in prof if getattr(n, "id", None) == {"type": "otable",
                                                                "name": ooctabs.MESSAGES})
    assert table.data == windowstats.shown(want.message_profile())[0]
    assert ooctabs.tab_key("messages", scope) != ooctabs.tab_key(
        "messages", ooctabs.Scope((t0, t1 + 1), None))
    # a window holding more messages than are read at once says so, in one line
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(oocwindow, "MAX_MESSAGES", 10)
        shown = ooctabs.tab(results, "messages", scope, p)
    failed = [n for n in shown if getattr(n, "className", None) == "error"]
    assert len(failed) == 1 and failed[0].children.endswith(": zoom in")
    assert "\n" not in failed[0].children
