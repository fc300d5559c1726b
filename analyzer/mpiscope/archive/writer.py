"""Write a Trace's MPI tables as an OTF2 archive in mpiscope's format
(docs/trace-format.md): the inverse of the reader for the outermost MPI calls, their
point-to-point and collective events, communicators and hosts.

It lives beside the reader because it is the same format knowledge, the other way. The
replay simulator writes its predicted runs with it, so `analyze`, `serve` and `compare`
read them like any trace. Not written: user regions, calls nested in MPI calls, buffer
flushes, clock offsets (the times are already on one clock).
"""

from __future__ import annotations

import os
from pathlib import Path

import _otf2  # the otf2 package's C binding: archive properties
import numpy as np
import otf2
from otf2.enums import (
    CollectiveOp,
    GroupType,
    LocationGroupType,
    LocationType,
    Paradigm,
    RegionRole,
    Type,
)

from mpiscope import __version__
from mpiscope.archive.decode import LIBRARY_PROPERTY
from mpiscope.archive.trace import Trace

BASE_TIME = 1_000_000_000  # raw timestamp of t=0
UNDEFINED_ROOT = 0xFFFFFFFF  # OTF2_UNDEFINED_UINT32: rootless collective

# Score-P's region roles (docs/trace-format.md, "Regions")
_ROLES = {
    "MPI_Barrier": RegionRole.BARRIER, "MPI_Ibarrier": RegionRole.BARRIER,
    **dict.fromkeys(("MPI_Bcast", "MPI_Scatter", "MPI_Scatterv", "MPI_Ibcast"),
                    RegionRole.COLL_ONE2ALL),
    **dict.fromkeys(("MPI_Reduce", "MPI_Gather", "MPI_Gatherv", "MPI_Ireduce"),
                    RegionRole.COLL_ALL2ONE),
    **dict.fromkeys(("MPI_Allreduce", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
                     "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Reduce_scatter",
                     "MPI_Reduce_scatter_block", "MPI_Iallreduce"), RegionRole.COLL_ALL2ALL),
    "MPI_Scan": RegionRole.COLL_OTHER, "MPI_Exscan": RegionRole.COLL_OTHER,
}
_P2P_PREFIXES = ("MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Isend", "MPI_Issend",
                 "MPI_Irsend", "MPI_Ibsend", "MPI_Recv", "MPI_Irecv", "MPI_Sendrecv",
                 "MPI_Wait", "MPI_Test", "MPI_Probe", "MPI_Iprobe", "MPI_Mprobe",
                 "MPI_Improbe", "MPI_Mrecv", "MPI_Imrecv")
# p2p events written at their call's Enter (the rest just before its Leave)
_AT_ENTER = {"send", "isend", "irecv_request", "nbc_request"}


def region_role(name: str) -> RegionRole:
    """Score-P's role of an MPI function's region (FUNCTION for anything else)."""
    if name in _ROLES:
        return _ROLES[name]
    return RegionRole.POINT2POINT if name.startswith(_P2P_PREFIXES) else RegionRole.FUNCTION


def parse_callsite(text: str) -> tuple[str, int]:
    """`"app.c:42"` -> ("app.c", 42); `"libx.so+0x1f"` -> ("libx.so+0x1f", 0)."""
    file, sep, line = text.rpartition(":")
    return (file, int(line)) if sep and line.isdigit() else (text, 0)


