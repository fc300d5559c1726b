"""Properties every mpiscope trace must have, whatever the program (docs/trace-format.md)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from mpiscope_testing.traceread import Event, Trace, read_print, read_python

# Region roles as docs/trace-format.md assigns them (Score-P's choice)
ROLE_OF = {
    **{f: "BARRIER" for f in ("MPI_Barrier", "MPI_Ibarrier")},
    **{f: "COLL_ONE2ALL" for f in ("MPI_Bcast", "MPI_Ibcast", "MPI_Scatter", "MPI_Scatterv")},
    **{f: "COLL_ALL2ONE" for f in ("MPI_Reduce", "MPI_Ireduce", "MPI_Gather", "MPI_Gatherv")},
    **{f: "COLL_ALL2ALL" for f in (
        "MPI_Allreduce", "MPI_Iallreduce", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
        "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block")},
    **{f: "COLL_OTHER" for f in ("MPI_Scan", "MPI_Exscan")},
    **{f: "POINT2POINT" for f in (
        "MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Recv", "MPI_Sendrecv",
        "MPI_Sendrecv_replace", "MPI_Isend", "MPI_Issend", "MPI_Irsend", "MPI_Irecv",
        "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test", "MPI_Testall",
        "MPI_Testany", "MPI_Testsome", "MPI_Probe", "MPI_Iprobe")},
    **{f: "FUNCTION" for f in (
        "MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Abort", "MPI_Comm_dup",
        "MPI_Comm_split", "MPI_Comm_create", "MPI_Cart_create", "MPI_Comm_free")},
    # nonblocking collectives take their blocking twin's role; neighbourhood ones COLL_OTHER
    **{f: "COLL_ALL2ONE" for f in ("MPI_Igather", "MPI_Igatherv")},
    **{f: "COLL_ONE2ALL" for f in ("MPI_Iscatter", "MPI_Iscatterv")},
    **{f: "COLL_ALL2ALL" for f in (
        "MPI_Iallgather", "MPI_Iallgatherv", "MPI_Ialltoall", "MPI_Ialltoallv", "MPI_Ialltoallw",
        "MPI_Ireduce_scatter", "MPI_Ireduce_scatter_block")},
    **{f: "COLL_OTHER" for f in ("MPI_Iscan", "MPI_Iexscan")},
    **{f"MPI_{prefix}_{f}": "COLL_OTHER" for prefix in ("Neighbor", "Ineighbor") for f in (
        "allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw")},
    **{f: "POINT2POINT" for f in (
        "MPI_Mprobe", "MPI_Improbe", "MPI_Mrecv", "MPI_Imrecv", "MPI_Ibsend", "MPI_Ssend_init",
        "MPI_Bsend_init", "MPI_Rsend_init")},
    **{f: "FUNCTION" for f in (
        "MPI_Comm_split_type", "MPI_Comm_dup_with_info", "MPI_Comm_idup",
        "MPI_Comm_create_group", "MPI_Intercomm_create", "MPI_Intercomm_merge", "MPI_Cart_sub",
        "MPI_Graph_create", "MPI_Dist_graph_create", "MPI_Dist_graph_create_adjacent")},
}
NBC_REGIONS = {"MPI_Ibarrier", "MPI_Ibcast", "MPI_Ireduce", "MPI_Iallreduce"} | {
    f for f, role in ROLE_OF.items()
    if f.startswith(("MPI_Ig", "MPI_Isc", "MPI_Iall", "MPI_Ired", "MPI_Iex", "MPI_Ineighbor_"))}

SEND_REGIONS = {"MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Sendrecv",
                "MPI_Sendrecv_replace"}
RECV_REGIONS = {"MPI_Recv", "MPI_Sendrecv", "MPI_Sendrecv_replace", "MPI_Mrecv"}
COMPLETION_REGIONS = {"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test",
                      "MPI_Testall", "MPI_Testany", "MPI_Testsome"}
ISEND_REGIONS = {"MPI_Isend", "MPI_Issend", "MPI_Irsend", "MPI_Ibsend", "MPI_Start",
                 "MPI_Startall"}
IRECV_REGIONS = {"MPI_Irecv", "MPI_Imrecv", "MPI_Start", "MPI_Startall"}
# which region each payload event may appear in
ALLOWED_IN = {
    "MpiSend": SEND_REGIONS,
    "MpiRecv": RECV_REGIONS,
    "MpiIsend": ISEND_REGIONS,
    "MpiIrecvRequest": IRECV_REGIONS,
    "MpiIsendComplete": COMPLETION_REGIONS,
    "MpiIrecv": COMPLETION_REGIONS,
    "MpiRequestTest": {"MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome"},
    "MpiRequestCancelled": COMPLETION_REGIONS | {"MPI_Cancel"},
    "NonBlockingCollectiveRequest": NBC_REGIONS,
    "NonBlockingCollectiveComplete": COMPLETION_REGIONS,
}
# RMA and MPI-IO records: inside the window's / file's own calls, or the Wait/Test that
# completes a request-based operation
RMA_CALLS = ("MPI_Win_", "MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Get_accumulate",
             "MPI_Fetch_and_op", "MPI_Compare_and_swap", "MPI_Rput", "MPI_Rget",
             "MPI_Raccumulate", "MPI_Rget_accumulate")


def record_may_be_in(kind: str, region: str) -> bool:
    if region.endswith("_c") and region[:-2] in ROLE_OF:  # MPI-4 large-count twin
        region = region[:-2]
    if kind.startswith("Rma"):
        return region.startswith(RMA_CALLS) or region in COMPLETION_REGIONS
    if kind.startswith("Io"):
        return region.startswith("MPI_File_") or region in COMPLETION_REGIONS
    return region in ALLOWED_IN[kind]


COLLECTIVE_REGIONS = {f for f, role in ROLE_OF.items() if role.startswith(("COLL", "BARRIER"))
                      and f not in ALLOWED_IN["NonBlockingCollectiveRequest"]}
COLLECTIVE_REGIONS |= {f"{f}_c" for f in COLLECTIVE_REGIONS}  # their large-count twins


def read_both(trace_dir: Path) -> Trace:
    """Read with the Python reader and otf2-print; insist they see the same trace."""
    assert (trace_dir / "traces.otf2").is_file(), f"no anchor file in {trace_dir}"
    py, text = read_python(trace_dir), read_print(trace_dir)
    assert py.comms == text.comms
    assert py.hosts == text.hosts
    assert py.locations == text.locations and py.groups == text.groups
    assert py.regions == text.regions
    assert py.events.keys() == text.events.keys()
    for rank in py.events:
        assert [(e.kind, e.time, e.fields) for e in py.events[rank]] == \
            [(e.kind, e.time, e.fields) for e in text.events[rank]], f"readers differ on {rank}"
    return py


def check_definitions(trace: Trace, nranks: int) -> None:
    """Location `rank` is each rank's main thread; a thread t > 0 that called MPI is
    location rank + t * nranks, "rank R thread T", in the rank's process."""
    assert set(range(nranks)) <= set(trace.events)
    for loc in trace.events:
        rank, thread = loc % nranks, loc // nranks
        assert trace.rank_of(loc) == rank
        assert trace.locations[loc] == (f"rank {rank}" if thread == 0
                                        else f"rank {rank} thread {thread}")
    for rank in range(nranks):  # threads numbered densely
        assert trace.threads(rank) == [rank + t * nranks
                                       for t in range(len(trace.threads(rank)))]
    assert trace.comms[0].name == "MPI_COMM_WORLD"
    assert trace.comms[0].members == list(range(nranks))
    assert trace.comms[1].name == "MPI_COMM_SELF"
    for name, (paradigm, role) in trace.regions.items():
        if paradigm == "USER":  # a call path's function (MPISCOPE_CALLPATH_DEPTH), never entered
            assert role == "FUNCTION", name
            continue
        assert paradigm == "MPI", name
        if name in ROLE_OF:
            assert role == ROLE_OF[name], f"{name}: role {role}, expected {ROLE_OF[name]}"


