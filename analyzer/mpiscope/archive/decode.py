"""Decode one OTF2 archive (ours or another tool's, e.g. Score-P) into a Trace of DataFrames.

Definitions (small) come from the `otf2` Python package and are flattened into lookup
arrays; the native reader (analyzer/native/reader.c) decodes the events and builds the
large tables, including message matching, in C. Here they only become DataFrames (no
copies). `reader` opens traces (cache, salvaged jobs) through this; `salvaged` decodes
each rank's own archive with it. See docs/data-model.md.
"""

from __future__ import annotations

import contextlib
import ctypes as C
import io
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpiscope.archive import anchor as anchor_file
from mpiscope.archive import native as _native
from mpiscope.archive.schema import SCHEMA
from mpiscope.archive.trace import Trace, TraceMeta
from mpiscope.errors import UserError

# 5: RMA and MPI-IO tables, call kinds io/rma/rma_sync; 6: threads; 7: call paths;
# 8: damaged timestamps and byte counts repaired, the reader's warnings in the metadata;
# 9: MPI-4 large-count functions (MPI_X_c) have their int twin's call kind
# 10: calls.prior_hash (the receive buffer at entry), the hosts' CPUs in the metadata
# 11: callpaths.library
READER_VERSION = "11"
# a call path's frame: (label, function, library) as in the callpaths table
Frame = tuple[str, str, bool]
NONE32 = _native.NONE32
Progress = Callable[[str], None]


class Step(str):
    """A progress text that can also be measured: `done` of `total` events (else None), so
    a display can draw a bar while plain callers just see the text."""

    done: int | None
    total: int | None

    def __new__(cls, text: str, done: int | None = None, total: int | None = None) -> Step:
        step = super().__new__(cls, text)
        step.done, step.total = done, total
        return step

# MPI function -> call kind (docs/data-model.md); MPI_File_* are all `io` (_kind_of)
_NBC = ("Ibarrier", "Ibcast", "Ireduce", "Iallreduce", "Igather", "Igatherv", "Iscatter",
        "Iscatterv", "Iallgather", "Iallgatherv", "Ialltoall", "Ialltoallv", "Ialltoallw",
        "Ireduce_scatter", "Ireduce_scatter_block", "Iscan", "Iexscan")
_NEIGHBOR = ("Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall",
             "Neighbor_alltoallv", "Neighbor_alltoallw")
_BLOCKING_COLL = ("Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv",
                  "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw",
                  "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan")
_KINDS = {
    "p2p_send": ("MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Isend", "MPI_Issend",
                 "MPI_Irsend", "MPI_Ibsend", "MPI_Send_init", "MPI_Ssend_init",
                 "MPI_Bsend_init", "MPI_Rsend_init", "MPI_Start", "MPI_Startall"),
    "p2p_recv": ("MPI_Recv", "MPI_Irecv", "MPI_Recv_init", "MPI_Mrecv", "MPI_Imrecv"),
    "p2p_sendrecv": ("MPI_Sendrecv", "MPI_Sendrecv_replace", "MPI_Isendrecv",
                     "MPI_Isendrecv_replace"),
    "wait": ("MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test",
             "MPI_Testall", "MPI_Testany", "MPI_Testsome"),
    "probe": ("MPI_Probe", "MPI_Iprobe", "MPI_Mprobe", "MPI_Improbe"),
    "barrier": ("MPI_Barrier",),
    # blocking, non-blocking, neighbourhood and (MPI-4) persistent collectives
    "collective": tuple(f"MPI_{n}" for n in (*_BLOCKING_COLL, *_NBC, *_NEIGHBOR)) +
                  tuple(f"MPI_I{n.lower()}" for n in _NEIGHBOR) +
                  tuple(f"MPI_{n}_init" for n in ("Barrier", *_BLOCKING_COLL, *_NEIGHBOR)),
    "rma": ("MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Get_accumulate", "MPI_Fetch_and_op",
            "MPI_Compare_and_swap", "MPI_Rput", "MPI_Rget", "MPI_Raccumulate",
            "MPI_Rget_accumulate", "MPI_Win_create", "MPI_Win_allocate",
            "MPI_Win_allocate_shared", "MPI_Win_create_dynamic", "MPI_Win_free",
            "MPI_Win_attach", "MPI_Win_detach"),
    "rma_sync": ("MPI_Win_fence", "MPI_Win_post", "MPI_Win_start", "MPI_Win_complete",
                 "MPI_Win_wait", "MPI_Win_test", "MPI_Win_lock", "MPI_Win_unlock",
                 "MPI_Win_lock_all", "MPI_Win_unlock_all", "MPI_Win_flush",
                 "MPI_Win_flush_all", "MPI_Win_flush_local", "MPI_Win_flush_local_all",
                 "MPI_Win_sync"),
    "init": ("MPI_Init", "MPI_Init_thread"),
    "finalize": ("MPI_Finalize",),
}
KIND_OF = {fn: kind for kind, fns in _KINDS.items() for fn in fns}
# The calls the tracer merges when they complete nothing (interposer/README.md,
# "Polling"); the reader merges idle visits of these back to back by the same rules, so a
# trace recorded with MPISCOPE_POLL=all (or by another tool) has one row per visit too.
POLLING = frozenset(("MPI_Test", "MPI_Testany", "MPI_Testall", "MPI_Testsome", "MPI_Iprobe",
                     "MPI_Improbe", "MPI_Request_get_status", "MPI_Win_test"))
