"""Point-to-point in C (programs/p2p.c), traced at 1, 2 and 4 ranks.

Each rank's exact sequence of calls is known from the source, so every count below is
exact. The program prints how often its polling loops (Test*, Waitsome, Iprobe) ran; the
trace must show exactly that many calls.
"""

from __future__ import annotations

import re
import socket
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace, archive_properties, otf2_print


@dataclass
class Polls:
    test: int
    testall: int
    testany: int
    testsome: int
    waitsome: int
    iprobe: int
    idle_testany: int
    idle_testsome: int
    cancelled: int
    clock_ok: int


@dataclass
class Run:
    np: int
    trace: Trace
    polls: dict[int, Polls]
    stdout: str
    out: Path


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda n: f"np{n}")
def p2p(request: pytest.FixtureRequest, programs, tmp_path_factory) -> Run:
    np = request.param
    out = tmp_path_factory.mktemp(f"p2p{np}") / "trace"
    # every polling call its own visit: these tests count calls and the requests each
    # idle Test* tested (merged polling: test_polling.py)
    job = mpijobs.run([str(programs["p2p.c"])], np=np, out=out, env={"MPISCOPE_POLL": "all"})
    assert job.returncode == 0, job.stderr
    polls = {}
    for m in re.finditer(r"rank (\d+) POLL (.*)", job.stdout):
        kv = dict(item.split("=") for item in m.group(2).split())
        polls[int(m.group(1))] = Polls(**{k: int(v) for k, v in kv.items()})
    assert sorted(polls) == list(range(np)), job.stdout
    return Run(np, tc.read_both(out), polls, job.stdout, out)


def ring(np: int, rank: int) -> tuple[int, int, int | None]:
    """(left, right, partner or None) exactly as p2p.c computes them."""
    partner = rank ^ 1
    return (rank + np - 1) % np, (rank + 1) % np, partner if partner < np else None


def expected_calls(np: int, rank: int, p: Polls) -> Counter:
    _, _, partner = ring(np, rank)
    calls = Counter({
        "MPI_Init": 1, "MPI_Finalize": 1, "MPI_Barrier": 1, "MPI_Rsend": 1, "MPI_Irsend": 1,
        "MPI_Irecv": 13, "MPI_Isend": 12, "MPI_Issend": 1, "MPI_Waitall": 7,
        "MPI_Sendrecv": 2, "MPI_Sendrecv_replace": 1, "MPI_Waitany": 2, "MPI_Wait": 8,
        "MPI_Waitsome": p.waitsome, "MPI_Test": p.test, "MPI_Testall": p.testall,
        "MPI_Testany": p.testany, "MPI_Testsome": p.testsome, "MPI_Iprobe": p.iprobe,
        "MPI_Probe": 1, "MPI_Send": 1, "MPI_Recv": 3,  # PROC_NULL send; 2 probed + PROC_NULL
        "MPI_Send_init": 1, "MPI_Recv_init": 1, "MPI_Startall": 3, "MPI_Start": 2,
        "MPI_Request_free": 2, "MPI_Cancel": 1,
        # no spec entry, timed wrappers generated from mpi.h (Test_cancelled, Comm_rank/
        # size, Wtime/Wtick are local-only: not recorded)
        "MPI_Buffer_attach": 1, "MPI_Buffer_detach": 1, "MPI_Type_vector": 1,
        "MPI_Type_contiguous": 1, "MPI_Type_commit": 2, "MPI_Type_free": 2,
    })
    if partner is not None and rank % 2 == 0:
        calls.update({"MPI_Send": 1, "MPI_Recv": 1, "MPI_Ssend": 1, "MPI_Bsend": 1})
    elif partner is not None:
        calls.update({"MPI_Recv": 3, "MPI_Send": 1})
    return calls


def expected_messages(np: int, rank: int) -> dict[str, Counter]:
    """(peer world rank, tag, bytes) of every message event kind on `rank`."""
    left, right, partner = ring(np, rank)
    sends = [(right, 5, 4), (right, 7, 16), (right, 8, 16), (right, 23, 24)]
    recvs = [(left, 7, 16), (left, 8, 16), (left, 17, 12), (left, 18, 24), (left, 23, 24)]
    if partner is not None and rank % 2 == 0:
        sends += [(partner, 1, 32), (partner, 3, 4), (partner, 4, 8)]
        recvs += [(partner, 2, 24)]
    elif partner is not None:
        sends += [(partner, 2, 24)]
        recvs += [(partner, 1, 32), (partner, 3, 4), (partner, 4, 8)]
    isends = [(right, tag, size) for tag, size in (
        (6, 4), (9, 20), (10, 8), (11, 8), (12, 12), (13, 4), (14, 4), (15, 4), (16, 4),
        (17, 12), (18, 24), (21, 4), (22, 16))] + [(right, 19, 8)] * 4
    irecvs = [(left, tag, size) for tag, size in (
        (5, 4), (6, 4), (9, 20), (10, 8), (11, 8), (12, 12), (13, 4), (14, 4), (15, 4),
        (16, 4), (21, 4), (22, 16))] + [(left, 19, 8)] * 4
    return {"MpiSend": Counter(sends), "MpiRecv": Counter(recvs),
            "MpiIsend": Counter(isends), "MpiIrecv": Counter(irecvs)}