class CallingContexts:
    """OTF2 CallingContext definitions for call paths, as mpiscope's interposer writes
    them (docs/trace-format.md): one context per frame and its chain of callers, its
    SourceCodeLocation named like a call site, its Region the frame's function (role
    FUNCTION, paradigm USER, never entered). `context(frames)` gives the innermost one."""

    def __init__(self, defs, sources: dict[str, object] | None = None) -> None:
        self.defs = defs
        self.sources = sources if sources is not None else {}
        self.regions: dict[str, object] = {}
        self.contexts: dict[tuple[tuple[str, str], ...], object] = {}

    def source(self, frame: str):
        if frame not in self.sources:
            self.sources[frame] = self.defs.source_code_location(*parse_callsite(frame))
        return self.sources[frame]

    def _region(self, function: str, frame: str):
        name = function or frame
        if name not in self.regions:
            self.regions[name] = self.defs.region(name, region_role=RegionRole.FUNCTION,
                                                  paradigm=Paradigm.USER)
        return self.regions[name]

    def context(self, frames) -> object | None:
        """`frames`: innermost first, each `"file.c:LINE"` (its function unknown), a
        (frame, function) pair or a (frame, function, library) triple. A library frame's
        context carries the LIBRARY_PROPERTY: its label keeps only the file's name, and
        the path that made it library code (decode.library_file) is not in the tables."""
        chain = tuple((f, "", False) if isinstance(f, str)
                      else (str(f[0]), str(f[1]), bool(f[2]) if len(f) > 2 else False)
                      for f in frames)
        if not chain:
            return None
        if chain not in self.contexts:
            parent = self.context(chain[1:]) if len(chain) > 1 else None
            frame, function, library = chain[0]
            ctx = self.defs.calling_context(self._region(function, frame), self.source(frame),
                                            parent)
            if library:
                self.defs.calling_context_property(ctx, LIBRARY_PROPERTY, Type.UINT8, 1)
            self.contexts[chain] = ctx
        return self.contexts[chain]


def callpath_attribute(defs):
    return defs.attribute("mpiscope:callpath", "call path of an MPI call (innermost frame)",
                          Type.CALLING_CONTEXT)


def collective_op(function: str) -> CollectiveOp:
    """The OTF2 operation of a blocking MPI collective (MpiCollectiveEnd's `op`)."""
    return getattr(CollectiveOp, function.removeprefix("MPI_").upper())


