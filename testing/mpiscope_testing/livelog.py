"""The crash-safe live log's layout, read from the C sources that define it, for tests that
craft damaged logs and check what `mpiscope-recover` makes of them.

    from mpiscope_testing import livelog
    lay = livelog.layout()                      # from live.h, evbuf.h, evbuf.c, liveread.c
    recs = livelog.records(defs_bytes)          # [Record(type, at, payload)]
    n = livelog.expected_events(defs, events, ring)  # OTF2 events a whole recovery writes

The record kinds and structs come from interposer/src/live.h, the event records' sizes
from evbuf.c's record_words(), which event kinds annotate the next one (no event of their
own) from liveread.c: a layout change there changes what the tests craft, not the tests.
`expected_events` walks the events and ring files independently of the C reader: the
oracle the mutation campaign checks every successful recovery against.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from mpiscope_testing import REPO

SRC = REPO / "interposer" / "src"
_CTYPES = {"char": ("s", 1), "uint32_t": ("I", 4), "int32_t": ("i", 4), "uint64_t": ("Q", 8),
           "int64_t": ("q", 8)}


@dataclass(frozen=True)
class Field:
    offset: int
    fmt: str  # struct format of one field ("<I", "<8s", ...)


@dataclass(frozen=True)
class Struct:
    size: int
    fields: dict[str, Field]

    def get(self, data: bytes, name: str, base: int = 0) -> int | bytes:
        f = self.fields[name]
        return struct.unpack_from(f.fmt, data, base + f.offset)[0]

    def put(self, data: bytearray, name: str, value: int | bytes, base: int = 0) -> None:
        f = self.fields[name]
        struct.pack_into(f.fmt, data, base + f.offset, value)


@dataclass(frozen=True)
class Layout:
    rec: dict[str, int]  # HEADER, STRING, CALLSITE, ... -> record type
    header: Struct
    callsite: Struct
    window: Struct
    ev: dict[str, int]  # ENTER, LEAVE, ... -> event record kind
    words: Callable[[int, int], int]  # (kind, third word) -> record words, 0: unknown
    annotations: frozenset[int]  # kinds that make no OTF2 event of their own
    tail_words: int  # MPS_LIVE_TAIL_WORDS


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def _enum(text: str, name: str, prefix: str) -> dict[str, int]:
    body = re.search(rf"enum {name} \{{(.*?)\}};", _strip_comments(text), re.S)
    assert body, f"enum {name} not found"
    out, value = {}, -1
    for item in body.group(1).split(","):
        m = re.fullmatch(r"\s*(\w+)\s*(?:=\s*(\d+))?\s*", item)
        if not m:
            continue
        value = int(m.group(2)) if m.group(2) else value + 1
        out[m.group(1).removeprefix(prefix)] = value
    return out


def _struct(text: str, name: str) -> Struct:
    body = re.search(rf"struct {name} \{{(.*?)\}};", _strip_comments(text), re.S)
    assert body, f"struct {name} not found"
    fields, offset = {}, 0
    for decl in body.group(1).split(";"):
        m = re.fullmatch(r"\s*(\w+)\s+(.+?)\s*", decl)
        if not m:
            continue
        code, size = _CTYPES[m.group(1)]
        for var in m.group(2).split(","):
            v = re.fullmatch(r"\s*(\w+)(?:\[(\d+)\])?\s*", var)
            assert v, decl
            count = int(v.group(2) or 1)
            offset = -(-offset // size) * size  # natural alignment
            fmt = f"<{count}s" if code == "s" else f"<{code}"
            fields[v.group(1)] = Field(offset, fmt)
            offset += size * count
    return Struct(-(-offset // 8) * 8, fields)


def _record_words(evbuf_c: str, ev: dict[str, int]) -> Callable[[int, int], int]:
    body = re.search(r"static size_t record_words\(const uint64_t \*p\)\s*\{(.*?)\n\}",
                     evbuf_c, re.S)
    assert body, "record_words not found in evbuf.c"
    # kind -> (words, words when the third word's high half is set: hashed collectives)
    table: dict[int, tuple[int, int]] = {}
    for cases, expr in re.findall(r"((?:case MPS_EV_\w+:\s*)+)return ([^;]+);", body.group(1)):
        expr = expr.strip()
        m = re.fullmatch(r"p\[2\] >> 32 \? (\d+) : (\d+)", expr)
        sizes = (int(m.group(2)), int(m.group(1))) if m else (int(expr), int(expr))
        for kind in re.findall(r"case MPS_EV_(\w+):", cases):
            table[ev[kind]] = sizes

    def words(kind: int, w2: int) -> int:
        plain, hashed = table.get(kind, (0, 0))
        return hashed if w2 >> 32 else plain
    return words


@cache
def layout() -> Layout:
    live_h = (SRC / "live.h").read_text()
    evbuf_h = (SRC / "evbuf.h").read_text()
    ev = _enum(evbuf_h, "mps_ev", "MPS_EV_")
    annot = re.search(r"static int annotation\(unsigned kind\)\s*\{(.*?)\n\}",
                      (SRC / "liveread.c").read_text(), re.S)
    assert annot, "annotation() not found in liveread.c"
    tail = re.search(r"#define MPS_LIVE_TAIL_WORDS (\d+)u?", live_h)
    assert tail
    return Layout(
        rec=_enum(live_h, "mps_live_rec", "MPS_LIVE_"),
        header=_struct(live_h, "mps_live_header"),
        callsite=_struct(live_h, "mps_live_callsite"),
        window=_struct(live_h, "mps_live_window"),
        ev=ev,
        words=_record_words((SRC / "evbuf.c").read_text(), ev),
        annotations=frozenset(ev[k] for k in re.findall(r"MPS_EV_(\w+)", annot.group(1))),
        tail_words=int(tail.group(1)),
    )


@dataclass(frozen=True)
class Record:
    type: int
    at: int  # byte offset of its {type, length} head
    payload: bytes

    @property
    def end(self) -> int:
        return self.at + 8 + len(self.payload)


def records(defs: bytes) -> list[Record]:
    """The whole records of a .defs file in order (a last one cut short is left out)."""
    out, at = [], 0
    while at + 8 <= len(defs):
        rtype, n = struct.unpack_from("<II", defs, at)
        if at + 8 + n > len(defs):
            break
        out.append(Record(rtype, at, defs[at + 8: at + 8 + n]))
        at += 8 + n
    return out


def of_type(defs: bytes, name: str) -> list[Record]:
    return [r for r in records(defs) if r.type == layout().rec[name]]


def window_end(words: tuple[int, ...], start: int, lim: int, cut: bool) -> tuple[int, list[int]]:
    """mps_evbuf_valid_end's walk of words[start:lim]: (end, starts of the whole records)."""
    lay, p, starts = layout(), start, []
    while p + 3 <= lim and words[p] != 0:
        n = lay.words(words[p + 1] & 0xFF, words[p + 2])
        if n == 0 or p + n > lim:
            break
        starts.append(p)
        p += n
    if cut and starts and lay.words(words[starts[-1] + 1] & 0xFF, words[starts[-1] + 2]) > 2:
        p = starts.pop()
    return p, starts


def spilled(defs: bytes) -> int:
    """Windows the log says are in the events file (its last SPILLED record); the later
    ones are in the ring, window k in slot k % 2."""
    recs = of_type(defs, "SPILLED")
    return struct.unpack("<Q", recs[-1].payload)[0] if recs else 0


def expected_events(defs: bytes, events: bytes, ring: bytes) -> int:
    """The OTF2 events a recovery that takes the log whole writes for it: MPI_Init's Enter
    and Leave, one per event record of its windows (not the annotations), one BufferFlush
    per window after which the log went on."""
    lay = layout()
    header = defs[8: 8 + lay.header.size]
    wbytes = int(lay.header.get(header, "window_bytes"))
    nwin, nspilled = len(of_type(defs, "WINDOW")), spilled(defs)
    total = 2 + nwin
    for k in range(nwin + 1):
        data, at = (events, k * wbytes) if k < nspilled else (ring, (k % 2) * wbytes)
        chunk = data[at: at + wbytes]
        words = struct.unpack(f"<{len(chunk) // 8}Q", chunk[: len(chunk) // 8 * 8])
        _, starts = window_end(words, 0, len(words), k == nwin)
        total += sum(1 for s in starts if words[s + 1] & 0xFF not in lay.annotations)
    return total
