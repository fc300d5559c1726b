"""Findings: each kind on a hand-made trace with hand-computed savings, and on a real MPI
program with injected problems: the provable ones at the right source lines, the ones
its timing decides as that run's own timestamps show them."""

import pytest

from mpiscope.analysis import findings
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing import truth
from mpiscope_testing.scenarios import PROGRAMS, Scenario, marker_line, traced_run


def by_kind(found, kind):
    return [f for f in found if f.kind == kind]


def test_redundant_collective_proved_by_hashes():
    sc = Scenario()
    for r in range(2):
        for i, h in enumerate([(11, 22), (11, 22), (11, 22), (12, 23)]):
            sc.call(r, "MPI_Allreduce", 100 * i, 100 * i + 10, callsite="x.c:5",
                    in_hash=h[0], out_hash=h[1])
    [f] = by_kind(Analysis(sc.trace()).findings, "redundant_collective")
    assert (f.function, f.callsite, f.calls) == ("MPI_Allreduce", "x.c:5", 4)  # 2nd, 3rd
    assert f.time_s == pytest.approx(4 * 10e-9)
    assert f.estimated_savings_s == pytest.approx(2 * 10e-9)  # per rank, nobody waits
    assert f.evidence["proof"] == "hash"


def test_barrier_directly_after_a_synchronizing_collective():
    sc = Scenario()
    for r in range(2):
        sc.call(r, "MPI_Allreduce", 0, 10, callsite="y.c:1")
        sc.call(r, "MPI_Barrier", 10, 15, callsite="y.c:2")
        sc.call(r, "MPI_Bcast", 20, 30, callsite="y.c:3", root=0)
        sc.call(r, "MPI_Barrier", 30, 35, callsite="y.c:4")  # after a Bcast: not proved
    [f] = by_kind(Analysis(sc.trace()).findings, "redundant_collective")
    assert (f.function, f.callsite, f.calls) == ("MPI_Barrier", "y.c:2", 2)
    assert "MPI_Barrier at y.c:2 is provably redundant in 1 instance: barrier directly " \
        "follows MPI_Allreduce" in f.message


def test_message_aggregation_saves_latency_per_burst():
    sc = Scenario()
    t = 0
    for _ in range(3):  # 3 bursts of 4 back-to-back 8-byte messages, each taking 500 ns
        for _ in range(4):
            s = sc.call(0, "MPI_Send", t, t + 500, callsite="halo.c:12", bytes_sent=8)
            r = sc.call(1, "MPI_Recv", t, t + 500, callsite="halo.c:20", bytes_recv=8)
            sc.message(s, r, 8, send_time=t, recv_time=t + 500)
            t += 510
        sc.call(0, "MPI_Barrier", t, t + 10)
        sc.call(1, "MPI_Barrier", t, t + 10)
        t += 10_000
    [f] = by_kind(Analysis(sc.trace()).findings, "message_aggregation")
    assert (f.function, f.callsite, f.calls) == ("MPI_Send", "halo.c:12", 12)
    # replayed with each burst sent as its last message: the 3 sends and receives before
    # it (500 ns each, the fitted latency of an 8-byte message) go, per burst
    assert f.estimated_savings_s == pytest.approx(3 * 3 * 500e-9, rel=0.02)
    assert "replayed" in f.message and f.evidence["model"] == "simulate (fitted machine)"


def test_frequent_small_collective_in_the_main_loop():
    sc = Scenario()
    for r in range(2):
        for it in range(30):
            t = 1000 * it
            work = 300 if (it + r) % 2 else 100  # ranks take turns being slow
            sc.call(r, "MPI_Allreduce", t + work, t + 400, callsite="cg.c:40",
                    bytes_sent=8, bytes_recv=8)
            sc.call(r, "MPI_Send" if r == 0 else "MPI_Recv", t + 400, t + 450,
                    callsite="cg.c:44")
    [f] = by_kind(Analysis(sc.trace()).findings, "frequent_collective")
    assert (f.function, f.callsite, f.calls) == ("MPI_Allreduce", "cg.c:40", 60)
    assert "k=10" in f.message and "replayed" in f.message
    # the replay (no messages here, so the ranks meet only in the Allreduce): a rank
    # works 600 ns plus its 300 or 100 ns (turn about) between two calls; a call ends 100
    # ns after the last rank entered (the measured cost). Kept: all 30 -> the measured
    # 29 x 1000 + 450 ns. Every k-th kept (and the last): a block of iterations costs the
    # slower rank's summed work + 100 ns; 600 + w per iteration, w summed per block:
    # k=10: blocks 0-9 (9 x 600 + 2000), 10-19, 20-29 (10 x 600 + 2000) -> 23750 ns
    # k=5: 0-4 (4 x 600 + 1100), then 5 blocks of 5 x 600 + 1100 -> 24650 ns
    # k=2: 0-1 (600 + 400), then 14 blocks of 2 x 600 + 400 -> 24950 ns
    # k=20 and 50 need 40 and 100 iterations; k=10 is the smallest with 90% of the best
    assert f.evidence["replayed_with_all_s"] * 1e9 == pytest.approx(29450)
    assert f.evidence["replayed_every_k_s"] * 1e9 == pytest.approx(23750)
    assert {int(k): v * 1e9 for k, v in f.evidence["saving_by_k_s"].items()} == \
        pytest.approx({2: 4500, 5: 4800, 10: 5700})
    assert f.estimated_savings_s * 1e9 == pytest.approx(5700)
    assert f.evidence["k"] == 10


