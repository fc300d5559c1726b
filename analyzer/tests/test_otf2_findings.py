"""Findings on synthetic OTF2 archives: written with the OTF2 Python writer (tracegen),
read back by mpiscope's reader and analyzed as a user does (`Analysis(trace)` or
`mpiscope analyze --json`). Every expected number is worked out by hand."""

import json
import subprocess

import pytest

from mpiscope.analysis import simulate
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.simulate.scenario import CallSite
from mpiscope.analysis.simulate.scenario import Scenario as SimScenario
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder


def ns(seconds: float) -> int:
    return round(seconds * 1e9)


def analyze(tb: TraceBuilder, tmp_path) -> dict:
    return Analysis(reader.load(tb.write(tmp_path / "trace"))).to_dict()


def of_kind(doc: dict, kind: str, minor: bool = False) -> list[dict]:
    """The listed findings of `kind` (with `minor`: and those below the noise floor)."""
    return [f for f in doc["findings"] + (doc["minor"] if minor else []) if f["kind"] == kind]


def init_finalize(tb: TraceBuilder, finalize_at: int) -> None:
    """Init 0-10 and Finalize from `finalize_at` on every rank: measured 10..finalize_at."""
    for r in range(tb.num_ranks):
        tb.call(r, 0, 10, "MPI_Init")
        tb.call(r, finalize_at, finalize_at + 10, "MPI_Finalize")


# --- load imbalance: the rank that causes the waiting, weighted by the waiting ------------

def gather_with_one_late_sender() -> TraceBuilder:
    """Rank 0 receives from ranks 1, 2, 3 in turn, 5 times (every 1000 ns from 100).
    Rank 1 is a little late every time (10 ns); rank 3 is very late twice (600 ns)."""
    tb = TraceBuilder(ranks=4)
    init_finalize(tb, 5100)
    for i in range(5):
        t = 100 + 1000 * i
        late3 = 600 if i in (1, 3) else 0
        tb.recv_call(0, t, t + 20, src=1, tag=0, nbytes=8, callsite="gather.c:30")
        tb.send_call(1, t + 10, t + 15, dest=0, tag=0, nbytes=8, callsite="gather.c:20")
        tb.recv_call(0, t + 20, t + 40, src=2, tag=0, nbytes=8, callsite="gather.c:30")
        tb.send_call(2, t + 20, t + 25, dest=0, tag=0, nbytes=8, callsite="gather.c:20")
        tb.recv_call(0, t + 40, t + 60 + late3, src=3, tag=0, nbytes=8, callsite="gather.c:30")
        tb.send_call(3, t + 40 + late3, t + 45 + late3, dest=0, tag=0, nbytes=8,
                     callsite="gather.c:20")
    return tb


def test_point_to_point_names_the_sender_that_causes_the_waiting(tmp_path):
    doc = analyze(gather_with_one_late_sender(), tmp_path)
    # balancing saves nothing here (below): a minor finding, its evidence still whole
    assert not of_kind(doc, "load_imbalance")
    [f] = of_kind(doc, "load_imbalance", minor=True)
    assert (f["function"], f["callsite"]) == ("MPI_Recv", "gather.c:30")
    ev = f["evidence"]
    # rank 1 is waited for more often (5 times, 10 ns each), rank 3 far longer (2 x 600)
    assert ev["late_rank"] == 3
    assert {int(r): ns(s) for r, s in ev["caused_by_rank_s"].items()} == {3: 1200, 1: 50}
    assert ev["late_share"] == pytest.approx(1200 / 1250)
    assert {int(r): ns(s) for r, s in ev["wait_by_rank_s"].items()} == {0: 1250}
    # the saving is the replay with the computation of the phases these receives run in
    # balanced (no collective: the whole run), what `whatif` predicts for it; rank 3
    # computes no more than ranks 1 and 2 in all, it is late only twice: nothing to gain
    r = simulate.replay(reader.load(tmp_path / "trace"), SimScenario(
        balance_at=(CallSite("MPI_Recv", "gather.c:30"),)))
    assert r.replayed_s - r.predicted_s < 1e-9
    assert f["estimated_savings_s"] == max(r.replayed_s - r.predicted_s, 0.0)
    assert "replayed" in f["message"]
    # measured 5090 ns each; rank 0 spends 5 x 60 + 1200 in MPI, the senders 5 x 5:
    # rank 3 computes 5065 vs the mean (3590 + 3 x 5065) / 4, i.e. 368.75 ns more
    assert "rank 3 is late, causing 1.2 µs of it (96%" in f["message"]
    assert "waiting: rank 0 (1.25 µs)" in f["message"]
    assert "Rank 3 computes longer: 369 ns more than the mean" in f["message"]


