"""ctypes binding of the native reader (analyzer/native/reader.c).

The C side decodes the events and builds every large table; here its columns become
numpy arrays that own the C buffers (no copy: `free` runs when the array is collected).
"""

from __future__ import annotations

import ctypes as C
from collections.abc import Callable
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

import numpy as np

from mpiscope.archive.schema import SCHEMA, Schema
from mpiscope.errors import UserError
from mpiscope.paths import artefact

NONE32 = 0xFFFFFFFF

# C element type -> ctypes (a `T[]` field is a pointer to a numpy array's data)
_CTYPES = {"int8_t": C.c_int8, "uint8_t": C.c_uint8, "int16_t": C.c_int16,
           "int32_t": C.c_int32, "uint32_t": C.c_uint32, "int64_t": C.c_int64,
           "uint64_t": C.c_uint64}


class Config(C.Structure):
    """mpsr_config, as tables.spec declares it: lookup tables from the definitions."""
    _fields_ = [(f.name, C.c_void_p if f.array else _CTYPES[f.ctype])
                for f in SCHEMA.structs["config"].fields]


@dataclass
class Lookup:
    """What the C side needs from the definitions (numpy arrays, kept alive by this)."""
    locations: np.ndarray  # uint64 location refs to read, rank-major (every thread)
    loc_rank: np.ndarray  # int32 world rank of each
    loc_thread: np.ndarray  # int16 thread of each within its rank
    attr_callsite: int
    attr_in: int
    attr_out: int
    timer_resolution: int
    global_offset: int
    region_func: np.ndarray  # int32 per region ref
    region_kind: np.ndarray  # int8
    region_mpi: np.ndarray  # uint8
    unknown_func: int
    source_code: np.ndarray  # int32 per source code location ref
    unknown_source: int
    comm_index: np.ndarray  # int32 per comm ref (-1: unknown)
    comm_offset: np.ndarray  # int64, ncomms + 1
    comm_members: np.ndarray  # int32 world ranks
    comm_self: np.ndarray  # uint8 per comm index
    expected_events: int
    win_comm: np.ndarray  # int32 comm ref per RmaWin ref (-1: unknown)
    attr_callpath: int = NONE32
    attr_calls: int = NONE32
    context_path: np.ndarray | None = None  # int32 call path id per CallingContext ref
    context_source: np.ndarray | None = None  # int32 call-site code of its innermost frame


@dataclass
class Events:
    tables: dict[str, dict[str, np.ndarray]]
    loc_events: np.ndarray
    loc_first: np.ndarray
    loc_last: np.ndarray
    loc_truncated: np.ndarray
    clock_offsets: int  # ClockOffset records libotf2 applied to the timestamps
    # per p2p row: the posting call of a receive, the completing call of a send (-1: none);
    # what message matching pairs by, for matching reads of location subsets together
    link: np.ndarray | None = None
    # read with subset=True: why none of the locations was readable ("" if one was)
    error: str = ""


PROGRESS = C.CFUNCTYPE(None, C.c_uint64, C.c_uint64)
_lib: C.CDLL | None = None


def library() -> C.CDLL:
    global _lib
    if _lib is None:
        path = artefact("native/libmpiscope_reader.so", "native reader")
        lib = C.CDLL(str(path))
        check_layout(lib, path, SCHEMA)
        lib.mpsr_read.restype = C.c_void_p
        lib.mpsr_read.argtypes = [C.c_char_p, C.POINTER(Config), PROGRESS]
        lib.mpsr_release.argtypes = [C.c_void_p]
        lib.mpsr_rows.restype = C.c_uint64
        lib.mpsr_rows.argtypes = [C.c_void_p, C.c_int]
        lib.mpsr_take.restype = C.c_void_p
        lib.mpsr_take.argtypes = [C.c_void_p, C.c_int, C.c_int]
        lib.mpsr_clock_offsets.restype = C.c_uint64
        lib.mpsr_clock_offsets.argtypes = [C.c_void_p]
        lib.mpsr_take_link.restype = C.c_void_p
        lib.mpsr_take_link.argtypes = [C.c_void_p]
        lib.mpsr_error.restype = C.c_char_p
        lib.mpsr_error.argtypes = [C.c_void_p]
        lib.mpsr_locations.argtypes = [C.c_void_p, C.c_int32] + [C.c_void_p] * 4
        lib.mpsr_free_buffer.argtypes = [C.c_void_p]
        lib.mpsr_properties.restype = C.c_void_p
        lib.mpsr_properties.argtypes = [C.c_char_p]
        _lib = lib
    return _lib


def check_layout(lib: C.CDLL, path: Path, schema: Schema) -> None:
    """The library was built from the declaration we read: else its columns, codes or
    config would be misread. A one-line UserError naming what differs if not."""
    built = ""
    if hasattr(lib, "mpsr_layout"):  # older builds do not say
        lib.mpsr_layout.restype = C.c_char_p
        built = lib.mpsr_layout().decode()
    expected = schema.layout()
    if built == expected:
        return
    differs = [(a or b).partition(":")[0]
               for a, b in zip_longest(expected.splitlines(), built.splitlines()) if a != b]
    what = f"its {differs[0]} differs from tables.spec" if built else "it predates tables.spec"
    raise UserError(str(path), f"native reader is out of date ({what}): run `make build`")