def write(trace: Trace, directory: str | os.PathLike,
          properties: dict[str, str] | None = None) -> Path:
    """Write `trace` (times in ns since its start) into `directory` (created, must not
    hold an archive yet); `properties` are added as archive properties."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with otf2.writer.open(str(directory), timer_resolution=1_000_000_000) as w:
        w._update_timestamps(BASE_TIME)  # global_offset: t=0 is the trace start
        _write(trace, w)
        meta = trace.meta
        props = {"MPISCOPE::PROGRAM": meta.program, "MPISCOPE::CMDLINE": meta.cmdline,
                 "MPISCOPE::MPI_LIBRARY": meta.mpi_library,
                 "MPISCOPE::START_TIME": meta.start_time, "MPISCOPE::VERSION": __version__,
                 **({"MPISCOPE::FILTERED": ",".join(meta.filtered)} if meta.filtered else {}),
                 **(properties or {})}
        for key, value in props.items():
            _otf2.Archive_SetProperty(w.handle, key, value, False)
    return directory


def _write(trace: Trace, w: otf2.writer.Writer) -> None:
    d = w.definitions
    ranks = trace.ranks.sort_values("rank")
    hosts = ranks["host"].astype(str).tolist()
    root = d.system_tree_node("machine", class_name="machine")
    nodes = {h: d.system_tree_node(h, class_name="node", parent=root)
             for h in dict.fromkeys(hosts)}
    locs = []
    for r, h in enumerate(hosts):
        g = d.location_group(f"MPI Rank {r}", location_group_type=LocationGroupType.PROCESS,
                             system_tree_parent=nodes[h])
        locs.append(d.location(f"rank {r}", type=LocationType.CPU_THREAD, group=g))
    d.group("MPI locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
            members=locs)
    comms: dict[int, object] = {}
    local: dict[int, dict[int, int]] = {}  # comm -> world rank -> rank in comm
    for c in trace.comms.sort_values("comm").itertuples():
        members = list(c.members)
        if not members:  # MPI_COMM_SELF
            grp = d.group(c.name, group_type=GroupType.COMM_SELF, paradigm=Paradigm.MPI,
                          members=[])
        else:
            grp = d.group(c.name, group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                          members=[locs[m] for m in members])
        comms[c.comm] = d.comm(c.name, group=grp,
                               parent=comms.get(c.parent) if c.parent >= 0 else None)
        local[c.comm] = {m: i for i, m in enumerate(members)}
    a_site = d.attribute("mpiscope:callsite", "call site of an MPI call",
                         Type.SOURCE_CODE_LOCATION)
    a_in = d.attribute("mpiscope:in_hash", "FNV-1a of the input", Type.UINT64)
    a_out = d.attribute("mpiscope:out_hash", "FNV-1a of the result", Type.UINT64)
    a_prior = d.attribute("mpiscope:prior_hash", "FNV-1a of the receive buffer at entry",
                          Type.UINT64)
    regions: dict[str, object] = {}
    sources: dict[str, object] = {}
    contexts = CallingContexts(d, sources)
    source = contexts.source
    # the call paths: their frames, kept through a replay or a salvaged job
    cp = trace.callpaths
    paths = {int(k): list(zip(g["frame"], g["function"], g["library"], strict=True))
             for k, g in cp.sort_values(["callpath", "level"]).groupby("callpath")}
    a_path = callpath_attribute(d) if paths else None

    def region(name: str):
        if name not in regions:
            regions[name] = d.region(name, region_role=region_role(name), paradigm=Paradigm.MPI)
        return regions[name]

    def peer(comm: int, world: int) -> int:
        return local.get(comm, {}).get(world, 0)

    calls = trace.calls
    p2p_by_call = {k: g for k, g in trace.p2p.groupby("call", sort=False)} if len(trace.p2p) else {}
    coll_by_call = trace.collectives.set_index("call") if len(trace.collectives) else None
    fn = calls["function"].astype(str).to_numpy()
    cs = calls["callsite"].astype(str).to_numpy()
    ids = calls["call"].to_numpy()
    start = calls["start"].to_numpy() + BASE_TIME
    end = calls["end"].to_numpy() + BASE_TIME
    rank, depth = calls["rank"].to_numpy(), calls["depth"].to_numpy()
    path_of = (calls["callpath"].to_numpy() if "callpath" in calls.columns
               else np.full(len(calls), -1))
    # a merged polling visit keeps the calls it stands for (mpiscope:calls on its Leave)
    polls = (calls["polls"].to_numpy(np.int64) if "polls" in calls.columns
             else np.ones(len(calls), np.int64))
    a_calls = (d.attribute("mpiscope:calls", "calls of a merged polling visit", Type.UINT64)
               if (polls > 1).any() else None)
    for r in range(len(hosts)):
        ew = w.event_writer_from_location(locs[r])
        for i in np.flatnonzero((rank == r) & (depth == 0)):
            cid, t0, t1 = int(ids[i]), int(start[i]), int(end[i])
            reg = region(fn[i])
            at = {a_site: source(cs[i])} if cs[i] else {}
            if a_path is not None and int(path_of[i]) in paths:
                at[a_path] = contexts.context(paths[int(path_of[i])])
            ew.enter(t0, reg, attributes=at or None)
            coll = None
            if coll_by_call is not None and cid in coll_by_call.index:
                coll = coll_by_call.loc[cid]
                ew.mpi_collective_begin(t0)
            ev = p2p_by_call.get(cid)
            if ev is not None:
                for e in ev.itertuples():
                    t = t0 if e.event in _AT_ENTER else t1
                    kind = e.event
                    if kind == "send":
                        ew.mpi_send(t, peer(e.comm, e.peer), comms[e.comm], e.tag, e.bytes)
                    elif kind == "recv":
                        ew.mpi_recv(t, peer(e.comm, e.peer), comms[e.comm], e.tag, e.bytes)
                    elif kind == "isend":
                        ew.mpi_isend(t, peer(e.comm, e.peer), comms[e.comm], e.tag, e.bytes,
                                     e.request)
                    elif kind == "isend_complete":
                        ew.mpi_isend_complete(t, e.request)
                    elif kind == "irecv_request":
                        ew.mpi_irecv_request(t, e.request)
                    elif kind == "irecv":
                        ew.mpi_irecv(t, peer(e.comm, e.peer), comms[e.comm], e.tag, e.bytes,
                                     e.request)
                    elif kind == "cancelled":
                        ew.mpi_request_cancelled(t, e.request)
            if coll is not None:
                op = collective_op(fn[i])
                at = {a: int(coll[k]) for a, k in ((a_in, "in_hash"), (a_out, "out_hash"),
                                                   (a_prior, "prior_hash"))
                      if int(coll[k])}
                root_rank = (UNDEFINED_ROOT if int(coll["root"]) < 0
                             else peer(int(coll["comm"]), int(coll["root"])))
                ew.mpi_collective_end(t1, op, comms[int(coll["comm"])], root_rank,
                                      int(coll["bytes_sent"]), int(coll["bytes_recv"]),
                                      attributes=at or None)
            if a_calls is not None and polls[i] > 1:
                ew.leave(t1, reg, attributes={a_calls: int(polls[i])})
            else:
                ew.leave(t1, reg)
