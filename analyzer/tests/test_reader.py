"""mpiscope.archive.reader.load on hand-written traces: every table, row by row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpiscope.archive import decode, reader
from mpiscope.archive.trace import Trace
from mpiscope_testing.tracegen import TraceBuilder


def rows(df: pd.DataFrame, cols: list[str]) -> list[tuple]:
    return [tuple(r) for r in df[cols].astype(object).itertuples(index=False)]


@pytest.fixture(scope="module")
def two(two_rank_trace: Path) -> Trace:
    return reader.load(two_rank_trace, use_cache=False)


def test_calls_are_exact(two: Trace) -> None:
    cols = ["call", "rank", "function", "kind", "start", "end", "depth", "callsite", "comm",
            "peer", "tag", "bytes_sent", "bytes_recv", "root", "coll_seq", "in_hash",
            "out_hash"]
    assert rows(two.calls, cols) == [
        (0, 0, "MPI_Init", "init", 0, 10, 0, "app.c:10", -1, -1, -1, 0, 0, -1, -1, 0, 0),
        (1, 0, "MPI_Isend", "p2p_send", 100, 110, 0, "app.c:42", 0, 1, 7, 800, 0, -1, -1, 0, 0),
        (2, 0, "MPI_Irecv", "p2p_recv", 112, 115, 0, "app.c:44", -1, -1, -1, 0, 0, -1, -1, 0, 0),
        (3, 0, "MPI_Waitall", "wait", 120, 250, 0, "app.c:50", -1, -1, -1, 0, 400, -1, -1, 0, 0),
        (4, 0, "MPI_Allreduce", "collective", 300, 400, 0, "app.c:60", 0, -1, -1, 8, 8, -1, 0,
         1, 3),
        (5, 0, "MPI_Barrier", "barrier", 450, 500, 0, "app.c:70", 0, -1, -1, 0, 0, -1, 1, 0, 0),
        (6, 0, "MPI_Finalize", "finalize", 600, 700, 0, "app.c:80", -1, -1, -1, 0, 0, -1, -1, 0,
         0),
        (7, 1, "MPI_Init", "init", 0, 12, 0, "app.c:10", -1, -1, -1, 0, 0, -1, -1, 0, 0),
        (8, 1, "MPI_Irecv", "p2p_recv", 100, 105, 0, "app.c:44", -1, -1, -1, 0, 0, -1, -1, 0, 0),
        (9, 1, "MPI_Isend", "p2p_send", 106, 109, 0, "app.c:42", 0, 0, 8, 400, 0, -1, -1, 0, 0),
        (10, 1, "MPI_Waitall", "wait", 120, 200, 0, "app.c:50", -1, -1, -1, 0, 800, -1, -1, 0,
         0),
        (11, 1, "MPI_Allreduce", "collective", 350, 401, 0, "app.c:60", 0, -1, -1, 8, 8, -1, 0,
         2, 3),
        (12, 1, "MPI_Barrier", "barrier", 460, 500, 0, "app.c:70", 0, -1, -1, 0, 0, -1, 1, 0, 0),
        (13, 1, "MPI_Finalize", "finalize", 600, 700, 0, "app.c:80", -1, -1, -1, 0, 0, -1, -1, 0,
         0),
    ]
    assert (two.calls["call"].to_numpy() == np.arange(len(two.calls))).all()


def test_dtypes_follow_the_data_model(two: Trace) -> None:
    c = two.calls
    assert str(c["rank"].dtype) == "int32" and str(c["depth"].dtype) == "int8"
    assert str(c["start"].dtype) == "int64" and str(c["in_hash"].dtype) == "uint64"
    for col in ("function", "kind", "callsite"):
        assert isinstance(c[col].dtype, pd.CategoricalDtype), col
    assert str(two.messages["send_time"].dtype) == "int64"
    assert isinstance(two.p2p["event"].dtype, pd.CategoricalDtype)


def test_messages_match_isends_to_irecvs(two: Trace) -> None:
    assert two.messages.to_dict("records") == [
        {"send_rank": 0, "recv_rank": 1, "comm": 0, "tag": 7, "bytes": 800, "send_call": 1,
         "recv_call": 8, "send_complete_call": 3, "recv_complete_call": 10, "send_time": 100,
         "recv_time": 200, "send_enter": 100, "recv_enter": 100, "recv_leave": 200},
        {"send_rank": 1, "recv_rank": 0, "comm": 0, "tag": 8, "bytes": 400, "send_call": 9,
         "recv_call": 2, "send_complete_call": 10, "recv_complete_call": 3, "send_time": 106,
         "recv_time": 240, "send_enter": 106, "recv_enter": 112, "recv_leave": 250},
    ]
    assert two.unmatched.empty


def test_p2p_lists_every_payload_event(two: Trace) -> None:
    assert rows(two.p2p, ["rank", "event", "time", "call", "peer", "comm", "tag", "bytes",
                          "request"]) == [
        (0, "isend", 100, 1, 1, 0, 7, 800, 1),
        (0, "irecv_request", 112, 2, -1, -1, -1, 0, 2),
        (0, "isend_complete", 150, 3, -1, -1, -1, 0, 1),
        (0, "irecv", 240, 3, 1, 0, 8, 400, 2),
        (1, "irecv_request", 100, 8, -1, -1, -1, 0, 1),
        (1, "isend", 106, 9, 0, 0, 8, 400, 2),
        (1, "isend_complete", 190, 10, -1, -1, -1, 0, 2),
        (1, "irecv", 200, 10, 0, 0, 7, 800, 1),
    ]


def test_collectives_share_an_instance_per_comm_and_sequence(two: Trace) -> None:
    assert rows(two.collectives, ["rank", "call", "function", "comm", "coll_seq", "instance",
                                  "start", "end", "root", "in_hash", "out_hash"]) == [
        (0, 4, "MPI_Allreduce", 0, 0, 0, 300, 400, -1, 1, 3),
        (0, 5, "MPI_Barrier", 0, 1, 1, 450, 500, -1, 0, 0),
        (1, 11, "MPI_Allreduce", 0, 0, 0, 350, 401, -1, 2, 3),
        (1, 12, "MPI_Barrier", 0, 1, 1, 460, 500, -1, 0, 0),
    ]


def test_definitions_and_meta(two: Trace) -> None:
    assert rows(two.ranks, ["rank", "host", "location", "first_ns", "last_ns"]) == [
        (0, "node0", 0, 0, 700), (1, "node1", 1, 0, 700)]
    world = two.comms.set_index("comm").loc[0]
    assert (world["name"], world["size"], list(world["members"])) == ("MPI_COMM_WORLD", 2, [0, 1])
    m = two.meta
    assert (m.creator, m.num_ranks, m.duration_ns, m.timer_resolution, m.truncated_ranks) == (
        "mpiscope 0.1.0", 2, 700, 1_000_000_000, [])
    assert (m.program, m.mpi_library) == ("/tmp/app", "Open MPI v4.1.4")
    assert two.regions.empty and two.flushes.empty and not m.clock_corrected


def test_peers_and_roots_are_world_ranks_in_sub_communicators(write_trace) -> None:
    tb = TraceBuilder(ranks=3)
    rev = tb.comm([2, 0], name="pair")  # comm rank 0 = world 2, comm rank 1 = world 0
    tb.send_call(2, 10, 20, dest=0, tag=5, nbytes=16, comm=rev)
    tb.recv_call(0, 5, 30, src=2, tag=5, nbytes=16, comm=rev)
    for rank in (0, 2):
        tb.collective(rank, 40, 50, "MPI_Bcast", comm=rev, root=2, sent=4, received=4)
    t = reader.load(write_trace(tb), use_cache=False)
    assert rows(t.calls, ["rank", "function", "comm", "peer", "root"]) == [
        (0, "MPI_Recv", rev, 2, -1), (0, "MPI_Bcast", rev, -1, 2),
        (2, "MPI_Send", rev, 0, -1), (2, "MPI_Bcast", rev, -1, 2)]
    assert rows(t.messages, ["send_rank", "recv_rank", "comm", "tag", "bytes"]) == [
        (2, 0, rev, 5, 16)]
    pair = t.comms.set_index("comm").loc[rev]
    assert (pair["name"], list(pair["members"]), pair["parent"]) == ("pair", [2, 0], 0)
    # a rank without events is still a rank
    assert t.ranks["rank"].tolist() == [0, 1, 2]


def test_nested_calls_and_user_regions(write_trace) -> None:
    tb = TraceBuilder(ranks=1, creator="Score-P")
    tb.enter(0, 0, "main")
    tb.enter(0, 10, "solve")
    tb.enter(0, 20, "MPI_Allreduce")
    tb.enter(0, 25, "MPI_Barrier")  # e.g. a PMPI layer calling MPI inside MPI
    tb.leave(0, 30, "MPI_Barrier")
    tb.leave(0, 40, "MPI_Allreduce")
    tb.leave(0, 50, "solve")
    tb.leave(0, 60, "main")
    t = reader.load(write_trace(tb), use_cache=False)
    assert rows(t.calls, ["function", "start", "end", "depth", "callsite"]) == [
        ("MPI_Allreduce", 20, 40, 0, ""), ("MPI_Barrier", 25, 30, 1, "")]
    assert rows(t.regions, ["function", "start", "end", "depth"]) == [
        ("main", 0, 60, 0), ("solve", 10, 50, 1)]
    assert t.meta.creator != "mpiscope" and t.meta.truncated_ranks == []


def test_sendrecv_keeps_both_directions(write_trace) -> None:
    tb = TraceBuilder(ranks=2)
    for me, other in ((0, 1), (1, 0)):
        tb.enter(me, 10, "MPI_Sendrecv")
        tb.send(me, 11, other, tag=1, nbytes=100 + me)
        tb.recv(me, 30, other, tag=1, nbytes=100 + other)
        tb.leave(me, 31, "MPI_Sendrecv")
    t = reader.load(write_trace(tb), use_cache=False)
    assert rows(t.calls, ["rank", "kind", "peer", "bytes_sent", "bytes_recv"]) == [
        (0, "p2p_sendrecv", 1, 100, 101), (1, "p2p_sendrecv", 0, 101, 100)]
    assert sorted(rows(t.messages, ["send_rank", "recv_rank", "bytes", "send_call",
                                    "recv_call"])) == [(0, 1, 100, 0, 1), (1, 0, 101, 1, 0)]


def test_flushes_are_listed(write_trace) -> None:
    tb = TraceBuilder(ranks=1)
    tb.call(0, 0, 5, "MPI_Init")
    tb.buffer_flush(0, 50, stop=80)
    tb.call(0, 100, 110, "MPI_Finalize")
    t = reader.load(write_trace(tb), use_cache=False)
    assert rows(t.flushes, ["rank", "start", "end"]) == [(0, 50, 80)]


def test_progress_reports_the_steps(two_rank_trace: Path) -> None:
    seen: list[str] = []
    reader.load(two_rank_trace, use_cache=False, progress=seen.append)
    assert seen[0] == "definitions" and seen[-1] == "tables"
    assert any(s.startswith("events 0.0M of 0.0M (100%)") for s in seen)


def test_scorep_trace(scorep_trace: Path) -> None:
    t = reader.load(scorep_trace, use_cache=False)
    assert t.meta.num_ranks == 2 and t.meta.creator.startswith("Score-P")
    assert t.ranks["rank"].tolist() == [0, 1] and set(t.ranks["host"]) == {"quartz10"}
    # Score-P counts CPU cycles; times come out in ns: the run took ~0.2 s
    assert 0.19e9 < t.meta.duration_ns < 0.21e9
    counts = t.calls.groupby(["rank", "function"], observed=True).size().to_dict()
    for rank in (0, 1):
        assert counts[(rank, "MPI_Send")] == 8 and counts[(rank, "MPI_Recv")] == 8
        assert counts[(rank, "MPI_Init")] == 1 and counts[(rank, "MPI_Finalize")] == 1
    assert set(t.calls["kind"]) >= {"p2p_send", "p2p_recv", "init", "finalize"}
    # the ping-pong doubles the size every round, both directions
    m = t.messages
    assert len(m) == 16 and t.unmatched.empty
    assert sorted(m.loc[m["send_rank"] == 0, "bytes"]) == [2 ** k for k in range(14, 22)]
    assert (m["recv_leave"] >= m["send_enter"]).all()
    assert set(m["comm"]) == {t.comms.set_index("name").loc["MPI_COMM_WORLD", "comm"]}
    assert t.regions["function"].tolist() == ["int main(int, char**)"] * 2
    assert t.meta.truncated_ranks == [] and t.meta.clock_corrected  # Score-P's offsets


def test_large_count_functions_have_their_int_twin_s_kind() -> None:
    """MPI-4's MPI_X_c is recorded by the interposer exactly as MPI_X (mpi4py calls them on
    MPICH 4): the same call kind; a `_c` function with no interpreted twin stays `other`."""
    assert {n: decode.kind_of(n) for n in (
        "MPI_Send_c", "MPI_Irecv_c", "MPI_Mrecv_c", "MPI_Sendrecv_c", "MPI_Allgatherv_c",
        "MPI_Iallreduce_c", "MPI_Put_c", "MPI_Win_create_c", "MPI_File_read_at_c",
        "MPI_Type_contiguous_c", "MPI_Pack_c")} == {
        "MPI_Send_c": "p2p_send", "MPI_Irecv_c": "p2p_recv", "MPI_Mrecv_c": "p2p_recv",
        "MPI_Sendrecv_c": "p2p_sendrecv", "MPI_Allgatherv_c": "collective",
        "MPI_Iallreduce_c": "collective", "MPI_Put_c": "rma", "MPI_Win_create_c": "rma",
        "MPI_File_read_at_c": "io", "MPI_Type_contiguous_c": None, "MPI_Pack_c": None}
