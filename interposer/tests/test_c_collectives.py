"""Collectives and communicators in C (programs/colls.c), traced at 1, 2 and 4 ranks.

Bytes follow one rule: sent = what this rank's send buffer contributes, received = what
lands in its receive buffer (so a Bcast root sends, a Reduce root receives).
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace

INT, DOUBLE = 4, 8


@dataclass
class Run:
    np: int
    trace: Trace
    stdout: str


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda n: f"np{n}")
def colls(request: pytest.FixtureRequest, programs, tmp_path_factory) -> Run:
    np = request.param
    out = tmp_path_factory.mktemp(f"colls{np}") / "trace"
    job = mpijobs.run([str(programs["colls.c"])], np=np, out=out)
    assert job.returncode == 0, job.stderr
    return Run(np, tc.read_both(out), job.stdout)


def split_members(np: int, rank: int) -> list[int]:
    """Comm_split(colour = rank % 2, key = -rank): highest world rank first."""
    return sorted((r for r in range(np) if r % 2 == rank % 2), reverse=True)


def expected_collectives(np: int, r: int) -> list[tuple]:
    """(op, root, sent, received) of every blocking collective on MPI_COMM_WORLD."""
    tri = np * (np + 1) // 2  # sum of (i + 1) over ranks: the v-variants' counts
    root0 = r == 0
    return [
        ("BARRIER", None, 0, 0),
        ("BCAST", 0, 4 * INT if root0 else 0, 0 if root0 else 4 * INT),
        ("REDUCE", np - 1, 2 * DOUBLE, 2 * DOUBLE if r == np - 1 else 0),
        ("ALLREDUCE", None, DOUBLE, DOUBLE),
        ("ALLREDUCE", None, 3 * INT, 3 * INT),  # MPI_IN_PLACE
        ("REDUCE_SCATTER", None, 2 * INT * np, 2 * INT),
        ("REDUCE_SCATTER_BLOCK", None, 2 * INT * np, 2 * INT),
        ("SCAN", None, INT, INT),
        ("EXSCAN", None, INT, INT),
        ("GATHER", 0, INT, INT * np if root0 else 0),
        ("GATHERV", 0, INT * (r + 1), INT * tri if root0 else 0),
        ("SCATTER", 0, 2 * INT * np if root0 else 0, 2 * INT),
        ("SCATTERV", 0, INT * tri if root0 else 0, INT * (r + 1)),
        ("ALLGATHER", None, INT, INT * np),
        ("ALLGATHERV", None, INT * (r + 1), INT * tri),
        ("ALLTOALL", None, INT * np, INT * np),
        ("ALLTOALLV", None, INT * tri, INT * np * (r + 1)),
        ("ALLTOALLW", None, INT * np, INT * np),
    ]


def test_definitions_and_structure(colls: Run) -> None:
    tc.check_well_formed(colls.trace, colls.np)


def test_every_call_recorded_once(colls: Run) -> None:
    np = colls.np
    for r in range(np):
        members = split_members(np, r)
        even = r % 2 == 0
        want = Counter({f: 1 for f in (
            "MPI_Init", "MPI_Finalize", "MPI_Reduce", "MPI_Reduce_scatter",
            "MPI_Reduce_scatter_block", "MPI_Scan", "MPI_Exscan", "MPI_Gather", "MPI_Gatherv",
            "MPI_Scatter", "MPI_Scatterv", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
            "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Ibarrier", "MPI_Ibcast", "MPI_Ireduce",
            "MPI_Iallreduce", "MPI_Comm_split", "MPI_Comm_create",
            "MPI_Cart_create", "MPI_Sendrecv", "MPI_Comm_set_name")})
        want.update({"MPI_Barrier": 1 + even, "MPI_Bcast": 2, "MPI_Allreduce": 4,
                     "MPI_Wait": 4, "MPI_Comm_dup": 2, "MPI_Comm_free": 4 + even})
        if len(members) > 1 and members[0] == r:
            want["MPI_Send"] = 1
        if len(members) > 1 and members[1] == r:
            want["MPI_Recv"] = 1
        assert colls.trace.enters(r) == want, r


def test_collective_types_roots_and_bytes(colls: Run) -> None:
    for r in range(colls.np):
        got = [(e["op"], e["root"], e["sent"], e["received"])
               for e in colls.trace.of(r, "MpiCollectiveEnd") if e["comm"] == 0]
        assert got == expected_collectives(colls.np, r), r
        assert len(colls.trace.of(r, "MpiCollectiveBegin")) == \
            len(colls.trace.of(r, "MpiCollectiveEnd"))


def test_nonblocking_collectives(colls: Run) -> None:
    for r in range(colls.np):
        t = colls.trace
        assert len(t.of(r, "NonBlockingCollectiveRequest")) == 4
        got = [(e["op"], e["comm"], e["root"], e["sent"], e["received"])
               for e in t.of(r, "NonBlockingCollectiveComplete")]
        assert got == [
            ("BARRIER", 0, None, 0, 0),
            ("BCAST", 0, 0, 4 * INT if r == 0 else 0, 0 if r == 0 else 4 * INT),
            ("REDUCE", 0, 0, DOUBLE, DOUBLE if r == 0 else 0),
            ("ALLREDUCE", 0, None, 2 * INT, 2 * INT),
        ], r


def test_small_payload_hashes(colls: Run) -> None:
    """FNV-1a 64 of the input and of the result, MPI_IN_PLACE hashing the buffer before."""
    np = colls.np
    total = float(sum(range(1, np + 1)))
    for r in range(np):
        ends = [e for e in colls.trace.of(r, "MpiCollectiveEnd") if e["op"] == "ALLREDUCE"]
        plain, in_place = ends[0], ends[1]
        assert plain["mpiscope:in_hash"] == tc.fnv1a(struct.pack("<d", r + 1.0))
        assert plain["mpiscope:out_hash"] == tc.fnv1a(struct.pack("<d", total))
        assert in_place["mpiscope:in_hash"] == tc.fnv1a(struct.pack("<3i", r, 1, 2))
        assert in_place["mpiscope:out_hash"] == tc.fnv1a(struct.pack("<3i", np - 1, 1, 2))


def comm_of(t: Trace, rank: int, region: str, nth: int = 0) -> int:
    """Communicator ref of the payload event inside the nth `region` call on `rank`."""
    seen, inside = -1, False
    for e in t.events[rank]:
        if e.kind == "Enter":
            inside = e["region"] == region
            seen += inside
        elif inside and seen == nth and "comm" in e.fields:
            return int(e["comm"])
    raise AssertionError(f"no event with a communicator in {region} #{nth} on rank {rank}")


def test_communicators_after_dup_split_create_cart_free(colls: Run) -> None:
    t, np = colls.trace, colls.np
    refs: dict[str, set[int]] = {"dup": set(), "split": set(), "evens": set(), "cart": set(),
                                 "dup2": set()}
    for r in range(np):
        dup = comm_of(t, r, "MPI_Allreduce", 2)
        dup2 = comm_of(t, r, "MPI_Allreduce", 3)
        refs["dup2"].add(dup2)
        assert t.comms[dup2].members == list(range(np)) and t.comms[dup2].parent == 0
        split = comm_of(t, r, "MPI_Bcast", 1)
        cart = comm_of(t, r, "MPI_Sendrecv")
        refs["dup"].add(dup)
        refs["split"].add(split)
        refs["cart"].add(cart)
        assert t.comms[dup].members == list(range(np)) and t.comms[dup].parent == 0
        assert t.comms[split].members == split_members(np, r)
        assert t.comms[split].parent == 0
        assert t.comms[cart].members == list(range(np))
        if r % 2 == 0:
            evens = comm_of(t, r, "MPI_Barrier", 1)
            refs["evens"].add(evens)
            assert t.comms[evens].members == list(range(0, np, 2))
    # one ref per communicator, agreed by all members; two split comms when np >= 2
    assert [len(refs[k]) for k in ("dup", "split", "evens", "cart", "dup2")] == \
        [1, min(np, 2), 1, 1, 1]
    # refs are never reused, not even for a communicator created after another was freed
    everything = set().union(*refs.values())
    assert len(everything) == 4 + min(np, 2) and not everything & {0, 1}


def test_communicator_names(colls: Run) -> None:
    """docs/trace-format.md: "comm <ref>" unless the program named it (MPI_Comm_set_name
    on the first duplicate of MPI_COMM_WORLD)."""
    t = colls.trace
    named = comm_of(t, 0, "MPI_Allreduce", 2)
    for ref, comm in t.comms.items():
        if ref > 1:
            assert comm.name == ("solver comm" if ref == named else f"comm {ref}"), ref


def test_messages_on_derived_communicators_name_world_ranks(colls: Run) -> None:
    t, np = colls.trace, colls.np
    sends, recvs = tc.messages(t)
    assert sends == recvs
    for r in range(np):
        members = split_members(np, r)
        if len(members) > 1 and members[0] == r:
            (send,) = [e for e in t.of(r, "MpiSend") if e["tag"] == 42]
            assert tc.world(t, send["comm"], send["peer"]) == members[1]
            assert send["bytes"] == 7 * INT
        # split Bcast root is comm rank 0 = the colour's highest world rank
        (bcast,) = [e for e in t.of(r, "MpiCollectiveEnd")
                    if e["op"] == "BCAST" and e["comm"] not in (0, 1)]
        assert tc.world(t, bcast["comm"], bcast["root"]) == members[0]
        cart = [e for e in t.of(r, "MpiSend") if e["tag"] == 43]
        assert [tc.world(t, e["comm"], e["peer"]) for e in cart] == [(r + 1) % np]


def test_call_sites(colls: Run) -> None:
    t = colls.trace
    for r in range(colls.np):
        assert tc.callsites(t, r, "MPI_Allreduce") == [
            mpijobs.callsite("colls.c", m)
            for m in ("allreduce", "allreduce_in_place", "allreduce_dup", "allreduce_dup2")]
        assert tc.callsites(t, r, "MPI_Comm_split") == [mpijobs.callsite("colls.c", "split")]
        assert tc.callsites(t, r, "MPI_Barrier")[0] == mpijobs.callsite("colls.c", "barrier")
        assert tc.callsites(t, r, "MPI_Bcast")[1] == mpijobs.callsite("colls.c", "bcast_split")


def test_hash_size_is_configurable(programs, tmp_path) -> None:
    """MPISCOPE_HASH_BYTES=4: the 4-byte Scan is hashed, the 8-byte Allreduce is not."""
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["colls.c"])], np=2, out=out,
                      env={"MPISCOPE_HASH_BYTES": "4"})
    assert job.returncode == 0, job.stderr
    t = tc.read_both(out)
    for r in range(2):
        by_op = {e["op"]: e for e in t.of(r, "MpiCollectiveEnd") if e["comm"] == 0}
        assert "mpiscope:in_hash" in by_op["SCAN"].fields
        assert "mpiscope:in_hash" not in by_op["ALLREDUCE"].fields
        assert "mpiscope:out_hash" not in by_op["ALLREDUCE"].fields


def test_v_and_w_variant_hashes(colls: Run) -> None:
    """Gather/scatter/alltoall families and reduce_scatter are hashed too: v/w variants as
    their blocks concatenated in rank order, a side without a buffer as 0. colls.c's send
    buffer `a` holds zeros, so each hash is that of so many zero bytes."""
    np = colls.np
    tri = np * (np + 1) // 2

    def zeros(n_ints: int) -> int:
        return tc.fnv1a(bytes(INT * n_ints))

    for r in range(np):
        ends = {e["op"]: e for e in colls.trace.of(r, "MpiCollectiveEnd") if e["comm"] == 0}
        root0 = r == 0
        want = {
            "GATHERV": (zeros(r + 1), zeros(tri) if root0 else 0),
            "SCATTERV": (zeros(tri) if root0 else 0, zeros(r + 1)),
            "ALLGATHERV": (zeros(r + 1), zeros(tri)),
            "ALLTOALLV": (zeros(tri), zeros(np * (r + 1))),
            "ALLTOALLW": (zeros(np), zeros(np)),
            "REDUCE_SCATTER": (zeros(2 * np), zeros(2)),
        }
        for op, (in_hash, out_hash) in want.items():
            e = ends[op]
            assert (e["mpiscope:in_hash"], e["mpiscope:out_hash"]) == (in_hash, out_hash), (r, op)
