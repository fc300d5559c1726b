"""Nonblocking and neighbourhood collectives in C (programs/nbc.c), traced at 2 and 4 ranks.

Every nonblocking collective of MPI-3.1 is a NonBlockingCollectiveRequest in its call and a
NonBlockingCollectiveComplete in the MPI_Wait that completes it, with the operation, root
and bytes its blocking twin records (sent = what this rank's send buffer contributes,
received = what lands in its receive buffer). Neighbourhood collectives are recorded as
the global operation of the same shape (OTF2 has no neighbourhood operation), with the
bytes that move to and from the topology's neighbours.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace

INT = 4
NBC = ["MPI_Igather", "MPI_Igatherv", "MPI_Iscatter", "MPI_Iscatterv", "MPI_Iallgather",
       "MPI_Iallgatherv", "MPI_Ialltoall", "MPI_Ialltoallv", "MPI_Ialltoallw",
       "MPI_Ireduce_scatter", "MPI_Ireduce_scatter_block", "MPI_Iscan", "MPI_Iexscan"]
NEIGHBOUR = ["allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw"]


@dataclass
class Run:
    np: int
    out: Path
    trace: Trace
    loaded: mpiscope.Trace


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"np{n}")
def nbc(request: pytest.FixtureRequest, programs, tmp_path_factory) -> Run:
    np = request.param
    out = tmp_path_factory.mktemp(f"nbc{np}") / "trace"
    job = mpijobs.run([str(programs["nbc.c"])], np=np, out=out)
    assert job.returncode == 0, job.stderr
    return Run(np, out, tc.read_both(out), mpiscope.load(out))


def expected_nbc(np: int, r: int) -> list[tuple]:
    """(op, root, sent, received) of the nonblocking collectives on MPI_COMM_WORLD."""
    tri = np * (np + 1) // 2
    root0 = r == 0
    return [
        ("GATHER", 0, INT, INT * np if root0 else 0),
        ("GATHERV", 0, INT * (r + 1), INT * tri if root0 else 0),
        ("SCATTER", 0, 2 * INT * np if root0 else 0, 2 * INT),
        ("SCATTERV", 0, INT * tri if root0 else 0, INT * (r + 1)),
        ("ALLGATHER", None, INT, INT * np),
        ("ALLGATHERV", None, INT * (r + 1), INT * tri),
        ("ALLTOALL", None, INT * np, INT * np),
        ("ALLTOALLV", None, INT * tri, INT * np * (r + 1)),
        ("ALLTOALLW", None, INT * np, INT * np),
        ("REDUCE_SCATTER", None, 2 * INT * np, 2 * INT),
        ("REDUCE_SCATTER_BLOCK", None, 2 * INT * np, 2 * INT),
        ("SCAN", None, INT, INT),
        ("EXSCAN", None, INT, INT),
        ("ALLTOALL", None, INT * np, INT * np),  # the late one
    ]


def expected_neighbour(np: int, r: int) -> list[tuple]:
    """(op, comm, sent, received) of the neighbourhood collectives, blocking or not, in
    program order: ring (periodic, 2 neighbours), chain (open ends), directed chain."""
    ring = [("ALLGATHER", 2 * INT, 2 * INT), ("ALLGATHERV", 2 * INT, 4 * INT),
            ("ALLTOALL", 2 * INT, 2 * INT), ("ALLTOALLV", 4 * INT, 4 * INT),
            ("ALLTOALLW", 4 * INT, 4 * INT)]
    sides = (r > 0) + (r < np - 1)  # MPI_PROC_NULL beyond the chain's ends moves nothing
    return ([(op, "ring", s, v) for op, s, v in ring] * 2
            + [("ALLTOALL", "chain", 3 * INT * sides, 3 * INT * sides),
               ("ALLGATHER", "dg", 5 * INT * (r < np - 1), 5 * INT * (r > 0))])


def test_structure(nbc: Run) -> None:
    tc.check_well_formed(nbc.trace, nbc.np)


def test_every_call_once(nbc: Run) -> None:
    for r in range(nbc.np):
        want = Counter({f: 1 for f in NBC + [f"MPI_Neighbor_{f}" for f in NEIGHBOUR]
                        + [f"MPI_Ineighbor_{f}" for f in NEIGHBOUR]})
        want.update({"MPI_Init": 1, "MPI_Finalize": 1, "MPI_Cart_create": 2,
                     "MPI_Dist_graph_create_adjacent": 1, "MPI_Comm_free": 3,
                     "MPI_Alltoall": 1, "MPI_Gather": 1, "MPI_Scatter": 1,
                     "MPI_Reduce_scatter_block": 1, "MPI_Barrier": 1, "MPI_Ialltoall": 1,
                     "MPI_Neighbor_alltoall": 1, "MPI_Neighbor_allgather": 1,
                     "MPI_Wait": len(NBC) + len(NEIGHBOUR) + 1})
        got = {f: k for f, k in nbc.trace.enters(r).items()
               if f not in ("MPI_Comm_rank", "MPI_Comm_size")}  # book-keeping
        assert got == want, r


def test_nonblocking_collectives_on_world(nbc: Run) -> None:
    t = nbc.trace
    for r in range(nbc.np):
        done = [e for e in t.of(r, "NonBlockingCollectiveComplete") if e["comm"] == 0]
        assert [(e["op"], e["root"], e["sent"], e["received"]) for e in done] == \
            expected_nbc(nbc.np, r), r
        # request then completion, one each, the completion in the MPI_Wait after the call
        requests = [int(e["request"]) for e in t.of(r, "NonBlockingCollectiveRequest")]
        assert len(requests) == len(NBC) + len(NEIGHBOUR) + 1
        assert sorted(int(e["request"]) for e in t.of(r, "NonBlockingCollectiveComplete")) \
            == sorted(requests)


def comm_members(t: Trace, ref: int) -> list[int]:
    return t.comms[ref].members


def test_neighbourhood_collectives(nbc: Run) -> None:
    t, np = nbc.trace, nbc.np
    for r in range(np):
        got = []
        names: dict[int, str] = {}
        for e in t.events[r]:
            if e.kind in ("MpiCollectiveEnd", "NonBlockingCollectiveComplete") and e["comm"] != 0:
                name = names.setdefault(int(e["comm"]), ["ring", "chain", "dg"][len(names)])
                assert e["root"] is None
                got.append((e["op"], name, e["sent"], e["received"]))
        assert got == expected_neighbour(np, r), r
        # each topology is a communicator of every rank, in world order (no reordering)
        for ref in names:
            assert comm_members(t, ref) == list(range(np))


def fnv_ints(*values: int) -> int:
    return tc.fnv1a(struct.pack(f"<{len(values)}i", *values))


def test_result_hashes(nbc: Run) -> None:
    """Input and result hashes (FNV-1a 64) on blocking and nonblocking gather, scatter,
    alltoall and reduce_scatter; a[i] = 1000 * rank + i."""
    t, np = nbc.trace, nbc.np
    for r in range(np):
        a = [1000 * r + i for i in range(64 * np)]
        ends = {e["op"]: e for e in t.of(r, "MpiCollectiveEnd") if e["comm"] == 0}
        alltoall = ends["ALLTOALL"]
        assert alltoall["mpiscope:in_hash"] == fnv_ints(*a[:np])
        assert alltoall["mpiscope:out_hash"] == fnv_ints(*[1000 * q + r for q in range(np)])
        gather = ends["GATHER"]
        assert gather["mpiscope:in_hash"] == fnv_ints(*a[:2])
        want = fnv_ints(*[1000 * q + i for q in range(np) for i in range(2)]) if r == 0 else 0
        assert gather["mpiscope:out_hash"] == want
        scatter = ends["SCATTER"]
        assert scatter["mpiscope:in_hash"] == (fnv_ints(*range(np)) if r == 0 else 0)
        assert scatter["mpiscope:out_hash"] == fnv_ints(r)
        rsb = ends["REDUCE_SCATTER_BLOCK"]
        assert rsb["mpiscope:in_hash"] == fnv_ints(*a[:np])
        assert rsb["mpiscope:out_hash"] == fnv_ints(sum(1000 * q + r for q in range(np)))
        # nonblocking: the result as it is at completion
        done = [e for e in t.of(r, "NonBlockingCollectiveComplete") if e["comm"] == 0]
        iallgather = done[4]
        assert iallgather["op"] == "ALLGATHER"
        assert iallgather["mpiscope:in_hash"] == fnv_ints(1000 * r)
        assert iallgather["mpiscope:out_hash"] == fnv_ints(*[1000 * q for q in range(np)])
        iscan = done[11]
        assert iscan["op"] == "SCAN"
        assert iscan["mpiscope:in_hash"] == fnv_ints(r)
        assert iscan["mpiscope:out_hash"] == fnv_ints(sum(range(r + 1)))


def test_mpiscope_reader(nbc: Run) -> None:
    """The analyzer's tables: every call by name, nonblocking completions with their root
    and bytes in p2p, neighbourhood collectives in collectives with their bytes."""
    tr, np = nbc.loaded, nbc.np
    calls = tr.calls
    for r in range(np):
        mine = calls[calls["rank"] == r]
        names = Counter(mine["function"].astype(str))
        for f in NBC + [f"MPI_Ineighbor_{f}" for f in NEIGHBOUR]:
            assert names[f] == 1 + (f == "MPI_Ialltoall"), (r, f)
        done = tr.p2p[(tr.p2p["rank"] == r) & (tr.p2p["event"] == "nbc_complete")
                      & (tr.p2p["comm"] == 0)]
        want = expected_nbc(np, r)
        assert list(done["bytes"]) == [sent for _, _, sent, _ in want]
        assert list(done["peer"]) == [-1 if root is None else root for _, root, _, _ in want]
        coll = tr.collectives[(tr.collectives["rank"] == r)]
        nb = coll[coll["function"].astype(str).str.startswith("MPI_Neighbor_")]
        exp = expected_neighbour(np, r)
        blocking = exp[:5] + exp[10:]
        assert list(zip(nb["bytes_sent"], nb["bytes_recv"], strict=True)) == \
            [(s, v) for _, _, s, v in blocking], r
        assert set(nb["root"]) == {-1}
    comms = tr.comms.set_index("comm")
    for ref in set(tr.collectives["comm"]):
        assert list(comms.loc[ref, "members"]) == list(range(np))


def test_late_partner_in_ialltoall(nbc: Run) -> None:
    """Rank 1 sleeps 100 ms after a Barrier, then enters MPI_Ialltoall; the others wait for
    it in the MPI_Wait that completes theirs: that Wait holds the completion and cannot
    end before rank 1 posted (how long it lasts depends on when a busy machine let each
    rank reach it: not asserted)."""
    tr = nbc.loaded
    calls = tr.calls
    late = calls[calls["rank"] == 1].reset_index(drop=True)
    post = late.loc[late[late["function"].astype(str) == "MPI_Ialltoall"].index[-1]]
    barrier = late.loc[post.name - 1]
    assert barrier["function"] == "MPI_Barrier"
    assert post["start"] - barrier["end"] >= 100_000_000  # the sleep, in trace time
    for r in range(nbc.np):
        mine = calls[calls["rank"] == r].reset_index(drop=True)
        last = mine[mine["function"].astype(str) == "MPI_Ialltoall"].index[-1]
        wait = mine.loc[last + 1]
        assert wait["function"] == "MPI_Wait"
        assert wait["callsite"] == mpijobs.callsite("nbc.c", "late_wait")
        done = tr.p2p[(tr.p2p["rank"] == r) & (tr.p2p["event"] == "nbc_complete")]
        assert done["call"].iloc[-1] == wait["call"]
        assert wait["end"] >= post["start"], r  # all-to-all: rank 1's part is needed
