"""Every communicator constructor in C (programs/commctors.c), at 2 and 4 ranks.

Each constructor is followed by a collective on the new communicator; that collective must
name a communicator the trace defines, with the members MPI gave it (world ranks in
communicator-rank order), in otf2-print, the OTF2 Python reader and mpiscope.load alike.
MPI_Comm_idup gets its id without communicating (from the parent's and the number of idups
the parent has seen; a one-rank parent such as MPI_COMM_SELF: from the rank itself); an
intercommunicator is an OTF2 InterComm whose peers are ranks of the other group, so its
messages match.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace


@dataclass
class Run:
    np: int
    trace: Trace
    loaded: mpiscope.Trace


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"np{n}")
def ctors(request: pytest.FixtureRequest, programs, tmp_path_factory) -> Run:
    np = request.param
    out = tmp_path_factory.mktemp(f"ctors{np}") / "trace"
    job = mpijobs.run([str(programs["commctors.c"])], np=np, out=out)
    assert job.returncode == 0, job.stderr
    return Run(np, tc.read_both(out), mpiscope.load(out))


def expected_members(np: int, rank: int) -> dict[str, list[int]]:
    """The members of the communicator each marked collective runs on, seen from `rank`."""
    parity = [r for r in range(np) if r % 2 == rank % 2]
    want = {
        "split_type": list(range(np - 1, -1, -1)),  # key -rank
        "dup_with_info": list(range(np)),
        "idup": list(range(np)),
        "idup_half1": parity,
        "idup_half2": parity,
        "idup_self": [rank],
        "cart_sub": [rank // 2 * 2, rank // 2 * 2 + 1],
        "graph": list(range(np)),
        "dist_graph": list(range(np)),
        "dist_graph_adjacent": list(range(np)),
        "merge": [r for r in range(np) if r % 2 == 0] + [r for r in range(np) if r % 2],
    }
    if rank % 2 == 0:
        want["create_group"] = sorted(parity, reverse=True)
    return want


def comm_by_callsite(t: Trace, rank: int) -> dict[str, int]:
    """Communicator ref of the collective (or message) each call site ran on."""
    found: dict[str, int] = {}
    site = ""
    for e in t.events[rank]:
        if e.kind == "Enter":
            site = str(e["callsite"]).rsplit("/", 1)[-1]
        elif "comm" in e.fields and e.kind in ("MpiCollectiveEnd", "MpiSend"):
            found.setdefault(site, int(e["comm"]))
    return found


def test_structure(ctors: Run) -> None:
    tc.check_well_formed(ctors.trace, ctors.np)


def test_every_constructor_recorded(ctors: Run) -> None:
    for r in range(ctors.np):
        got = ctors.trace.enters(r)
        for f in ("MPI_Comm_split_type", "MPI_Comm_dup_with_info", "MPI_Cart_sub",
                  "MPI_Graph_create", "MPI_Dist_graph_create", "MPI_Dist_graph_create_adjacent",
                  "MPI_Intercomm_create", "MPI_Intercomm_merge"):
            assert got[f] == 1, (r, f)
        assert got["MPI_Comm_idup"] == 4
        assert got["MPI_Comm_create_group"] == (r % 2 == 0)


def test_collectives_name_defined_communicators(ctors: Run) -> None:
    t, np = ctors.trace, ctors.np
    refs: dict[str, set[int]] = {}
    for r in range(np):
        found = comm_by_callsite(t, r)
        for marker, members in expected_members(np, r).items():
            ref = found[mpijobs.callsite("commctors.c", marker)]
            assert ref in t.comms, (r, marker)
            assert t.comms[ref].members == members, (r, marker)
            assert t.comms[ref].groups is None
            refs.setdefault(marker, set()).add(ref)
    # one communicator per constructor call: the same on its members, distinct from others
    assert len(refs["dup_with_info"]) == len(refs["idup"]) == 1
    assert len(refs["idup_half1"]) == len(refs["idup_half2"]) == min(np, 2)
    assert not refs["idup_half1"] & refs["idup_half2"]
    # MPI_COMM_SELF's id is the same everywhere: its idups still get one id per rank
    assert len(refs["idup_self"]) == np
    assert len(set().union(*refs.values())) == sum(len(v) for v in refs.values())
    # the idup'd communicators' parents: the world, and each half's split
    (idup,) = refs["idup"]
    assert t.comms[idup].parent == 0
    for ref in refs["idup_half1"] | refs["idup_half2"]:
        assert t.comms[t.comms[ref].parent].members == t.comms[ref].members


def test_intercommunicator(ctors: Run) -> None:
    t, np = ctors.trace, ctors.np
    evens, odds = list(range(0, np, 2)), list(range(1, np, 2))
    inter = {comm_by_callsite(t, r)[mpijobs.callsite("commctors.c", "inter_p2p")]
             for r in range(np)}
    assert len(inter) == 1
    c = t.comms[inter.pop()]
    assert c.groups == (evens, odds)  # group A: the group whose rank 0 proposed the id
    for r in range(np):
        (send,) = [e for e in t.of(r, "MpiSend") if e["comm"] == c.ref]
        partner = r + 1 if r % 2 == 0 else r - 1
        assert tc.world(t, c.ref, send["peer"], r) == partner
        ends = [e for e in t.of(r, "MpiCollectiveEnd") if e["comm"] == c.ref]
        assert [e["op"] for e in ends] == ["ALLREDUCE"]
    sends, recvs = tc.messages(t)
    assert sends == recvs
    # the merged communicator's parent is the intercommunicator
    merged = comm_by_callsite(t, 0)[mpijobs.callsite("commctors.c", "merge")]
    assert t.comms[merged].parent == c.ref


def test_mpiscope_reader(ctors: Run) -> None:
    tr, np = ctors.loaded, ctors.np
    comms = tr.comms.set_index("comm")
    calls = tr.calls
    for r in range(np):
        mine = calls[(calls["rank"] == r) & (calls["function"] == "MPI_Allreduce")]
        by_site = dict(zip(mine["callsite"].astype(str), mine["comm"], strict=True))
        for marker, members in expected_members(np, r).items():
            ref = by_site[mpijobs.callsite("commctors.c", marker)]
            assert list(comms.loc[ref, "members"]) == members, (r, marker)
    # every collective instance has all members of its communicator
    k = tr.collectives
    for (ref, _), group in k.groupby(["comm", "instance"]):
        assert sorted(group["rank"]) == sorted(comms.loc[ref, "members"]), ref
    # the intercommunicator's messages: matched, between partners
    assert tr.unmatched.empty
    m = tr.messages
    assert len(m) == np
    assert all(abs(a - b) == 1 and min(a, b) % 2 == 0
               for a, b in zip(m["send_rank"], m["recv_rank"], strict=True))
