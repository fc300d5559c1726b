"""The critical path on traces whose path is known by construction (synthetic OTF2
archives with exact times, read back by the reader as a user's trace is), on a real
traced program, and in `mpiscope analyze`'s JSON and summary.

Every synthetic rank runs MPI_Init 0-10, so the run starts at 10 (the end of MPI_Init);
it ends where the last rank enters MPI_Finalize. Segments are written
(rank, start, end, kind, function, call site); a compute burst names the call ending it.
"""

import os
import subprocess
import sys

import pytest

from mpiscope.analysis import breakdown
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.scenarios import PROGRAMS, analyze_json, marker_line, traced_run
from mpiscope_testing.tracegen import TraceBuilder


def builder(ranks: int, finalize: list[int]) -> TraceBuilder:
    tb = TraceBuilder(ranks=ranks)
    for r in range(ranks):
        tb.call(r, 0, 10, "MPI_Init", callsite="c.c:1")
        tb.call(r, finalize[r], finalize[r] + 10, "MPI_Finalize", callsite="c.c:99")
    return tb


def path_of(tb: TraceBuilder, tmp_path) -> Analysis:
    return Analysis(reader.load(tb.write(tmp_path / "trace"), use_cache=False))


def segments(a: Analysis) -> list[tuple]:
    s = a.critical_path.segments
    return [(int(r.rank), int(r.start), int(r.end), str(r.kind), r.function, r.callsite)
            for r in s.itertuples()]


def per_rank_ns(a: Analysis) -> dict[int, int]:
    return {int(r.rank): round(r.time_s * 1e9) for r in a.critical_path.per_rank().itertuples()}


def test_late_sender_chain_across_three_ranks(tmp_path):
    """Rank 2 sends to rank 1 at 300, rank 1 (waiting since 20) computes and sends to
    rank 0 at 500, rank 0 (waiting since 30) computes until 1000, the last to finish."""
    tb = builder(3, [1000, 900, 800])
    tb.send_call(2, 300, 310, dest=1, tag=1, nbytes=8, callsite="c.c:20")
    tb.recv_call(1, 20, 320, src=2, tag=1, nbytes=8, callsite="c.c:21")
    tb.send_call(1, 500, 510, dest=0, tag=2, nbytes=8, callsite="c.c:22")
    tb.recv_call(0, 30, 520, src=1, tag=2, nbytes=8, callsite="c.c:23")
    a = path_of(tb, tmp_path)
    assert segments(a) == [
        (2, 10, 300, "compute", "MPI_Send", "c.c:20"),   # rank 2's work before its send
        (1, 300, 320, "mpi", "MPI_Recv", "c.c:21"),      # the receive after the send began
        (1, 320, 500, "compute", "MPI_Send", "c.c:22"),
        (0, 500, 520, "mpi", "MPI_Recv", "c.c:23"),
        (0, 520, 1000, "compute", "MPI_Finalize", "c.c:99"),
    ]
    cp = a.critical_path
    assert cp.length_ns == 990 and cp.rank_switches == 2
    assert per_rank_ns(a) == {0: 500, 1: 200, 2: 290}
    doc = cp.to_dict()
    assert doc["length_s"] == pytest.approx(990e-9)
    assert {(f["name"], f["callsite"], f.get("before")): round(f["time_s"] * 1e9)
            for f in doc["functions"]} == {
        ("compute", "c.c:99", "MPI_Finalize"): 480, ("compute", "c.c:20", "MPI_Send"): 290,
        ("compute", "c.c:22", "MPI_Send"): 180, ("MPI_Recv", "c.c:21", None): 20,
        ("MPI_Recv", "c.c:23", None): 20}
    assert doc["functions"][0]["name"] == "compute" and doc["functions"][0]["time_s"] == \
        pytest.approx(480e-9)


def test_barrier_after_imbalance_goes_through_the_slowest_rank(tmp_path):
    """Ranks compute until 100, 400, 200, then a barrier all leave at 420."""
    tb = builder(3, [500, 500, 500])
    for r, start in enumerate([100, 400, 200]):
        tb.collective(r, start, 420, "MPI_Barrier", callsite="c.c:30")
    a = path_of(tb, tmp_path)
    assert segments(a) == [
        (1, 10, 400, "compute", "MPI_Barrier", "c.c:30"),
        (0, 400, 420, "mpi", "MPI_Barrier", "c.c:30"),   # after the last rank arrived
        (0, 420, 500, "compute", "MPI_Finalize", "c.c:99"),
    ]
    assert per_rank_ns(a) == {0: 100, 1: 390, 2: 0}
    f = a.to_dict()["findings"]
    imbalance = [x for x in f if x["kind"] == "load_imbalance"]
    assert len(imbalance) == 1
    # the slow rank's burst before the barrier and the barrier's end: 410 of 490 ns
    assert imbalance[0]["on_critical_path"] is True
    assert round(imbalance[0]["critical_path_s"] * 1e9) == 410
    assert imbalance[0]["critical_path_share"] == pytest.approx(410 / 490)