# Ineighbor_* are spelt with a capital after the I
KIND_OF.update({f"MPI_Ineighbor_{n.partition('_')[2]}": "collective" for n in _NEIGHBOR})


def kind_of(name: str) -> str | None:
    """The call kind of an MPI function by name, None if the name says nothing."""
    if name in KIND_OF:
        return KIND_OF[name]
    if name.endswith("_c") and name[:-2] in KIND_OF:  # MPI-4 large-count twin (MPI_Send_c)
        return KIND_OF[name[:-2]]
    return "io" if name.startswith("MPI_File_") else None

CALL_KINDS = SCHEMA.enums["call_kind"].names
_ROLE_KIND = {"BARRIER": "barrier", "COLL_ONE2ALL": "collective", "COLL_ALL2ONE": "collective",
              "COLL_ALL2ALL": "collective", "COLL_OTHER": "collective"}
CALL_COLUMNS = SCHEMA.tables["calls"].names
COLLECTIVE_COLUMNS = SCHEMA.tables["collectives"].names
UNMATCHED_EVENTS = SCHEMA.enums["p2p_event"].names


_ERROR_CALLBACK = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_char_p, C.c_uint64, C.c_char_p, C.c_int,
                             C.c_char_p, C.c_void_p)
_silent: list[object] = []  # keeps the callback alive


def _silence_otf2_package() -> None:
    """The otf2 package carries its own libotf2, which prints its errors to stderr; the
    user gets one line from us instead (the native reader silences the system libotf2)."""
    if _silent:
        return
    callback = _ERROR_CALLBACK(lambda _u, _f, _l, _fn, code, _fmt, _va: code)
    try:
        from _otf2.Config import conf  # the package's own handle on its library

        fn = conf.lib.OTF2_Error_RegisterCallback
    except (ImportError, AttributeError):  # another layout: its messages stay as they are
        return
    fn.argtypes = [_ERROR_CALLBACK, C.c_void_p]
    fn.restype = C.c_void_p
    fn(callback, None)
    _silent.append(callback)


