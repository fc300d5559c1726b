"""The Profiles tab of a window out of core (mpiscope_webui.oocprofiles: the window's rows
read from the files the profiles' per-rank pass writes, then the in-memory code) equals
the in-memory window's (mpiscope.analysis.window) on the same trace and windows: every
MPI function profile (per process, call site, communicator, tag, thread), the wait
states per rank, the user regions (in all and per process), the call tree and the
breakdown; for wide and narrow windows, past the run's ends, before it, inside one long
call, and for rank sets. The trace is built to make them differ if the rows read or
their codes are wrong: nested user regions around the calls, call paths (the session
relabels call sites by them), a second thread, calls of no length, merged polling
visits, a long call, waiting at collectives, messages on two communicators and tags.
A window holding more rows than the bound is not read: the tab says so in one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dash import html
from dash.exceptions import PreventUpdate

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder
from mpiscope_webui import oocprofiles, ooctabs, windowstats
from mpiscope_webui.windowstats import Scope

RANKS = 4
ROUNDS = 300
LONG = (1, 100_000, 400_000)  # rank 1's long MPI_Wait: (rank, start, end) in ns
PATH_A = ["solver.c:40", "main.c:7"]  # innermost first
PATH_B = [("halo.c:12", "halo"), ("solver.c:55", "solve"), ("main.c:7", "main")]


def build(out: Path) -> Path:
    rng = np.random.default_rng(11)
    tb = TraceBuilder(RANKS, hosts=["a", "a", "b", "b"], threads=2)
    sub = tb.comm([0, 1], name="pair")
    for r in range(RANKS):
        tb.call(r, 0, 1_000, "MPI_Init")
        tb.enter(r, 1_500, "main")
    t = [2_000 + 41 * r for r in range(RANKS)]
    for i in range(ROUNDS):
        for r in range(RANKS):
            if r == LONG[0] and LONG[1] <= t[r] < LONG[2]:
                tb.call(r, LONG[1], LONG[2], "MPI_Wait", callsite="long.c:1")
                t[r] = LONG[2] + 50
            s = t[r]
            tb.enter(r, s, "solve")
            d = int(rng.integers(20, 300))
            tb.collective(r, s + 10, s + 10 + d, "MPI_Barrier" if i % 40 == 0 else
                          "MPI_Allreduce", sent=8, received=8,
                          callpath=PATH_A if i % 2 else None,
                          callsite=None if i % 2 else "a.c:1")
            u = s + 20 + d
            tb.enter(r, u, "kernel")
            tb.call(r, u + 5, u + 5, "MPI_Comm_rank", callsite="a.c:2")  # of no length
            for _ in range(3):  # polls completing nothing: one merged visit
                tb.call(r, u + 10, u + 15, "MPI_Test", callsite="a.c:3")
                u += 5
            tb.leave(r, u + 40, "kernel")
            t[r] = u + 50 + int(rng.integers(0, 100))
            tb.leave(r, t[r], "solve")
            t[r] += 10
            if i % 7 == 0 and r < 2:  # messages on the pair's communicator, tag by round
                other = 1 - r
                if r == 0:
                    tb.send_call(0, t[r], t[r] + 30, dest=other, tag=i % 3, nbytes=64 * i,
                                 comm=sub, callpath=PATH_B)
                else:
                    tb.recv_call(1, t[r] - 20, t[r] + 60, src=0, tag=i % 3, nbytes=64 * i,
                                 comm=sub, callpath=PATH_B)
                t[r] += 70
            if i % 5 == 0:  # the worker thread calls MPI too
                tb.call((r, 1), t[r] - 80, t[r] + 20, "MPI_Send", callsite="w.c:1")
    end = max(t) + 100
    for r in range(RANKS):
        tb.leave(r, end, "main")
        tb.call(r, end + 100, end + 600, "MPI_Finalize")
    return tb.write(out)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("oocprofiles") / "t")


@pytest.fixture(scope="module")
def mem(trace_dir) -> Analysis:
    a = Analysis(reader.load(trace_dir))  # writes the Parquet cache the pass reads
    c = a.trace.calls
    assert (c["polls"] > 1).any() and (c["end"] == c["start"]).any()
    assert (c["thread"] > 0).any() and len(a.trace.regions) > 2 * RANKS * ROUNDS
    assert a.paths.frames and (c["callpath"] >= 0).any()
    return a


@pytest.fixture(scope="module")
def results(mem, trace_dir) -> Iterator[ooctabs.Results]:
    """The files of the profiles' pass (the real child process, as the page runs it after
    the analysis: the Dask engine's analysis itself is not needed here)."""
    r = ooctabs.Results(trace_dir, start=False)
    r._run_profiles()
    assert r.profiles_error is None, r.profiles_error
    assert r.window_rows is not None
    r.json = {"callsites": [], "wait_states_per_rank": [], "threads": []}
    r._done.set()
    yield r  # the files live as long as `r` (the server's Results)


