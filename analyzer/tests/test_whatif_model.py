"""The replay's machine model by construction: traces whose transfer times follow a
known path give that path back from `fit`; each call's own time splits into its
function's overhead and noise, and a scenario changes only what it should; whatif's
options are validated in one line and its output states the machine it predicted."""

from pathlib import Path

import numpy as np
import pytest

from mpiscope.analysis import simulate
from mpiscope.analysis.simulate.model import INTER, INTRA, Machine, PathModel, fit, parse_rate
from mpiscope.analysis.simulate.scenario import Scenario
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder

LAT_NS = 30_000  # the known inter-node path: 30 us + n / 12.5 MB/s (100 Mbit/s)
BW = 12.5e6


def finish(tb: TraceBuilder, tmp_path: Path, name: str = "t"):
    for r in range(tb.num_ranks):
        last = max(e.t for e in tb.events[r])
        tb.call(r, last + 10, last + 20, "MPI_Finalize")
    return reader.load(tb.write(tmp_path / name), use_cache=False)


def pingpong(sizes, rounds: int, transfer_ns, noise_every: int = 0) -> TraceBuilder:
    """Rank 0 sends, rank 1 waits in MPI_Recv from before: each receive ends when the
    message arrives, `transfer_ns(bytes)` after the send; every `noise_every`-th
    message is late by 5 ms (a descheduled rank), which the low envelope must ignore."""
    tb = TraceBuilder(2, ["node0", "node1"])
    t, k = 1000, 0
    for n in sizes:
        for _ in range(rounds):
            late = 5_000_000 if noise_every and k % noise_every == 0 else 0
            arrive = t + int(transfer_ns(n)) + late
            tb.recv_call(1, t - 500, arrive, src=0, tag=1, nbytes=n)
            tb.send_call(0, t, t + 50, dest=1, tag=1, nbytes=n)
            t, k = arrive + 1000, k + 1
    return tb


SIZES = [1, 16, 256, 1024, 4096, 16384, 65536, 262144]


def test_fit_gives_back_the_path_the_trace_was_built_with(tmp_path):
    tb = pingpong(SIZES, 20, lambda n: LAT_NS + n / BW * 1e9, noise_every=4)
    path = fit(finish(tb, tmp_path)).paths[INTER]
    assert path.bandwidth_Bps == pytest.approx(BW, rel=0.01)
    assert path.latency_s == pytest.approx(LAT_NS / 1e9, rel=0.05)


def test_a_token_bucket_burst_does_not_raise_the_fitted_bandwidth(tmp_path):
    # up to 6 KB pass at 10x the rate (the bucket's burst), larger ones at the rate
    def shaped(n):
        return LAT_NS + (n / (10 * BW) if n <= 6056 else n / BW) * 1e9
    path = fit(finish(pingpong(SIZES, 20, shaped), tmp_path)).paths[INTER]
    assert path.bandwidth_Bps == pytest.approx(BW, rel=0.05)
    assert path.latency_s == pytest.approx(LAT_NS / 1e9, rel=0.1)


def test_an_application_with_two_halo_sizes_gets_a_path_that_times_both(tmp_path):
    """Himeno on the emulated 10 Mbit cluster sends halos of 17952 and 34848 bytes only,
    both mostly transfer; the tbf bucket passes their first 6 KB at once, so the line
    through the two sizes crosses zero at 6 KB. Neither size measures a latency: taking
    the smaller one's whole time for it (10.5 ms) replayed the run 71% too long. The path
    has no latency and a rate that times both sizes within a quarter of what they took."""
    rate = 1.25e6

    def shaped(n):
        return max(n - 6056, 0) / rate * 1e9
    tb = pingpong([17952, 34848], 20, shaped)
    path = fit(finish(tb, tmp_path)).paths[INTER]
    assert path.latency_s == 0
    for n in (17952, 34848):
        assert path.transfer_s(n) == pytest.approx(shaped(n) / 1e9, rel=0.25)


@pytest.mark.parametrize(("text", "bytes_per_s"), [
    ("100Mbit", 12.5e6), ("100Mbps", 12.5e6), ("100mbit", 12.5e6), ("1Gbit/s", 125e6),
    ("12.5MB", 12.5e6), ("12.5MB/s", 12.5e6), ("1GB", 1e9), ("1000", 1000.0),
])
def test_rates_read_as_hpc_people_write_them(text, bytes_per_s):
    assert parse_rate(text) == pytest.approx(bytes_per_s)


def _known() -> Machine:
    path = PathModel(1e-6, 1e9, 4096)
    return Machine("known", {INTRA: path, INTER: path}, fitted=True)


def _noisy_barriers(tmp_path: Path):
    """Two ranks, 10 barriers entered together at 20 us steps: each takes 2 us of its
    own, but the 3rd on rank 0 takes 9 us more (descheduled inside the call)."""
    tb = TraceBuilder(2)
    for i in range(10):
        t = 20_000 * (i + 1)
        for r in (0, 1):
            extra = 9000 if (r, i) == (0, 9) else 0
            tb.collective(r, t, t + 2000 + extra, "MPI_Barrier", callsite="b.c:1")
    return finish(tb, tmp_path)


def test_noise_is_kept_on_the_traced_hosts_and_dropped_on_request(tmp_path):
    trace = _noisy_barriers(tmp_path)
    kept = simulate.replay(trace, Scenario(cpu_factor=1.0), fitted=_known())
    assert kept.predicted_s == pytest.approx(kept.replayed_s)  # nothing changed
    dropped = simulate.replay(trace, Scenario(noise=False), fitted=_known())
    # the last barrier takes its overhead (1 us: the function's low own time after the
    # algorithm's 1 us) on rank 0 too: the run ends the 9 us of noise earlier
    assert (dropped.replayed_s - dropped.predicted_s) * 1e9 == pytest.approx(9000)
    calls = dropped.trace.calls
    own = (calls["end"] - calls["start"])[calls["function"].astype(str) == "MPI_Barrier"]
    assert set(own.tolist()) == {2000}


