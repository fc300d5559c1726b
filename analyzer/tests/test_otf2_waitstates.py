"""Wait states and the per-rank breakdown on synthetic OTF2 archives: written with the
OTF2 Python writer (tracegen), read back by mpiscope's reader, analyzed as a user does.
Every expected number is worked out by hand in the comments."""

import json
import subprocess

import pytest

from mpiscope.analysis import simulate
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.simulate.scenario import CallSite, Scenario
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder

KINDS = ("late_sender", "late_receiver", "wait_at_barrier", "wait_at_nxn", "late_broadcast",
         "early_reduce")


def ns(seconds: float) -> int:
    return round(seconds * 1e9)


def per_rank_ns(rows: list[dict], keys) -> dict[int, dict[str, int]]:
    return {r["rank"]: {k: ns(r[k]) for k in keys} for r in rows}


def collectives_and_late_receiver() -> TraceBuilder:
    """Three ranks; every rank's measured interval is 10..1000 (990 ns)."""
    tb = TraceBuilder(ranks=3, hosts=["node0", "node0", "node1"])
    for r in range(3):
        tb.call(r, 0, 10, "MPI_Init", callsite="w.c:1")
        tb.call(r, 1000, 1010, "MPI_Finalize", callsite="w.c:99")
    # late receiver: rank 0's synchronous send blocks from 100 until rank 1 posts its
    # receive at 180 (80 ns); the message arrives at 200
    tb.send_call(0, 100, 200, dest=1, tag=3, nbytes=64, function="MPI_Ssend",
                 callsite="w.c:10")
    tb.recv_call(1, 180, 200, src=0, tag=3, nbytes=64, callsite="w.c:11")
    # barrier: ranks enter at 300, 320, 350 and all leave at 360
    for r, start in enumerate([300, 320, 350]):
        tb.collective(r, start, 360, "MPI_Barrier", callsite="w.c:20")
    # late broadcast: root 2 enters at 450, after ranks 0 and 1 (400, 420); all leave at 470
    for r, start in enumerate([400, 420, 450]):
        tb.collective(r, start, 470, "MPI_Bcast", root=2, sent=8 if r == 2 else 0,
                      received=0 if r == 2 else 8, callsite="w.c:30")
    # early reduce: root 0 enters at 500, the last contributor (rank 2) at 560; leave at 580
    for r, start in enumerate([500, 540, 560]):
        tb.collective(r, start, 580, "MPI_Reduce", root=0, sent=8, received=8 if r == 0 else 0,
                      callsite="w.c:40")
    return tb


@pytest.fixture(scope="module")
def waits_archive(tmp_path_factory):
    return collectives_and_late_receiver().write(tmp_path_factory.mktemp("otf2") / "trace")


def test_wait_states_per_rank(waits_archive):
    doc = Analysis(reader.load(waits_archive)).to_dict()
    got = per_rank_ns(doc["wait_states_per_rank"], KINDS)
    zero = dict.fromkeys(KINDS, 0)
    assert got == {
        # late receiver 180 - 100; barrier 350 - 300; broadcast 450 - 400;
        # early reduce 560 - 500
        0: {**zero, "late_receiver": 80, "wait_at_barrier": 50, "late_broadcast": 50,
            "early_reduce": 60},
        # barrier 350 - 320, broadcast 450 - 420; its receive was not early (send began
        # at 100, before it)
        1: {**zero, "wait_at_barrier": 30, "late_broadcast": 30},
        2: zero,  # last at the barrier, root of the broadcast, a contributor to the reduce
    }
    assert {k: ns(v) for k, v in doc["wait_states"].items()} == {
        "late_sender_s": 0, "late_receiver_s": 80, "wait_at_barrier_s": 80,
        "wait_at_nxn_s": 0, "late_broadcast_s": 80, "early_reduce_s": 60,
        # RMA's, none in this trace
        "wait_at_fence_s": 0, "late_post_s": 0, "early_wait_s": 0, "lock_contention_s": 0}