def allreduce_late_from_its_own_mpi() -> TraceBuilder:
    """Three ranks, 5 iterations: ranks 0 and 1 compute 300 ns, then Allreduce until
    +800; rank 2 computes only 100 ns but then spends 600 ns in MPI_Comm_split, so it
    enters the Allreduce last, at +700."""
    tb = TraceBuilder(ranks=3)
    init_finalize(tb, 5100)
    for i in range(5):
        t = 100 + 1000 * i
        for r in (0, 1):
            tb.collective(r, t + 300, t + 800, "MPI_Allreduce", sent=8, received=8,
                          callsite="solve.c:50")
        tb.call(2, t + 100, t + 700, "MPI_Comm_split", callsite="solve.c:45")
        tb.collective(2, t + 700, t + 800, "MPI_Allreduce", sent=8, received=8,
                      callsite="solve.c:50")
    return tb


def test_a_late_rank_that_does_not_compute_longer_is_not_said_to(tmp_path):
    doc = analyze(allreduce_late_from_its_own_mpi(), tmp_path)
    # no imbalance in the computation: not listed, kept as minor with the reason
    assert not of_kind(doc, "load_imbalance")
    [f] = of_kind(doc, "load_imbalance", minor=True)
    ev = f["evidence"]
    assert (f["callsite"], ev["late_rank"], ev["late_share"]) == ("solve.c:50", 2, 1.0)
    # ranks 0 and 1 wait 700 - 300 = 400 ns in each of the 5 instances
    assert {int(r): ns(s) for r, s in ev["wait_by_rank_s"].items()} == {0: 2000, 1: 2000}
    assert {int(r): ns(s) for r, s in ev["caused_by_rank_s"].items()} == {2: 4000}
    # compute over 5090 ns: ranks 0, 1: 5090 - 5 x 500; rank 2: 5090 - 5 x (600 + 100)
    assert {int(r): ns(s) for r, s in ev["compute_by_rank_s"].items()} == {
        0: 2590, 1: 2590, 2: 1590}
    assert "rank 2 is late" in f["message"]
    assert "computes longer" not in f["message"]
    assert "Rank 2 does not compute longer than the others" in f["message"]
    # in the units people read (no "-1e-06 s")
    assert ev["minor_reason"] == (
        "rank 2 is late but computes 1 µs less than the ranks waiting for it (at least 1 µs "
        "more would explain the waiting): not a load imbalance — e.g. transfer "
        "time, descheduling or its own communication")


def score_p_style(iterations: int) -> TraceBuilder:
    """As Score-P writes it: no call sites. Three ranks, every 1000 ns: an Allreduce that
    rank 2 enters 200 ns after ranks 0 and 1, then rank 0 receives from rank 1, which
    sends 300 ns after rank 0 started waiting."""
    tb = TraceBuilder(ranks=3, creator="Score-P")
    init_finalize(tb, 1000 * iterations + 100)
    for i in range(iterations):
        t = 100 + 1000 * i
        for r, start in enumerate([t, t, t + 200]):
            tb.collective(r, start, t + 250, "MPI_Allreduce", sent=8, received=8)
        tb.recv_call(0, t + 300, t + 620, src=1, tag=0, nbytes=8)
        tb.send_call(1, t + 600, t + 610, dest=0, tag=0, nbytes=8)
    return tb


def test_without_call_sites_each_finding_keeps_its_own_culprits(tmp_path):
    doc = analyze(score_p_style(20), tmp_path)
    imb = {f["function"]: f for f in of_kind(doc, "load_imbalance", minor=True)}
    assert set(imb) == {"MPI_Allreduce", "MPI_Recv"}
    assert imb["MPI_Allreduce"]["evidence"]["late_rank"] == 2
    # the receive waited for rank 1's send, not for the collective's last arriver
    assert imb["MPI_Recv"]["evidence"]["late_rank"] == 1
    assert {int(r): ns(s) for r, s in imb["MPI_Recv"]["evidence"]["caused_by_rank_s"]
            .items()} == {1: 20 * 300}
    assert doc["main_loop"] == {"callsite": "", "function": "MPI_Allreduce", "iterations": 20}
    [freq] = of_kind(doc, "frequent_collective", minor=True)
    for f in doc["findings"] + doc["minor"]:
        assert f["callsite"] == ""
        assert " at  " not in f["message"] and " at (" not in f["message"]
        assert f"{f['function']} (no call site recorded)" in f["message"]