def test_noise_hides_behind_a_longer_wait(tmp_path):
    # rank 1 receives 10 messages, each 1 us after its send (the known latency); after
    # the first it is descheduled 3 us inside the receive. On a network 10 us slower,
    # that noise falls inside the longer wait: the receive ends when the message is in
    tb = TraceBuilder(2)
    for i in range(10):
        t = 100_000 * (i + 1)
        noise = 3000 if i == 0 else 0
        tb.send_call(0, t, t + 10, dest=1, tag=0, nbytes=0)
        tb.recv_call(1, t - 500, t + 1000 + noise, src=0, tag=0, nbytes=0)
    trace = finish(tb, tmp_path)
    slow = simulate.replay(trace, Scenario(latency_s=11e-6), fitted=_known())
    calls = slow.trace.calls
    recv = calls[calls["function"].astype(str) == "MPI_Recv"]
    assert recv["end"].tolist()[0] == 100_000 + 11_000
    # a 1 us faster network hides nothing: the noise stays
    fast = simulate.replay(trace, Scenario(latency_s=0.0), fitted=_known())
    calls = fast.trace.calls
    recv = calls[calls["function"].astype(str) == "MPI_Recv"]
    assert recv["end"].tolist()[0] == 100_000 + 3000


# ---------------------------------------------------------------- the CLI
def whatif(*args: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from mpiscope.cli.dispatch import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["whatif", *args])
    return rc, out.getvalue(), err.getvalue()


def _exchange(tmp_path: Path):
    """Rank 0: one large Isend completed by a Waitall; rank 1: a blocking Recv;
    then an Allreduce on both."""
    tb = TraceBuilder(2, ["a", "a"])
    tb.isend_call(0, 100, 110, dest=1, tag=3, nbytes=100_000, request=1, callsite="x.c:3")
    tb.enter(0, 120, "MPI_Waitall", "x.c:4")
    tb.isend_complete(0, 300_000, request=1)
    tb.leave(0, 300_000, "MPI_Waitall")
    tb.recv_call(1, 50, 200_000, src=0, tag=3, nbytes=100_000, callsite="x.c:9")
    for r in (0, 1):
        tb.collective(r, 400_000, 400_100, "MPI_Allreduce", sent=8, received=8,
                      callsite="x.c:5")
    return finish(tb, tmp_path)


@pytest.mark.parametrize(("args", "message"), [
    (["--aggregate", "MPI_Isend@x.c:3"], "sends no small message"),
    (["--nodes", "3"], "3 nodes for 2 ranks"),
    (["--remove", "MPI_Waitall@x.c:4"], "completes 1 requests started elsewhere"),
    (["--bandwidth", "100mb"], "unknown rate unit 'mb'"),
    (["--inter-node", "100Mbit,5us,6us"], "two latencies"),
    (["--inter-node", "100"], "needs a unit"),
    (["--inter-node", ","], "expected BANDWIDTH[,LATENCY]"),
])
def test_bad_scenarios_are_one_line_errors(tmp_path, args, message):
    rc, out, err = whatif(str(_exchange(tmp_path).path), *args)
    assert rc == 2 and message in err and err.count("\n") == 1, err


def test_the_output_states_the_predicted_machine(tmp_path):
    trace = _exchange(tmp_path)
    rc, out, err = whatif(str(trace.path), "--machine", "beowulf-2008")
    assert rc == 0, err
    text = " ".join(out.split())
    assert "Predicted machine beowulf-2008" in text
    assert "CPU factor 3 (computation takes 3x its measured time)" in text
    assert "4 nodes" in text


def test_inter_node_changes_only_the_inter_node_path(tmp_path):
    import json

    trace = _exchange(tmp_path)
    js = tmp_path / "w.json"
    rc, out, err = whatif(str(trace.path), "--nodes", "2", "--inter-node", "100Mbit,50us",
                          "--json", str(js))
    assert rc == 0, err
    d = json.loads(js.read_text())
    fitted, machine = d["fitted"]["paths"], d["machine"]["paths"]
    assert machine[INTER]["bandwidth_Bps"] == pytest.approx(12.5e6)
    assert machine[INTER]["latency_s"] == pytest.approx(50e-6)
    assert machine[INTRA] == fitted[INTRA]
    # the 100 kB message now crosses 100 Mbit/s: at least 8 ms
    assert d["predicted_s"] - d["replayed_s"] > 100_000 / 12.5e6 - 1e-3
    assert np.isfinite(d["predicted_s"])


def test_noise_drop_from_the_command_line(tmp_path):
    import json

    trace = _noisy_barriers(tmp_path)
    js = tmp_path / "w.json"
    rc, out, err = whatif(str(trace.path), "--noise", "drop", "--json", str(js))
    assert rc == 0, err
    d = json.loads(js.read_text())
    assert d["own_time"]["noise_kept"] is False
    assert d["own_time"]["noise_s"] == pytest.approx(9e-6)
    assert "noise 0.0000 s dropped (--noise drop)" in " ".join(out.split())


def test_noise_is_dropped_on_other_nodes_unless_kept(tmp_path):
    trace = _noisy_barriers(tmp_path)
    moved = simulate.replay(trace, Scenario(nodes=2), fitted=_known())
    kept = simulate.replay(trace, Scenario(nodes=2, noise=True), fitted=_known())
    assert (kept.predicted_s - moved.predicted_s) * 1e9 == pytest.approx(9000)
