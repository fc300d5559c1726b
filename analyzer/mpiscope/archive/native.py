"""ctypes binding of the native reader (analyzer/native/reader.c).

The C side decodes the events and builds every large table; here its columns become
numpy arrays that own the C buffers (no copy: `free` runs when the array is collected).
"""

from __future__ import annotations

import ctypes as C
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mpiscope.errors import UserError
from mpiscope.paths import BUILD_DIR

NONE32 = 0xFFFFFFFF
P2P_KINDS = ("send", "recv", "isend", "isend_complete", "irecv_request", "irecv", "cancelled",
             "nbc_request", "nbc_complete")

# table index -> (name, [(column, dtype)]) in the C layout order (reader.c enums)
CALL_COLS = [("rank", np.int32), ("function", np.int32), ("kind", np.int8), ("start", np.int64),
             ("end", np.int64), ("depth", np.int8), ("callsite", np.int32), ("comm", np.int32),
             ("peer", np.int32), ("tag", np.int32), ("bytes_sent", np.int64),
             ("bytes_recv", np.int64), ("root", np.int32), ("coll_seq", np.int64),
             ("coll_op", np.int16), ("in_hash", np.uint64), ("out_hash", np.uint64),
             ("truncated", np.bool_)]
TABLES: list[tuple[str, list[tuple[str, type]]]] = [
    ("calls", CALL_COLS),
    ("regions", CALL_COLS),
    ("p2p", [("rank", np.int32), ("event", np.uint8), ("time", np.int64), ("call", np.int64),
             ("peer", np.int32), ("comm", np.int32), ("tag", np.int32), ("bytes", np.int64),
             ("request", np.int64)]),
    ("flushes", [("rank", np.int32), ("start", np.int64), ("end", np.int64)]),
    ("messages", [("send_rank", np.int32), ("recv_rank", np.int32), ("comm", np.int32),
                  ("tag", np.int32), ("bytes", np.int64), ("send_call", np.int64),
                  ("recv_call", np.int64), ("send_complete_call", np.int64),
                  ("recv_complete_call", np.int64), ("send_time", np.int64),
                  ("recv_time", np.int64), ("send_enter", np.int64), ("recv_enter", np.int64),
                  ("recv_leave", np.int64)]),
    ("unmatched", [("rank", np.int32), ("event", np.uint8), ("peer", np.int32),
                   ("comm", np.int32), ("tag", np.int32), ("bytes", np.int64),
                   ("call", np.int64)]),
    ("coll", [("call", np.int64), ("instance", np.int64)]),
]


class Config(C.Structure):
    """Mirror of mpsr_config: lookup tables from the definitions."""
    _fields_ = [
        ("nloc", C.c_int32), ("locs", C.c_void_p),
        ("attr_callsite", C.c_uint32), ("attr_in", C.c_uint32), ("attr_out", C.c_uint32),
        ("timer_resolution", C.c_uint64), ("global_offset", C.c_uint64),
        ("nregions", C.c_uint32), ("region_func", C.c_void_p), ("region_kind", C.c_void_p),
        ("region_mpi", C.c_void_p), ("unknown_func", C.c_int32),
        ("nsources", C.c_uint32), ("source_code", C.c_void_p), ("unknown_source", C.c_int32),
        ("ncommrefs", C.c_uint32), ("comm_index", C.c_void_p), ("ncomms", C.c_int32),
        ("comm_offset", C.c_void_p), ("comm_members", C.c_void_p), ("comm_self", C.c_void_p),
        ("expected_events", C.c_uint64),
    ]


@dataclass
class Lookup:
    """What the C side needs from the definitions (numpy arrays, kept alive by this)."""
    locations: np.ndarray  # uint64 location ref per world rank
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


@dataclass
class Events:
    tables: dict[str, dict[str, np.ndarray]]
    loc_events: np.ndarray
    loc_first: np.ndarray
    loc_last: np.ndarray
    loc_truncated: np.ndarray
    clock_offsets: int  # ClockOffset records libotf2 applied to the timestamps


PROGRESS = C.CFUNCTYPE(None, C.c_uint64, C.c_uint64)
_lib: C.CDLL | None = None