def test_isend_irecv_waitall_with_a_late_partner(tmp_path):
    """Rank 0 posts its exchange at 20 and waits from 40; rank 1 computes until 300
    before posting its side: rank 0's Waitall ends when rank 1's message arrives."""
    tb = builder(2, [400, 350])
    tb.irecv_call(0, 20, 25, request=1, callsite="c.c:40")
    tb.isend_call(0, 26, 30, dest=1, tag=5, nbytes=8, request=2, callsite="c.c:41")
    tb.enter(0, 40, "MPI_Waitall", callsite="c.c:42")
    tb.isend_complete(0, 50, request=2)
    tb.irecv(0, 320, src=1, tag=6, nbytes=8, request=1)
    tb.leave(0, 330, "MPI_Waitall")
    tb.irecv_call(1, 300, 302, request=1, callsite="c.c:40")
    tb.isend_call(1, 303, 306, dest=0, tag=6, nbytes=8, request=2, callsite="c.c:41")
    tb.enter(1, 310, "MPI_Waitall", callsite="c.c:42")
    tb.irecv(1, 312, src=0, tag=5, nbytes=8, request=1)
    tb.isend_complete(1, 314, request=2)
    tb.leave(1, 315, "MPI_Waitall")
    a = path_of(tb, tmp_path)
    assert segments(a) == [
        (1, 10, 300, "compute", "MPI_Irecv", "c.c:40"),
        (1, 300, 302, "mpi", "MPI_Irecv", "c.c:40"),
        (1, 302, 303, "compute", "MPI_Isend", "c.c:41"),
        (0, 303, 330, "mpi", "MPI_Waitall", "c.c:42"),   # from rank 1's Isend on
        (0, 330, 400, "compute", "MPI_Finalize", "c.c:99"),
    ]
    assert a.critical_path.length_ns == 390


def test_synchronous_send_waits_for_a_late_receiver(tmp_path):
    """Rank 0's Ssend blocks from 100 until rank 1 posts its receive at 280."""
    tb = builder(2, [400, 350])
    tb.send_call(0, 100, 300, dest=1, tag=3, nbytes=64, function="MPI_Ssend",
                 callsite="c.c:60")
    tb.recv_call(1, 280, 300, src=0, tag=3, nbytes=64, callsite="c.c:61")
    a = path_of(tb, tmp_path)
    assert segments(a) == [
        (1, 10, 280, "compute", "MPI_Recv", "c.c:61"),
        (0, 280, 300, "mpi", "MPI_Ssend", "c.c:60"),
        (0, 300, 400, "compute", "MPI_Finalize", "c.c:99"),
    ]


def test_collective_whose_last_arriver_changes(tmp_path):
    """Two Allreduces from one call site: rank 1 arrives last at the first (300), rank 0
    at the second (600): the path follows rank 0 back to 310, then rank 1."""
    tb = builder(3, [700, 650, 680])
    for r, start in enumerate([100, 300, 200]):
        tb.collective(r, start, 310, "MPI_Allreduce", sent=8, received=8, callsite="c.c:50")
    for r, start in enumerate([600, 400, 500]):
        tb.collective(r, start, 610, "MPI_Allreduce", sent=8, received=8, callsite="c.c:50")
    a = path_of(tb, tmp_path)
    assert segments(a) == [
        (1, 10, 300, "compute", "MPI_Allreduce", "c.c:50"),
        (0, 300, 310, "mpi", "MPI_Allreduce", "c.c:50"),
        (0, 310, 600, "compute", "MPI_Allreduce", "c.c:50"),
        (0, 600, 610, "mpi", "MPI_Allreduce", "c.c:50"),  # rank 0 was last: it did not wait
        (0, 610, 700, "compute", "MPI_Finalize", "c.c:99"),
    ]
    assert per_rank_ns(a) == {0: 400, 1: 290, 2: 0}
    prof = a.critical_path.profile()
    assert round(float(prof.iloc[0]["time_s"]) * 1e9) == 580  # compute before the Allreduce