def test_load_imbalance_names_who_is_late_and_who_waits():
    sc = Scenario()
    for r in range(3):
        for it in range(5):
            t = 1000 * it
            sc.call(r, "MPI_Allreduce", t + (900 if r == 2 else 100), t + 910,
                    callsite="solve.c:77")
    [f] = by_kind(Analysis(sc.trace()).findings, "load_imbalance")
    assert f.callsite == "solve.c:77"
    assert f.evidence["late_rank"] == 2 and f.evidence["late_share"] == 1.0
    assert f.evidence["wait_by_rank_s"][0] == pytest.approx(5 * 800e-9)
    assert f.evidence["caused_by_rank_s"] == {2: pytest.approx(2 * 5 * 800e-9)}
    # replayed balanced: every iteration's computation becomes the mean, rank 2's 800 ns
    # more shrink to a third (the Allreduce still ends 10 ns after the last entry)
    assert f.estimated_savings_s == pytest.approx(2 * 5 * 800e-9 / 3)
    assert "Balancing the computation" in f.message and "replayed" in f.message
    assert f.message.startswith("ranks wait 8 µs in MPI_Allreduce at solve.c:77 (wait "
                                "at nxn): rank 2 is late, causing 8 µs of it (100%)")


def test_findings_are_ranked_by_savings():
    sc = Scenario()
    for r in range(3):
        for it in range(5):
            t = 1000 * it
            sc.call(r, "MPI_Allreduce", t + (900 if r == 2 else 100), t + 910,
                    callsite="solve.c:77")
            sc.call(r, "MPI_Barrier", t + 910, t + 920, callsite="solve.c:78")
    found = Analysis(sc.trace()).findings
    assert [f.kind for f in found] == ["load_imbalance", "redundant_collective"]
    savings = [f.estimated_savings_s for f in found]
    assert savings == sorted(savings, reverse=True)


def test_injected_problems_of_a_real_program(tmp_path):
    t = reader.load(traced_run("imbalance", 4, ["8"], tmp_path))
    src = PROGRAMS / "imbalance.c"
    site = {name: f"imbalance.c:{marker_line(src, name)}"
            for name in ("allreduce", "barrier", "bcast", "recv", "waitall")}
    analysis = Analysis(t)
    found = analysis.findings
    # provable whatever the scheduling: the barrier right after the Allreduce, the same
    # value broadcast every iteration
    red = {f.callsite: f for f in by_kind(found, "redundant_collective")}
    assert red[site["barrier"]].evidence["proof"] == "barrier_after"
    assert red[site["barrier"]].calls == 4 * 8
    assert red[site["bcast"]].evidence["proof"] == "hash"
    assert red[site["bcast"]].calls == 4 * 7  # every call after the first
    # every saving is replayed
    assert all("replayed" in f.message for f in found)
    # The imbalance the program injects (rank 3 sleeps 15 ms longer before the
    # Allreduce; rank 1 5 ms before each send to rank 0) is what a busy machine lets it
    # be: a rank can be descheduled for longer. So each site's finding is checked
    # against the waiting the trace itself shows there: reported where that reaches the
    # reporting threshold, with each culprit's share as the trace shows it.
    imb = {f.callsite: f for f in by_kind(found, "load_imbalance")}
    threshold = findings.NOTABLE_SHARE * analysis.ranks["total_s"].sum()
    shown = {"allreduce": truth.nxn(t, "MPI_Allreduce"), "recv": truth.late_sender(t),
             "waitall": truth.late_sender(t)}
    for name, (waits, culprits) in shown.items():
        wait_s = truth.at_callsite(t, waits, site[name])
        if wait_s < threshold * (1 - 1e-6):
            assert site[name] not in imb, (name, wait_s, threshold)
            continue
        if wait_s <= threshold * (1 + 1e-6):
            continue  # at the threshold itself: either way
        ev = imb[site[name]].evidence
        assert sum(ev["wait_by_rank_s"].values()) == pytest.approx(wait_s, rel=1e-9), name
        caused = truth.caused(t, waits, culprits, site[name])
        assert ev["caused_by_rank_s"] == pytest.approx(caused, rel=1e-9), name
        assert ev["late_rank"] == max(caused, key=caused.get), name
    # only rank 1 sends to rank 0's receive
    if site["recv"] in imb:
        assert imb[site["recv"]].evidence["late_rank"] == 1
