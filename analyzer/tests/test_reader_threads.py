"""Ranks with several threads (locations) calling MPI, as Score-P writes them: every
location of a process is read, calls never nest across threads, messages are matched by
their true tag whichever thread sent or received them, and the breakdown of a rank is its
main thread's with the other threads' MPI time beside it.

The trace is hand-made (tracegen, Score-P flavour: locations numbered rank by rank, so a
location ref is not a rank). Times in ns; every number below is computed by hand."""

from __future__ import annotations

import pytest

from mpiscope.analysis.session import Analysis
from mpiscope.archive.reader import load
from mpiscope_testing.tracegen import TraceBuilder

MAIN, WORKER = 0, 1


@pytest.fixture
def trace(tmp_path):
    tb = TraceBuilder(2, creator="Score-P", threads=2)
    for r in range(2):
        tb.call(r, 0, 10, "MPI_Init")
        tb.collective(r, 400, 420, "MPI_Allreduce", sent=8, received=8)
        tb.call(r, 500, 510, "MPI_Finalize")
    # both threads of rank 0 send at once, each its own tag; rank 1's threads receive.
    # In one location the worker's Send would open inside the main thread's.
    tb.send_call((0, WORKER), 100, 110, dest=1, tag=1, nbytes=4)
    tb.send_call((0, MAIN), 105, 120, dest=1, tag=2, nbytes=8)
    tb.recv_call((1, WORKER), 100, 130, src=0, tag=1, nbytes=4)
    tb.recv_call((1, MAIN), 102, 125, src=0, tag=2, nbytes=8)
    # one tag used by both threads: MPI matches in send order and posting order, across
    # the threads of a rank (the first send, 16 B, meets the receive posted first)
    tb.send_call((0, MAIN), 200, 210, dest=1, tag=5, nbytes=16)
    tb.send_call((0, WORKER), 220, 230, dest=1, tag=5, nbytes=32)
    tb.recv_call((1, WORKER), 205, 240, src=0, tag=5, nbytes=16)
    tb.recv_call((1, MAIN), 225, 260, src=0, tag=5, nbytes=32)
    return load(tb.write(tmp_path / "t"), use_cache=False)


def test_every_location_of_a_process_is_a_thread_of_its_rank(trace):
    th = trace.threads
    assert list(zip(th["rank"], th["thread"], th["location"], th["name"], strict=True)) == [
        (0, 0, 0, "rank 0"), (0, 1, 1, "rank 0 thread 1"),
        (1, 0, 2, "rank 1"), (1, 1, 3, "rank 1 thread 1")]
    assert list(trace.ranks["location"]) == [0, 2]
    assert list(trace.ranks["events"]) == [
        th[th["rank"] == r]["events"].sum() for r in range(2)]
    c = trace.calls
    assert (c["depth"] == 0).all()  # overlapping calls of two threads do not nest
    assert sorted(zip(c["rank"], c["thread"], c["function"].astype(str), c["start"],
                      strict=True)) == sorted([
        (0, 0, "MPI_Init", 0), (0, 0, "MPI_Send", 105), (0, 0, "MPI_Send", 200),
        (0, 0, "MPI_Allreduce", 400), (0, 0, "MPI_Finalize", 500),
        (0, 1, "MPI_Send", 100), (0, 1, "MPI_Send", 220),
        (1, 0, "MPI_Init", 0), (1, 0, "MPI_Recv", 102), (1, 0, "MPI_Recv", 225),
        (1, 0, "MPI_Allreduce", 400), (1, 0, "MPI_Finalize", 500),
        (1, 1, "MPI_Recv", 100), (1, 1, "MPI_Recv", 205)])
    p = trace.p2p
    assert sorted(zip(p["rank"], p["thread"], p["tag"], strict=True)) == [
        (0, 0, 2), (0, 0, 5), (0, 1, 1), (0, 1, 5), (1, 0, 2), (1, 0, 5), (1, 1, 1), (1, 1, 5)]