# --- frequent collectives: every iteration only, saving replayed by hand -----------------

def cg_loop(iterations: int, reduce_every: int = 1) -> TraceBuilder:
    """Two ranks, iteration i from t = 1000 (i + 1): an 8-byte Allreduce (cg.c:40) that
    rank 0 enters at t + 300 in odd and t + 100 in even iterations (rank 1 the other way
    round), everyone leaving at t + 400, then rank 0 sends 8 bytes to rank 1 (cg.c:44)."""
    tb = TraceBuilder(ranks=2)
    init_finalize(tb, 1000 * (iterations + 1))
    for i in range(iterations):
        t = 1000 * (i + 1)
        if i % reduce_every == reduce_every - 1:
            for r in (0, 1):
                work = 300 if (i + r) % 2 else 100
                tb.collective(r, t + work, t + 400, "MPI_Allreduce", sent=8, received=8,
                              callsite="cg.c:40")
        tb.send_call(0, t + 400, t + 450, dest=1, tag=0, nbytes=8, callsite="cg.c:44")
        tb.recv_call(1, t + 400, t + 450, src=0, tag=0, nbytes=8, callsite="cg.c:46")
    return tb


def test_frequent_collective_saving_is_the_replayed_gain(tmp_path):
    doc = analyze(cg_loop(30), tmp_path)
    [f] = of_kind(doc, "frequent_collective")
    assert (f["function"], f["callsite"], f["calls"]) == ("MPI_Allreduce", "cg.c:40", 60)
    # per iteration one rank is in it 100 ns, the other 300 ns
    assert ns(f["time_s"]) == 30 * (100 + 300)
    # the saving is what `whatif --collective-every` predicts for the k proposed
    from mpiscope.analysis import simulate
    from mpiscope.analysis.simulate.scenario import CallSite, CollectiveEvery, Scenario
    from mpiscope.archive import reader
    ev = f["evidence"]
    trace = reader.load(tmp_path / "trace")
    r = simulate.replay(trace, Scenario(collective_every=(
        CollectiveEvery(CallSite("MPI_Allreduce", "cg.c:40"), ev["k"]),)))
    assert f["estimated_savings_s"] == pytest.approx(r.replayed_s - r.predicted_s)
    assert ev["replayed_with_all_s"] == pytest.approx(r.measured_s)  # self-consistent
    best = max(ev["saving_by_k_s"].values())
    assert ev["k"] == min(int(k) for k, s in ev["saving_by_k_s"].items() if s >= 0.9 * best)
    assert (ev["iterations"], ev["per_iteration"]) == (30, 1)
    assert "runs in every iteration" in f["message"] and f"k={ev['k']}" in f["message"]
    assert "replayed" in f["message"]


