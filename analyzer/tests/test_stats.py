"""Per-function / per-call-site statistics, message sizes with bandwidth, comm matrix,
intra- vs inter-node split, and the Hockney fit."""

import pytest
from scenarios import SCOREP_PING_PONG, Scenario

from mpiscope import reader, stats

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


def test_scorep_ping_pong_shows_the_protocol_switch():
    """The Score-P test trace: ping-pong of 16 KiB..2 MiB, one bucket per size."""
    t = reader.load(SCOREP_PING_PONG)
    h = stats.message_sizes(t)
    assert list(h["bucket_lo"]) == [2 ** k for k in range(14, 22)]
    assert (h["messages"] == 2).all()
    assert h["bandwidth_MBps"].iloc[-1] > h["bandwidth_MBps"].iloc[0]
