"""Wait states with Scalasca's definitions, on hand-made traces (exact) and on a real
MPI program with injected late senders and imbalance (call by call, as its own
timestamps show them)."""

import numpy as np
import pandas as pd
import pytest

from mpiscope.analysis import waitstates
from mpiscope.archive import reader
from mpiscope_testing import truth
from mpiscope_testing.scenarios import PROGRAMS, Scenario, marker_line, traced_run


def wait_of(trace, call):
    row = waitstates.compute(trace).per_call.iloc[call]
    return int(row["wait_ns"]), str(row["wait_kind"])


def test_late_sender_blocking_receive():
    sc = Scenario()
    recv = sc.call(0, "MPI_Recv", 100, 200, peer=1)
    send = sc.call(1, "MPI_Send", 150, 160, peer=0)
    sc.message(send, recv)
    assert wait_of(sc.trace(), recv) == (50, "late_sender")
    assert wait_of(sc.trace(), send) == (0, "nan")


def test_nonblocking_wait_is_split_into_waiting_and_transfer():
    sc = Scenario()
    irecv = sc.call(0, "MPI_Irecv", 100, 101)
    wait = sc.call(0, "MPI_Wait", 110, 200)
    isend = sc.call(1, "MPI_Isend", 170, 171)
    swait = sc.call(1, "MPI_Wait", 172, 175)
    sc.message(isend, irecv, send_complete=swait, recv_complete=wait)
    # the partner started sending 60 ns into the Wait; the remaining 30 ns are transfer
    assert wait_of(sc.trace(), wait) == (60, "late_sender")


def test_waitall_waits_for_its_latest_sender():
    sc = Scenario()
    r1 = sc.call(0, "MPI_Irecv", 300, 301)
    r2 = sc.call(0, "MPI_Irecv", 301, 302)
    waitall = sc.call(0, "MPI_Waitall", 310, 400)
    s1 = sc.call(1, "MPI_Send", 320, 330)
    s2 = sc.call(2, "MPI_Send", 350, 360)
    sc.message(s1, r1, recv_complete=waitall)
    sc.message(s2, r2, recv_complete=waitall)
    assert wait_of(sc.trace(), waitall) == (40, "late_sender")


def test_late_receiver_only_when_the_send_blocked():
    sc = Scenario()
    ssend = sc.call(0, "MPI_Ssend", 100, 200)
    recv = sc.call(1, "MPI_Recv", 180, 200)
    sc.message(ssend, recv, send_time=100)
    eager = sc.call(0, "MPI_Send", 300, 305)
    late_recv = sc.call(1, "MPI_Recv", 380, 390)
    sc.message(eager, late_recv, send_time=300)
    t = sc.trace()
    assert wait_of(t, ssend) == (80, "late_receiver")
    assert wait_of(t, eager) == (0, "nan")  # eager: it left before the receive was posted


def test_collective_wait_states():
    sc = Scenario()
    b0 = sc.call(0, "MPI_Bcast", 100, 145, root=1)
    sc.call(1, "MPI_Bcast", 130, 140, root=1)
    red0 = sc.call(0, "MPI_Reduce", 200, 260, root=0)
    sc.call(1, "MPI_Reduce", 250, 255, root=0)
    bar0 = sc.call(0, "MPI_Barrier", 300, 390)
    bar1 = sc.call(1, "MPI_Barrier", 370, 390)
    t = sc.trace()
    assert wait_of(t, b0) == (30, "late_broadcast")
    assert wait_of(t, red0) == (50, "early_reduce")
    assert wait_of(t, bar0) == (70, "wait_at_barrier")
    assert wait_of(t, bar1) == (0, "wait_at_barrier")
    totals = waitstates.compute(t).totals()
    assert totals["late_broadcast"] == pytest.approx(30e-9)
    assert totals["wait_at_barrier"] == pytest.approx(70e-9)


def test_large_count_collectives_wait_as_their_int_twins():
    """MPI-4's MPI_X_c (what mpi4py calls on MPICH 4) is MPI_X with 64-bit counts: the
    same wait states, blocking and nonblocking."""
    sc = Scenario()
    b0 = sc.call(0, "MPI_Bcast_c", 100, 145, root=1, kind="collective")
    sc.call(1, "MPI_Bcast_c", 130, 140, root=1, kind="collective")
    red0 = sc.call(0, "MPI_Reduce_c", 200, 260, root=0, kind="collective")
    sc.call(1, "MPI_Reduce_c", 250, 255, root=0, kind="collective")
    all0 = sc.call(0, "MPI_Allreduce_c", 300, 390, kind="collective")
    sc.call(1, "MPI_Allreduce_c", 370, 390, kind="collective")
    t = sc.trace()
    assert wait_of(t, b0) == (30, "late_broadcast")
    assert wait_of(t, red0) == (50, "early_reduce")
    assert wait_of(t, all0) == (70, "wait_at_nxn")
    assert {"MPI_Allreduce_c", "MPI_Iallreduce_c"} <= waitstates.NXN | waitstates.NBC_NXN
    assert "MPI_Ibcast_c" in waitstates.NBC_ONE2ALL and "MPI_Igatherv_c" in \
        waitstates.NBC_ALL2ONE


