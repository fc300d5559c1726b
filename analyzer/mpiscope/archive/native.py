"""ctypes binding of the native reader (analyzer/native/reader.c).

The C side decodes the events and builds every large table; here its columns become
numpy arrays that own the C buffers (no copy: `free` runs when the array is collected).
"""

from __future__ import annotations

import contextlib
import ctypes as C
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
    attr_prior: int = NONE32
    attr_run_delay: int = NONE32
    context_path: np.ndarray | None = None  # int32 call path id per CallingContext ref
    context_source: np.ndarray | None = None  # int32 call-site code of its innermost frame
    trace_length: int = 0  # clock ticks (ClockProperties), 0 if unknown
    # per location: most events its stored bytes can hold (0: no bound)
    loc_max_events: np.ndarray | None = None
    # sparse definition refs: the sorted refs a lookup's entries belong to (None: dense,
    # entry i is ref i); see Refs in decode.py
    refs: dict[str, np.ndarray] = field(default_factory=dict)


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
    damage: Damage | None = None


@dataclass
class Damage:
    """Per location, what the reader changed of a damaged file (reader.c's stamp and
    plausible): timestamps raised to the one before them, timestamps outside the trace's
    range, byte counts dropped, and whether it held more events than its bytes can."""

    backwards: np.ndarray  # uint64
    outside: np.ndarray  # uint64
    bytes: np.ndarray  # uint64
    overrun: np.ndarray  # bool

    @staticmethod
    def none(n: int) -> Damage:
        z = np.zeros(n, np.uint64)
        return Damage(z, z.copy(), z.copy(), np.zeros(n, bool))

    @staticmethod
    def concat(parts: list[Damage]) -> Damage:
        return Damage(*(np.concatenate([getattr(d, f) for d in parts])
                        for f in ("backwards", "outside", "bytes", "overrun")))


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
        lib.mpsr_damage.argtypes = [C.c_void_p, C.c_int32] + [C.c_void_p] * 4
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


def _ptr(a: np.ndarray | None) -> int:
    return a.ctypes.data if a is not None and len(a) else 0


_END = b"\x02\x01"  # a complete OTF2 buffer file ends with END_OF_FILE, END_OF_BUFFER
_CHUNK_MAX = 16 << 20  # OTF2's largest chunk size


def _chunk_sizes(anchor: Path) -> tuple[int, int]:
    """The archive's chunk sizes (events, definitions), the largest possible if unknown."""
    try:
        import _otf2  # the otf2 package's binding (its own libotf2)

        rd = _otf2.Reader_Open(str(anchor))
        try:
            evt, defs = _otf2.Reader_GetChunkSize(rd)
        finally:
            _otf2.Reader_Close(rd)
        if 0 < evt <= _CHUNK_MAX and 0 < defs <= _CHUNK_MAX:
            return int(evt), int(defs)
    except Exception:  # noqa: BLE001 - the package raises its own types: assume the worst
        pass
    return _CHUNK_MAX, _CHUNK_MAX


