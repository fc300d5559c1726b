"""`whatif`'s scenarios and the findings' replayed savings on real MPI runs: the
programs in programs/ (loadsplit.c: the same work split unevenly or evenly; bursts.c:
bursts of small messages; masterworker.c: a slow master), traced, replayed, and the
prediction checked against what the scenario means, worked out from the same trace's
times (never against a second run, which a busy machine slows differently)."""

import contextlib
import io
import json

import numpy as np
import pytest

from mpiscope.analysis import simulate
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.simulate.scenario import CallSite, Scenario
from mpiscope.archive import reader
from mpiscope.archive.trace import Trace
from mpiscope.cli.dispatch import main
from mpiscope_testing.scenarios import PROGRAMS, marker_line, traced_run
from mpiscope_testing.scenarios import Scenario as ScenarioTrace


def mpiscope(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def iterations_s(trace) -> np.ndarray:
    """The time from one Allreduce's end (the last rank out) to the next's: the
    iterations."""
    ends = trace.collectives.groupby("instance")["end"].max().sort_index().to_numpy()
    return np.diff(ends) / 1e9


def balancing_gain_s(trace) -> np.ndarray:
    """What balancing the computation saves per iteration, from the measured trace alone
    (loadsplit: each iteration, compute, then one Allreduce). In iteration k, rank r
    computes c[r] (from its exit out of Allreduce k-1 to its entry into Allreduce k) and
    had left Allreduce k-1 e[r] after the last rank entered it (its wake-up: long for
    some rank on a busy machine). The last entry into Allreduce k comes max(e + c) after
    the last entry into k-1; with every rank computing the mean, max(e) + mean(c). The
    exits out of k follow the last entry by the same e either way, so the iteration
    shortens by max(e + c) - max(e) - mean(c): the slowest rank's extra computation over
    the mean (75 ms by construction here), less the wake-up the balanced run now waits
    for."""
    co = trace.collectives
    top = trace.calls[trace.calls["depth"] == 0].set_index("call")
    prev_end = top.sort_values(["rank", "start"]).groupby("rank")["end"].shift()
    last_in = co.groupby("instance")["start"].transform("max")
    co = co.assign(compute=co["start"] - co["call"].map(prev_end), wake=co["end"] - last_in)
    c = co.pivot(index="instance", columns="rank", values="compute").to_numpy()[1:] / 1e9
    e = co.pivot(index="instance", columns="rank", values="wake").to_numpy()[:-1] / 1e9
    return (e + c).max(axis=1) - e.max(axis=1) - c.mean(axis=1)


def test_balance_predicts_the_gain_of_balancing(tmp_path):
    """Rank r sleeps (r + 1) units of 50 ms per iteration (the mean: 2.5 units). The
    replay of that run with --balance shortens each iteration by what balancing the
    computation saves by the trace's own times (`balancing_gain_s`). (Ground truth from
    the same trace: a second, evenly split run would differ by however busy the machine
    was during each; a few ms of scheduling delay per Allreduce of 4 polling ranks on 2
    cores, tens of ms when loaded.)"""
    unit = "50000"
    uneven = reader.load(traced_run("loadsplit", 4, ["8", "imbalanced", unit], tmp_path))
    r = simulate.replay(uneven, Scenario(balance=True))
    predicted = iterations_s(simulate.replay(uneven).trace) - iterations_s(r.trace)
    truth = balancing_gain_s(uneven)
    assert len(predicted) == 7 and len(truth) == 7
    assert predicted == pytest.approx(truth, abs=2e-3), (predicted, truth)
    # and the finding says so, with the replayed saving
    [f] = [f for f in Analysis(uneven).findings if f.kind == "load_imbalance"]
    assert f.evidence["late_rank"] == 3 and "replayed" in f.message
    # (the finding balances the phases its Allreduce runs in: all but the last, after
    # the last Allreduce; compared with that replay, not within 5% of balancing every
    # phase, which a busy machine's noise in the last phase can exceed; and no saving
    # where the exposed wake-ups outweigh the imbalance, as they can on a busy machine)
    at = simulate.replay(uneven, Scenario(balance_at=(CallSite(f.function, f.callsite),)))
    assert f.estimated_savings_s == pytest.approx(max(at.replayed_s - at.predicted_s, 0.0),
                                                  rel=1e-6, abs=1e-9)


def test_aggregate_sends_each_burst_as_one_message(tmp_path):
    trace_dir = traced_run("bursts", 2, ["20"], tmp_path)
    site = f"MPI_Send@bursts.c:{marker_line(PROGRAMS / 'bursts.c', 'send')}"
    pred, js = tmp_path / "pred", tmp_path / "w.json"
    rc, out, err = mpiscope("whatif", str(trace_dir), "--aggregate", site,
                            "--out", str(pred), "--json", str(js))
    assert rc == 0, err
    d = json.loads(js.read_text())
    assert {"measured_s", "replayed_s", "predicted_s", "scenario"} <= d.keys()
    assert d["scenario"]["aggregate"] == [site]
    # 8 sends of 8 bytes per iteration became one of 64: fewer calls, no slower
    assert d["predicted_s"] <= d["replayed_s"] * 1.001
    p = reader.load(pred, use_cache=False)
    assert len(p.messages) == 20 and set(p.messages["bytes"]) == {64}
    assert len(reader.load(trace_dir).messages) == 8 * 20
    # the prediction is a trace like any other: analyze and compare read it
    rc, out, err = mpiscope("analyze", str(pred), "--json", str(tmp_path / "a.json"))
    assert rc == 0, err
    rc, out, err = mpiscope("compare", str(trace_dir), str(pred), "--html",
                            str(tmp_path / "c.html"))
    assert rc == 0, err
    # the finding's saving is that replay (listed, or minor if this run's noise is larger)
    a = Analysis(reader.load(trace_dir))
    [f] = [f for f in a.all_findings if f.kind == "message_aggregation"]
    # scaled to the measured run and bounded by the calls' time (findings' "Savings")
    gain = max(d["replayed_s"] - d["predicted_s"], 0) * d["measured_s"] / d["replayed_s"]
    assert f.estimated_savings_s == pytest.approx(min(gain, f.evidence["saving_bound_s"]))
    assert f.estimated_savings_s <= f.time_s


def test_nodes_places_ranks_block_wise(tmp_path):
    """4 ranks on 2 nodes: ranks 0, 1 on the first, 2, 3 on the second; the workers 2
    and 3 talk to the master across nodes now, on the machine's inter-node path (10 ms
    latency in this machine file)."""
    trace_dir = traced_run("masterworker", 4, ["30"], tmp_path)
    js, pred = tmp_path / "w.json", tmp_path / "pred"
    machine = tmp_path / "slow.toml"
    machine.write_text('name = "slow-between"\n[network.intra-node]\nlatency = "1us"\n'
                       'bandwidth = "1GB"\n[network.inter-node]\nlatency = "10ms"\n'
                       'bandwidth = "1GB"\n')
    rc, out, err = mpiscope("whatif", str(trace_dir), "--machine", str(machine),
                            "--nodes", "2", "--json", str(js), "--out", str(pred))
    assert rc == 0, err
    d = json.loads(js.read_text())
    assert d["scenario"]["nodes"] == 2 and d["machine"]["nodes"] == 2
    hosts = reader.load(pred, use_cache=False).ranks.sort_values("rank")["host"]
    assert hosts.astype(str).tolist() == ["node0", "node0", "node1", "node1"]
    # in the predicted trace, what crosses nodes takes the 10 ms at least; what stays
    # on node 0 (rank 1 and the master) does not: once both sides are there (a task
    # or request can wait long for the busy master to post its receive; a busy
    # machine's time), it takes no longer than it did when traced, as the 1 us path is
    # no slower than this machine's
    m = reader.load(pred, use_cache=False).messages
    traced = reader.load(trace_dir).messages
    cols = ["send_rank", "recv_rank", "tag"]
    assert m[cols].reset_index(drop=True).equals(traced[cols].reset_index(drop=True))
    node = np.array([0, 0, 1, 1])
    across = node[m["send_rank"].to_numpy()] != node[m["recv_rank"].to_numpy()]
    took = (m["recv_time"] - m["send_time"]).to_numpy() / 1e9
    assert across.any() and (took[across] >= 10e-3).all()

    def once_both_there(m):
        return (m["recv_leave"] - np.maximum(m["send_enter"], m["recv_enter"])).to_numpy() / 1e9

    assert (~across).any()
    assert (once_both_there(m)[~across] <= once_both_there(traced)[~across] + 1e-4).all()
    rc, out, err = mpiscope("whatif", str(trace_dir), "--nodes", "0")
    assert rc == 2 and "--nodes" in err and err.count("\n") == 1


def master_worker(tasks: int = 30) -> Trace:
    """Built by construction (a real run's hot spot depends on how the 2 cores were
    shared): rank 0 prepares each task for 12 ms and hands it to worker 1 + t % 3, each
    worker works 6 ms on it and sends the result back; the master collects a worker's
    result before handing it its next task. The 3 workers queue at rank 0."""
    sc = ScenarioTrace()
    ms, us = 1_000_000, 1_000
    for r in range(4):
        sc.call(r, "MPI_Init", 0, 10 * us, callsite="mw.c:5")
    cur = 10 * us
    worker_free = {w: 10 * us for w in (1, 2, 3)}  # where each worker's next Recv starts
    pending: dict[int, tuple[int, int]] = {}  # worker -> (its result Send call, send end)
    for t in range(tasks):
        w = 1 + t % 3
        cur += 12 * ms  # preparing the task
        if w in pending:
            send, sent = pending.pop(w)
            start = cur
            cur = max(cur, sent) + 20 * us
            sc.message(send, sc.call(0, "MPI_Recv", start, cur, callsite="mw.c:29", peer=w))
        task = sc.call(0, "MPI_Send", cur, cur + 10 * us, callsite="mw.c:41", peer=w)
        cur += 10 * us
        got = cur + 20 * us
        sc.message(task, sc.call(w, "MPI_Recv", worker_free[w], got, callsite="mw.c:41",
                                 peer=0))
        done = got + 6 * ms  # the work
        pending[w] = (sc.call(w, "MPI_Send", done, done + 10 * us, callsite="mw.c:29",
                              peer=0), done + 10 * us)
        worker_free[w] = done + 10 * us
    for w, (send, sent) in sorted(pending.items()):
        start = cur
        cur = max(cur, sent) + 20 * us
        sc.message(send, sc.call(0, "MPI_Recv", start, cur, callsite="mw.c:29", peer=w))
    end = max(cur, *worker_free.values())
    for r in range(4):
        sc.call(r, "MPI_Finalize", end, end + 10 * us, callsite="mw.c:50")
    return sc.trace()


def test_hot_spot_on_master_worker():
    trace = master_worker()
    doc = Analysis(trace).to_dict()
    [f] = [f for f in doc["findings"] if f["kind"] == "hot_spot"]
    ev = f["evidence"]
    assert ev["rank"] == 0 and ev["senders"] == [1, 2, 3]
    assert ev["median_partners"] == 1  # each worker talks to the master only
    assert ev["critical_path_share"] >= 0.5 and f["on_critical_path"]
    assert f["message"].startswith("rank 0 is a hot spot")
    assert "replayed" in f["message"]
    # the saving: the master's computation shared out among the 4 ranks, replayed and
    # scaled to the measured run (docs/simulate.md), never more than its bound
    r = simulate.replay(trace, Scenario(spread_rank=0))
    gain = (r.replayed_s - r.predicted_s) * r.measured_s / r.replayed_s
    assert f["estimated_savings_s"] == pytest.approx(min(gain, ev["saving_bound_s"]))
    assert f["estimated_savings_s"] > 0


def test_findings_off_the_critical_path_say_so(tmp_path):
    trace = reader.load(traced_run("masterworker", 4, ["30"], tmp_path))
    doc = Analysis(trace).to_dict()
    for f in doc["findings"]:
        off = "cannot shorten the run" in f["message"]
        # null: a finding of the whole run (descheduled) has no calls to find on the path
        assert off == (f["on_critical_path"] is False), f


def test_balanced_replay_keeps_the_total_computation(tmp_path):
    trace = reader.load(traced_run("loadsplit", 4, ["10", "imbalanced"], tmp_path))
    r = simulate.replay(trace, Scenario(balance=True))
    assert np.isclose(r.ranks["predicted_compute_s"].sum(),
                      r.ranks["replayed_compute_s"].sum(), rtol=0.01)