def check_structure(trace: Trace) -> None:
    """Enter/Leave balanced and never nested (the interposer's own MPI calls are not
    recorded); payload events inside the region that may produce them; collectives
    framed by Begin/End; per-rank time never goes backwards."""
    check_placement(trace)
    for rank, events in trace.events.items():
        region: str | None = None
        in_collective = False
        last = 0
        for e in events:
            assert e.time >= last, f"rank {rank}: time goes backwards at {e}"
            last = e.time
            if e.kind == "Enter":
                assert region is None, f"rank {rank}: {e['region']} entered inside {region}"
                assert "callsite" in e.fields, f"rank {rank}: {e['region']} without call site"
                region = str(e["region"])
            elif e.kind == "Leave":
                assert e["region"] == region, f"rank {rank}: leave {e['region']} in {region}"
                assert not in_collective, f"rank {rank}: {region} left inside a collective"
                region = None
            elif e.kind == "BufferFlush":
                continue
            else:
                assert region is not None, f"rank {rank}: {e.kind} outside any MPI call"
                if e.kind == "MpiCollectiveBegin":
                    assert region in COLLECTIVE_REGIONS and not in_collective, (rank, region)
                    in_collective = True
                elif e.kind == "MpiCollectiveEnd":
                    assert in_collective, f"rank {rank}: collective end without begin"
                    in_collective = False
                else:
                    assert record_may_be_in(e.kind, region), f"rank {rank}: {e.kind} in {region}"
        assert region is None, f"rank {rank}: {region} never left"