def test_single_rank_path_is_the_whole_rank(tmp_path):
    tb = builder(1, [500])
    tb.collective(0, 100, 110, "MPI_Barrier", callsite="c.c:70")
    a = path_of(tb, tmp_path)
    assert segments(a) == [
        (0, 10, 100, "compute", "MPI_Barrier", "c.c:70"),
        (0, 100, 110, "mpi", "MPI_Barrier", "c.c:70"),
        (0, 110, 500, "compute", "MPI_Finalize", "c.c:99"),
    ]
    assert a.critical_path.to_dict()["per_rank"] == [
        {"rank": 0, "time_s": 490e-9, "share": 1.0, "compute_s": 480e-9, "mpi_s": 10e-9}]


def test_a_rank_that_starts_late_reaches_back_through_its_mpi_init(tmp_path):
    """Rank 1's MPI_Init returns at 50, after rank 0's (10): the path covers the run from
    10, through rank 1's MPI_Init."""
    tb = TraceBuilder(ranks=2)
    tb.call(0, 0, 10, "MPI_Init", callsite="c.c:1")
    tb.call(1, 0, 50, "MPI_Init", callsite="c.c:1")
    for r, start in enumerate([100, 200]):
        tb.collective(r, start, 210, "MPI_Barrier", callsite="c.c:30")
        tb.call(r, 300, 310, "MPI_Finalize", callsite="c.c:99")
    a = path_of(tb, tmp_path)
    assert segments(a) == [
        (1, 10, 50, "startup", "MPI_Init", "c.c:1"),
        (1, 50, 200, "compute", "MPI_Barrier", "c.c:30"),
        (0, 200, 210, "mpi", "MPI_Barrier", "c.c:30"),
        (0, 210, 300, "compute", "MPI_Finalize", "c.c:99"),
    ]
    assert a.critical_path.length_ns == 290


def test_path_on_clock_skew_corrected_times(tmp_path):
    """Rank 1's receive completes at 150, before rank 0 sent at 200: its clock is 50 ns
    behind. On the corrected times (rank 1 + 50) its receive runs 150-200 and waits for
    the send until its end; the path goes back to rank 0 there."""
    tb = builder(2, [300, 280])
    tb.send_call(0, 200, 210, dest=1, tag=1, nbytes=8, callsite="c.c:90")
    tb.recv_call(1, 100, 150, src=0, tag=1, nbytes=8, callsite="c.c:91")
    a = path_of(tb, tmp_path)
    assert a.wait_states.skew.offsets_ns == {1: 50}
    assert segments(a) == [
        (0, 10, 200, "compute", "MPI_Send", "c.c:90"),
        (1, 200, 330, "compute", "MPI_Finalize", "c.c:99"),
    ]
    assert a.critical_path.length_ns == 320
    # the path ends at 330 on the corrected clocks, past the 310 ns recorded: said so
    out = subprocess.run([sys.executable, "-m", "mpiscope", "analyze",
                          str(tmp_path / "trace")], capture_output=True, text=True,
                         check=True, env=dict(os.environ, COLUMNS="200")).stdout
    assert "10 ns to 330 ns of the 310 ns run" in out
    assert ("on clocks corrected for skew: 1 rank(s) shifted by up to 50 ns (1 message(s) "
            "received before they were sent as recorded, 0 left)") in out


def off_path_trace() -> TraceBuilder:
    """Rank 1 sends 100 ns late to rank 0 (a load imbalance), while rank 2 computes
    through the whole run and finishes last: the waiting is off the critical path."""
    tb = builder(3, [500, 500, 1000])
    tb.send_call(1, 200, 210, dest=0, tag=1, nbytes=8, callsite="c.c:80")
    tb.recv_call(0, 100, 220, src=1, tag=1, nbytes=8, callsite="c.c:81")
    return tb


def test_findings_off_the_critical_path_are_marked(tmp_path):
    a = path_of(off_path_trace(), tmp_path)
    assert {r[0] for r in segments(a)} == {2}
    (f,) = a.to_dict()["findings"]
    assert (f["kind"], f["callsite"]) == ("load_imbalance", "c.c:81")
    assert (f["on_critical_path"], f["critical_path_s"], f["critical_path_share"]) == (
        False, 0.0, 0.0)