def test_definitions_and_structure(p2p: Run) -> None:
    tc.check_definitions(p2p.trace, p2p.np)
    tc.check_structure(p2p.trace)


def test_every_call_recorded_once(p2p: Run) -> None:
    """Exactly the program's calls: no MPI_Wtime/Wtick (called 1000 times, local-only) and
    none of the interposer's own MPI traffic (clock sync, definition exchange)."""
    for rank in range(p2p.np):
        assert p2p.polls[rank].clock_ok == 1
        assert p2p.trace.enters(rank) == expected_calls(p2p.np, rank, p2p.polls[rank]), rank
        assert p2p.trace.kinds(rank)["Leave"] == p2p.trace.kinds(rank)["Enter"]


def test_message_peers_tags_and_sizes(p2p: Run) -> None:
    """Includes ANY_SOURCE receives with MPI_STATUS(ES)_IGNORE (sender still known),
    derived datatypes (bytes = count x type size) and no event for MPI_PROC_NULL."""
    for rank in range(p2p.np):
        for kind, want in expected_messages(p2p.np, rank).items():
            assert tc.p2p_of(p2p.trace, rank, kind) == want, (rank, kind)


def test_request_events(p2p: Run) -> None:
    tc.check_requests(p2p.trace)  # names any request that never completes
    for rank in range(p2p.np):
        p = p2p.polls[rank]
        kinds = p2p.trace.kinds(rank)
        assert p.cancelled == 1
        assert kinds["MpiIrecvRequest"] == 13 + 4  # Irecv + persistent receive starts
        assert kinds["MpiIsendComplete"] == 17
        assert kinds["MpiRequestCancelled"] == 1
        # a Test* that completes nothing records each request it tested
        idle = (p.test - 1) + 2 * (p.testall - 1) + p.idle_testany + p.idle_testsome
        assert kinds["MpiRequestTest"] == idle, rank


def test_sends_match_receives(p2p: Run) -> None:
    sends, recvs = tc.messages(p2p.trace)
    assert sends == recvs
    assert sum(sends.values()) == p2p.np * 21 + (p2p.np // 2) * 4


def test_receive_follows_send_across_ranks(p2p: Run) -> None:
    """Clocks aligned: a blocking receive completes after its send started."""
    if p2p.np < 2:
        pytest.skip("needs two ranks")
    t = p2p.trace
    send = next(e for e in t.of(0, "MpiSend") if e["tag"] == 1)
    recv = next(e for e in t.of(1, "MpiRecv") if e["tag"] == 1)
    assert recv.time > send.time


def test_call_sites(p2p: Run) -> None:
    t = p2p.trace
    for rank in range(p2p.np):
        assert t.of(rank, "Enter")[0]["region"] == "MPI_Init"
        assert tc.callsites(t, rank, "MPI_Init") == [mpijobs.callsite("p2p.c", "init")]
        assert tc.callsites(t, rank, "MPI_Finalize") == [mpijobs.callsite("p2p.c", "finalize")]
        assert tc.callsites(t, rank, "MPI_Startall") == [mpijobs.callsite("p2p.c",
                                                                          "startall")] * 3
        waitall = tc.callsites(t, rank, "MPI_Waitall")
        assert waitall.count(mpijobs.callsite("p2p.c", "waitall")) == 1
        isend = mpijobs.callsite("p2p.c", "isend")
        assert tc.callsites(t, rank, "MPI_Isend").count(isend) == 1
        if rank % 2 == 0 and p2p.np > 1:
            assert mpijobs.callsite("p2p.c", "send") in tc.callsites(t, rank, "MPI_Send")
            assert mpijobs.callsite("p2p.c", "recv_any") in tc.callsites(t, rank, "MPI_Recv")
        # the full path of the source file is recorded
        init = tc.first(t.events[rank], "Enter")
        assert Path(str(init["callsite"]).rsplit(":", 1)[0]) == mpijobs.PROGRAMS / "p2p.c"


def test_hosts_in_system_tree(p2p: Run) -> None:
    assert set(p2p.trace.hosts.values()) == {socket.gethostname()}


def test_clock_properties(p2p: Run) -> None:
    (clock,) = [line for line in otf2_print(p2p.out, "-G").splitlines()
                if line.startswith("CLOCK_PROPERTIES")]
    ticks = int(re.search(r"Ticks per Seconds: (\d+)", clock).group(1))
    offset = int(re.search(r"Global Offset: (\d+)", clock).group(1))
    length = int(re.search(r"Length: (\d+)", clock).group(1))
    times = [e.time for events in p2p.trace.events.values() for e in events]
    assert ticks == 1_000_000_000
    assert offset <= min(times) and max(times) <= offset + length


def test_archive_files(p2p: Run) -> None:
    """Exactly the OTF2 archive: nothing from mpirun or its daemons, which load the
    library too."""
    files = {str(f.relative_to(p2p.out)) for f in p2p.out.rglob("*") if f.is_file()}
    assert files == {"traces.otf2", "traces.def"} | {
        f"traces/{r}.{ext}" for r in range(p2p.np) for ext in ("evt", "def")}


def test_archive_properties(p2p: Run) -> None:
    props = archive_properties(p2p.out)
    assert Path(props["MPISCOPE::PROGRAM"]).name == "p2p"
    assert props["MPISCOPE::MPI_LIBRARY"].startswith("Open MPI v4")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", props["MPISCOPE::START_TIME"])