def check_placement(trace: Trace) -> None:
    """docs/trace-format.md: MpiCollectiveBegin right after Enter, MpiCollectiveEnd right
    before Leave, a blocking receive's MpiRecv just before Leave."""
    for rank, events in trace.events.items():
        events = [e for e in events if e.kind != "BufferFlush"]
        for prev, e, nxt in zip(events, events[1:], events[2:], strict=False):
            if e.kind == "MpiCollectiveBegin":
                assert prev.kind == "Enter", (rank, prev, e)
            if e.kind in ("MpiCollectiveEnd", "MpiRecv"):
                assert nxt.kind == "Leave", (rank, e, nxt)


def check_requests(trace: Trace) -> None:
    """Every completion names a request that is outstanding; request ids of one-shot
    non-blocking calls are never reused; nothing is left outstanding at the end but as
    many requests as MPI_Request_free was called with requests outstanding (an active
    request freed completes unseen: MPI has no hook, interposer/README.md)."""
    for rank, events in trace.events.items():
        outstanding: dict[int, str] = {}
        started: dict[int, str] = {}  # request id -> where, for messages
        used: set[int] = set()
        region = None
        freed = 0  # MPI_Request_free calls while requests were outstanding
        for e in events:
            if e.kind == "Enter":
                region = e["region"]
                freed += region == "MPI_Request_free" and bool(outstanding)
            kind = {"MpiIsend": "send", "MpiIrecvRequest": "recv",
                    "NonBlockingCollectiveRequest": "coll"}.get(e.kind)
            if kind:
                rid = int(e["request"])
                assert rid not in outstanding, f"rank {rank}: request {rid} started twice"
                if region not in ("MPI_Start", "MPI_Startall"):
                    assert rid not in used, f"rank {rank}: request id {rid} reused"
                outstanding[rid] = kind
                started[rid] = f"{region}(tag {e.get('tag')}) at t={e.time}"
                used.add(rid)
            done = {"MpiIsendComplete": "send", "MpiIrecv": "recv", "MpiRequestCancelled": None,
                    "NonBlockingCollectiveComplete": "coll"}
            if e.kind in done:
                rid = int(e["request"])
                assert rid in outstanding, f"rank {rank}: {e.kind} of unknown request {rid}"
                want = done[e.kind]
                assert want is None or outstanding[rid] == want, (rank, e.kind, rid)
                del outstanding[rid]
            if e.kind == "MpiRequestTest":
                assert int(e["request"]) in outstanding, (rank, e)
        assert len(outstanding) <= freed, f"rank {rank}: requests never completed: " + \
            ", ".join(f"{rid}: {started[rid]}" for rid in outstanding)


def check_well_formed(trace: Trace, nranks: int) -> None:
    """Every property above that any trace of `nranks` ranks must have."""
    check_definitions(trace, nranks)
    check_structure(trace)
    check_requests(trace)


def world(trace: Trace, comm: int, rank_in_comm: int, rank: int = -1) -> int:
    """World rank of `rank`'s peer `rank_in_comm` (in the remote group of an
    intercommunicator)."""
    return trace.comms[comm].peer(rank, rank_in_comm)


def messages(trace: Trace) -> tuple[Counter, Counter]:
    """(sends, receives) as counters of (from, to, comm, tag, bytes) in world ranks."""
    sends: Counter = Counter()
    recvs: Counter = Counter()
    for loc, events in trace.events.items():
        rank = trace.rank_of(loc)
        for e in events:
            if e.kind in ("MpiSend", "MpiIsend"):
                sends[(rank, world(trace, e["comm"], e["peer"], rank), e["comm"], e["tag"],
                       e["bytes"])] += 1
            elif e.kind in ("MpiRecv", "MpiIrecv"):
                recvs[(world(trace, e["comm"], e["peer"], rank), rank, e["comm"], e["tag"],
                       e["bytes"])] += 1
    return sends, recvs


def p2p_of(trace: Trace, rank: int, kind: str) -> Counter:
    """Counter of (peer as world rank, tag, bytes) of one message event kind."""
    return Counter((world(trace, e["comm"], e["peer"], rank), e["tag"], e["bytes"])
                   for e in trace.of(rank, kind))


def callsites(trace: Trace, rank: int, region: str) -> list[str]:
    """Call sites (basename:line) of every Enter of `region` on `rank`."""
    return [Path(str(e["callsite"])).name for e in trace.of(rank, "Enter")
            if e["region"] == region]


def fnv1a(data: bytes) -> int:
    """FNV-1a 64, the hash docs/trace-format.md specifies for collective payloads."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def first(events: list[Event], kind: str) -> Event:
    return next(e for e in events if e.kind == kind)
