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


def _allreduces(hashes, site="x.c:5"):
    """Two ranks calling MPI_Allreduce at `site` once per (in, out, prior) hashes."""
    sc = Scenario()
    for r in range(2):
        for i, (ih, oh, ph) in enumerate(hashes):
            sc.call(r, "MPI_Allreduce", 100 * i, 100 * i + 10, callsite=site,
                    in_hash=ih, out_hash=oh, prior_hash=ph)
    return sc


def test_redundant_collective_proved_by_hashes():
    # the first call fills the buffer (it held 5 before); the next three find the result
    # already there and write the same bytes again
    sc = _allreduces([(11, 22, 5), (11, 22, 22), (11, 22, 22), (11, 22, 22)])
    [f] = by_kind(Analysis(sc.trace()).findings, "redundant_collective")
    assert (f.function, f.callsite, f.calls) == ("MPI_Allreduce", "x.c:5", 6)  # 2nd-4th
    assert f.time_s == pytest.approx(6 * 10e-9)
    assert f.estimated_savings_s == pytest.approx(3 * 10e-9)  # per rank, nobody waits
    assert f.evidence["proof"] == "hash" and f.evidence["instances"] == 3
    assert "provably redundant in all 3 calls after the first of this run (4 calls per " \
        "rank in all)" in f.message
    assert "receive buffer already held the result" in f.message


def test_a_fresh_receive_buffer_is_not_redundant():
    # same input and result every time, but the buffer held something else at entry
    # (refilled by the program, e.g. with -1, before each call): deleting the call would
    # leave that, so nothing is redundant
    sc = _allreduces([(11, 22, 7)] * 4)
    assert by_kind(Analysis(sc.trace()).findings, "redundant_collective") == []


def test_without_prior_hashes_nothing_is_proved():
    # a trace from a tracer that did not record the receive buffer at entry
    sc = _allreduces([(11, 22, 0)] * 4)
    assert by_kind(Analysis(sc.trace()).findings, "redundant_collective") == []


def test_redundant_only_when_every_call_of_the_site_is():
    # the last call changes the result: the call site is not redundant (not "in 2 of 4")
    sc = _allreduces([(11, 22, 5), (11, 22, 22), (11, 22, 22), (12, 23, 22)])
    assert by_kind(Analysis(sc.trace()).findings, "redundant_collective") == []
    # one repeated call (set-up) is never claimed: kept under `minor`, saying why, with
    # no saving (nothing replayed for it)
    sc = _allreduces([(11, 22, 5), (11, 22, 22)])
    a = Analysis(sc.trace())
    assert by_kind(a.findings, "redundant_collective") == []
    [minor] = a.to_dict()["minor"]
    assert (minor["kind"], minor["callsite"], minor["calls"]) == (
        "redundant_collective", "x.c:5", 2)
    assert minor["minor_reason"] == "only 1 instance in this run (redundancy is claimed " \
        "from 2 on)"
    assert minor["estimated_savings_s"] == 0 and not minor["evidence"]["saving_replayed"]
    assert minor["evidence"]["share_of_run"] is None
    assert minor["message"].startswith(
        "MPI_Allreduce at x.c:5, in 1 instance of this run (2 calls per rank in all): on "
        "every rank its input and result equal those of the previous call")
    assert "Not claimed as redundant" in minor["message"]
    assert "no saving is stated" in minor["message"]


def test_barrier_directly_after_a_synchronizing_collective():
    sc = Scenario()
    for r in range(2):
        for i in range(3):
            t = 100 * i
            sc.call(r, "MPI_Allreduce", t, t + 10, callsite="y.c:1")
            sc.call(r, "MPI_Barrier", t + 10, t + 15, callsite="y.c:2")
            sc.call(r, "MPI_Bcast", t + 20, t + 30, callsite="y.c:3", root=0)
            sc.call(r, "MPI_Barrier", t + 30, t + 35, callsite="y.c:4")  # after a Bcast
        sc.call(r, "MPI_Allreduce", 400, 410, callsite="y.c:5")
        sc.call(r, "MPI_Barrier", 410, 415, callsite="y.c:6")  # once, at the end: not claimed
    [f] = by_kind(Analysis(sc.trace()).findings, "redundant_collective")
    assert (f.function, f.callsite, f.calls) == ("MPI_Barrier", "y.c:2", 6)
    assert "MPI_Barrier at y.c:2 is provably redundant in all 3 calls of this run (3 calls " \
        "per rank in all): each directly follows MPI_Allreduce" in f.message
    # the barrier at the end, once: under `minor`
    [minor] = by_kind(Analysis(sc.trace()).minor_findings, "redundant_collective")
    assert (minor.callsite, minor.evidence["proof"], minor.evidence["instances"]) == (
        "y.c:6", "barrier_after", 1)
    assert minor.evidence["minor_reason"].startswith("only 1 instance in this run")


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
    # the rules, whatever the noise floor lists (its own tests are by construction)
    found = analysis.all_findings
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


