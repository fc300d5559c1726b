"""Window statistics (analysis/window.py) on a trace built by construction: what each
window holds is known from how the trace was written, and the whole run's window equals
the session's whole-run results."""

from __future__ import annotations

import numpy as np
import pytest

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.windowtrace import ALLREDUCES, END, PHASE_B, SENDS, US, build


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return Analysis(reader.load(build(tmp_path_factory.mktemp("window") / "t")))


def test_whole_run_window_is_the_whole_run_analysis(session):
    lo, hi = session.window_index.span
    w = session.window(lo, hi + 1)
    bd, ref = w.breakdown(), session.ranks
    for col in ("total_s", "compute_s", "communication_s", "synchronization_s", "io_s"):
        assert bd[col].to_numpy() == pytest.approx(ref[col].to_numpy(), abs=1e-9)
    fn = w.functions().set_index("name")
    ref = session.functions.set_index("name")
    assert sorted(fn.index) == sorted(ref.index)
    assert fn.loc[ref.index, "calls"].tolist() == ref["calls"].tolist()
    assert fn.loc[ref.index, "time_s"].to_numpy() == pytest.approx(ref["time_s"].to_numpy())
    assert fn.loc[ref.index, "max_s"].to_numpy() == pytest.approx(ref["max_s"].to_numpy())
    totals = session.wait_states.totals()
    mine = w.wait_totals()
    for k in ("late_sender", "wait_at_nxn"):
        assert mine[k] == pytest.approx(totals[k], abs=1e-9)
    m = w.comm_matrix()
    assert m["messages"].sum() == len(session.trace.messages)


def test_phase_a_holds_the_sends_and_no_allreduce(session):
    w = session.window(50 * US, PHASE_B - 10 * US)
    fn = w.functions().set_index("name")
    assert "MPI_Allreduce" not in fn.index
    send = fn.loc["MPI_Send"]
    durs = np.array([d for _, d in SENDS]) / 1e9
    assert send["calls"] == len(SENDS)
    assert send["time_s"] == pytest.approx(durs.sum())
    assert (send["min_s"], send["median_s"], send["max_s"]) == pytest.approx(
        (durs.min(), np.median(durs), durs.max()))
    m = w.comm_matrix()
    assert m[["send_rank", "recv_rank", "messages"]].values.tolist() == [[0, 1, len(SENDS)]]
    assert m["bytes"].iloc[0] == sum(1000 * (i + 1) for i in range(len(SENDS)))
    sizes = w.message_sizes()
    assert sizes["messages"].sum() == len(SENDS)
    # the receives were posted 2 µs before each send: late senders, 2 µs each
    assert w.wait_totals()["late_sender"] == pytest.approx(len(SENDS) * 2e-6, rel=1e-6)
    assert w.wait_totals()["wait_at_nxn"] == 0


def test_phase_b_holds_the_allreduces_and_their_waiting(session):
    w = session.window(PHASE_B - 10 * US, END - 30 * US)
    fn = w.functions().set_index("name")
    assert list(fn.index) == ["MPI_Allreduce"]
    assert fn.loc["MPI_Allreduce", "calls"] == 3 * ALLREDUCES
    assert w.comm_matrix().empty
    # ranks 0 and 1 wait 20 µs per allreduce for rank 2
    waits = w.wait_states().set_index("rank")["wait_at_nxn"]
    assert waits.to_dict() == pytest.approx({0: ALLREDUCES * 20e-6, 1: ALLREDUCES * 20e-6,
                                            2: 0.0})
    bd = w.breakdown().set_index("rank")
    assert bd.loc[0, "synchronization_s"] == pytest.approx(ALLREDUCES * 20e-6)
    assert bd.loc[0, "total_s"] == pytest.approx((END - 30 * US - (PHASE_B - 10 * US)) / 1e9)


