"""`whatif`'s scenarios and the findings' replayed savings on real MPI runs: the
programs in programs/ (loadsplit.c: the same work split unevenly or evenly; bursts.c:
bursts of small messages; masterworker.c: a slow master), traced, replayed, and where a
variant of the program does what the scenario predicts, measured against it."""

import contextlib
import io
import json

import numpy as np
import pytest

from mpiscope.analysis import simulate
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.simulate.scenario import Scenario
from mpiscope.archive import reader
from mpiscope.cli.dispatch import main
from mpiscope_testing.scenarios import PROGRAMS, marker_line, traced_run


def mpiscope(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def iteration_s(trace) -> float:
    """The median time from one Allreduce's end (the last rank out) to the next's: an
    iteration, robust to the odd one a busy machine stretches."""
    ends = trace.collectives.groupby("instance")["end"].max().sort_index().to_numpy()
    return float(np.median(np.diff(ends))) / 1e9


def test_balance_predicts_the_balanced_variant(tmp_path):
    """Rank r sleeps (r + 1) units of 50 ms per iteration; the balanced variant gives
    every rank the mean (2.5 units). The replay of the uneven run with --balance predicts
    the gain per iteration the even run shows (75 ms by construction), within 30% of
    that measured gain. (Units this long keep a busy machine's scheduling delays, a few
    ms per Allreduce of 4 polling ranks on 2 cores, small beside the gain.)"""
    (tmp_path / "uneven").mkdir()
    (tmp_path / "even").mkdir()
    unit = "50000"
    uneven = reader.load(traced_run("loadsplit", 4, ["8", "imbalanced", unit],
                                    tmp_path / "uneven"))
    even = reader.load(traced_run("loadsplit", 4, ["8", "balanced", unit], tmp_path / "even"))
    r = simulate.replay(uneven, Scenario(balance=True))
    predicted = iteration_s(simulate.replay(uneven).trace) - iteration_s(r.trace)
    measured = iteration_s(uneven) - iteration_s(even)
    assert measured > 0.03  # the variants do differ (75 ms by construction)
    assert predicted == pytest.approx(measured, rel=0.3), (predicted, measured)
    # and the finding says so, with the replayed saving
    [f] = [f for f in Analysis(uneven).findings if f.kind == "load_imbalance"]
    assert f.evidence["late_rank"] == 3 and "replayed" in f.message
    # (the finding balances the phases its Allreduce runs in: all but the last, after
    # the last Allreduce, where there is nothing to balance)
    assert f.estimated_savings_s == pytest.approx(r.replayed_s - r.predicted_s, rel=0.05)


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
    # the finding's saving is that replay
    [f] = [f for f in Analysis(reader.load(trace_dir)).findings
           if f.kind == "message_aggregation"]
    assert f.estimated_savings_s == pytest.approx(max(d["replayed_s"] - d["predicted_s"], 0))


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
    # on node 0 (rank 1 and the master) need not
    m = reader.load(pred, use_cache=False).messages
    node = np.array([0, 0, 1, 1])
    across = node[m["send_rank"].to_numpy()] != node[m["recv_rank"].to_numpy()]
    took = (m["recv_time"] - m["send_time"]).to_numpy() / 1e9
    assert across.any() and (took[across] >= 10e-3).all()
    assert np.median(took[~across]) < 10e-3
    rc, out, err = mpiscope("whatif", str(trace_dir), "--nodes", "0")
    assert rc == 2 and "--nodes" in err and err.count("\n") == 1


def test_hot_spot_on_master_worker(tmp_path):
    """The master prepares each task for 12 ms, a worker works 6 ms on it: 3 workers
    queue at rank 0, which holds the critical path."""
    trace = reader.load(traced_run("masterworker", 4, ["30"], tmp_path))
    doc = Analysis(trace).to_dict()
    [f] = [f for f in doc["findings"] if f["kind"] == "hot_spot"]
    ev = f["evidence"]
    assert ev["rank"] == 0 and ev["senders"] == [1, 2, 3]
    assert ev["critical_path_share"] >= 0.5 and f["on_critical_path"]
    assert f["message"].startswith("rank 0 is a hot spot")
    assert "replayed" in f["message"]
    # the saving: the master's computation shared out among the 4 ranks, replayed
    r = simulate.replay(trace, Scenario(spread_rank=0))
    assert f["estimated_savings_s"] == pytest.approx(r.replayed_s - r.predicted_s)
    assert f["estimated_savings_s"] > 0


def test_findings_off_the_critical_path_say_so(tmp_path):
    trace = reader.load(traced_run("masterworker", 4, ["30"], tmp_path))
    doc = Analysis(trace).to_dict()
    for f in doc["findings"]:
        off = "cannot shorten the run" in f["message"]
        assert off == (not f["on_critical_path"]), f


def test_balanced_replay_keeps_the_total_computation(tmp_path):
    trace = reader.load(traced_run("loadsplit", 4, ["10", "imbalanced"], tmp_path))
    r = simulate.replay(trace, Scenario(balance=True))
    assert np.isclose(r.ranks["predicted_compute_s"].sum(),
                      r.ranks["replayed_compute_s"].sum(), rtol=0.01)