class _Buffer:
    """A C buffer seen by numpy through the array interface; freed with the last view."""

    def __init__(self, lib: C.CDLL, ptr: int, n: int, dtype: np.dtype) -> None:
        self._free = lib.mpsr_free_buffer
        self.ptr = ptr
        self.__array_interface__ = {"data": (ptr, False), "shape": (n,),
                                    "typestr": dtype.str, "version": 3}

    def __del__(self) -> None:
        self._free(self.ptr)


def _take(lib: C.CDLL, res: int, table: int, col: int, n: int, dtype: str) -> np.ndarray:
    ptr = lib.mpsr_take(res, table, col)
    dt = np.dtype(dtype)
    if not ptr:
        return np.zeros(n, dtype=dt)
    if n == 0:
        lib.mpsr_free_buffer(ptr)
        return np.empty(0, dtype=dt)
    return np.asarray(_Buffer(lib, ptr, n, dt))


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data if len(a) else 0


def read_events(anchor: Path, lk: Lookup,
                progress: Callable[[int, int], None] | None = None, *,
                subset: bool = False) -> Events:
    """Decode all events of the given locations into tables (see reader.c). The
    locations may be a subset of the archive's (a group of ranks with all their threads):
    `call` ids then count within the subset, and messages are matched within it only."""
    lib = library()
    ctx_path = lk.context_path if lk.context_path is not None else np.zeros(0, np.int32)
    ctx_src = lk.context_source if lk.context_source is not None else np.zeros(0, np.int32)
    cfg = Config(
        nloc=len(lk.locations), locs=_ptr(lk.locations), loc_rank=_ptr(lk.loc_rank),
        loc_thread=_ptr(lk.loc_thread), attr_callsite=lk.attr_callsite,
        attr_in=lk.attr_in, attr_out=lk.attr_out, timer_resolution=lk.timer_resolution,
        global_offset=lk.global_offset, nregions=len(lk.region_func),
        region_func=_ptr(lk.region_func), region_kind=_ptr(lk.region_kind),
        region_mpi=_ptr(lk.region_mpi), unknown_func=lk.unknown_func,
        nsources=len(lk.source_code), source_code=_ptr(lk.source_code),
        unknown_source=lk.unknown_source, ncommrefs=len(lk.comm_index),
        comm_index=_ptr(lk.comm_index), ncomms=len(lk.comm_self),
        comm_offset=_ptr(lk.comm_offset), comm_members=_ptr(lk.comm_members),
        comm_self=_ptr(lk.comm_self), expected_events=lk.expected_events,
        nwinrefs=len(lk.win_comm), win_comm=_ptr(lk.win_comm),
        attr_callpath=lk.attr_callpath, attr_calls=lk.attr_calls, ncontexts=len(ctx_path),
        context_path=_ptr(ctx_path), context_source=_ptr(ctx_src), subset=int(subset))
    callback = PROGRESS(progress) if progress else PROGRESS()
    res = lib.mpsr_read(str(anchor).encode(), C.byref(cfg), callback)
    if not res:
        raise UserError(str(anchor.parent), "out of memory while reading events")
    try:
        error = (lib.mpsr_error(res) or b"").decode(errors="replace")
        unreadable = subset and error.startswith("corrupt OTF2 events")
        if error and not unreadable:
            raise UserError(str(anchor.parent), error)
        tables = {}
        for t, table in enumerate(SCHEMA.native_tables):
            n = int(lib.mpsr_rows(res, t))
            tables[table.name] = {col.name: _take(lib, res, t, i, n, col.storage)
                                  for i, col in enumerate(table.native)}
        nloc = len(lk.locations)
        events = np.zeros(nloc, np.uint64)
        first = np.zeros(nloc, np.int64)
        last = np.zeros(nloc, np.int64)
        trunc = np.zeros(nloc, np.uint8)
        lib.mpsr_locations(res, nloc, _ptr(events), _ptr(first), _ptr(last), _ptr(trunc))
        np2p = len(tables["p2p"]["rank"])
        link_ptr = lib.mpsr_take_link(res)
        if link_ptr and np2p:
            link = np.asarray(_Buffer(lib, link_ptr, np2p, np.dtype(np.int64)))
        else:
            if link_ptr:
                lib.mpsr_free_buffer(link_ptr)
            link = np.full(np2p, -1, np.int64)
        return Events(tables, events, first, last, trunc.astype(bool),
                      int(lib.mpsr_clock_offsets(res)), link, error)
    finally:
        lib.mpsr_release(res)


def archive_properties(anchor: Path) -> dict[str, str]:
    lib = library()
    ptr = lib.mpsr_properties(str(anchor).encode())
    if not ptr:
        return {}
    try:
        text = C.string_at(ptr).decode(errors="replace")
    finally:
        lib.mpsr_free_buffer(ptr)
    props = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        props[key] = value
    return props
