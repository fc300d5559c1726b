"""Clock skew: a receive that completes before its send began is corrected before the
wait states are computed, and the correction is reported."""

from mpiscope.analysis import skew, waitstates
from mpiscope_testing.scenarios import Scenario


def skewed():
    sc = Scenario()
    send = sc.call(0, "MPI_Send", 1000, 1010)
    # rank 1's clock runs 100 ns behind: its receive seems to end before the send began
    recv = sc.call(1, "MPI_Recv", 900, 990)
    sc.message(send, recv, send_time=1005, recv_time=985)
    return sc, recv


def test_violations_are_detected_and_removed():
    sc, _ = skewed()
    fixed = skew.detect_and_correct(sc.trace())
    assert fixed.correction.violations == 1
    assert fixed.correction.offsets_ns == {1: 20}  # the least shift that makes it causal
    assert fixed.correction.remaining == 0
    assert fixed.messages["recv_time"].iloc[0] == 1005
    assert fixed.calls["start"].iloc[1] == 920


def test_wait_states_use_corrected_clocks():
    sc, recv = skewed()
    ws = waitstates.compute(sc.trace())
    assert ws.skew.violations == 1
    assert ws.per_call["wait_ns"].iloc[recv] == 1000 - 920  # late sender after the shift


def test_consistent_trace_is_left_alone():
    sc = Scenario()
    send = sc.call(0, "MPI_Send", 100, 110)
    recv = sc.call(1, "MPI_Recv", 90, 130)
    sc.message(send, recv, send_time=105, recv_time=125)
    fixed = skew.detect_and_correct(sc.trace())
    assert fixed.correction == skew.SkewCorrection(0, {}, 0)


def test_a_chain_of_skewed_clocks_is_corrected_past_eight_ranks():
    """Each of 12 ranks' clocks runs 100 ns behind the one before, seen only by the
    messages from each rank to the next: rank k needs k x 80 ns, found however long the
    chain (it once stopped after 8 rounds, leaving violations)."""
    sc = Scenario()
    for k in range(11):
        send = sc.call(k, "MPI_Send", 1000 - 100 * k, 1010 - 100 * k)
        recv = sc.call(k + 1, "MPI_Recv", 900 - 100 * k, 990 - 100 * k)
        sc.message(send, recv, send_time=1005 - 100 * k, recv_time=985 - 100 * (k + 1) + 100)
    fixed = skew.detect_and_correct(sc.trace())
    assert fixed.correction.remaining == 0
    assert fixed.correction.offsets_ns == {k: 20 * k for k in range(1, 12)}


def test_receives_before_sends_both_ways_are_no_skew_and_left_as_recorded():
    """Rank 0 receives rank 1's message before rank 1 sent it, and rank 1 rank 0's: no
    shift of either clock makes both go forward (clock skew would make one of them later
    than recorded, not both earlier), so no rank is shifted — shifting them in turn only
    moved the whole run later — and every violation is reported as left."""
    sc = Scenario()
    s0 = sc.call(0, "MPI_Send", 100, 110)
    r0 = sc.call(0, "MPI_Recv", 120, 130)
    s1 = sc.call(1, "MPI_Send", 100, 110)
    r1 = sc.call(1, "MPI_Recv", 120, 130)
    sc.message(s0, r1, send_time=108, recv_time=104)
    sc.message(s1, r0, send_time=108, recv_time=104)
    fixed = skew.detect_and_correct(sc.trace())
    assert fixed.correction == skew.SkewCorrection(2, {}, 2)
    assert fixed.calls["start"].tolist() == [100, 120, 100, 120]