def test_breakdown_per_rank(waits_archive):
    doc = Analysis(reader.load(waits_archive)).to_dict()
    parts = ("total_s", "compute_s", "communication_s", "synchronization_s")
    assert per_rank_ns(doc["ranks"], parts) == {
        # MPI: Ssend 100 + Barrier 60 + Bcast 70 + Reduce 80 = 310; synchronization: the
        # whole barrier 60 + late receiver 80 + late broadcast 50 + early reduce 60 = 250
        0: {"total_s": 990, "compute_s": 990 - 310, "communication_s": 310 - 250,
            "synchronization_s": 250},
        # MPI: Recv 20 + Barrier 40 + Bcast 50 + Reduce 40 = 150; sync: barrier 40 + 30
        1: {"total_s": 990, "compute_s": 990 - 150, "communication_s": 150 - 70,
            "synchronization_s": 70},
        # MPI: Barrier 10 + Bcast 20 + Reduce 20 = 50; sync: the barrier's 10
        2: {"total_s": 990, "compute_s": 990 - 50, "communication_s": 50 - 10,
            "synchronization_s": 10},
    }


def test_who_is_late_at_each_collective(waits_archive):
    trace = reader.load(waits_archive)
    doc = Analysis(trace).to_dict()
    imb = {f["callsite"]: f for f in doc["findings"] + doc["minor"]
           if f["kind"] == "load_imbalance"}
    # 2 % of the 3 x 990 ns rank time is 59.4 ns: the barrier (80), the broadcast (80),
    # the reduce (60) and the late receiver (80, not a load-imbalance kind) qualify
    assert sorted(imb) == ["w.c:20", "w.c:30", "w.c:40"]
    # listed where balancing saves at least the noise floor (1% of the run here), minor
    # below it: the barrier, which nothing follows before the next wait, saves nothing
    floor = doc["noise_floor"]["floor_s"]
    listed = {f["callsite"] for f in doc["findings"] if f["kind"] == "load_imbalance"}
    assert listed == {s for s, f in imb.items() if f["estimated_savings_s"] >= floor > 0}
    assert "w.c:20" not in listed
    # rank 2 entered the barrier last, is the broadcast's root and the last contributor
    for site, waited in [("w.c:20", {0: 50, 1: 30}), ("w.c:30", {0: 50, 1: 30}),
                         ("w.c:40", {0: 60})]:
        f = imb[site]
        assert f["evidence"]["late_rank"] == 2 and f["evidence"]["late_share"] == 1.0
        assert {int(r): ns(s) for r, s in f["evidence"]["wait_by_rank_s"].items()} == waited
        # the saving: the replay with the computation of the phase the call runs in
        # balanced (mpiscope.analysis.simulate; tests/test_simulate.py checks the replay)
        r = simulate.replay(trace, Scenario(balance_at=(CallSite(f["function"], site),)))
        assert f["estimated_savings_s"] == max(r.replayed_s - r.predicted_s, 0.0)
        assert "rank 2 is late" in f["message"]


def skewed() -> TraceBuilder:
    """Rank 1's clock runs behind: its receive seems to complete (985) before rank 0 sent
    (1005). Both ranks: Init 0-10, Finalize from 2000."""
    tb = TraceBuilder(ranks=2)
    for r in range(2):
        tb.call(r, 0, 10, "MPI_Init", callsite="s.c:1")
        tb.call(r, 2000, 2010, "MPI_Finalize", callsite="s.c:9")
    tb.send_call(0, 1000, 1010, dest=1, tag=0, nbytes=8, send_time=1005, callsite="s.c:5")
    tb.recv_call(1, 900, 990, src=0, tag=0, nbytes=8, recv_time=985, callsite="s.c:6")
    return tb


def test_clock_skew_is_corrected_before_the_wait_states(tmp_path):
    archive = skewed().write(tmp_path / "trace")
    out = tmp_path / "r.json"
    p = subprocess.run(["mpiscope", "analyze", str(archive), "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    # the least shift that makes the message go forward: 1005 - 985 = 20 ns on rank 1
    assert doc["clock_skew"] == {"violations": 1, "offsets_ns": {"1": 20}, "remaining": 0}
    # shifted, rank 1's receive runs 920..1010: it waited for the send entered at 1000
    got = per_rank_ns(doc["wait_states_per_rank"], ("late_sender", "late_receiver"))
    assert got == {0: {"late_sender": 0, "late_receiver": 0},
                   1: {"late_sender": 1000 - 920, "late_receiver": 0}}
    parts = ("total_s", "compute_s", "communication_s", "synchronization_s")
    assert per_rank_ns(doc["ranks"], parts) == {
        0: {"total_s": 1990, "compute_s": 1980, "communication_s": 10, "synchronization_s": 0},
        # the shift moves the whole rank: still 1990 ns, 90 of them in the receive
        1: {"total_s": 1990, "compute_s": 1900, "communication_s": 10,
            "synchronization_s": 80},
    }