def test_analyze_json_and_summary(tmp_path):
    trace = off_path_trace().write(tmp_path / "trace")
    proc, doc = analyze_json(trace, tmp_path)
    cp = doc["critical_path"]
    assert cp["length_s"] == pytest.approx(990e-9)
    assert cp["functions"][0] == {"name": "compute", "callsite": "c.c:99", "time_s": 990e-9,
                                  "share": 1.0, "before": "MPI_Finalize"}
    assert [r["share"] for r in cp["per_rank"]] == [0.0, 0.0, 1.0]
    assert doc["findings"][0]["on_critical_path"] is False
    out = subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(trace)],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, COLUMNS="200")).stdout
    # the interval it covers, said as such: not the whole run (Init and Finalize are not
    # in it)
    assert (cp["begin_s"], cp["end_s"], doc["meta"]["duration_s"]) == pytest.approx(
        (10e-9, 1000e-9, 1010e-9))
    assert ("Critical path: 990 ns, 10 ns to 1 µs of the 1.01 µs run (the first rank leaving "
            "MPI_Init to the last entering MPI_Finalize), 0 rank switches; rank 2 holds 100% "
            "of it") in out
    assert "compute before MPI_Finalize" in out
    assert ("load_imbalance MPI_Recv at c.c:81: not on the critical path: fixing it cannot "
            "shorten the run") in out


@pytest.fixture(scope="module")
def imbalance_trace(tmp_path_factory):
    return traced_run("imbalance", 3, ["4"], tmp_path_factory.mktemp("cpath"))


def test_real_program_path_spans_the_run_through_every_allreduce(imbalance_trace):
    """imbalance.c: every rank sleeps 2 ms before each Allreduce, the last rank 15 ms
    longer (how much longer it really is, a busy machine decides)."""
    a = Analysis(reader.load(imbalance_trace))
    cp = a.critical_path
    iv = breakdown.intervals(a.trace)
    # the run on the path's times: the trace's own, shifted where clocks were corrected
    off = iv["rank"].map(a.wait_states.skew.offsets_ns).fillna(0).astype(int)
    assert cp.length_ns == int((iv["end"] + off).max() - (iv["begin"] + off).min())
    s = cp.segments
    assert (s["start"].to_numpy()[1:] == s["end"].to_numpy()[:-1]).all()  # no gap, no overlap
    assert int((s["end"] - s["start"]).sum()) == cp.length_ns
    # Which rank was last at each Allreduce is what this run shows (on a busy machine any
    # rank may be descheduled longer than the injected 15 ms), and so is which rank holds
    # most of the path: assert only what follows from the trace itself. The path reaches
    # each Allreduce through the last arriver's work wherever it was clearly last, and each
    # rank's share is its segments' time over the path's length.
    coll = a.trace.collectives
    ar = coll[coll["function"] == "MPI_Allreduce"].copy()
    ar["t"] = ar["start"] + ar["rank"].map(a.wait_states.skew.offsets_ns).fillna(0)
    for _, g in ar.groupby("instance"):
        g = g.sort_values("t")
        if g["t"].iloc[-1] - g["t"].iloc[-2] > 1e6:  # clearly last: by more than 1 ms
            last = g.iloc[-1]  # the path runs through its work up to its entry
            assert ((s["rank"] == last["rank"]) & (s["end"] == int(last["t"]))).any(), g
    shares = cp.per_rank().set_index("rank")["share"]
    held = (s["end"] - s["start"]).groupby(s["rank"]).sum() / cp.length_ns
    assert shares.sort_index().to_numpy() == pytest.approx(held.sort_index().to_numpy())
    assert shares.sum() == pytest.approx(1.0)
    # Each of the 4 Allreduces is reached through its last arriver's computation right
    # before it, which sleeps BASE_US (2 ms) at least whichever rank it is: that much of
    # the path is computation before the Allreduce. (Not that it tops the profile: with
    # the ranks started far apart on a busy machine, MPI_Init can hold more of the path.)
    prof = cp.profile()
    allreduce = f"imbalance.c:{marker_line(PROGRAMS / 'imbalance.c', 'allreduce')}"
    before = prof[(prof["name"] == "compute") & (prof["before"] == "MPI_Allreduce")]
    assert before["callsite"].tolist() == [allreduce]
    assert before["time_s"].iloc[0] >= 4 * 2e-3
    assert prof["time_s"].sum() == pytest.approx(cp.length_ns / 1e9)