def require_regular(path: Path) -> None:
    """Refuse a FIFO, device or socket: reading one would block (a FIFO with no writer)
    or never end. A missing file is left to the caller's own message."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise UserError(str(path), f"cannot read: {err.strerror}") from None
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise UserError(str(path), "not a regular file")


def require_regular_files(anchor: Path) -> None:
    """Every file libotf2 will open for this archive (anchor, global definitions, the
    per-location `.def`/`.evt` files under `traces/`) is a regular file: libotf2 would
    open a FIFO and wait forever for a writer."""
    files = [anchor, anchor.with_suffix(".def")]
    local = anchor.with_suffix("")
    try:
        files += sorted(local.iterdir()) if local.is_dir() else []
    except OSError as err:
        raise UserError(str(local), f"cannot read: {err.strerror}") from None
    for f in files:
        require_regular(f)


def callsite_label(file: str, line: int) -> str:
    return f"{os.path.basename(file)}:{line}" if line > 0 else file


# files of code a program's author does not own (callpaths.library): Python's standard
# library and installed packages, system headers (their inline functions)
_LIBRARY_FILE = re.compile(r"/lib/python\d[\d.]*/|/(site|dist)-packages/|^/usr/include/|"
                           r"^<frozen ")


# a CallingContextProperty marking a library frame whose file's path no longer tells (an
# archive mpiscope wrote keeps the frame's label, the file's name, not its path)
LIBRARY_PROPERTY = "mpiscope::library"


def library_file(file: str) -> bool:
    """The frame's file is library code, not the program's own (by its path)."""
    return bool(_LIBRARY_FILE.search(file))


def _marked_library(context) -> bool:
    try:
        return bool(int(context[LIBRARY_PROPERTY]))
    except (KeyError, TypeError, ValueError):  # unmarked, or a property of another type
        return False


def _name(obj: object) -> str:
    return getattr(obj, "name", str(obj))


class RefIndex:
    """Where a lookup table over definition refs keeps each ref: at the ref itself (dense,
    as writers number their definitions), or, when the refs are sparse (a damaged or
    hostile file may define a region 0xfffffffe), at its place among the sorted refs, so
    no table is sized by the largest ref. `refs` (sorted, uint32) is what the native
    reader searches; None when dense."""

    def __init__(self, refs: Iterable[int]) -> None:
        ordered = sorted({int(r) for r in refs})
        self.sparse = bool(ordered) and ordered[-1] >= 2 * len(ordered) + 1024
        self.refs = np.asarray(ordered, np.uint32) if self.sparse else None
        self.size = len(ordered) if self.sparse else (ordered[-1] + 1 if ordered else 0)

    def __getitem__(self, ref: int) -> int:
        return int(np.searchsorted(self.refs, ref)) if self.refs is not None else int(ref)

    def slots(self, refs: np.ndarray) -> np.ndarray:
        """The slot of each ref, -1 where none is defined."""
        refs = np.asarray(refs, np.int64)
        if self.refs is None:
            return np.where((refs >= 0) & (refs < self.size), refs, -1)
        pos = np.clip(np.searchsorted(self.refs, refs), 0, self.size - 1)
        return np.where(self.refs[pos] == refs, pos, -1)


def event_file_bytes(anchor: Path, location: int) -> int:
    """Bytes stored for a location's events (its `.evt` file; where there is none, as in
    a SIONlib container, all files of the archive): each event takes at least one, so
    this bounds what a damaged event count may make us expect or read."""
    local = anchor.with_suffix("")
    try:
        return (local / f"{location}.evt").stat().st_size
    except OSError:
        pass
    try:
        return sum(f.stat().st_size for f in local.iterdir() if f.is_file())
    except OSError:
        return 0


def fix_otf2_intercomm() -> None:
    """The otf2 package's InterComm inherits Comm's fields before its own (name, group,
    parent, flags, groupA, …), so reading any InterComm definition fails: give it the
    fields of the record (name, groupA, groupB, commonCommunicator as parent, flags)."""
    from otf2 import definitions

    f = definitions.InterComm._fields
    names = [x.name for x in f]
    if names == ["name", "group", "parent", "flags", "groupA", "groupB", "parent", "flags"]:
        definitions.InterComm._fields = (f[0], f[4], f[5], f[6], f[7])


class Definitions:
    """The global definitions we need, flattened into lookup arrays for the C side."""

    def __init__(self, anchor: Path) -> None:
        import otf2

        require_regular_files(anchor)  # before libotf2 opens (and blocks on) any of them
        anchor_file.check(anchor)  # before libotf2 allocates what its counts claim
        _silence_otf2_package()
        fix_otf2_intercomm()
        # its definition callbacks print Python tracebacks on damaged records: keep them
        captured = io.StringIO()
        try:
            with contextlib.redirect_stderr(captured), otf2.reader.open(str(anchor)) as tr:
                self._load(tr.definitions, anchor)
        except UserError:
            raise
        except Exception as err:  # the otf2 package raises its own error types
            text = str(err).strip()
            msg = text.splitlines()[0] if text else type(err).__name__
            cause = [line for line in captured.getvalue().splitlines() if line.strip()]
            if cause and "Traceback" in captured.getvalue():
                msg = f"damaged definition record ({cause[-1].strip()})"
            raise UserError(str(anchor.parent), f"corrupt OTF2 definitions: {msg}") from None

    def _load(self, d, anchor: Path) -> None:
        cp = d.clock_properties
        self.resolution = int(cp.timer_resolution) if cp and cp.timer_resolution else 10**9
        self.offset = int(cp.global_offset) if cp else 0
        self.length = int(cp.trace_length) if cp else 0
        # one process (location group) is one MPI rank; its CPU threads (by location ref)
        # are its threads, the first its main thread (mpiscope: location = rank)
        threads_of: dict[int, list[object]] = {}
        for loc in d.locations:
            if loc.group is None:
                continue
            threads_of.setdefault(loc.group._ref, []).append(loc)
        for g, locs in threads_of.items():
            cpu = [loc for loc in locs if str(loc.type).rsplit(".", 1)[-1] == "CPU_THREAD"]
            threads_of[g] = sorted(cpu or locs, key=lambda loc: loc._ref)
        groups = sorted(threads_of)
        by_group = {g: threads_of[g][0] for g in groups}
        self.locations = [by_group[g]._ref for g in groups]
        self.threads = [(rank, t, loc._ref, loc.name or f"location {loc._ref}")
                        for rank, g in enumerate(groups)
                        for t, loc in enumerate(threads_of[g])]
        # what the definitions claim, per rank (all its threads) and in all: a hostile file
        # may claim anything (engines/choose.py bounds these by the event files' sizes)
        self.events_per_rank = [sum(int(loc.number_of_events or 0) for loc in threads_of[g])
                                for g in groups]
        self.location_events = {int(loc._ref): int(loc.number_of_events or 0)
                                for g in groups for loc in threads_of[g]}
        self.rank_locations = [[int(loc._ref) for loc in threads_of[g]] for g in groups]
        # the events expected, each location's as its file can hold them (a damaged count,
        # up to 2^64 - 1, would size the reader's tables, groups and buckets by itself)
        self.loc_max_events = np.asarray([event_file_bytes(anchor, loc)
                                          for _r, _t, loc, _n in self.threads], np.uint64)
        self.expected_events = sum(
            min(self.location_events.get(int(loc), 0), int(most))
            for (_r, _t, loc, _n), most in zip(self.threads, self.loc_max_events, strict=True))
        rank_of_location = {ref: i for i, ref in enumerate(self.locations)}
        self.hosts = []
        for g in groups:
            node = by_group[g].group.system_tree_parent
            self.hosts.append(node.name if node is not None else "?")

        self.mpi_functions: list[str] = []
        self.other_functions: list[str] = []
        codes: dict[tuple[bool, str], int] = {}
        self.region_slots = RefIndex(r._ref for r in d.regions)
        n = self.region_slots.size
        self.region_func = np.zeros(n, np.int32)
        self.region_kind = np.full(n, CALL_KINDS.index("other"), np.int8)
        self.region_mpi = np.zeros(n, np.uint8)
        for r in d.regions:
            slot = self.region_slots[r._ref]
            name = r.name or f"region {r._ref}"
            mpi = _name(r.paradigm) == "MPI" or name.startswith("MPI_")
            names = self.mpi_functions if mpi else self.other_functions
            if (mpi, name) not in codes:
                codes[(mpi, name)] = len(names)
                names.append(name)
            self.region_func[slot] = codes[(mpi, name)]
            self.region_mpi[slot] = 2 if mpi and name in POLLING else mpi
            if mpi:
                kind = kind_of(name) or _ROLE_KIND.get(_name(r.region_role), "other")
                self.region_kind[slot] = CALL_KINDS.index(kind)
        self.unknown_func = len(self.other_functions)
        self.other_functions.append("<unknown region>")

        self.attrs = {a.name: a._ref for a in d.attributes}
        self.callsites = [""]
        labels: dict[str, int] = {"": 0}
        srcs = list(d.source_code_locations)
        self.source_slots = RefIndex(s._ref for s in srcs)
        self.source_code = np.zeros(self.source_slots.size, np.int32)
        for s in srcs:
            label = callsite_label(_name(s.file), int(s.line_number))
            if label not in labels:
                labels[label] = len(self.callsites)
                self.callsites.append(label)
            self.source_code[self.source_slots[s._ref]] = labels[label]
        self._load_contexts(d, labels)

        self.comms: list[dict] = []
        comm_list = sorted(d.comms, key=lambda c: c._ref)
        self.comm_slots = RefIndex(c._ref for c in comm_list)
        self.comm_index = np.full(self.comm_slots.size, -1, np.int32)
        def ranks(group: object) -> list[int]:
            return [rank_of_location.get(getattr(m, "_ref", m), -1) for m in group.members]

        for i, c in enumerate(comm_list):
            group = getattr(c, "group", None)
            is_self = c.name == "MPI_COMM_SELF" or (
                group is not None and _name(group.group_type) == "COMM_SELF")
            members = [] if is_self or group is None else ranks(group)
            inter_a = 0
            if getattr(c, "groupA", None) is not None:  # an InterComm: group A, then B
                a, b = ranks(c.groupA), ranks(c.groupB)
                members, inter_a, is_self = a + b, len(a), False
            parent = getattr(c, "parent", None)
            self.comm_index[self.comm_slots[c._ref]] = i
            self.comms.append({"comm": c._ref, "name": c.name, "members": members,
                               "self": is_self, "inter_a": inter_a,
                               "parent": parent._ref if parent else -1})

        self.windows = sorted(({"win": w._ref, "name": w.name or f"window {w._ref}",
                                "comm": w.comm._ref if w.comm is not None else -1}
                               for w in d.rma_wins), key=lambda w: w["win"])
        self.win_slots = RefIndex(w["win"] for w in self.windows)
        self.win_comm = np.full(self.win_slots.size, -1, np.int32)
        for w in self.windows:
            self.win_comm[self.win_slots[w["win"]]] = w["comm"]
        self.files = []
        for h in sorted(d.io_handles, key=lambda h: h._ref):
            f = getattr(h, "file", None)
            par = getattr(h, "io_paradigm", None)
            comm = getattr(h, "comm", None)
            self.files.append({"handle": h._ref, "name": h.name or "",
                               "file": _name(f) if f is not None else "",
                               "paradigm": (getattr(par, "name", None) or "") if par else "",
                               "comm": comm._ref if comm is not None else -1})
        # world ranks of every group (RmaGroupSync names its partners by a group)
        self.group_members = {
            g._ref: [rank_of_location.get(getattr(m, "_ref", m), -1) for m in g.members]
            for g in d.groups}

    def _load_contexts(self, d, labels: dict[str, int]) -> None:
        """Calling contexts (callpath conventions: one per frame and its parent chain, the
        frame's name in its SourceCodeLocation, its function in its Region) become call
        paths: chains of frames, innermost first, one id per distinct chain of names (as
        equal call sites are one whatever their refs)."""
        # only MPI calls carrying mpiscope:callpath name a context: another tool's contexts
        # (Score-P's unwinding, maybe 10^5 of them) are not read into paths
        contexts = ({c._ref: c for c in d.calling_contexts}
                    if "mpiscope:callpath" in self.attrs else {})
        self.context_slots = RefIndex(contexts)
        n = self.context_slots.size
        self.context_path = np.full(n, -1, np.int32)
        self.context_source = np.zeros(n, np.int32)
        self.callpaths: list[list[Frame]] = []
        ids: dict[tuple[str, ...], int] = {}
        chains: dict[int, list[Frame]] = {}

        def frame(c) -> Frame:
            scl, region = c.source_code_location, c.region
            function = (region.name or "") if region is not None else ""
            if scl is None:
                return function, function, False
            file = _name(scl.file)
            return (callsite_label(file, int(scl.line_number)), function,
                    library_file(file) or _marked_library(c))

        def chain(ref: int) -> list[Frame]:
            out: list[Frame] = []
            seen: set[int] = set()
            c = contexts.get(ref)
            while c is not None and c._ref not in seen:  # a damaged parent loop ends here
                if c._ref in chains:
                    out += chains[c._ref]
                    break
                seen.add(c._ref)
                out.append(frame(c))
                parent = c.parent
                c = contexts.get(parent._ref) if parent is not None else None
            chains[ref] = out
            return out

        for ref in sorted(contexts):
            frames = chain(ref)
            key = tuple(f[0] for f in frames)
            if key not in ids:
                ids[key] = len(self.callpaths)
                self.callpaths.append(frames)
            self.context_path[self.context_slots[ref]] = ids[key]
            label = frames[0][0] if frames else ""
            if label not in labels:
                labels[label] = len(self.callsites)
                self.callsites.append(label)
            self.context_source[self.context_slots[ref]] = labels[label]

    def lookup(self) -> _native.Lookup:
        # an intercommunicator's members for the C side: [size of group A, A..., B...]
        members = [np.asarray(([c["inter_a"]] if c["inter_a"] else []) + list(c["members"]),
                              np.int32) for c in self.comms]
        offsets = np.zeros(len(members) + 1, np.int64)
        offsets[1:] = np.cumsum([len(m) for m in members])
        return _native.Lookup(
            locations=np.asarray([loc for _r, _t, loc, _n in self.threads], np.uint64),
            loc_rank=np.asarray([r for r, _t, _l, _n in self.threads], np.int32),
            loc_thread=np.asarray([t for _r, t, _l, _n in self.threads], np.int16),
            attr_callsite=self.attrs.get("mpiscope:callsite", NONE32),
            attr_in=self.attrs.get("mpiscope:in_hash", NONE32),
            attr_out=self.attrs.get("mpiscope:out_hash", NONE32),
            attr_prior=self.attrs.get("mpiscope:prior_hash", NONE32),
            timer_resolution=self.resolution, global_offset=self.offset,
            region_func=self.region_func, region_kind=self.region_kind,
            region_mpi=self.region_mpi, unknown_func=self.unknown_func,
            source_code=self.source_code, unknown_source=0, comm_index=self.comm_index,
            comm_offset=offsets,
            comm_members=np.concatenate(members) if members else np.zeros(0, np.int32),
            comm_self=np.asarray([2 if c["inter_a"] else c["self"] for c in self.comms],
                                 np.uint8),
            expected_events=self.expected_events, win_comm=self.win_comm,
            attr_callpath=self.attrs.get("mpiscope:callpath", NONE32),
            attr_calls=self.attrs.get("mpiscope:calls", NONE32),
            attr_run_delay=self.attrs.get("mpiscope:run_delay_ns", NONE32),
            context_path=self.context_path, context_source=self.context_source,
            trace_length=self.length, loc_max_events=self.loc_max_events,
            refs={name: slots.refs for name, slots in (
                ("region", self.region_slots), ("source", self.source_slots),
                ("comm", self.comm_slots), ("win", self.win_slots),
                ("context", self.context_slots)) if slots.refs is not None})

    def comm_positions(self, refs: np.ndarray) -> np.ndarray:
        """The comm index (row of `comms`) of each comm ref, -1 where it is not defined."""
        slots = self.comm_slots.slots(refs)
        return np.where(slots >= 0, self.comm_index[np.maximum(slots, 0)], -1) \
            if len(self.comm_index) else np.full(len(slots), -1, np.int64)


def _category(codes: np.ndarray, categories: list[str]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object),
                                     validate=False)


def _frame(cols: dict[str, object]) -> pd.DataFrame:
    return pd.DataFrame(cols, copy=False)


def _calls_frame(cols: dict[str, np.ndarray], functions: list[str],
                 callsites: list[str]) -> pd.DataFrame:
    n = len(cols["rank"])
    kind = cols["kind"]
    coll = cols["coll_op"] >= 0
    if coll.any():  # an MPI call with collective payload is a collective whatever its name
        other = CALL_KINDS.index("other")
        kind[coll & (kind == other)] = CALL_KINDS.index("collective")
    out = {"call": np.arange(n, dtype=np.int64)}
    for name in CALL_COLUMNS[1:]:
        if name == "function":
            out[name] = _category(cols["function"], functions)
        elif name == "kind":
            out[name] = _category(kind, CALL_KINDS)
        elif name == "callsite":
            out[name] = _category(cols["callsite"], callsites)
        else:
            out[name] = cols[name]
    return _frame(out)


def build_archive(anchor: Path, defs: Definitions, progress: Progress | None = None) -> Trace:
    """The tables of one archive whose definitions are read already."""
    say = progress or (lambda _msg: None)
    if not defs.locations:
        raise UserError(str(anchor.parent), "OTF2 archive without locations")

    def on_events(done: int, expected: int) -> None:
        if expected:
            say(Step(f"events {done / 1e6:.1f}M of {expected / 1e6:.1f}M "
                     f"({min(100, 100 * done // expected)}%)", done, expected))
        else:
            say(Step(f"events {done / 1e6:.1f}M", done))

    props = _native.archive_properties(anchor)
    from mpiscope.archive.memory import kept_events_budget

    # the events the definitions claim were planned for (engines/choose.py), but a trace
    # recorded with every polling call may be read on the hope that they merge: stop in
    # one line when the events kept outgrow the memory this process can take
    ev = _native.read_events(anchor, defs.lookup(), on_events if progress else None,
                             max_kept_events=kept_events_budget())
    say("tables")
    t = ev.tables
    calls = _calls_frame(t["calls"], defs.mpi_functions, defs.callsites)
    regions = _calls_frame(t["regions"], defs.other_functions, defs.callsites)
    regions["kind"] = _category(np.full(len(regions), CALL_KINDS.index("other"), np.int8),
                                CALL_KINDS)
    p = t["p2p"]
    p["event"] = _category(p["event"], UNMATCHED_EVENTS)
    p2p = _frame(p)
    u = t["unmatched"]
    u["event"] = _category(u["event"], UNMATCHED_EVENTS)
    unmatched = _frame(u)
    messages = _frame(t["messages"])
    flushes = _frame(t["flushes"])
    rows = t["collectives"]["call"]
    coll = {name: (calls[name].to_numpy()[rows] if name != "function"
                   else calls["function"].array.take(rows))
            for name in COLLECTIVE_COLUMNS if name != "instance"}
    coll["call"] = rows
    coll["instance"] = t["collectives"]["instance"]
    collectives = _frame({name: coll[name] for name in COLLECTIVE_COLUMNS})

    rma, rma_sync, io_ops, windows, files = _rma_io_frames(t, defs)

    nranks = len(defs.locations)
    threads = _frame({
        "rank": np.asarray([r for r, _t, _l, _n in defs.threads], np.int32),
        "thread": np.asarray([t for _r, t, _l, _n in defs.threads], np.int16),
        "location": np.asarray([loc for _r, _t, loc, _n in defs.threads], np.int64),
        "name": [n for _r, _t, _l, n in defs.threads],
        "first_ns": ev.loc_first,
        "last_ns": ev.loc_last,
        "events": ev.loc_events.astype(np.int64),
    })
    ranks = ranks_frame(defs, threads)
    loc_rank = threads["rank"].to_numpy()
    comms = comms_frame(defs)

    finalized: set[int] = set()
    if "MPI_Finalize" in defs.mpi_functions:
        fin = defs.mpi_functions.index("MPI_Finalize")
        finalized = set(np.unique(t["calls"]["rank"][t["calls"]["function"] == fin]).tolist())
    meta = trace_meta(defs, props, nranks, set(loc_rank[ev.loc_truncated].tolist()), finalized,
                      int(ev.loc_last.max(initial=0)), ev.clock_offsets > 0, ev.damage)
    return Trace(Path(anchor.parent), meta, ranks, comms, calls, regions, p2p, messages,
                 collectives, flushes, unmatched, windows=windows, files=files, rma=rma,
                 rma_sync=rma_sync, io=io_ops, threads=threads,
                 callpaths=callpaths_frame(defs.callpaths))


def ranks_frame(defs: Definitions, threads: pd.DataFrame) -> pd.DataFrame:
    """The `ranks` table: a rank is its threads together (first and last event of any,
    events of all)."""
    nranks = len(defs.locations)
    busy = threads[threads["events"] > 0]
    per_rank = threads.groupby("rank").agg(events=("events", "sum"))
    span = busy.groupby("rank").agg(first_ns=("first_ns", "min"), last_ns=("last_ns", "max"))
    per_rank = per_rank.join(span).reindex(range(nranks)).fillna(0)
    return _frame({
        "rank": np.arange(nranks, dtype=np.int32),
        "host": pd.Categorical(defs.hosts, categories=pd.Index(sorted(set(defs.hosts)),
                                                              dtype=object)),
        "location": np.asarray(defs.locations, dtype=np.int64),
        "first_ns": per_rank["first_ns"].to_numpy(np.int64),
        "last_ns": per_rank["last_ns"].to_numpy(np.int64),
        "events": per_rank["events"].to_numpy(np.int64),
    })


def comms_frame(defs: Definitions) -> pd.DataFrame:
    """The `comms` table from the definitions."""
    return pd.DataFrame([
        {"comm": c["comm"], "name": c["name"], "size": 1 if c["self"] else len(c["members"]),
         "members": c["members"], "parent": c["parent"]} for c in defs.comms
    ], columns=SCHEMA.tables["comms"].names)


def trace_meta(defs: Definitions, props: dict[str, str], nranks: int, truncated: set[int],
               finalized: set[int], last_ns: int, clock_corrected: bool,
               damage: _native.Damage | None = None) -> TraceMeta:
    """The trace's metadata. `truncated`: ranks whose event files are cut; `finalized`:
    ranks that called MPI_Finalize (a job that finalizes does so on every rank, so the
    others were cut short too — and any rank of our own trace without MPI_Finalize)."""
    ours = "MPISCOPE::VERSION" in props
    truncated = set(truncated)
    if "MPI_Finalize" in defs.mpi_functions:
        if ours or finalized:
            truncated |= set(range(nranks)) - finalized
    elif ours:
        truncated = set(range(nranks))
    # the events' span: the definitions' length only when there are none (a damaged one
    # may say 2^64 ticks; the reader keeps every timestamp within it anyway)
    duration = last_ns if last_ns > 0 else int(min(defs.length * 1e9 / defs.resolution, 2**62))
    creator = (f"mpiscope {props['MPISCOPE::VERSION']}" if ours
               else props.get("OTF2::CREATOR") or "unknown")
    return TraceMeta(
        program=props.get("MPISCOPE::PROGRAM", ""),
        cmdline=props.get("MPISCOPE::CMDLINE", ""),
        mpi_library=props.get("MPISCOPE::MPI_LIBRARY", ""),
        start_time=props.get("MPISCOPE::START_TIME", ""),
        creator=creator, num_ranks=nranks, duration_ns=duration,
        timer_resolution=defs.resolution, truncated_ranks=sorted(truncated),
        clock_corrected=bool(clock_corrected),
        filtered=[f for f in props.get("MPISCOPE::FILTERED", "").split(",") if f],
        warnings=damage_warnings(defs, damage) if damage is not None else [],
        host_cpus=_host_cpus(props.get("MPISCOPE::HOST_CPUS", "")),
    )


def _host_cpus(text: str) -> list[int]:
    """MPISCOPE::HOST_CPUS: positive whole numbers, space-separated; anything else (a
    damaged or foreign property) is not guessed at: no CPU counts."""
    words = text.split()
    if not words or len(words) > 1_000_000 or not all(w.isdigit() and len(w) < 10
                                                       for w in words):
        return []
    cpus = [int(w) for w in words]
    return cpus if all(c > 0 for c in cpus) else []


def _where(defs: Definitions, flagged: np.ndarray, most: int = 6) -> str:
    """The flagged locations by rank (and thread where a rank has several)."""
    names = [f"rank {r}" + (f" thread {t}" if t else "")
             for (r, t, _l, _n), hit in zip(defs.threads, flagged.tolist(), strict=True) if hit]
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def damage_warnings(defs: Definitions, damage: _native.Damage) -> list[str]:
    """One line per kind of damage the native reader repaired (reader.c): how many and
    where."""
    out = []
    back, outside = damage.backwards.astype(np.int64), damage.outside.astype(np.int64)
    if (back + outside).any():
        parts = [f"{n} {what}" for n, what in (
            (int(back.sum()), "earlier than the event before them (raised to its time)"),
            (int(outside.sum()), "outside the trace's time range (given the time of the "
                                 "event before them)")) if n]
        where = _where(defs, back + outside > 0)
        out.append(f"damaged timestamps: {' and '.join(parts)} in {where}; times and "
                   "durations there are uncertain")
    bad = damage.bytes.astype(np.int64)
    if bad.any():
        out.append(f"{int(bad.sum())} byte count(s) beyond 2^48 (256 TiB) dropped as damaged in "
                   f"{_where(defs, bad > 0)}")
    if damage.overrun.any():
        out.append("more events than their event files' bytes can hold (damaged): read as far "
                   f"as those bytes go in {_where(defs, damage.overrun)}")
    return out


def callpaths_frame(paths: Sequence[Sequence[Frame]]) -> pd.DataFrame:
    """The `callpaths` table of call paths given as (frame, function, library) lists,
    innermost first; path i gets id i."""
    rows = [(i, level, *f) for i, frames in enumerate(paths) for level, f in enumerate(frames)]
    return pd.DataFrame({
        "callpath": np.asarray([r[0] for r in rows], np.int32),
        "level": np.asarray([r[1] for r in rows], np.int16),
        "frame": pd.Series([r[2] for r in rows], dtype=object),
        "function": pd.Series([r[3] for r in rows], dtype=object),
        "library": np.asarray([r[4] for r in rows], bool)})


def _records_frame(rows: list[dict], table: str) -> pd.DataFrame:
    """A small table from the definitions, with its declared dtypes also when empty."""
    cols = SCHEMA.tables[table].columns
    return pd.DataFrame({c.name: pd.Series([r[c.name] for r in rows],
                                           dtype=object if c.dtype == "str" else c.dtype)
                         for c in cols})


def _rma_io_frames(t: dict[str, dict[str, np.ndarray]], defs: Definitions
                   ) -> tuple[pd.DataFrame, ...]:
    """The RMA and MPI-IO tables: the native columns, plus what the definitions say
    (a group's members, a handle's file)."""
    def enum_col(codes: np.ndarray, enum: str) -> pd.Categorical:
        return _category(codes, SCHEMA.enums[enum].names)

    r = dict(t["rma"])
    r["op"] = enum_col(r["op"], "rma_op")
    rma = _frame({n: r[n] for n in SCHEMA.tables["rma"].names})
    s = dict(t["rma_sync"])
    s["event"] = enum_col(s["event"], "rma_sync_event")
    groups = defs.group_members
    s["members"] = pd.Series([groups.get(int(g), []) if g >= 0 else [] for g in s["group"]],
                             dtype=object)
    rma_sync = _frame({n: s[n] for n in SCHEMA.tables["rma_sync"].names})
    o = dict(t["io"])
    o["mode"] = enum_col(o["mode"], "io_mode")
    o["collective"] = o["collective"].astype(bool)
    o["nonblocking"] = o["nonblocking"].astype(bool)
    paths = sorted({f["file"] for f in defs.files} | {""})
    code_of_handle = {f["handle"]: paths.index(f["file"]) for f in defs.files}
    # by the handles' refs, not a table as long as the largest (an event may name any)
    refs = np.asarray(sorted(code_of_handle), np.int64)
    codes = np.asarray([code_of_handle[h] for h in refs.tolist()], np.int32)
    handles = o["handle"].astype(np.int64)
    pos = np.clip(np.searchsorted(refs, handles), 0, max(len(refs) - 1, 0))
    known = (refs[pos] == handles) if len(refs) else np.zeros(len(handles), bool)
    o["file"] = _category(np.where(known, codes[pos] if len(refs) else 0, 0).astype(np.int32),
                          paths)
    io_ops = _frame({n: o[n] for n in SCHEMA.tables["io"].names})
    windows = _records_frame(defs.windows, "windows")
    files = _records_frame(defs.files, "files")
    return rma, rma_sync, io_ops, windows, files


