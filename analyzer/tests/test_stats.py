"""Per-function / per-call-site statistics, message sizes with bandwidth, comm matrix,
intra- vs inter-node split, the Hockney fit, and the eager/rendezvous switch (here on
synthetic networks; on a real ping-pong in test_protocol_switch.py)."""

import pytest

from mpiscope.analysis import stats
from mpiscope.archive import reader
from mpiscope_testing.scenarios import Scenario

ALPHA_NS = 1000  # latency of the synthetic network
BETA_B_PER_NS = 1.0  # 1 GB/s


def network(sizes, hosts=None):
    """Rank 0 sends each size to rank 1 (and to rank 2 if present); the transfer takes
    exactly alpha + n/beta once both sides are ready."""
    sc = Scenario(hosts=hosts or {})
    t = 0
    peers = [1, 2] if hosts else [1]
    for n in sizes:
        for p in peers:
            dur = int(ALPHA_NS + n / BETA_B_PER_NS)
            s = sc.call(0, "MPI_Send", t, t + dur, callsite="net.c:5", bytes_sent=n)
            r = sc.call(p, "MPI_Recv", t, t + dur, callsite="net.c:9", bytes_recv=n)
            sc.message(s, r, n, send_time=t, recv_time=t + dur)
            t += dur + 10
    return sc.trace()


def test_functions_and_callsites():
    t = network([100, 100, 5000])
    f = stats.functions(t).set_index("name")
    assert f.loc["MPI_Send", "calls"] == 3
    assert f.loc["MPI_Send", "bytes"] == 5200
    assert f.loc["MPI_Send", "time_s"] * 1e9 == pytest.approx(3 * ALPHA_NS + 5200)
    assert f.loc["MPI_Send", "max_s"] * 1e9 == pytest.approx(ALPHA_NS + 5000)
    cs = stats.callsites(t).set_index("callsite")
    assert cs.loc["net.c:9", "function"] == "MPI_Recv"
    assert cs.loc["net.c:9", "mean_s"] * 1e9 == pytest.approx((3 * ALPHA_NS + 5200) / 3)


def test_message_size_histogram_with_bandwidth_per_bucket():
    t = network([100, 100, 5000, 70000])
    h = stats.message_sizes(t).set_index("bucket_lo")
    assert list(h.index) == [64, 4096, 65536]
    assert h.loc[64, "messages"] == 2 and h.loc[64, "bucket_hi"] == 127
    # achieved bandwidth grows with size as latency is amortized
    assert h.loc[64, "bandwidth_MBps"] == pytest.approx(100 / (ALPHA_NS + 100) * 1e3)
    assert h.loc[65536, "bandwidth_MBps"] == pytest.approx(70000 / (ALPHA_NS + 70000) * 1e3)


def late_tail(n, hosts=None):
    """Ten n-byte messages from rank 0 to rank 1 arriving at network speed, except two
    received 20x later (say, the receiver posted early and waited in compute). Returns the
    trace and the network-speed transfer time (ns)."""
    fast = ALPHA_NS + n / BETA_B_PER_NS
    sc = Scenario(hosts=hosts or {})
    t = 0
    for i in range(10):
        took = int(fast * (20 if i in (3, 7) else 1))
        s = sc.call(0, "MPI_Send", t, t + 50, bytes_sent=n)
        r = sc.call(1, "MPI_Recv", t, t + took, bytes_recv=n)
        sc.message(s, r, n, send_time=t, recv_time=t + took)
        t += took + 10
    return sc.trace(), fast


def test_one_late_message_does_not_rule_its_bucket():
    """The bucket's bandwidth is that of the typical message; the slow tail shows in the
    90th percentile."""
    n = 4096
    trace, fast = late_tail(n)
    [row] = stats.message_sizes(trace).to_dict("records")
    assert row["messages"] == 10 and row["bytes"] == 10 * n
    assert row["median_transfer_s"] * 1e9 == pytest.approx(fast)
    assert row["p90_transfer_s"] * 1e9 == pytest.approx(20 * fast)
    assert row["bandwidth_MBps"] == pytest.approx(n / fast * 1e3)  # 1e3: B/ns -> MB/s


def test_one_late_message_does_not_rule_the_host_split():
    n = 1 << 17
    trace, fast = late_tail(n, hosts={0: "a", 1: "b"})
    [row] = stats.host_split(trace).to_dict("records")
    assert (row["path"], row["messages"]) == ("inter-node", 10)
    assert row["bandwidth_MBps"] == pytest.approx(n / fast * 1e3)


