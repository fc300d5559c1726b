"""End to end on a synthetic OTF2 archive (tracegen's writer, then the real reader):
breakdown, wait states and findings, every number computed by hand."""

import json
import subprocess

import pytest

from mpiscope.analysis import simulate
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder


def scenario() -> TraceBuilder:
    tb = TraceBuilder(ranks=2, hosts=["node0", "node1"])
    for r in (0, 1):
        tb.call(r, 0, 10, "MPI_Init")
        tb.call(r, 500, 510, "MPI_Finalize")
    # rank 1 waits in MPI_Waitall from 120; rank 0 only starts sending at 150: late sender 30
    tb.irecv_call(1, 100, 105, request=1, callsite="app.c:20")
    tb.enter(1, 120, "MPI_Waitall", callsite="app.c:21")
    tb.irecv(1, 200, src=0, tag=7, nbytes=800, request=1)
    tb.leave(1, 200, "MPI_Waitall")
    tb.isend_call(0, 150, 160, dest=1, tag=7, nbytes=800, request=1, callsite="app.c:30")
    tb.enter(0, 170, "MPI_Waitall", callsite="app.c:31")
    tb.isend_complete(0, 180, request=1)
    tb.leave(0, 180, "MPI_Waitall")
    # an Allreduce where rank 0 waits 40 for rank 1 (its buffer held 4), then the same
    # one twice again into the buffer that holds its result: those two are redundant
    for r, start in ((0, 300), (1, 340)):
        tb.collective(r, start, 350, "MPI_Allreduce", sent=8, received=8, in_hash=5,
                      out_hash=9, prior_hash=4, callsite="app.c:60")
        for t in (400, 420):
            tb.collective(r, t, t + 10, "MPI_Allreduce", sent=8, received=8, in_hash=5,
                          out_hash=9, prior_hash=9, callsite="app.c:60")
    return tb


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return scenario().write(tmp_path_factory.mktemp("otf2") / "trace")


def test_breakdown_and_wait_states_from_an_otf2_archive(archive):
    doc = Analysis(reader.load(archive)).to_dict()
    ranks = {r["rank"]: r for r in doc["ranks"]}
    # this archive has no scheduling samples: descheduled_s is unmeasured, not 0
    assert [row["descheduled_s"] for row in ranks.values()] == [None, None]
    ns = {r: {k: round(v * 1e9) for k, v in row.items()
              if k.endswith("_s") and k != "descheduled_s"}
          for r, row in ranks.items()}
    # interval 10..500; rank 0: MPI 10+10+50+10+10, waiting 40 in the first Allreduce
    assert ns[0] == {"total_s": 490, "compute_s": 400, "communication_s": 50,
                     "synchronization_s": 40, "io_s": 0}
    # rank 1: MPI 5+80+10+10+10, waiting 30 of its 80 ns Waitall for the late sender
    assert ns[1] == {"total_s": 490, "compute_s": 375, "communication_s": 85,
                     "synchronization_s": 30, "io_s": 0}
    assert (ranks[0]["host"], ranks[1]["host"]) == ("node0", "node1")
    ws = {k: round(v * 1e9) for k, v in doc["wait_states"].items()}
    assert ws == {"late_sender_s": 30, "late_receiver_s": 0, "wait_at_barrier_s": 0,
                  "wait_at_nxn_s": 40, "late_broadcast_s": 0, "early_reduce_s": 0,
                  "wait_at_fence_s": 0, "late_post_s": 0, "early_wait_s": 0,
                  "lock_contention_s": 0}
    assert doc["host_split"][0]["path"] == "inter-node"


def test_findings_from_an_otf2_archive(archive):
    doc = Analysis(reader.load(archive)).to_dict()
    red = [f for f in doc["findings"] + doc["minor"] if f["kind"] == "redundant_collective"]
    assert len(red) == 1
    f = red[0]
    assert (f["function"], f["callsite"], f["calls"]) == ("MPI_Allreduce", "app.c:60", 4)
    assert round(f["time_s"] * 1e9) == 40
    # two messages fit a path far slower than the 510 ns run: the base replay exceeds the
    # run, so the replayed difference (the 20 ns of the calls removed) is scaled to the
    # measured run (the run, Init's end to Finalize's start, over that interval replayed)
    # and never exceeds the calls' time or the run
    ev = f["evidence"] if "evidence" in f else None
    trace = reader.load(archive)
    r = simulate.replay(trace)
    assert r.replayed_s > r.measured_s
    run_s = max(x["total_s"] for x in doc["ranks"])
    scale = run_s / simulate.base_run(trace).interval_s
    assert scale < 1
    assert f["estimated_savings_s"] == pytest.approx(min(20e-9 * scale, 40e-9), rel=1e-3)
    assert 0 < f["estimated_savings_s"] <= min(f["time_s"], run_s)
    if ev is not None:
        assert ev["share_of_run"] == pytest.approx(f["estimated_savings_s"] / run_s)


def test_cli_json_matches(archive, tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run(["mpiscope", "analyze", str(archive), "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert [round(r["synchronization_s"] * 1e9) for r in doc["ranks"]] == [40, 30]
    assert "app.c:60" in p.stdout