def test_failed_base_replay_is_kept_for_the_session(monkeypatch):
    """A trace whose own replay deadlocks by construction (each rank receives before it
    sends what the other receives): the base replay is tried once for the session, not
    once per finding asking for a saving, and the findings state no saving."""
    sc = Scenario()
    recv = {r: sc.call(r, "MPI_Recv", 0, 100, callsite="ring.c:3", bytes_recv=8)
            for r in range(2)}
    send = {r: sc.call(r, "MPI_Send", 110, 120, callsite="ring.c:4", bytes_sent=8)
            for r in range(2)}
    for r in range(2):
        sc.message(send[r], recv[1 - r], 8, send_time=110, recv_time=100)
    t = 200
    for i in range(3):  # the 2nd and 3rd provably redundant (their buffer held the result)
        for r in range(2):
            sc.call(r, "MPI_Allreduce", t, t + 10, callsite="x.c:5", in_hash=11, out_hash=22,
                    prior_hash=5 if i == 0 else 22)
        t += 100
    for _ in range(2):  # a barrier right after a synchronizing collective, every time
        for r in range(2):
            sc.call(r, "MPI_Allreduce", t, t + 10, callsite="y.c:1")
            sc.call(r, "MPI_Barrier", t + 10, t + 15, callsite="y.c:2")
        t += 100
    tried = []
    base_run = findings.simulate.base_run

    def counted(*args, **kwargs):
        tried.append(1)
        return base_run(*args, **kwargs)

    monkeypatch.setattr(findings.simulate, "base_run", counted)
    a = Analysis(sc.trace())
    a.to_json()
    # without a saving, each lies below any noise floor: listed as minor
    found = a.findings + a.minor_findings
    assert {(f.kind, f.callsite) for f in found} >= {("redundant_collective", "x.c:5"),
                                                     ("redundant_collective", "y.c:2")}
    assert len(found) >= 2  # findings that asked for a saving
    assert all(f.estimated_savings_s == 0 and "the trace cannot be replayed as it ran"
               in f.message for f in found)
    assert len(tried) == 1


def test_noise_floor_lists_only_what_the_run_could_show():
    """20 iterations of 900, 1000 and 1100 ns in turn (robust σ of an iteration 148.26
    ns: the median deviation is 100 ns), each with two provably redundant collectives: a
    10 ns Allreduce (19 x 10 ns saved, below the floor) and a 100 ns Bcast (1.9 µs)."""
    sc = Scenario()
    starts = [0]
    for i in range(20):
        starts.append(starts[-1] + (900, 1000, 1100)[i % 3])
    for r in range(2):
        for i, t in enumerate(starts[:-1]):
            prior = 5 if i == 0 else 22
            sc.call(r, "MPI_Allreduce", t, t + 10, callsite="k.c:1", in_hash=11,
                    out_hash=22, prior_hash=prior)
            sc.call(r, "MPI_Bcast", t + 10, t + 110, callsite="k.c:2", root=0, in_hash=22,
                    out_hash=22, prior_hash=prior)
    a = Analysis(sc.trace())
    assert a.loop is not None and a.loop.iterations == 20
    floor = a.noise_floor
    assert floor.iterations == 19
    assert floor.iteration_spread_s == pytest.approx(1.4826 * 100e-9 * 19 ** 0.5, rel=1e-9)
    assert floor.floor_s == pytest.approx(max(0.01 * floor.run_s, floor.iteration_spread_s))
    assert [f.callsite for f in by_kind(a.findings, "redundant_collective")] == ["k.c:2"]
    [minor] = by_kind(a.minor_findings, "redundant_collective")
    assert minor.callsite == "k.c:1" and minor.estimated_savings_s < floor.floor_s
    assert "below the noise floor" in minor.evidence["minor_reason"]
    assert all(f.estimated_savings_s >= floor.floor_s for f in a.findings)
    doc = a.to_dict()
    assert "k.c:1" in {f["callsite"] for f in doc["minor"]}
    assert doc["noise_floor"]["floor_s"] == pytest.approx(floor.floor_s)
    # every saving also as a share of the run
    [listed] = [f for f in doc["findings"] if f["kind"] == "redundant_collective"]
    share = listed["estimated_savings_s"] / floor.run_s
    assert f"{share:.1%} of the run" in listed["message"]


