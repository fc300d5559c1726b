"""MPI calls that fail (programs/failcalls.c, MPI_ERRORS_RETURN) are recorded as calls
that failed: the Leave of each carries `mpiscope:error`, the code MPI returned, and no
message, status or collective that never existed goes into the trace.

Each rank makes six failing calls (sends to a rank that does not exist or with a
negative tag, a receive from a rank that does not exist, an Isend, a Bcast with no such
root, an Allreduce of MPI_DATATYPE_NULL), then one real message 0 -> 1 and one real Bcast.
"""

from __future__ import annotations

import subprocess

import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc

FAILING = ["MPI_Send", "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Bcast", "MPI_Allreduce"]


def check(job: mpijobs.Job) -> None:
    assert job.returncode == 0, job.stderr[-3000:]
    assert sorted(mpijobs.sorted_lines(job.stdout)) == ["rank 0 failed 6", "rank 1 failed 6"]
    assert job.out is not None
    t = tc.read_both(job.out)
    tc.check_well_formed(t, 2)
    for r in range(2):
        region = None
        failed = []
        for e in t.events[r]:
            if e.kind == "Enter":
                region = e["region"]
            elif e.kind == "Leave" and "mpiscope:error" in e.fields:
                failed.append(region)
                assert e["mpiscope:error"] != 0
        assert failed == FAILING, r
        # only the real traffic: one message, one Bcast; no request from the failed Isend
        assert len(t.of(r, "MpiSend")) == (r == 0)
        assert len(t.of(r, "MpiRecv")) == (r == 1)
        assert not t.of(r, "MpiIsendRequest") and not t.of(r, "MpiIsend")
        assert [e["op"] for e in t.of(r, "MpiCollectiveEnd")] == ["BCAST"]
        assert len(t.of(r, "MpiCollectiveBegin")) == 1
    sends, recvs = tc.messages(t)
    assert sends == recvs
    # the analysis counts every call, failed or not, and matches the one message
    tr = mpiscope.load(job.out)
    calls = tr.calls
    for r in range(2):
        mine = calls[calls["rank"] == r]["function"].astype(str).value_counts()
        assert mine["MPI_Send"] == 2 + (r == 0)
        assert mine["MPI_Recv"] == 1 + (r == 1)
    assert len(tr.messages) == 1
    assert subprocess.run(["otf2-print", str(job.out / "traces.otf2")],
                          capture_output=True).returncode == 0


def test_failed_calls_open_mpi(programs, tmp_path) -> None:
    check(mpijobs.run([str(programs["failcalls.c"])], np=2, out=tmp_path / "trace"))


@pytest.mark.mpich
def test_failed_calls_mpich(tmp_path) -> None:
    check(mpijobs.run_mpich("failcalls.c", tmp_path, 2, out=tmp_path / "trace"))