def library() -> C.CDLL:
    global _lib
    if _lib is None:
        path = BUILD_DIR / "native" / "libmpiscope_reader.so"
        if not path.is_file():
            raise UserError(str(path), "native reader not built (run `make build`)")
        lib = C.CDLL(str(path))
        if not hasattr(lib, "mpsr_take"):
            raise UserError(str(path), "native reader is out of date (run `make build`)")
        lib.mpsr_read.restype = C.c_void_p
        lib.mpsr_read.argtypes = [C.c_char_p, C.POINTER(Config), PROGRESS]
        lib.mpsr_release.argtypes = [C.c_void_p]
        lib.mpsr_rows.restype = C.c_uint64
        lib.mpsr_rows.argtypes = [C.c_void_p, C.c_int]
        lib.mpsr_take.restype = C.c_void_p
        lib.mpsr_take.argtypes = [C.c_void_p, C.c_int, C.c_int]
        lib.mpsr_clock_offsets.restype = C.c_uint64
        lib.mpsr_clock_offsets.argtypes = [C.c_void_p]
        lib.mpsr_error.restype = C.c_char_p
        lib.mpsr_error.argtypes = [C.c_void_p]
        lib.mpsr_locations.argtypes = [C.c_void_p, C.c_int32] + [C.c_void_p] * 4
        lib.mpsr_free_buffer.argtypes = [C.c_void_p]
        lib.mpsr_properties.restype = C.c_void_p
        lib.mpsr_properties.argtypes = [C.c_char_p]
        _lib = lib
    return _lib


class _Buffer:
    """A C buffer seen by numpy through the array interface; freed with the last view."""

    def __init__(self, lib: C.CDLL, ptr: int, n: int, dtype: np.dtype) -> None:
        self._free = lib.mpsr_free_buffer
        self.ptr = ptr
        self.__array_interface__ = {"data": (ptr, False), "shape": (n,),
                                    "typestr": dtype.str, "version": 3}

    def __del__(self) -> None:
        self._free(self.ptr)


def _take(lib: C.CDLL, res: int, table: int, col: int, n: int, dtype: type) -> np.ndarray:
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
                progress: Callable[[int, int], None] | None = None) -> Events:
    """Decode all events of the given locations into tables (see reader.c)."""
    lib = library()
    cfg = Config(
        nloc=len(lk.locations), locs=_ptr(lk.locations), attr_callsite=lk.attr_callsite,
        attr_in=lk.attr_in, attr_out=lk.attr_out, timer_resolution=lk.timer_resolution,
        global_offset=lk.global_offset, nregions=len(lk.region_func),
        region_func=_ptr(lk.region_func), region_kind=_ptr(lk.region_kind),
        region_mpi=_ptr(lk.region_mpi), unknown_func=lk.unknown_func,
        nsources=len(lk.source_code), source_code=_ptr(lk.source_code),
        unknown_source=lk.unknown_source, ncommrefs=len(lk.comm_index),
        comm_index=_ptr(lk.comm_index), ncomms=len(lk.comm_self),
        comm_offset=_ptr(lk.comm_offset), comm_members=_ptr(lk.comm_members),
        comm_self=_ptr(lk.comm_self), expected_events=lk.expected_events)
    callback = PROGRESS(progress) if progress else PROGRESS()
    res = lib.mpsr_read(str(anchor).encode(), C.byref(cfg), callback)
    if not res:
        raise UserError(str(anchor.parent), "out of memory while reading events")
    try:
        error = lib.mpsr_error(res)
        if error:
            raise UserError(str(anchor.parent), error.decode(errors="replace"))
        tables = {}
        for t, (name, cols) in enumerate(TABLES):
            n = int(lib.mpsr_rows(res, t))
            tables[name] = {col: _take(lib, res, t, i, n, dtype)
                            for i, (col, dtype) in enumerate(cols)}
        nloc = len(lk.locations)
        events = np.zeros(nloc, np.uint64)
        first = np.zeros(nloc, np.int64)
        last = np.zeros(nloc, np.int64)
        trunc = np.zeros(nloc, np.uint8)
        lib.mpsr_locations(res, nloc, _ptr(events), _ptr(first), _ptr(last), _ptr(trunc))
        return Events(tables, events, first, last, trunc.astype(bool),
                      int(lib.mpsr_clock_offsets(res)))
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
