"""Small synthetic OTF2 traces in mpiscope's format (docs/trace-format.md), for tests.

Built on the `otf2` Python writer. Times are integer nanoseconds *since the trace start*
exactly as they appear in the reader's tables (the builder pins the archive's
`global_offset`, so `t=0` is the trace start). Ranks and peers are **world ranks**; the
builder translates peers/roots into ranks within the communicator, as OTF2 stores them.

    from mpiscope_testing.tracegen import TraceBuilder

    tb = TraceBuilder(ranks=2, hosts=["node0", "node1"])
    tb.isend_call(0, 100, 110, dest=1, tag=7, nbytes=800, request=1, callsite="app.c:42")
    tb.irecv_call(1, 100, 105, request=1, callsite="app.c:44")
    tb.enter(0, 120, "MPI_Waitall", callsite="app.c:50")
    tb.isend_complete(0, 150, request=1)
    tb.leave(0, 150, "MPI_Waitall")
    tb.enter(1, 120, "MPI_Waitall", callsite="app.c:50")
    tb.irecv(1, 200, src=0, tag=7, nbytes=800, request=1)
    tb.leave(1, 200, "MPI_Waitall")
    for r in (0, 1):
        tb.collective(r, 300, 400 + r, "MPI_Allreduce", sent=8, received=8,
                      in_hash=r + 1, out_hash=3, callsite="app.c:60")
    path = tb.write(tmp_path / "trace")          # -> directory holding traces.otf2

Low level: `enter/leave` (any region name; names starting with `MPI_` are MPI regions
with Score-P's roles, anything else is a user region such as `"main"`), and one method
per OTF2 MPI event (`send`, `recv`, `isend`, `isend_complete`, `irecv_request`, `irecv`,
`request_test`, `cancelled`, `coll_begin`, `coll_end`, `buffer_flush`). High level:
`send_call`, `recv_call`, `isend_call`, `irecv_call`, `collective`, `call` (any MPI call
without payload). `rank` may be `(rank, thread)`: with `threads=N`, each rank is a process
of N CPU-thread locations, created rank by rank as Score-P does (location refs then differ
from ranks: rank r's thread t is ref r * N + t). Events of one rank may be added in any
order; they are written sorted by time (ties keep the order they were added in). Leaving
out Leaves or `MPI_Finalize` makes a truncated trace. `copy_trace(src, dst)` makes a
writable copy of a trace to damage; `local_definitions(tmp, nregions)` the bytes of a
location's local definitions as Score-P writes them (clock offsets, id maps).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import _otf2  # the otf2 package's C binding: archive properties
import otf2
from otf2.enums import (
    CollectiveOp,
    GroupType,
    IoAccessMode,
    IoCreationFlag,
    IoOperationFlag,
    IoOperationMode,
    IoParadigmClass,
    IoParadigmFlag,
    IoStatusFlag,
    LocationGroupType,
    LocationType,
    LockType,
    Paradigm,
    RegionRole,
    RmaAtomicType,
    RmaSyncLevel,
    RmaSyncType,
    RmaWinFlag,
    Type,
)

# the OTF2 format knowledge of mpiscope's own trace writer (roles, operations, call sites)
from mpiscope.archive.writer import (
    BASE_TIME,
    UNDEFINED_ROOT,
    CallingContexts,
    callpath_attribute,
    collective_op,
    parse_callsite,
    region_role,
)


@dataclass
class _Event:
    t: int
    seq: int
    kind: str
    args: tuple
    attrs: dict = field(default_factory=dict)


class TraceBuilder:
    """Collects events per rank, then writes one OTF2 archive with `write(dir)`.

    ranks: number of MPI ranks (one location each, location ref = rank).
    threads: locations per rank (thread 0 first); >1 numbers the locations rank-major.
    hosts: host name per rank (default: all on "node0").
    creator: "mpiscope" writes our archive properties (`MPISCOPE::VERSION` …) and the
        `mpiscope:*` attributes; "Score-P" writes neither (like a Score-P trace).
    program/cmdline/mpi_library/start_time: run metadata properties (mpiscope only).
    """

    def __init__(self, ranks: int, hosts: Sequence[str] | None = None, *,
                 creator: str = "mpiscope", program: str = "/tmp/app",
                 cmdline: str = "mpirun -np {n} /tmp/app", mpi_library: str = "Open MPI v4.1.4",
                 start_time: str = "2026-01-01T00:00:00Z", threads: int = 1) -> None:
        self.num_ranks = ranks
        self.threads = threads
        self.hosts = list(hosts) if hosts is not None else ["node0"] * ranks
        if len(self.hosts) != ranks:
            raise ValueError("one host name per rank")
        self.creator = creator
        self.properties = {
            "MPISCOPE::PROGRAM": program,
            "MPISCOPE::CMDLINE": cmdline.format(n=ranks),
            "MPISCOPE::MPI_LIBRARY": mpi_library,
            "MPISCOPE::START_TIME": start_time,
            "MPISCOPE::VERSION": "0.1.0",
        } if creator == "mpiscope" else {}
        # comm ref -> (name, world ranks in comm-rank order or None for COMM_SELF, parent)
        self.comms: dict[int, tuple[str, list[int] | None, int | None]] = {
            0: ("MPI_COMM_WORLD", list(range(ranks)), None),
            1: ("MPI_COMM_SELF", None, None),
        }
        self.events: list[list[_Event]] = [[] for _ in range(ranks)]  # main threads'
        self.thread_events: dict[tuple[int, int], list[_Event]] = {
            (r, t): [] for r in range(ranks) for t in range(1, threads)}
        self._seq = 0
        self.windows: dict[int, tuple[str, int]] = {}  # RmaWin ref -> (name, comm ref)
        self.files: dict[int, tuple[str, str, int]] = {}  # IoHandle ref -> (name, path, comm)

    # ------------------------------------------------------------------ definitions
    @property
    def world(self) -> int:
        return 0

    def comm(self, members: Sequence[int], name: str | None = None, parent: int = 0) -> int:
        """Define a communicator of the given world ranks (comm-rank order); returns its ref."""
        ref = max(self.comms) + 1
        self.comms[ref] = (name or f"comm {ref}", list(members), parent)
        return ref

    def window(self, comm: int = 0, name: str | None = None) -> int:
        """Define an RMA window over a communicator; returns its ref."""
        ref = len(self.windows)
        self.windows[ref] = (name or f"MPI_Win {ref}", comm)
        return ref

    def file(self, path: str, comm: int = 0, name: str | None = None) -> int:
        """Define an MPI-IO file handle (IoRegularFile `path`, paradigm MPI-IO)."""
        ref = len(self.files)
        self.files[ref] = (name or path, path, comm)
        return ref

    def _local(self, comm: int, world_rank: int | None, me: int) -> int:
        if world_rank is None:
            return UNDEFINED_ROOT
        members = self.comms[comm][1]
        if members is None:  # MPI_COMM_SELF
            return 0
        return members.index(world_rank)

    # ------------------------------------------------------------------ low-level events
    def _add(self, rank: int | tuple[int, int], t: int, kind: str, *args, **attrs) -> None:
        r, thread = rank if isinstance(rank, tuple) else (rank, 0)
        events = self.thread_events[(r, thread)] if thread else self.events[r]
        events.append(_Event(int(t), self._seq, kind, args, attrs))
        self._seq += 1

    def enter(self, rank: int, t: int, region: str, callsite: str | None = None,
              callpath: Sequence[str | tuple[str, str]] | None = None,
              run_delay: int | None = None) -> None:
        """`callpath`: the frames, innermost first, each `"file.c:LINE"` or (frame,
        function); written as OTF2 calling contexts with `mpiscope:callpath`. With a
        callpath and no callsite, `mpiscope:callsite` is left out (as the interposer may).
        `run_delay`: the thread's run-queue delay so far (ns), as the interposer samples
        it (`mpiscope:run_delay_ns`)."""
        self._add(rank, t, "enter", region, callsite=callsite,
                  callpath=tuple(callpath) if callpath else None, run_delay=run_delay)

    def leave(self, rank: int, t: int, region: str, run_delay: int | None = None) -> None:
        self._add(rank, t, "leave", region, run_delay=run_delay)

    def send(self, rank: int, t: int, dest: int, tag: int, nbytes: int, comm: int = 0) -> None:
        self._add(rank, t, "send", self._local(comm, dest, rank), comm, tag, nbytes)

    def recv(self, rank: int, t: int, src: int, tag: int, nbytes: int, comm: int = 0) -> None:
        self._add(rank, t, "recv", self._local(comm, src, rank), comm, tag, nbytes)

    def isend(self, rank: int, t: int, dest: int, tag: int, nbytes: int, request: int,
              comm: int = 0) -> None:
        self._add(rank, t, "isend", self._local(comm, dest, rank), comm, tag, nbytes, request)

    def isend_complete(self, rank: int, t: int, request: int) -> None:
        self._add(rank, t, "isend_complete", request)

    def irecv_request(self, rank: int, t: int, request: int) -> None:
        self._add(rank, t, "irecv_request", request)

    def irecv(self, rank: int, t: int, src: int, tag: int, nbytes: int, request: int,
              comm: int = 0) -> None:
        self._add(rank, t, "irecv", self._local(comm, src, rank), comm, tag, nbytes, request)

    def request_test(self, rank: int, t: int, request: int) -> None:
        self._add(rank, t, "request_test", request)

    def cancelled(self, rank: int, t: int, request: int) -> None:
        self._add(rank, t, "cancelled", request)

    def coll_begin(self, rank: int, t: int) -> None:
        self._add(rank, t, "coll_begin")

    def coll_end(self, rank: int, t: int, function: str, comm: int = 0, root: int | None = None,
                 sent: int = 0, received: int = 0, in_hash: int | None = None,
                 out_hash: int | None = None, prior_hash: int | None = None) -> None:
        """MpiCollectiveEnd; `root` is a world rank (None: rootless); `prior_hash`: the
        receive buffer's hash at entry."""
        self._add(rank, t, "coll_end", collective_op(function), comm,
                  self._local(comm, root, rank), sent, received, in_hash=in_hash,
                  out_hash=out_hash, prior_hash=prior_hash)

    def nbc_request(self, rank: int, t: int, request: int) -> None:
        """NonBlockingCollectiveRequest (in the posting call, e.g. MPI_Ialltoall)."""
        self._add(rank, t, "nbc_request", request)

    def nbc_complete(self, rank: int, t: int, function: str, request: int, comm: int = 0,
                     root: int | None = None, sent: int = 0, received: int = 0) -> None:
        """NonBlockingCollectiveComplete (in the Wait/Test); `function` names the blocking
        operation (`"MPI_Alltoall"`), `root` a world rank."""
        self._add(rank, t, "nbc_complete", collective_op(function), comm,
                  self._local(comm, root, rank), sent, received, request)

    def buffer_flush(self, rank: int, t: int, stop: int) -> None:
        self._add(rank, t, "flush", stop)

    # RMA (targets are world ranks, stored as ranks in the window's communicator)
    def _target(self, win: int, target: int | None) -> int:
        return self._local(self.windows[win][1], target, 0)

    def rma_put(self, rank: int, t: int, win: int, target: int, nbytes: int,
                matching: int) -> None:
        self._add(rank, t, "rma_put", win, self._target(win, target), nbytes, matching)

    def rma_get(self, rank: int, t: int, win: int, target: int, nbytes: int,
                matching: int) -> None:
        self._add(rank, t, "rma_get", win, self._target(win, target), nbytes, matching)

    def rma_atomic(self, rank: int, t: int, win: int, target: int, sent: int, received: int,
                   matching: int) -> None:
        self._add(rank, t, "rma_atomic", win, self._target(win, target), sent, received,
                  matching)

    def rma_complete(self, rank: int, t: int, win: int, matching: int) -> None:
        """RmaOpCompleteBlocking."""
        self._add(rank, t, "rma_complete", win, matching)

    def rma_coll_begin(self, rank: int, t: int) -> None:
        self._add(rank, t, "rma_coll_begin")

    def rma_coll_end(self, rank: int, t: int, win: int, op: str = "BARRIER") -> None:
        """RmaCollectiveEnd; `op` an OTF2 CollectiveOp name (a fence: BARRIER; window
        creation as Score-P brackets it: CREATE_HANDLE_AND_ALLOCATE …)."""
        self._add(rank, t, "rma_coll_end", win, op)

    def rma_group_sync(self, rank: int, t: int, win: int, members: Sequence[int]) -> None:
        """RmaGroupSync naming world ranks `members`."""
        self._add(rank, t, "rma_group_sync", win, tuple(members))

    def rma_lock(self, rank: int, t: int, event: str, win: int, target: int, lock_id: int,
                 exclusive: bool = True) -> None:
        """event: "request", "acquire" or "release"."""
        self._add(rank, t, f"rma_{event}_lock", win, self._target(win, target), lock_id,
                  exclusive)

    def rma_sync(self, rank: int, t: int, win: int, target: int) -> None:
        self._add(rank, t, "rma_sync", win, self._target(win, target))

    def rma_win_create(self, rank: int, t: int, win: int) -> None:
        self._add(rank, t, "rma_win_create", win)

    def rma_win_destroy(self, rank: int, t: int, win: int) -> None:
        self._add(rank, t, "rma_win_destroy", win)

    # MPI-IO
    def io_create(self, rank: int, t: int, handle: int) -> None:
        self._add(rank, t, "io_create", handle)

    def io_destroy(self, rank: int, t: int, handle: int) -> None:
        self._add(rank, t, "io_destroy", handle)

    def io_begin(self, rank: int, t: int, handle: int, mode: str, nbytes: int, matching: int,
                 collective: bool = False, nonblocking: bool = False) -> None:
        """IoOperationBegin; mode "read", "write" or "flush"."""
        self._add(rank, t, "io_begin", handle, mode, nbytes, matching, collective, nonblocking)

    def io_issued(self, rank: int, t: int, handle: int, matching: int) -> None:
        self._add(rank, t, "io_issued", handle, matching)

    def io_complete(self, rank: int, t: int, handle: int, nbytes: int, matching: int) -> None:
        self._add(rank, t, "io_complete", handle, nbytes, matching)

    # ------------------------------------------------------------------ whole calls
    def call(self, rank: int, start: int, end: int, function: str,
             callsite: str | None = None,
             callpath: Sequence[str | tuple[str, str]] | None = None,
             run_delay: tuple[int | None, int | None] = (None, None)) -> None:
        """An MPI call without payload events (MPI_Init, MPI_Comm_rank, MPI_Finalize …);
        `run_delay`: the samples on its Enter and Leave (see `enter`)."""
        self.enter(rank, start, function, callsite, callpath, run_delay=run_delay[0])
        self.leave(rank, end, function, run_delay=run_delay[1])

    def send_call(self, rank: int, start: int, end: int, dest: int, tag: int, nbytes: int, *,
                  comm: int = 0, function: str = "MPI_Send", callsite: str | None = None,
                  callpath: Sequence[str | tuple[str, str]] | None = None,
                  send_time: int | None = None) -> None:
        """Blocking send: MpiSend at `send_time` (default: the Enter time)."""
        self.enter(rank, start, function, callsite, callpath)
        self.send(rank, start if send_time is None else send_time, dest, tag, nbytes, comm)
        self.leave(rank, end, function)

    def recv_call(self, rank: int, start: int, end: int, src: int, tag: int, nbytes: int, *,
                  comm: int = 0, function: str = "MPI_Recv", callsite: str | None = None,
                  callpath: Sequence[str | tuple[str, str]] | None = None,
                  recv_time: int | None = None) -> None:
        """Blocking receive: MpiRecv at `recv_time` (default: the Leave time)."""
        self.enter(rank, start, function, callsite, callpath)
        self.recv(rank, end if recv_time is None else recv_time, src, tag, nbytes, comm)
        self.leave(rank, end, function)

    def isend_call(self, rank: int, start: int, end: int, dest: int, tag: int, nbytes: int,
                   request: int, *, comm: int = 0, function: str = "MPI_Isend",
                   callsite: str | None = None) -> None:
        self.enter(rank, start, function, callsite)
        self.isend(rank, start, dest, tag, nbytes, request, comm)
        self.leave(rank, end, function)

    def irecv_call(self, rank: int, start: int, end: int, request: int, *,
                   function: str = "MPI_Irecv", callsite: str | None = None) -> None:
        self.enter(rank, start, function, callsite)
        self.irecv_request(rank, start, request)
        self.leave(rank, end, function)

    def collective(self, rank: int, start: int, end: int, function: str, *, comm: int = 0,
                   root: int | None = None, sent: int = 0, received: int = 0,
                   in_hash: int | None = None, out_hash: int | None = None,
                   prior_hash: int | None = None, callsite: str | None = None,
                   callpath: Sequence[str | tuple[str, str]] | None = None,
                   run_delay: tuple[int | None, int | None] = (None, None)) -> None:
        """A blocking collective: Enter, MpiCollectiveBegin, MpiCollectiveEnd, Leave."""
        self.enter(rank, start, function, callsite, callpath, run_delay=run_delay[0])
        self.coll_begin(rank, start)
        self.coll_end(rank, end, function, comm, root, sent, received, in_hash, out_hash,
                      prior_hash)
        self.leave(rank, end, function, run_delay=run_delay[1])

    def fence(self, rank: int, start: int, end: int, win: int,
              callsite: str | None = None) -> None:
        """MPI_Win_fence: RmaCollectiveBegin at Enter, RmaCollectiveEnd before Leave."""
        self.enter(rank, start, "MPI_Win_fence", callsite)
        self.rma_coll_begin(rank, start)
        self.rma_coll_end(rank, end, win)
        self.leave(rank, end, "MPI_Win_fence")

    def rma_call(self, rank: int, start: int, end: int, function: str, win: int, target: int,
                 nbytes: int, matching: int, callsite: str | None = None) -> None:
        """MPI_Put / MPI_Get (by `function`) with its RmaPut / RmaGet."""
        self.enter(rank, start, function, callsite)
        (self.rma_get if function in ("MPI_Get", "MPI_Rget") else self.rma_put)(
            rank, start, win, target, nbytes, matching)
        self.leave(rank, end, function)

    def io_call(self, rank: int, start: int, end: int, function: str, handle: int, mode: str,
                nbytes: int, matching: int, *, collective: bool = False,
                callsite: str | None = None) -> None:
        """A blocking MPI-IO call: IoOperationBegin … IoOperationComplete inside it."""
        self.enter(rank, start, function, callsite)
        self.io_begin(rank, start, handle, mode, nbytes, matching, collective)
        self.io_complete(rank, end, handle, nbytes, matching)
        self.leave(rank, end, function)

    # ------------------------------------------------------------------ writing
    def write(self, directory: str | os.PathLike, *, chunk_size_events: int = 1 << 20) -> Path:
        """Write the archive into `directory` (created; must not hold a trace yet).
        `chunk_size_events`: OTF2's event chunk size (its default; smaller ones make a
        reader allocate less per location)."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        with otf2.writer.open(str(directory), timer_resolution=1_000_000_000,
                              chunk_size_events=chunk_size_events) as w:
            # pin global_offset to t=0 even if no event happens exactly then
            w._update_timestamps(BASE_TIME)
            self._write(w)
            for key, value in self.properties.items():
                _otf2.Archive_SetProperty(w.handle, key, value, False)
        return directory

    def _write(self, w: otf2.writer.Writer) -> None:
        d = w.definitions
        root = d.system_tree_node("machine", class_name="machine")
        nodes = {h: d.system_tree_node(h, class_name="node", parent=root)
                 for h in dict.fromkeys(self.hosts)}
        groups = [d.location_group(f"MPI Rank {r}", location_group_type=LocationGroupType.PROCESS,
                                   system_tree_parent=nodes[self.hosts[r]])
                  for r in range(self.num_ranks)]
        threads = {(r, t): d.location(f"rank {r}" if t == 0 else f"rank {r} thread {t}",
                                      type=LocationType.CPU_THREAD, group=groups[r])
                   for r in range(self.num_ranks) for t in range(self.threads)}
        locs = [threads[(r, 0)] for r in range(self.num_ranks)]
        d.group("MPI locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                members=locs)
        comms = {}
        for ref in sorted(self.comms):
            name, members, parent = self.comms[ref]
            if members is None:
                grp = d.group(name, group_type=GroupType.COMM_SELF, paradigm=Paradigm.MPI,
                              members=[])
            else:
                grp = d.group(name, group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                              members=[locs[m] for m in members])
            comms[ref] = d.comm(name, group=grp,
                                parent=comms[parent] if parent is not None else None)
        attrs = {}
        if self.creator == "mpiscope":
            attrs = {
                "callsite": d.attribute("mpiscope:callsite", "call site of an MPI call",
                                        Type.SOURCE_CODE_LOCATION),
                "in_hash": d.attribute("mpiscope:in_hash", "FNV-1a of the input", Type.UINT64),
                "out_hash": d.attribute("mpiscope:out_hash", "FNV-1a of the result",
                                        Type.UINT64),
                "prior_hash": d.attribute("mpiscope:prior_hash",
                                          "FNV-1a of the receive buffer at entry", Type.UINT64),
            }
        if attrs and any(e.attrs.get("run_delay") is not None for evs in
                         [*self.events, *self.thread_events.values()] for e in evs):
            attrs["run_delay"] = d.attribute("mpiscope:run_delay_ns",
                                             "the thread's run-queue delay so far (ns)",
                                             Type.UINT64)
        regions: dict[str, otf2.definitions.Region] = {}
        sources: dict[str, otf2.definitions.SourceCodeLocation] = {}
        contexts = CallingContexts(d, sources)
        if attrs and any(e.attrs.get("callpath") for evs in
                         [*self.events, *self.thread_events.values()] for e in evs):
            attrs["callpath"] = callpath_attribute(d)

        def region(name: str):
            if name not in regions:
                mpi = name.startswith("MPI_")
                regions[name] = d.region(
                    name, region_role=region_role(name) if mpi else RegionRole.FUNCTION,
                    paradigm=Paradigm.MPI if mpi else Paradigm.USER)
            return regions[name]

        def source(callsite: str):
            if callsite not in sources:
                file, line = parse_callsite(callsite)
                sources[callsite] = d.source_code_location(file, line)
            return sources[callsite]

        wins = {ref: d.rma_win(name, comms[comm], flags=RmaWinFlag.CREATE_DESTROY_EVENTS)
                for ref, (name, comm) in sorted(self.windows.items())}
        handles = {}
        if self.files:
            para = d.io_paradigm("MPI-IO", "MPI-IO", IoParadigmClass.PARALLEL,
                                 IoParadigmFlag.NONE)
            for ref, (name, path, comm) in sorted(self.files.items()):
                f = d.io_regular_file(path, scope=root)
                handles[ref] = d.io_handle(name, f, para, comm=comms[comm])
        rgroups: dict[tuple, object] = {}

        def rgroup(members: tuple):
            if members not in rgroups:
                rgroups[members] = d.group(f"RMA group {len(rgroups)}",
                                           group_type=GroupType.COMM_GROUP,
                                           paradigm=Paradigm.MPI,
                                           members=[locs[m] for m in members])
            return rgroups[members]

        for key, loc in threads.items():
            ew = w.event_writer_from_location(loc)
            events = self.thread_events[key] if key[1] else self.events[key[0]]
            for ev in sorted(events, key=lambda e: (e.t, e.seq)):
                t = BASE_TIME + ev.t
                a = ev.args
                if ev.kind == "enter":
                    cs, path = ev.attrs.get("callsite"), ev.attrs.get("callpath")
                    at = {attrs["callsite"]: source(cs)} if cs and attrs else {}
                    if path and attrs:
                        at[attrs["callpath"]] = contexts.context(path)
                    if ev.attrs.get("run_delay") is not None and attrs:
                        at[attrs["run_delay"]] = ev.attrs["run_delay"]
                    ew.enter(t, region(a[0]), attributes=at or None)
                elif ev.kind == "leave":
                    delay = ev.attrs.get("run_delay")
                    ew.leave(t, region(a[0]), attributes={attrs["run_delay"]: delay}
                             if delay is not None and attrs else None)
                elif ev.kind == "send":
                    ew.mpi_send(t, a[0], comms[a[1]], a[2], a[3])
                elif ev.kind == "recv":
                    ew.mpi_recv(t, a[0], comms[a[1]], a[2], a[3])
                elif ev.kind == "isend":
                    ew.mpi_isend(t, a[0], comms[a[1]], a[2], a[3], a[4])
                elif ev.kind == "isend_complete":
                    ew.mpi_isend_complete(t, a[0])
                elif ev.kind == "irecv_request":
                    ew.mpi_irecv_request(t, a[0])
                elif ev.kind == "irecv":
                    ew.mpi_irecv(t, a[0], comms[a[1]], a[2], a[3], a[4])
                elif ev.kind == "request_test":
                    ew.mpi_request_test(t, a[0])
                elif ev.kind == "cancelled":
                    ew.mpi_request_cancelled(t, a[0])
                elif ev.kind == "coll_begin":
                    ew.mpi_collective_begin(t)
                elif ev.kind == "coll_end":
                    at = {attrs[k]: ev.attrs[k] for k in ("in_hash", "out_hash", "prior_hash")
                          if attrs and ev.attrs.get(k) is not None}
                    ew.mpi_collective_end(t, a[0], comms[a[1]], a[2], a[3], a[4],
                                          attributes=at or None)
                elif ev.kind == "flush":
                    ew.buffer_flush(t, BASE_TIME + a[0])
                elif ev.kind == "nbc_request":
                    ew.non_blocking_collective_request(t, a[0])
                elif ev.kind == "nbc_complete":
                    ew.non_blocking_collective_complete(t, a[0], comms[a[1]], a[2], a[3], a[4],
                                                        a[5])
                elif ev.kind.startswith(("rma_", "io_")):
                    self._write_rma_io(ew, t, ev.kind, a, wins, handles, rgroup)
                else:  # pragma: no cover - guarded by the methods above
                    raise ValueError(ev.kind)


    @staticmethod
    def _write_rma_io(ew, t: int, kind: str, a: tuple, wins: dict, handles: dict,
                      rgroup) -> None:
        if kind == "rma_put":
            ew.rma_put(t, wins[a[0]], a[1], a[2], a[3])
        elif kind == "rma_get":
            ew.rma_get(t, wins[a[0]], a[1], a[2], a[3])
        elif kind == "rma_atomic":
            ew.rma_atomic(t, wins[a[0]], a[1], RmaAtomicType.ACCUMULATE, a[2], a[3], a[4])
        elif kind == "rma_complete":
            ew.rma_op_complete_blocking(t, wins[a[0]], a[1])
        elif kind == "rma_coll_begin":
            ew.rma_collective_begin(t)
        elif kind == "rma_coll_end":
            ew.rma_collective_end(t, getattr(CollectiveOp, a[1]), RmaSyncLevel.PROCESS
                                  | RmaSyncLevel.MEMORY, wins[a[0]], UNDEFINED_ROOT, 0, 0)
        elif kind == "rma_group_sync":
            ew.rma_group_sync(t, RmaSyncLevel.PROCESS | RmaSyncLevel.MEMORY, wins[a[0]],
                              rgroup(a[1]))
        elif kind in ("rma_request_lock", "rma_acquire_lock"):
            lock = LockType.EXCLUSIVE if a[3] else LockType.SHARED
            getattr(ew, kind)(t, wins[a[0]], a[1], a[2], lock)
        elif kind == "rma_release_lock":
            ew.rma_release_lock(t, wins[a[0]], a[1], a[2])
        elif kind == "rma_sync":
            ew.rma_sync(t, wins[a[0]], a[1], RmaSyncType.MEMORY)
        elif kind == "rma_win_create":
            ew.rma_win_create(t, wins[a[0]])
        elif kind == "rma_win_destroy":
            ew.rma_win_destroy(t, wins[a[0]])
        elif kind == "io_create":
            ew.io_create_handle(t, handles[a[0]], IoAccessMode.READ_WRITE, IoCreationFlag.NONE,
                                IoStatusFlag.NONE)
        elif kind == "io_destroy":
            ew.io_destroy_handle(t, handles[a[0]])
        elif kind == "io_begin":
            flags = IoOperationFlag.NONE
            if a[4]:
                flags |= IoOperationFlag.COLLECTIVE
            if a[5]:
                flags |= IoOperationFlag.NON_BLOCKING
            ew.io_operation_begin(t, handles[a[0]], getattr(IoOperationMode, a[1].upper()),
                                  flags, a[2], a[3])
        elif kind == "io_issued":
            ew.io_operation_issued(t, handles[a[0]], a[1])
        elif kind == "io_complete":
            ew.io_operation_complete(t, handles[a[0]], a[1], a[2])
        else:  # pragma: no cover - guarded by the methods above
            raise ValueError(kind)


def copy_trace(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """A private, writable copy of a trace directory (without its cache), e.g. to damage."""
    dst = Path(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".mpiscope-cache*"))
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def local_definitions(tmp: Path, nregions: int, *, chunk_size: int = 4 << 20,
                      large_maps: int = 0) -> bytes:
    """A location's local definitions as Score-P writes them: clock offsets (libotf2
    corrects the events' timestamps by them) and id maps (it maps the events' region,
    comm and attribute refs through them: here regions swapped pairwise, two attributes
    swapped). Written by an archive of its own in `tmp`/local; the bytes go to the
    location's `traces/N.def` of the trace it is for. `large_maps` more maps of 60,000
    ids each (unused ids: a file of several `chunk_size` chunks)."""
    from otf2.enums import LocationGroupType, LocationType, MappingType

    with otf2.writer.open(str(tmp / "local"), timer_resolution=10**9,
                          chunk_size_definitions=chunk_size) as w:
        d = w.definitions
        root = d.system_tree_node("machine", class_name="machine")
        group = d.location_group("rank 0", location_group_type=LocationGroupType.PROCESS,
                                 system_tree_parent=root)
        loc = d.location("rank 0", type=LocationType.CPU_THREAD, group=group)
        w.event_writer_from_location(loc)
        dw = _otf2.Archive_GetDefWriter(w.handle, loc._ref)
        _otf2.DefWriter_WriteClockOffset(dw, 1000, 50, 0.5)
        _otf2.DefWriter_WriteClockOffset(dw, 2 * 10**9, -70, 0.5)
        for kind, ids in ((MappingType.REGION, [i ^ 1 for i in range(nregions & ~1)]),
                          (MappingType.COMM, [0, 1]), (MappingType.ATTRIBUTE, [0, 2, 1])):
            _otf2.DefWriter_WriteMappingTable(dw, kind, _otf2.IdMap_CreateFromUint64Array(
                ids, False))
        for _ in range(large_maps):
            unused = _otf2.IdMap_CreateFromUint64Array(list(range(1000, 61000)), False)
            _otf2.DefWriter_WriteMappingTable(dw, MappingType.COMM, unused)
    return (tmp / "local" / "traces" / f"{loc._ref}.def").read_bytes()
