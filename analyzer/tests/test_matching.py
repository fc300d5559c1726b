"""Message matching: MPI order (FIFO per sender, receiver, comm, tag; receives in the
order they were posted), unmatched operations kept, and the native matcher agrees with
the pandas reference on a generated trace."""

from __future__ import annotations

import pandas as pd

from mpiscope.archive import matching, reader
from mpiscope_testing.tracegen import TraceBuilder


def msgs(t, cols=("send_rank", "recv_rank", "tag", "bytes", "send_time", "recv_time")):
    return [tuple(r) for r in t.messages[list(cols)].itertuples(index=False)]


def test_receives_match_in_posting_order_not_completion_order(write_trace) -> None:
    tb = TraceBuilder(ranks=2)
    tb.send_call(0, 10, 12, dest=1, tag=5, nbytes=100)
    tb.send_call(0, 20, 22, dest=1, tag=5, nbytes=200)
    tb.irecv_call(1, 5, 6, request=1)  # posted first: gets the first message
    tb.irecv_call(1, 7, 8, request=2)
    tb.enter(1, 30, "MPI_Waitall")
    tb.irecv(1, 40, src=0, tag=5, nbytes=200, request=2)  # completes first
    tb.irecv(1, 45, src=0, tag=5, nbytes=100, request=1)
    tb.leave(1, 50, "MPI_Waitall")
    t = reader.load(write_trace(tb), use_cache=False)
    assert msgs(t) == [(0, 1, 5, 100, 10, 45), (0, 1, 5, 200, 20, 40)]
    calls = t.calls.set_index("call")
    first, second = t.messages["recv_call"].tolist()
    assert calls.loc[first, "start"] == 5 and calls.loc[second, "start"] == 7
    assert t.messages["recv_complete_call"].nunique() == 1  # both done in the Waitall


def test_blocking_receive_overtaken_by_earlier_irecv(write_trace) -> None:
    tb = TraceBuilder(ranks=2)
    tb.send_call(0, 10, 11, dest=1, tag=1, nbytes=8)
    tb.send_call(0, 12, 13, dest=1, tag=1, nbytes=16)
    tb.irecv_call(1, 1, 2, request=7)
    tb.recv_call(1, 3, 20, src=0, tag=1, nbytes=16)
    tb.enter(1, 30, "MPI_Wait")
    tb.irecv(1, 31, src=0, tag=1, nbytes=8, request=7)
    tb.leave(1, 32, "MPI_Wait")
    t = reader.load(write_trace(tb), use_cache=False)
    assert msgs(t, ("bytes", "send_time", "recv_time", "recv_enter", "recv_leave")) == [
        (8, 10, 31, 1, 32), (16, 12, 20, 3, 20)]


def test_tags_and_communicators_are_separate_queues(write_trace) -> None:
    tb = TraceBuilder(ranks=2)
    dup = tb.comm([0, 1], name="dup")
    tb.send_call(0, 10, 11, dest=1, tag=1, nbytes=1)
    tb.send_call(0, 12, 13, dest=1, tag=2, nbytes=2)
    tb.send_call(0, 14, 15, dest=1, tag=1, nbytes=3, comm=dup)
    tb.recv_call(1, 20, 21, src=0, tag=1, nbytes=3, comm=dup)
    tb.recv_call(1, 22, 23, src=0, tag=2, nbytes=2)
    tb.recv_call(1, 24, 25, src=0, tag=1, nbytes=1)
    t = reader.load(write_trace(tb), use_cache=False)
    assert msgs(t, ("comm", "tag", "bytes", "recv_time")) == [
        (0, 1, 1, 25), (0, 2, 2, 23), (dup, 1, 3, 21)]


def test_unmatched_sends_and_receives_are_kept(write_trace) -> None:
    tb = TraceBuilder(ranks=2)
    tb.send_call(0, 10, 11, dest=1, tag=1, nbytes=4)
    tb.send_call(0, 12, 13, dest=1, tag=1, nbytes=4)  # nobody receives this one
    tb.recv_call(1, 5, 20, src=0, tag=1, nbytes=4)
    tb.recv_call(0, 30, 40, src=1, tag=9, nbytes=2)  # nobody sends this one
    t = reader.load(write_trace(tb), use_cache=False)
    assert len(t.messages) == 1
    assert [tuple(r) for r in t.unmatched[["rank", "event", "peer", "tag", "bytes", "call"]]
            .astype(object).itertuples(index=False)] == [(0, "send", 1, 1, 4, 1),
                                                          (0, "recv", 1, 9, 2, 2)]


def test_native_matching_equals_the_pandas_reference(synth_trace) -> None:
    t = reader.load(synth_trace(8, 60000), use_cache=False)
    ref, ref_unmatched = matching.match_messages(t.p2p, t.calls)
    key = ["send_rank", "send_time"]
    ours = t.messages.sort_values(key, kind="stable").reset_index(drop=True)
    ref = ref.sort_values(key, kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, ref, check_dtype=False)
    assert len(ours) > 5000 and ref_unmatched.empty and t.unmatched.empty
    # every halo message arrives after it was sent; the sizes are what the generator wrote
    assert (ours["recv_time"] > ours["send_time"]).all()
    assert set(ours["bytes"]) == {8192, 64}


def test_collective_instances_line_up_across_ranks(synth_trace) -> None:
    t = reader.load(synth_trace(8, 60000), use_cache=False)
    c = t.collectives
    per_instance = c.groupby("instance").agg(ranks=("rank", "nunique"), fn=("function", "first"),
                                             seqs=("coll_seq", "nunique"))
    assert (per_instance["ranks"] == 8).all() and (per_instance["seqs"] == 1).all()
    ref = matching.collectives(t.calls)
    assert c["instance"].tolist() == ref["instance"].tolist()
    assert set(per_instance["fn"]) == {"MPI_Allreduce", "MPI_Barrier"}