def test_hockney_fit_recovers_the_model():
    fit = stats.fit_hockney(network([8, 100, 5000, 70000, 500000]))
    assert fit.alpha_s == pytest.approx(ALPHA_NS * 1e-9, rel=1e-6)
    assert fit.beta_Bps == pytest.approx(BETA_B_PER_NS * 1e9, rel=1e-6)


def test_comm_matrix_and_host_split():
    t = network([100, 200000], hosts={0: "a", 1: "a", 2: "b"})
    m = stats.comm_matrix(t).set_index(["send_rank", "recv_rank"])
    assert m.loc[(0, 1), "messages"] == 2 and m.loc[(0, 2), "bytes"] == 200100
    split = stats.host_split(t).set_index("path")
    assert split.loc["intra-node", "messages"] == 2
    assert split.loc["inter-node", "messages"] == 2
    # bandwidth from the large messages
    assert split.loc["inter-node", "bandwidth_MBps"] == pytest.approx(
        200000 / (ALPHA_NS + 200000) * 1e3)


def test_scorep_ping_pong_shows_the_protocol_switch(scorep_trace):
    """The Score-P test trace: ping-pong of 16 KiB..2 MiB, one bucket per size."""
    t = reader.load(scorep_trace)
    h = stats.message_sizes(t)
    assert list(h["bucket_lo"]) == [2 ** k for k in range(14, 22)]
    assert (h["messages"] == 2).all()
    assert h["bandwidth_MBps"].iloc[-1] > h["bandwidth_MBps"].iloc[0]


SIZES = [2 ** k for k in range(21)]  # 1 B .. 1 MiB


def stepped(sizes, limit, *, hosts=None, per_size=3, inter_limit=None):
    """Rank 0 sends `per_size` messages of each size to rank 1, over shared memory
    (latency 250 ns, 10 GB/s), and to rank 2 on another host if `inter_limit` is given
    (a network: 20 us, 1 GB/s). Above a path's limit a rendezvous handshake adds a
    round trip and more: 4 latencies."""
    sc = Scenario(hosts=hosts or {})
    t = 0
    paths = [(1, limit, 250, 10.0)] + ([(2, inter_limit, 20000, 1.0)] if inter_limit else [])
    for n in sizes:
        for peer, lim, alpha, beta in paths:
            for _ in range(per_size):
                dur = int(alpha + n / beta + (4 * alpha if n > lim else 0))
                s = sc.call(0, "MPI_Send", t, t + dur, bytes_sent=n)
                r = sc.call(peer, "MPI_Recv", t, t + dur, bytes_recv=n)
                sc.message(s, r, n, send_time=t, recv_time=t + dur)
                t += dur + 10
    return sc.trace()


def test_protocol_switch_is_where_time_jumps_above_the_trend():
    [sw] = stats.protocol_switches(stepped(SIZES, limit=4000))
    assert (sw.path, sw.bytes, sw.last_below_bytes) == ("intra-node", 4096, 2048)
    # the trend of the smaller sizes is the eager network itself
    assert sw.alpha_s == pytest.approx(250e-9, rel=0.05)
    assert sw.beta_Bps == pytest.approx(10e9, rel=0.05)
    assert sw.predicted_s == pytest.approx((250 + 4096 / 10) * 1e-9, rel=0.05)
    assert sw.transfer_s == pytest.approx((250 + 4096 / 10 + 4 * 250) * 1e-9, rel=1e-3)
    assert sw.jump == pytest.approx(sw.transfer_s / sw.predicted_s)
    assert (sw.sizes_below, sw.sizes_above) == (12, 9)


def test_no_switch_on_a_network_without_one():
    assert stats.protocol_switches(stepped(SIZES, limit=2 ** 30)) == []


@pytest.mark.parametrize("sizes, why", [
    ([2 ** k for k in range(13)], "only one size above the switch"),
    ([2 ** k for k in range(9, 21)], "only three sizes below it"),
])
def test_no_switch_without_evidence_on_both_sides(sizes, why):
    assert stats.protocol_switches(stepped(sizes, limit=3000)) == [], why


def test_too_few_messages_per_size_are_no_evidence():
    assert stats.protocol_switches(stepped(SIZES, limit=4000, per_size=2)) == []


def test_each_path_has_its_own_switch():
    """Shared memory on one host, a slower network to the other host: two limits."""
    t = stepped(SIZES, limit=4000, hosts={0: "a", 1: "a", 2: "b"}, inter_limit=60000)
    found = {s.path: s.bytes for s in stats.protocol_switches(t)}
    assert found == {"intra-node": 4096, "inter-node": 65536}