@pytest.mark.parametrize("reduce_every", [1, 5])
def test_frequent_collective_only_for_a_collective_in_every_iteration(tmp_path, reduce_every):
    out = tmp_path / "r.json"
    archive = cg_loop(100, reduce_every).write(tmp_path / "trace")
    p = subprocess.run(["mpiscope", "analyze", str(archive), "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    # the loop has 100 iterations either way; the Allreduce every 5th runs 20 times
    assert doc["main_loop"]["iterations"] == 100
    frequent = of_kind(doc, "frequent_collective")
    if reduce_every == 1:
        assert [f["callsite"] for f in frequent] == ["cg.c:40"]
    else:
        assert frequent == []  # already reduced every 5th iteration: nothing to find


# --- message aggregation ----------------------------------------------------------------

def bursts() -> TraceBuilder:
    """3 bursts of 4 back-to-back 8-byte messages from rank 0 to rank 1 (halo.c:12), each
    taking 500 ns from send to arrival, a barrier after each burst."""
    tb = TraceBuilder(ranks=2)
    init_finalize(tb, 40_000)
    burst_rounds(tb, 100)
    return tb


def burst_rounds(tb: TraceBuilder, t: int) -> None:
    """bursts()'s messages and barriers from time `t`."""
    for _ in range(3):
        for _ in range(4):
            tb.send_call(0, t, t + 500, dest=1, tag=1, nbytes=8, callsite="halo.c:12")
            tb.recv_call(1, t, t + 500, src=0, tag=1, nbytes=8, callsite="halo.c:20")
            t += 510
        for r in (0, 1):
            tb.collective(r, t, t + 10, "MPI_Barrier", callsite="halo.c:30")
        t += 10_000


def test_one_run_for_the_saving_scale_bound_share_and_noise_floor(tmp_path):
    """The bursts after a 50 ms MPI_Init (set-up, outside the measured interval): the
    scale compares the measured interval with the same interval replayed (1: the replay
    is exact), the share and the noise floor use that interval, not the set-up."""
    tb = TraceBuilder(ranks=2)
    for r in range(2):
        tb.call(r, 0, 50_000_000, "MPI_Init")
        tb.call(r, 50_040_000, 50_040_010, "MPI_Finalize")
    burst_rounds(tb, 50_000_100)
    a = Analysis(reader.load(tb.write(tmp_path / "trace")))
    run = a.noise_floor.run_s
    assert run == pytest.approx(40_000e-9)  # Init's end .. Finalize's start
    base = simulate.base_run(a.trace)
    assert base.replayed_s > 0.05 and base.interval_s == pytest.approx(run, rel=0.01)
    [f] = [f for f in a.all_findings if f.kind == "message_aggregation"]
    assert f.evidence["replay_scale"] == pytest.approx(run / base.interval_s)
    assert f.evidence["share_of_run"] == pytest.approx(f.estimated_savings_s / run)
    assert f"{f.estimated_savings_s / run:.1%} of the run" in f.message


def test_no_burst_of_two_statements_a_caller_names_alike(tmp_path):
    """hpcc's PingPong: a helper sends a control message (pp.c:10) and then the ping
    (pp.c:11) and waits for the pong; named by the helper's caller (bench.c:40, the
    helper skipped as a layer) both sends are one call site, back to back, but no burst:
    two statements, and the second is answered at once. Through the same layer a loop
    sending from one statement (pp.c:20) still is one."""
    def via(frame: str, caller: str) -> list[tuple[str, str]]:
        return [(frame, "pingpong"), (caller, "bench")]

    tb = TraceBuilder(ranks=2)
    init_finalize(tb, 200_000)
    t = 100
    for _ in range(10):
        tb.send_call(0, t, t + 100, dest=1, tag=1, nbytes=4, callpath=via("pp.c:10", "bench.c:40"))
        tb.recv_call(1, t, t + 600, src=0, tag=1, nbytes=4, callpath=via("pp.c:30", "bench.c:40"))
        tb.send_call(0, t + 100, t + 200, dest=1, tag=1, nbytes=8,
                     callpath=via("pp.c:11", "bench.c:40"))
        tb.recv_call(1, t + 600, t + 700, src=0, tag=1, nbytes=8,
                     callpath=via("pp.c:31", "bench.c:40"))
        tb.send_call(1, t + 700, t + 800, dest=0, tag=1, nbytes=8,
                     callpath=via("pp.c:32", "bench.c:40"))
        tb.recv_call(0, t + 200, t + 1300, src=1, tag=1, nbytes=8,
                     callpath=via("pp.c:12", "bench.c:40"))
        t += 2000
    for _ in range(10):
        for _ in range(3):
            tb.send_call(0, t, t + 500, dest=1, tag=2, nbytes=8,
                         callpath=via("pp.c:20", "bench.c:50"))
            tb.recv_call(1, t, t + 500, src=0, tag=2, nbytes=8,
                         callpath=via("pp.c:21", "bench.c:50"))
            t += 510
        for r in (0, 1):
            tb.collective(r, t, t + 10, "MPI_Barrier", callsite="bench.c:60")
        t += 2000
    a = Analysis(reader.load(tb.write(tmp_path / "trace")), skip_frames="pingpong")
    agg = [f for f in a.all_findings if f.kind == "message_aggregation"]
    assert [(f.callsite, f.calls, f.evidence["bursts"]) for f in agg] == [("bench.c:50", 30, 10)]


def test_message_aggregation_from_an_otf2_archive(tmp_path):
    doc = analyze(bursts(), tmp_path)
    [f] = of_kind(doc, "message_aggregation")
    assert (f["function"], f["callsite"], f["calls"]) == ("MPI_Send", "halo.c:12", 12)
    assert ns(f["time_s"]) == 12 * 500
    # replayed with each burst as one message: per burst the 3 sends and receives before
    # its last (500 ns each: the fitted latency of an 8-byte message) go
    assert f["estimated_savings_s"] * 1e9 == pytest.approx(3 * (4 - 1) * 500, rel=0.02)
    assert f["evidence"]["model"] == "simulate (fitted machine)"
    assert f["evidence"]["top_pairs"] == [[0, 1, 12]]
    assert f["message"].startswith("3 bursts of 4.0 small messages (mean 8 B)")
