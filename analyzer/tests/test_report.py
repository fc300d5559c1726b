"""The contract JSON assembled by the analysis session, on the Score-P trace and on a real
program traced by the interposer."""

import json
import os
import subprocess

import pytest

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing import truth
from mpiscope_testing.scenarios import traced_run

CONTRACT_RANK_KEYS = {"rank", "host", "total_s", "compute_s", "communication_s",
                      "synchronization_s"}
CONTRACT_FINDING_KEYS = {"kind", "function", "callsite", "calls", "time_s",
                         "estimated_savings_s", "message"}


def check_contract(doc: dict, nranks: int) -> None:
    assert [r["rank"] for r in doc["ranks"]] == list(range(nranks))
    for r in doc["ranks"]:
        assert CONTRACT_RANK_KEYS <= r.keys()
        parts = r["compute_s"] + r["communication_s"] + r["synchronization_s"]
        assert parts == pytest.approx(r["total_s"], rel=0.01)
        assert r["total_s"] > 0 and min(r["compute_s"], r["communication_s"],
                                        r["synchronization_s"]) >= 0
    for f in doc["functions"]:
        assert {"name", "calls", "time_s"} <= f.keys()
    assert {"late_sender_s", "late_receiver_s", "wait_at_barrier_s",
            "wait_at_nxn_s"} <= doc["wait_states"].keys()
    for f in doc["findings"]:
        assert CONTRACT_FINDING_KEYS <= f.keys()


def test_scorep_trace_has_a_breakdown_for_every_rank(scorep_trace):
    doc = json.loads(Analysis(reader.load(scorep_trace)).to_json())
    check_contract(doc, 2)
    assert doc["meta"]["num_ranks"] == 2
    funcs = {f["name"]: f for f in doc["functions"]}
    assert funcs["MPI_Send"]["calls"] == 16 and funcs["MPI_Recv"]["calls"] == 16
    assert doc["messages"] == {"matched": 16, "unmatched_sends": 0, "unmatched_receives": 0}
    # two messages per size are too few to name a protocol switch
    assert [b["messages"] for b in doc["message_sizes"]] == [2] * 8
    assert doc["protocol_switches"] == []
    assert all(r["communication_s"] > 0 for r in doc["ranks"])


def test_report_of_a_traced_program(tmp_path):
    t = reader.load(traced_run("imbalance", 3, ["6"], tmp_path))
    doc = json.loads(Analysis(t).to_json())
    check_contract(doc, 3)
    assert doc["main_loop"]["iterations"] == 6  # the program's loop count
    assert len(doc["iterations"]) == 5  # full spans between the 6 marker calls
    # the waiting as this run's own timestamps show it (how much of the injected
    # imbalance and late sends a busy machine leaves is up to its scheduler)
    nxn, _ = truth.nxn(t, "MPI_Allreduce")
    late, _ = truth.late_sender(t)
    assert doc["wait_states"]["wait_at_nxn_s"] == pytest.approx(nxn.sum() / 1e9, rel=1e-9)
    assert doc["wait_states"]["late_sender_s"] == pytest.approx(late.sum() / 1e9, rel=1e-9,
                                                                abs=1e-12)
    assert doc["clock_skew"]["remaining"] == 0
    assert sum(b["messages"] for b in doc["message_sizes"]) == doc["messages"]["matched"]
    assert {(c["send_rank"], c["recv_rank"]) for c in doc["comm_matrix"]} >= {(1, 0), (0, 1)}
    # the time bins hold the same rank-seconds as the per-rank table
    for part in ("compute_s", "communication_s", "synchronization_s"):
        assert sum(b[part] for b in doc["time_bins"]) == pytest.approx(
            sum(r[part] for r in doc["ranks"]), rel=1e-6)


def test_buffer_flushes_are_reported(tmp_path):
    """A tiny event buffer makes the interposer encode mid-run: the report counts those
    flushes and their time, which the breakdown holds as part of the run."""
    trace = traced_run("imbalance", 2, ["20"], tmp_path, env={"MPISCOPE_BUFFER_SIZE": "4k"})
    doc = json.loads(Analysis(reader.load(trace)).to_json())
    flushes = doc["buffer_flushes"]
    assert flushes["count"] >= 2 and flushes["seconds"] > 0
    assert {r["rank"] for r in flushes["per_rank"]} == {0, 1}
    assert flushes["count"] == sum(r["flushes"] for r in flushes["per_rank"])
    assert flushes["seconds"] < sum(r["total_s"] for r in doc["ranks"])
    # and the terminal summary says so
    out = subprocess.run(["mpiscope", "analyze", str(trace)], capture_output=True, text=True,
                         check=True, env={**os.environ, "COLUMNS": "200"}).stdout
    assert f"Tracing: {flushes['count']} buffer flushes took" in out


def test_no_flushes_with_the_default_buffer(tmp_path):
    doc = json.loads(Analysis(reader.load(
        traced_run("imbalance", 2, ["3"], tmp_path))).to_json())
    assert doc["buffer_flushes"] == {"count": 0, "seconds": 0.0, "per_rank": []}