def test_a_window_cutting_a_call_counts_the_part_inside(session):
    s, d = SENDS[4]
    w = session.window(s + d // 2, s + d + 5 * US, ranks=[0])
    send = w.functions().set_index("name").loc["MPI_Send"]
    assert send["calls"] == 1
    assert send["time_s"] == pytest.approx((d - d // 2) / 1e9)
    assert send["max_s"] == pytest.approx(d / 1e9)  # of the whole call


def test_rank_set_and_profiles_per_rank_callsite_comm_tag(session):
    w = session.window(0, END + 10 * US, ranks=[1])
    per_rank = w.profile(("rank", "function"))
    assert set(per_rank["rank"]) == {1}
    assert set(per_rank["function"]) == {"MPI_Init", "MPI_Recv", "MPI_Allreduce",
                                         "MPI_Finalize"}
    sites = w.profile(("function", "callsite")).set_index("function")
    assert sites.loc["MPI_Recv", "callsite"] == "a.c:20"
    tags = w.profile(("function", "tag")).set_index("function")
    assert tags.loc["MPI_Recv", "tag"] == 5
    comms = w.profile(("function", "comm")).set_index("function")
    assert comms.loc["MPI_Allreduce", "comm"] == "MPI_COMM_WORLD"
    msgs = w.message_profile(("comm", "tag"))
    assert msgs[["comm", "tag", "messages"]].values.tolist() == [["MPI_COMM_WORLD", 5,
                                                                  len(SENDS)]]
    assert w.breakdown()["rank"].tolist() == [1]


def test_user_regions_inclusive_and_exclusive(session):
    w = session.window(0, END + 10 * US, ranks=[2])
    reg = w.regions().set_index("name")
    main_incl = (END - 10 * US - 20 * US) / 1e9
    solve_incl = (END - 20 * US - 30 * US) / 1e9
    assert reg.loc["main", "inclusive_s"] == pytest.approx(main_incl)
    assert reg.loc["main", "exclusive_s"] == pytest.approx(main_incl - solve_incl)
    mpi = ALLREDUCES * 10e-6  # rank 2's allreduces: 10 µs each, inside solve
    assert reg.loc["solve", "exclusive_s"] == pytest.approx(solve_incl - mpi)
    # a window inside solve: solve is all of it, main has nothing of its own there
    w = session.window(PHASE_B - 10 * US, PHASE_B - 5 * US, ranks=[2])
    reg = w.regions().set_index("name")
    assert reg.loc["solve", "exclusive_s"] == pytest.approx(5e-6)
    assert reg.loc["main", "exclusive_s"] == pytest.approx(0)


@pytest.mark.parametrize("share", [1.0, 0.6, 0.05], ids=["whole", "most", "narrow"])
def test_profiles_equal_a_groupby_of_the_calls_in_the_window(synth_trace, share):
    """Profiles group per-trace atoms (window._Atoms); a window holding most of the trace
    keeps the trace's (atom, value) order, a narrow one sorts its calls anew: each equals
    the plain computation, a pandas groupby of the calls overlapping the window."""
    from mpiscope.analysis import stats

    s = Analysis(reader.load(synth_trace(ranks=6, events=40000)))
    lo, hi = s.window_index.span
    a = lo + int((1 - share) / 2 * (hi - lo))
    b = a + int(share * (hi - lo)) + 1
    w = s.window(a, b)
    c = s.trace.calls
    start = c["start"].to_numpy(np.int64)
    end = np.maximum(c["end"].to_numpy(np.int64), start)
    hit = (start < b) & ((end > a) | (start >= a))
    n = stats.polls(c)
    ref = c.loc[hit, ["rank", "function", "callsite", "tag"]].astype(
        {"function": str, "callsite": str}).assign(
        n=n[hit], inside=np.minimum(end[hit], b) - np.maximum(start[hit], a),
        v=(end - start)[hit] / np.maximum(n[hit], 1))
    for by in (("function",), ("rank", "function"), ("function", "callsite"),
               ("function", "tag")):
        got = w.profile(by).rename(columns={"name": "function"}).set_index(list(by))
        g = ref.groupby(list(by))
        want = g.agg(calls=("n", "sum"), time=("inside", "sum"), lo=("v", "min"),
                     med=("v", "median"), hi=("v", "max"))
        assert sorted(got.index) == sorted(want.index)
        got = got.loc[want.index]
        assert got["calls"].tolist() == want["calls"].tolist()
        assert got["time_s"].to_numpy() == pytest.approx(want["time"].to_numpy() / 1e9)
        for col, ref_col in (("min_s", "lo"), ("median_s", "med"), ("max_s", "hi")):
            assert got[col].to_numpy() == pytest.approx(want[ref_col].to_numpy() / 1e9)
    # groups made of several atoms (ranks, call sites, tags) are what the test is about
    assert len(w._atoms()) > len(w.profile(("function",)))