def windows(mem: Analysis) -> list[tuple[int | None, int | None, list[int] | None]]:
    lo, hi = mem.window_index.span
    span = hi - lo
    rank, s, e = LONG
    return [(lo + span // 7, hi - span // 9, None),  # wide
            (lo + span // 2 + 13, lo + span // 2 + 900, None),  # narrow
            (lo + s + 10_000, lo + e - 10_000, [rank]),  # inside the long call
            (lo + s - 5_000, lo + e + 40_000, [0, 2]),
            (lo - 1_000, hi + 1_000, None),  # past both ends
            (lo - 5_000, lo - 1_000, None),  # before the run (moved to its start)
            (lo + span // 3, lo + span // 3 + span // 50, [3]),
            (None, None, [1, 2])]  # the whole run of a rank set


def same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """The same rows in the same order, to the bit (the same code on the same values)."""
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True),
                                  check_dtype=False, check_exact=True)


def test_the_window_s_profiles_equal_the_in_memory_ones(mem, results):
    rows = results.window_rows
    for t0, t1, ranks in windows(mem):
        if t0 is None:
            lo, hi = mem.window_index.span
            want = mem.window(lo, hi + 1, ranks)
        else:
            want = mem.window(t0, t1, ranks)
        got = rows.window(t0, t1, ranks)
        assert (got.t0, got.t1, got.ranks) == (want.t0, want.t1, want.ranks)
        assert len(got.pos) == len(want.pos) == len(got.index.rank)
        for _title, _name, by in windowstats.PROFILES:
            same(got.profile(by), want.profile(by))
        same(got.profile(("function",)), want.profile(("function",)))
        same(got.wait_states(), want.wait_states())
        same(got.breakdown(), want.breakdown())
        for by_rank in (False, True):
            same(got.regions(by_rank), want.regions(by_rank))
        tree, want_tree = got.call_tree(rows.paths()), want.call_tree(mem.paths)
        assert tree.label == want_tree.label
        assert (tree.parent == want_tree.parent).all() and (tree.leaf == want_tree.leaf).all()
        same(tree.values, want_tree.values)
        # what it read: the window's rows exactly, counted before reading them
        ix = mem.window_index
        regions = ix.regions.overlapping(want.t0, want.t1)
        regions = regions[want.rank_mask[ix.r_rank[regions]]]
        assert len(got.index.r_rank) == len(regions)
        if t0 is not None and t0 >= ix.span[0]:  # (one before the run is moved: read)
            assert rows.rows(t0, t1, ranks) == len(want.pos) + len(regions)
    # the trace's call paths name call sites (relabelled as the session does)
    whole = rows.window(None, None, None).profile(("function", "callsite"))
    assert set(whole["callsite"]) == set(mem.window_index.whole()
                                         .profile(("function", "callsite"))["callsite"])
    assert "solver.c:40" in set(whole["callsite"])


def text(node) -> str:
    if isinstance(node, (list, tuple)):
        return " ".join(text(n) for n in node)
    if isinstance(node, html.Div | html.H4):
        return text(node.children)
    return "" if node is None else str(node)


def test_the_profiles_tab_follows_the_window_below_the_bound(mem, results, monkeypatch):
    lo, hi = mem.window_index.span
    t0, t1 = lo + (hi - lo) // 3, lo + (hi - lo) // 3 + (hi - lo) // 40
    scope = Scope((t0, t1), None)
    n = results.window_rows.rows(t0, t1, None)
    monkeypatch.setenv(oocprofiles.ENV, str(n))  # just enough
    shown = ooctabs.tab(results, "profiles", scope)
    assert "Statistics of the window" in text(shown[0])
    tables = {n.id["name"]: n for n in shown if hasattr(n, "data")}
    w = mem.window(t0, t1)
    # as the in-memory tables show the window's frames (windowstats.shown: their units)
    for _title, name, by in windowstats.PROFILES:  # per thread too: two threads call MPI
        assert tables[name].data == windowstats.shown(w.profile(by))[0], name
    assert tables["regions"].data == windowstats.shown(w.regions())[0]
    assert tables["waits"].data == windowstats.shown(w.wait_states())[0]
    assert ooctabs.tab_key("profiles", scope) == scope.key()  # redrawn with the window
    tree = ooctabs.tab(results, "calltree", scope)
    assert "ct-tree" in str(tree) and "solver.c:40" in str(tree)


def test_a_window_above_the_bound_says_so_in_one_line(mem, results, monkeypatch):
    lo, hi = mem.window_index.span
    scope = Scope((lo + (hi - lo) // 4, hi - (hi - lo) // 4), (0, 1))
    n = results.window_rows.rows(*scope.window, scope.ranks)
    monkeypatch.setenv(oocprofiles.ENV, str(n - 1))
    shown = ooctabs.tab(results, "profiles", scope)
    line = text(shown[0])
    assert "ooc-note" in shown[0].className and "\n" not in line
    assert f"holds {n:,} MPI calls and user regions" in line and f"{n - 1:,}" in line
    assert "zoom in" in line
    # then the whole run's tables, as before
    assert any(isinstance(x, html.H4) and "per call site" in x.children for x in shown)
    tree = ooctabs.tab(results, "calltree", scope)
    assert len(tree) == 1 and f"holds {n:,} MPI calls" in text(tree)


def test_rows_that_would_fill_the_disk_are_not_written(mem, tmp_path, monkeypatch):
    """The pass writes no rows (and removes those written) when the disk would keep less
    than FREE_SHARE of it free; the tabs then say why in one line."""
    w = oocprofiles.Writer(tmp_path / oocprofiles.DIR)
    (w.path / "rank=0.start.npy").write_bytes(b"")  # as if written for an earlier rank
    monkeypatch.setattr(oocprofiles, "FREE_SHARE", 1.0)  # no disk is that free
    w.add(1, mem.window_index)
    w.add(2, mem.window_index)
    w.finish()
    assert list(w.path.iterdir()) == [w.path / oocprofiles.META]
    rows = oocprofiles.WindowRows.open(w.path, tmp_path)
    assert rows.unavailable.startswith("each rank's calls would fill the disk (")
    got = oocprofiles.profiles(rows, Scope((0, 10), None), False, [])
    assert got.contents is None and got.line.startswith(
        "Profiles of a window are not available out of core: each rank's calls would fill")
    assert "\n" not in got.line


def test_the_call_tree_s_redraw_refuses_what_the_page_should_not_send(results):
    """The out-of-core call tree's callback (metric, clicks, the tab's Store) checks them
    as the in-memory one does: nothing drawn for a metric or a Store it does not know."""
    for metric, state in (("nope", {}), (None, {}), ("calls", "x"), ("calls", None),
                          (["time_s"], {})):
        with pytest.raises(PreventUpdate):
            oocprofiles.redrawn_tree(results.window_rows, metric, None, state)


def test_the_whole_run_s_user_regions_come_from_the_rows(mem, results, monkeypatch):
    """The whole run of all ranks stays the Dask engine's JSON, but for its user regions
    (which the JSON lacks): the in-memory tables from every rank's rows, or, above the
    bound, the line why not."""
    shown = ooctabs.tab(results, "profiles")
    tables = {n.id["name"]: n for n in shown if hasattr(n, "data")}
    whole = mem.window_index.whole()
    assert tables["regions"].data == windowstats.shown(whole.regions())[0]
    assert tables["regions-per-rank"].data == windowstats.shown(whole.regions(by_rank=True))[0]
    assert not [n for n in shown if "ooc-note" in (getattr(n, "className", "") or "")]
    monkeypatch.setenv(oocprofiles.ENV, "1000")
    shown = ooctabs.tab(results, "profiles")
    assert "regions" not in {n.id["name"] for n in shown if hasattr(n, "data")}
    assert text(shown[1]).startswith("The run holds ") and "ooc-note" in shown[1].className