def test_no_aggregation_of_an_exchange_or_of_single_messages():
    """A ping-pong of MPI_Sendrecv (each call also receives the partner's reply) and two
    sends from different call sites back to back are no bursts; two back-to-back sends
    from one call site to one partner are one."""
    sc = Scenario()
    t = 0
    for _ in range(20):  # ping-pong: 0 <-> 1, one Sendrecv each
        a = sc.call(0, "MPI_Sendrecv", t, t + 500, callsite="pp.c:5")
        b = sc.call(1, "MPI_Sendrecv", t, t + 500, callsite="pp.c:5")
        sc.message(a, b, 8, send_time=t, recv_time=t + 400)
        sc.message(b, a, 8, send_time=t, recv_time=t + 450)
        t += 1000
    for _ in range(20):  # one message from each of two lines, back to back
        s1 = sc.call(0, "MPI_Send", t, t + 500, callsite="two.c:1", bytes_sent=8)
        s2 = sc.call(0, "MPI_Send", t + 500, t + 1000, callsite="two.c:2", bytes_sent=8)
        r1 = sc.call(1, "MPI_Recv", t, t + 500, callsite="two.c:9", bytes_recv=8)
        r2 = sc.call(1, "MPI_Recv", t + 500, t + 1000, callsite="two.c:9", bytes_recv=8)
        sc.message(s1, r1, 8, send_time=t, recv_time=t + 500)
        sc.message(s2, r2, 8, send_time=t + 500, recv_time=t + 1000)
        t += 2000
    for _ in range(20):  # a real burst of two from one line
        for k in range(2):
            s = sc.call(0, "MPI_Send", t + 500 * k, t + 500 * k + 500, callsite="burst.c:3",
                        bytes_sent=8)
            r = sc.call(1, "MPI_Recv", t + 500 * k, t + 500 * k + 500, callsite="burst.c:8",
                        bytes_recv=8)
            sc.message(s, r, 8, send_time=t + 500 * k, recv_time=t + 500 * k + 500)
        for rank in (0, 1):  # bursts apart
            sc.call(rank, "MPI_Barrier", t + 1000, t + 1100, callsite="burst.c:12")
        t += 2000
    a = Analysis(sc.trace())
    agg = by_kind(a.all_findings, "message_aggregation")
    assert [f.callsite for f in agg] == ["burst.c:3"]
    assert agg[0].evidence["bursts"] == 20 and agg[0].evidence["mean_burst"] == 2.0


def halo_ring(n: int, steps: int = 20, slow: int = 1) -> Scenario:
    """A periodic 1-D halo exchange on `n` ranks: each step every rank computes 1 ms (rank
    `slow` 3 ms), sends to both neighbours, then receives from both. Every rank has the
    same 2 partners; the slow one holds the critical path and its neighbours wait for it."""
    ms, us = 1_000_000, 1_000
    sc = Scenario()
    t = {}
    for r in range(n):
        sc.call(r, "MPI_Init", 0, 10 * us, callsite="halo.c:5")
        t[r] = 10 * us
    for _ in range(steps):
        sent: dict[tuple[int, int], tuple[int, int]] = {}  # (from, to) -> (Send call, start)
        for r in range(n):
            t[r] += (3 if r == slow else 1) * ms
            for k, peer in enumerate(((r + 1) % n, (r - 1) % n)):
                a = t[r] + 10 * us * k
                sent[(r, peer)] = (sc.call(r, "MPI_Send", a, a + 10 * us, callsite="halo.c:20",
                                           peer=peer, bytes_sent=8), a)
            t[r] += 20 * us
        for r in range(n):
            for peer in ((r - 1) % n, (r + 1) % n):
                send, at = sent[(peer, r)]
                start, t[r] = t[r], max(t[r], at) + 20 * us
                sc.message(send, sc.call(r, "MPI_Recv", start, t[r], callsite="halo.c:22",
                                         peer=peer, bytes_recv=8))
    end = max(t.values())
    for r in range(n):
        sc.call(r, "MPI_Finalize", end, end + 10 * us, callsite="halo.c:30")
    return sc


@pytest.mark.parametrize("ranks", [4, 8])
def test_no_hot_spot_in_a_ring_with_one_slow_rank(ranks):
    """The slow rank holds the critical path and both its neighbours wait for it (with 4
    ranks, 2 of the 3 others: half of them), but every rank has as many partners: no
    central rank serving the others. Its waiting is still a load imbalance."""
    a = Analysis(halo_ring(ranks).trace())
    assert a.critical_path.per_rank()["share"].idxmax() == 1
    found = a.all_findings
    assert not by_kind(found, "hot_spot")
    [f] = by_kind(found, "load_imbalance")
    assert (f.callsite, f.evidence["late_rank"]) == ("halo.c:22", 1)
    assert f.estimated_savings_s > 0
