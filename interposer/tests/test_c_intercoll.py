"""Collectives on an intercommunicator, and nonblocking collectives whose argument arrays
are gone as soon as the call returns (programs/intercoll.c).

MPI sizes a collective's per-peer arrays by the remote group on an intercommunicator,
and lets the caller free a nonblocking collective's counts, displacements and datatype
arrays once the call is posted (mpi4py does). The program puts every such array right
before an inaccessible page and unmaps the nonblocking ones after posting: a tracer that
reads one element too many, or reads them at MPI_Wait, kills the job. Traced, the job
must end as it does untraced, with the bytes MPI moved.
"""

from __future__ import annotations

from collections import Counter

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace

INT = 4
BLOCKING = ["ALLGATHER", "ALLGATHERV", "ALLTOALL", "ALLTOALLV", "ALLTOALLW", "GATHER",
            "GATHERV", "SCATTER", "SCATTERV", "BCAST", "REDUCE"]
NONBLOCKING = ["ALLGATHERV", "ALLTOALLV", "ALLTOALLW", "GATHERV", "SCATTERV"]


def expected(op: str, in_a: bool, rsize: int) -> tuple[int, int]:
    """(sent, received) bytes of one rank: world rank 0 is group A and the root of every
    rooted collective; one int to or from each peer of the remote group."""
    peers = INT * rsize
    rooted = {"GATHER": (0, peers) if in_a else (INT, 0),
              "GATHERV": (0, peers) if in_a else (INT, 0),
              "SCATTER": (peers, 0) if in_a else (0, INT),
              "SCATTERV": (peers, 0) if in_a else (0, INT),
              "BCAST": (INT, 0) if in_a else (0, INT),
              "REDUCE": (0, INT) if in_a else (INT, 0)}
    if op in rooted:
        return rooted[op]
    return (INT, peers) if op.startswith("ALLGATHER") else (peers, peers)


def intercomm(t: Trace) -> int:
    refs = [ref for ref, c in t.comms.items() if c.groups is not None]
    assert len(refs) == 1, t.comms
    return refs[0]


def check_run(job: mpijobs.Job, np: int) -> None:
    assert job.returncode == 0, job.stderr[-3000:]
    assert sorted(mpijobs.sorted_lines(job.stdout)) == sorted(f"rank {r} ok" for r in range(np))
    assert job.out is not None
    t = tc.read_both(job.out)
    tc.check_well_formed(t, np)
    ic = intercomm(t)
    for r in range(np):
        in_a, rsize = r == 0, np - 1 if r == 0 else 1
        ends = [(e["op"], e["sent"], e["received"]) for e in t.of(r, "MpiCollectiveEnd")
                if e["comm"] == ic]
        assert ends == [(op, *expected(op, in_a, rsize)) for op in BLOCKING], r
        done = Counter((e["op"], e["sent"], e["received"])
                       for e in t.of(r, "NonBlockingCollectiveComplete") if e["comm"] == ic)
        assert done == Counter((op, *expected(op, in_a, rsize)) for op in NONBLOCKING), r
        # no payload hashes on an intercommunicator: a PROC_NULL rank's buffers are junk
        assert not any("mpiscope:out_hash" in e.fields
                       for e in t.events[r] if e.get("comm") == ic)
    # on MPI_COMM_WORLD the nonblocking results are still hashed, from the copied blocks
    world_iallgatherv = [e for e in t.of(0, "NonBlockingCollectiveComplete")
                         if e["comm"] == 0 and e["op"] == "ALLGATHERV"]
    assert len(world_iallgatherv) == 1
    want = tc.fnv1a(b"".join((1000 * q).to_bytes(INT, "little", signed=True)
                             for q in range(np)))
    assert world_iallgatherv[0]["mpiscope:out_hash"] == want


@pytest.mark.parametrize("np", [2, 3, 4])
def test_intercomm_and_freed_arrays_open_mpi(programs, tmp_path, np: int) -> None:
    job = mpijobs.run([str(programs["intercoll.c"])], np=np, out=tmp_path / "trace")
    check_run(job, np)


@pytest.mark.mpich
def test_intercomm_and_freed_arrays_mpich(tmp_path) -> None:
    check_run(mpijobs.run_mpich("intercoll.c", tmp_path, 3, out=tmp_path / "trace"), 3)