# --- a real MPI program, traced by the interposer -------------------------------------

ITERATIONS = 10


@pytest.fixture(scope="module")
def imbalance4(tmp_path_factory):
    return reader.load(traced_run("imbalance", 4, [str(ITERATIONS)],
                                  tmp_path_factory.mktemp("imb")))


# What the waits are is what this run's own timestamps show (mpiscope_testing.truth): how
# long a sleep really lasts, and when a busy machine lets the other rank reach its call,
# varies from run to run, so neither that rank 0 waits for rank 1's sends nor that rank 3
# is the one waited for at the Allreduce is asserted (a rank can be descheduled for
# longer than the 5 and 15 ms the program injects).

def test_injected_late_senders_are_found_at_their_source_lines(imbalance4):
    src = PROGRAMS / "imbalance.c"
    ws = waitstates.compute(imbalance4)
    sites = ws.per_callsite().set_index(["callsite", "wait_kind"])["wait_ns"]
    shown, _ = truth.late_sender(imbalance4)
    # call by call, as the trace shows them
    pc = ws.per_call
    assert pc["wait_ns"].to_numpy()[shown.index].tolist() == shown.tolist()
    receives = {f"imbalance.c:{marker_line(src, m)}" for m in ("recv", "waitall")}
    for site in receives:
        found = sites.get((site, "late_sender"), 0) / 1e9
        assert found == pytest.approx(truth.at_callsite(imbalance4, shown, site),
                                      rel=1e-9, abs=1e-12), site
    # the program receives at those two lines only: no late sender anywhere else
    late = pc[(pc["wait_kind"].astype(str) == "late_sender") & (pc["wait_ns"] > 0)]
    assert set(late["callsite"].astype(str)) <= receives


def test_injected_imbalance_is_waiting_at_the_allreduce(imbalance4):
    ws = waitstates.compute(imbalance4)
    shown, _ = truth.nxn(imbalance4, "MPI_Allreduce")
    # each rank's wait in each Allreduce: the last rank's entry minus its own
    pc = ws.per_call
    assert pc["wait_ns"].to_numpy()[shown.index].tolist() == shown.tolist()
    assert set(pc["wait_kind"].astype(str).to_numpy()[shown.index]) == {"wait_at_nxn"}
    per_rank = ws.per_rank()["wait_at_nxn"]
    expected = truth.by_rank(imbalance4, shown)
    for rank in range(4):
        assert per_rank.loc[rank] == pytest.approx(expected.get(rank, 0.0), rel=1e-9,
                                                   abs=1e-9)
    # the last rank into an instance waits nothing there
    last = imbalance4.collectives.loc[imbalance4.collectives[
        imbalance4.collectives["function"] == "MPI_Allreduce"].groupby("instance")[
        "start"].idxmax(), "call"]
    assert (pc["wait_ns"].to_numpy()[last.to_numpy()] == 0).all()
    assert ws.skew.remaining == 0


def _release_by_definition(held: pd.DataFrame) -> np.ndarray:
    """Lock contention's release, lock by lock: the last release at or before the
    acquisition of a conflicting lock another rank held on the same window and target."""
    out = np.full(len(held), np.nan)
    for i, me in held.iterrows():
        if me["remote"] < 0:
            continue
        other = held[(held["win"] == me["win"]) & (held["remote"] == me["remote"])
                     & (held["rank"] != me["rank"])
                     & ((held["lock_type"] == 0) | (me["lock_type"] == 0))
                     & (held["t_acq"] <= me["t_acq"]) & (held["t_rel"] <= me["t_acq"])]
        if len(other):
            out[i] = other["t_rel"].max()
    return out


def test_lock_contention_release_is_the_last_conflicting_one_before_acquisition():
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        t_acq = rng.integers(0, 1000, n).astype(float)
        t_rel = t_acq + rng.integers(0, 200, n)
        t_rel[rng.random(n) < 0.1] = np.nan  # never released in the trace
        held = pd.DataFrame({"rank": rng.integers(0, 4, n), "win": rng.integers(0, 2, n),
                             "remote": rng.integers(-1, 3, n),
                             "lock_type": rng.integers(0, 2, n), "t_acq": t_acq,
                             "t_rel": t_rel})
        np.testing.assert_array_equal(waitstates._last_conflicting_release(held),
                                      _release_by_definition(held))