def test_messages_matched_with_their_tags_across_threads(trace):
    m = trace.messages
    thread = trace.calls["thread"].to_numpy()
    got = sorted(zip(m["tag"], m["bytes"], thread[m["send_call"]], thread[m["recv_call"]],
                     m["recv_time"], strict=True))
    # (tag, bytes, sending thread, receiving thread, receive event at the Recv's Leave)
    assert got == [(1, 4, 1, 1, 130), (2, 8, 0, 0, 125), (5, 16, 0, 1, 240),
                   (5, 32, 1, 0, 260)]
    assert trace.unmatched.empty


def test_breakdown_is_the_main_thread_with_the_others_beside_it(trace):
    a = Analysis(trace)
    ranks = a.ranks.set_index("rank")
    # measured interval 10..500; rank 0's main thread: Send 15 + 10, Allreduce 20
    assert ranks.loc[0, "total_s"] * 1e9 == pytest.approx(490)
    assert (ranks.loc[0, "communication_s"] + ranks.loc[0, "synchronization_s"]) * 1e9 == \
        pytest.approx(15 + 10 + 20)
    assert ranks.loc[0, "compute_s"] * 1e9 == pytest.approx(490 - 45)
    parts = a.ranks[["compute_s", "communication_s", "synchronization_s"]].sum(axis=1)
    assert list(parts) == pytest.approx(list(a.ranks["total_s"]))
    threads = a.to_dict()["threads"]
    assert [(t["rank"], t["thread"], t["calls"]) for t in threads] == [
        (0, 0, 3), (0, 1, 2), (1, 0, 3), (1, 1, 2)]
    by = {(t["rank"], t["thread"]): t["mpi_s"] * 1e9 for t in threads}
    assert by[(0, 1)] == pytest.approx(10 + 10)  # the worker's two Sends
    assert by[(1, 1)] == pytest.approx(30 + 35)  # the worker's two Recvs
    assert by[(0, 0)] == pytest.approx(45)


def test_request_completed_on_another_thread(tmp_path):
    """A request started on one thread and completed on another, here on the main thread,
    whose location is read first: the message still links the call that posted it and
    the call that completed it."""
    tb = TraceBuilder(2, creator="Score-P", threads=2)
    for r in range(2):
        tb.call(r, 0, 10, "MPI_Init")
        tb.call(r, 500, 510, "MPI_Finalize")
    tb.isend_call((0, WORKER), 300, 305, dest=1, tag=9, nbytes=64, request=7)
    tb.enter((0, MAIN), 310, "MPI_Wait")
    tb.isend_complete((0, MAIN), 320, request=7)
    tb.leave((0, MAIN), 320, "MPI_Wait")
    tb.irecv_call((1, WORKER), 290, 295, request=9)
    tb.enter((1, MAIN), 300, "MPI_Wait")
    tb.irecv((1, MAIN), 330, src=0, tag=9, nbytes=64, request=9)
    tb.leave((1, MAIN), 330, "MPI_Wait")
    t = load(tb.write(tmp_path / "t"), use_cache=False)
    c = t.calls.set_index("call")

    def where(call: int) -> tuple[int, int, str]:
        return int(c.loc[call, "rank"]), int(c.loc[call, "thread"]), str(c.loc[call, "function"])

    (msg,) = t.messages.itertuples()
    assert (msg.tag, msg.bytes) == (9, 64)
    assert where(msg.send_call) == (0, WORKER, "MPI_Isend")
    assert where(msg.send_complete_call) == (0, MAIN, "MPI_Wait")
    assert where(msg.recv_call) == (1, WORKER, "MPI_Irecv")
    assert where(msg.recv_complete_call) == (1, MAIN, "MPI_Wait")
    assert msg.recv_enter == 290 and msg.recv_leave == 330
    assert t.unmatched.empty
