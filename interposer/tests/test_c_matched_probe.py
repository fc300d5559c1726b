"""Matched probe and the point-to-point variants in C (programs/mprobe.c), at 2 and 3 ranks.

MPI_Mprobe/MPI_Improbe record what MPI_Probe records (their region); the receive that
consumes the probed message records it on the communicator the probe named: MPI_Mrecv an
MpiRecv, MPI_Imrecv an MpiIrecvRequest and the MpiIrecv in the Wait that completes it, so
the analyzer matches every message to its send. Ibsend and the persistent Ssend/Bsend/
Rsend inits record what Isend and Send_init record.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace

INT = 4
# calls of the program that only book-keep (recorded or not, as the spec decides)
LOCAL = {"MPI_Comm_rank", "MPI_Comm_size", "MPI_Get_count", "MPI_Pack_size",
         "MPI_Buffer_attach", "MPI_Buffer_detach"}


@dataclass
class Run:
    np: int
    trace: Trace
    loaded: mpiscope.Trace
    polls: dict[int, int]  # MPI_Improbe calls per rank, as the program counted them


@pytest.fixture(scope="module", params=[2, 3], ids=lambda n: f"np{n}")
def mprobe(request: pytest.FixtureRequest, programs, tmp_path_factory) -> Run:
    np = request.param
    out = tmp_path_factory.mktemp(f"mprobe{np}") / "trace"
    job = mpijobs.run([str(programs["mprobe.c"])], np=np, out=out)
    assert job.returncode == 0, job.stderr
    polls = {int(r): int(k) for r, k in re.findall(r"rank (\d+) improbe (\d+)", job.stdout)}
    assert sorted(polls) == list(range(np))
    return Run(np, tc.read_both(out), mpiscope.load(out), polls)


def test_structure(mprobe: Run) -> None:
    tc.check_well_formed(mprobe.trace, mprobe.np)


def test_every_call(mprobe: Run) -> None:
    for r in range(mprobe.np):
        got = Counter({f: k for f, k in mprobe.trace.enters(r).items()
                       if f not in LOCAL and f != "MPI_Improbe"})
        # idle polls are merged into visits that carry their count (mpiscope:calls)
        improbes = sum(int(e.get("mpiscope:calls", 1)) for e in mprobe.trace.of(r, "Leave")
                       if e["region"] == "MPI_Improbe")
        assert improbes == mprobe.polls[r], r
        assert got == Counter({
            "MPI_Init": 1, "MPI_Comm_dup": 1, "MPI_Isend": 2, "MPI_Mprobe": 1, "MPI_Mrecv": 1,
            "MPI_Wait": 3, "MPI_Imrecv": 1, "MPI_Irecv": 4,
            "MPI_Barrier": 1, "MPI_Ibsend": 1, "MPI_Ssend_init": 1, "MPI_Bsend_init": 1,
            "MPI_Rsend_init": 1, "MPI_Startall": 1, "MPI_Waitall": 2, "MPI_Request_free": 3,
            "MPI_Comm_free": 1, "MPI_Finalize": 1}), r


def test_receives_name_the_probed_message(mprobe: Run) -> None:
    t, np = mprobe.trace, mprobe.np
    for r in range(np):
        left, right = (r - 1) % np, (r + 1) % np
        (recv,) = t.of(r, "MpiRecv")  # the Mrecv's
        assert (t.comms[recv["comm"]].name, tc.world(t, recv["comm"], recv["peer"]),
                recv["tag"], recv["bytes"]) == ("comm 2", left, 11, 3 * INT)
        irecvs = t.of(r, "MpiIrecv")
        assert [(e["tag"], e["bytes"]) for e in irecvs] == \
            [(12, 5 * INT)] + [(21 + i, 7 * INT) for i in range(4)]
        assert {tc.world(t, e["comm"], e["peer"]) for e in irecvs} == {left}
        assert {e["comm"] for e in irecvs} == {recv["comm"]}
        isends = t.of(r, "MpiIsend")
        assert [(tc.world(t, e["comm"], e["peer"]), e["tag"], e["bytes"]) for e in isends] == \
            [(right, 11, 3 * INT), (right, 12, 5 * INT)] + \
            [(right, 21 + i, 7 * INT) for i in range(4)]
    sends, recvs = tc.messages(t)
    assert sends == recvs


def test_analyzer_matches_every_message(mprobe: Run) -> None:
    tr, np = mprobe.loaded, mprobe.np
    assert tr.unmatched.empty
    m = tr.messages
    assert len(m) == 6 * np
    calls = tr.calls.set_index("call")
    by_recv = Counter(str(calls.loc[c, "function"]) for c in m["recv_call"])
    by_send = Counter(str(calls.loc[c, "function"]) for c in m["send_call"])
    assert by_recv == {"MPI_Mrecv": np, "MPI_Imrecv": np, "MPI_Irecv": 4 * np}
    assert by_send == {"MPI_Isend": 2 * np, "MPI_Ibsend": np, "MPI_Startall": 3 * np}
    for row in m.itertuples():
        assert row.recv_rank == (row.send_rank + 1) % np
    imrecv = m[[str(calls.loc[c, "function"]) == "MPI_Imrecv" for c in m["recv_call"]]]
    assert {str(calls.loc[c, "function"]) for c in imrecv["recv_complete_call"]} == {"MPI_Wait"}