@contextlib.contextmanager
def _complete(anchor: Path, locations: np.ndarray) -> Iterator[Path]:
    """The anchor to read: `anchor`, or when a location's event or local definition file
    is cut short (it does not end as libotf2 ends a file), a temporary archive of links
    to the files with a zero-padded copy of each cut one. libotf2 reads a chunk into a
    buffer and decodes past the end of a cut file into the buffer's old contents (another
    location's events: garbage rows); zeros to the chunk's end, and in the next chunk,
    decode as the end of the data."""
    local = anchor.with_suffix("")
    cut = []
    for loc in locations.tolist():
        for f in (local / f"{loc}.evt", local / f"{loc}.def"):
            try:
                size = f.stat().st_size
                if size >= len(_END):
                    with open(f, "rb") as fh:
                        fh.seek(size - len(_END))
                        if fh.read() != _END:
                            cut.append(f)
            except OSError:
                continue  # missing or unreadable: libotf2 reports it
    if not cut:
        yield anchor
        return
    chunk = dict(zip((".evt", ".def"), _chunk_sizes(anchor), strict=True))
    with tempfile.TemporaryDirectory(prefix="mpiscope-cut-") as tmp:
        t = Path(tmp)
        os.symlink(anchor.resolve(), t / anchor.name)
        defs = anchor.with_suffix(".def")
        os.symlink(defs.resolve(), t / defs.name)
        (t / local.name).mkdir()
        for f in local.iterdir():
            if f in cut:
                shutil.copyfile(f, t / local.name / f.name)
                size, step = f.stat().st_size, chunk[f.suffix]
                with open(t / local.name / f.name, "r+b") as fh:
                    # zeros to the end of its chunk, and a chunk of them after it: the
                    # next read must find zeros too, not fail into the old buffer
                    fh.truncate(-(-size // step) * step + step)  # sparse: costs no disk
            else:
                os.symlink(f.resolve(), t / local.name / f.name)
        yield t / anchor.name


def config(lk: Lookup, *, subset: bool = False,
           max_kept_events: int = 0) -> tuple[Config, dict[str, np.ndarray]]:
    """The mpsr_config read_events hands to mpsr_read, and the array behind each of its
    pointer fields (by field name; they must outlive the Config). The reader's fuzz
    harness (analyzer/native/fuzz) is given exactly this."""
    ctx_path = lk.context_path if lk.context_path is not None else np.zeros(0, np.int32)
    ctx_src = lk.context_source if lk.context_source is not None else np.zeros(0, np.int32)
    arrays = {
        "locs": lk.locations, "loc_rank": lk.loc_rank, "loc_thread": lk.loc_thread,
        "region_func": lk.region_func, "region_kind": lk.region_kind,
        "region_mpi": lk.region_mpi, "source_code": lk.source_code,
        "comm_index": lk.comm_index, "comm_offset": lk.comm_offset,
        "comm_members": lk.comm_members, "comm_self": lk.comm_self, "win_comm": lk.win_comm,
        "context_path": ctx_path, "context_source": ctx_src,
        "loc_max_events": lk.loc_max_events,
        **{f"{name}_refs": refs for name, refs in lk.refs.items()}}
    arrays = {name: a for name, a in arrays.items() if a is not None}
    cfg = Config(
        nloc=len(lk.locations), attr_callsite=lk.attr_callsite,
        attr_in=lk.attr_in, attr_out=lk.attr_out, timer_resolution=lk.timer_resolution,
        global_offset=lk.global_offset, nregions=len(lk.region_func),
        unknown_func=lk.unknown_func, nsources=len(lk.source_code),
        unknown_source=lk.unknown_source, ncommrefs=len(lk.comm_index),
        ncomms=len(lk.comm_self), expected_events=lk.expected_events,
        nwinrefs=len(lk.win_comm), attr_callpath=lk.attr_callpath, attr_calls=lk.attr_calls,
        attr_prior=lk.attr_prior, attr_run_delay=lk.attr_run_delay, ncontexts=len(ctx_path),
        subset=int(subset), trace_length=lk.trace_length,
        max_kept_events=max(int(max_kept_events), 0),
        **{name: _ptr(a) for name, a in arrays.items()})
    return cfg, arrays


def read_events(anchor: Path, lk: Lookup,
                progress: Callable[[int, int], None] | None = None, *,
                subset: bool = False, max_kept_events: int = 0) -> Events:
    """Decode all events of the given locations into tables (see reader.c). The
    locations may be a subset of the archive's (a group of ranks with all their threads):
    `call` ids then count within the subset, and messages are matched within it only.
    `max_kept_events` (0: none): reading stops with a UserError once it keeps more events
    (idle polling calls merged into visits are not kept: archive/memory.py)."""
    lib = library()
    cfg, _arrays = config(lk, subset=subset, max_kept_events=max_kept_events)
    callback = PROGRESS(progress) if progress else PROGRESS()
    with _complete(anchor, lk.locations) as readable:
        res = lib.mpsr_read(str(readable).encode(), C.byref(cfg), callback)
    if not res:
        raise UserError(str(anchor.parent), "out of memory while reading events")
    try:
        error = (lib.mpsr_error(res) or b"").decode(errors="replace")
        unreadable = subset and error.startswith("corrupt OTF2 events")
        if error.startswith("memory budget:"):
            from mpiscope.archive.memory import PANDAS_BYTES_PER_EVENT, gib

            raise UserError(str(anchor.parent), (
                f"too large for this machine's memory: the events kept ({error[15:]}; "
                "idle polling calls merged) outgrew the "
                f"{gib(max_kept_events * PANDAS_BYTES_PER_EVENT)} it can give an analysis; "
                "record fewer events (MPISCOPE_FILTER, a shorter run), or analyse it with "
                "more memory (a larger Dask --memory-limit or cluster)"))
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
        damage = Damage.none(nloc)
        overrun = np.zeros(nloc, np.uint8)
        lib.mpsr_damage(res, nloc, _ptr(damage.backwards), _ptr(damage.outside),
                        _ptr(damage.bytes), _ptr(overrun))
        damage.overrun = overrun.astype(bool)
        np2p = len(tables["p2p"]["rank"])
        link_ptr = lib.mpsr_take_link(res)
        if link_ptr and np2p:
            link = np.asarray(_Buffer(lib, link_ptr, np2p, np.dtype(np.int64)))
        else:
            if link_ptr:
                lib.mpsr_free_buffer(link_ptr)
            link = np.full(np2p, -1, np.int64)
        return Events(tables, events, first, last, trunc.astype(bool),
                      int(lib.mpsr_clock_offsets(res)), link, error, damage)
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
