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
