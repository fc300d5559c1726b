"""Damage an OTF2 archive the way a disk, a transfer or a hostile hand does, for the fuzz
suite (analyzer/tests/test_fuzz.py) and its regression cases.

OTF2 files (`traces.def`, `traces/N.evt`, `traces/N.def`) are chunks: an 18-byte header
(record type, endianness, first and last event number as uint64), then records; a
complete file ends with END_OF_FILE, END_OF_BUFFER (0x02 0x01). Integers are mostly
"compressed": a byte giving their length (0..8), then that many bytes little-endian;
0xff alone is the all-ones value (OTF2's "undefined"). Definition records carry their
length (type byte, length byte, fields), their first field is the record's own ref.
Event records follow a timestamp record (0x05, then 8 bytes little-endian) and,
optionally, an attribute list (0x06, with a length).

`mutate(trace_dir, rng)` applies one random damage of a random kind and says what it
did; the helpers below make the targeted ones (a Location's event count, a definition's
ref, a timestamp) for regression tests.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from pathlib import Path

HEADER = 18
END = b"\x02\x01"
TIMESTAMP = 0x05
ATTRIBUTES = 0x06
LOCATION = 0x0E  # global definition record types (OTF2_GlobalDefRecordType)
REGION = 0x0F
MAPPING_TABLE = 0x05  # a local definition record type (OTF2_LocalDefRecordType)
HUGE = [(1 << 64) - 1, (1 << 63) + 5, (1 << 62), (1 << 40), 0xFFFFFFFE, 0xFFFFFFFF,
        0x7FFFFFFF, 1 << 31]


def cint(data: bytes, i: int) -> tuple[int, int]:
    """The compressed integer at i and the offset after it."""
    n = data[i]
    if n == 0xFF:
        return (1 << 64) - 1, i + 1
    return int.from_bytes(data[i + 1:i + 1 + n], "little"), i + 1 + n


def encode(value: int) -> bytes:
    """`value` compressed (all-ones as OTF2's one-byte form)."""
    if value == (1 << 64) - 1:
        return b"\xff"
    if value == 0:
        return b"\x00"
    n = (value.bit_length() + 7) // 8
    return bytes([n]) + value.to_bytes(n, "little")


@dataclass(frozen=True)
class Record:
    start: int  # offset of the type byte
    type: int
    body: int  # first byte of the fields
    end: int  # after the last


def def_records(data: bytes) -> list[Record]:
    """The records of a definition file's first chunk (all of them in a small trace)."""
    out, i = [], HEADER
    while i + 1 < len(data) and data[i] not in (0x01, 0x02):
        t, length, body = data[i], data[i + 1], i + 2
        if length == 0xFF:
            length, body = int.from_bytes(data[body:body + 8], "little"), body + 8
        if body + length > len(data):
            break
        out.append(Record(i, t, body, body + length))
        i = body + length
    return out


def replace(data: bytes, rec: Record, start: int, stop: int, new: bytes) -> bytes:
    """data[start:stop] (inside rec's fields) replaced by `new`, rec's length fixed."""
    fields = data[rec.body:start] + new + data[stop:rec.end]
    head = bytes([rec.type, len(fields)]) if len(fields) < 0xFF else \
        bytes([rec.type, 0xFF]) + struct.pack("<Q", len(fields))
    return data[:rec.start] + head + fields + data[rec.end:]


def with_location_events(data: bytes, value: int) -> bytes:
    """Every Location's numberOfEvents set to `value` (fields: self, name, type (a
    byte), numberOfEvents, group)."""
    done = 0
    while True:
        locs = [r for r in def_records(data) if r.type == LOCATION]
        if done == len(locs):
            return data
        rec = locs[done]
        _self, at = cint(data, rec.body)
        _name, at = cint(data, at)
        _old, stop = cint(data, at + 1)
        data = replace(data, rec, at + 1, stop, encode(value))
        done += 1


def with_self_ref(data: bytes, record_type: int, index: int, value: int) -> bytes:
    """The index-th definition record of a type given the ref `value`."""
    rec = [r for r in def_records(data) if r.type == record_type][index]
    _old, stop = cint(data, rec.body)
    return replace(data, rec, rec.body, stop, encode(value))


def with_id_map_count(data: bytes, index: int, value: int) -> bytes:
    """A local definition file's index-th MappingTable claiming `value` ids (fields:
    mapping type (a byte), the id map's count, its mode (a byte), the ids); the ids it
    holds stay as they are."""
    rec = [r for r in def_records(data) if r.type == MAPPING_TABLE][index]
    _old, stop = cint(data, rec.body + 1)
    return replace(data, rec, rec.body + 1, stop, encode(value))


def timestamps(data: bytes, lo: int, hi: int) -> list[int]:
    """Offsets of the timestamp records of an event file whose time lies in [lo, hi] (the
    trace's range in clock ticks: other bytes rarely look like one)."""
    out, i = [], HEADER
    while True:
        i = data.find(bytes([TIMESTAMP]), i)
        if i < 0 or i + 9 > len(data):
            return out
        t = int.from_bytes(data[i + 1:i + 9], "little")
        if lo <= t <= hi:
            out.append(i)
            i += 9
        else:
            i += 1


def with_timestamp(data: bytes, at: int, value: int) -> bytes:
    return data[:at + 1] + (value % (1 << 64)).to_bytes(8, "little") + data[at + 9:]


ENTER, LEAVE = 0x0C, 0x0D  # event record types


def event_after(data: bytes, stamp: int) -> int:
    """Offset of the event record after the timestamp record at `stamp` (past its
    attribute list, if it has one)."""
    rec = stamp + 9
    if rec < len(data) and data[rec] == ATTRIBUTES:
        rec += 2 + data[rec + 1]
    return rec


def with_region_ref(data: bytes, lo: int, hi: int, old: int, new: int) -> bytes:
    """Every Enter and Leave of region `old` made to name region `new`."""
    for stamp in reversed(timestamps(data, lo, hi)):
        at = event_after(data, stamp)
        if at + 1 < len(data) and data[at] in (ENTER, LEAVE):
            ref, stop = cint(data, at + 1)
            if ref == old:
                data = data[:at + 1] + encode(new) + data[stop:]
    return data


def clock_range(trace: Path) -> tuple[int, int]:
    """(global offset, offset + length) in ticks, from the ClockProperties record."""
    data = (trace / "traces.def").read_bytes()
    rec = next(r for r in def_records(data) if r.type == 0x05)
    _res, at = cint(data, rec.body)
    offset, at = cint(data, at)
    length, _at = cint(data, at)
    return offset, offset + length


def _files(trace: Path) -> list[Path]:
    files = [trace / "traces.otf2", trace / "traces.def"]
    return files + sorted((trace / "traces").glob("*.evt")) + sorted(
        (trace / "traces").glob("*.def"))


def mutate(trace: Path, rng: random.Random) -> str:
    """One random damage to the archive in `trace` (modified in place); what was done."""
    kind = rng.choice(["flip", "bytes", "truncate", "events", "ref", "field", "timestamp",
                       "timestamp", "evt_field", "evt_field"])
    evts = sorted((trace / "traces").glob("*.evt"))
    if kind in ("flip", "bytes", "truncate"):
        f = rng.choice(_files(trace))
        data = bytearray(f.read_bytes())
        if not data:
            return f"{kind}: {f.name} is empty"
        if kind == "flip":
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == "bytes":
            for _ in range(rng.randint(1, 20)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        else:
            data = data[:rng.randrange(len(data))]
        f.write_bytes(bytes(data))
        return f"{kind} {f.relative_to(trace)}"
    defs = trace / "traces.def"
    data = defs.read_bytes()
    if kind == "events":
        value = rng.choice(HUGE)
        defs.write_bytes(with_location_events(data, value))
        return f"every Location's numberOfEvents = {value:#x}"
    if kind in ("ref", "field"):
        recs = [r for r in def_records(data) if r.end > r.body]
        rec = rng.choice(recs)
        value = rng.choice(HUGE)
        if kind == "ref":
            _old, stop = cint(data, rec.body)
            defs.write_bytes(replace(data, rec, rec.body, stop, encode(value)))
            return f"definition record {rec.type:#x} at {rec.start}: ref {value:#x}"
        at = rng.randrange(rec.body, rec.end)  # any byte read as a compressed integer
        stop = min(at + 1 + (data[at] if data[at] <= 8 else 0), rec.end)
        defs.write_bytes(replace(data, rec, at, stop, encode(value)))
        return f"definition record {rec.type:#x} at {rec.start}: field at {at} = {value:#x}"
    lo, hi = clock_range(trace)
    f = rng.choice(evts)
    data = f.read_bytes()
    stamps = timestamps(data, lo, hi)
    if not stamps:
        return f"{kind}: no timestamp in {f.name}"
    at = rng.choice(stamps)
    if kind == "timestamp":
        t = int.from_bytes(data[at + 1:at + 9], "little")
        value = rng.choice([t + rng.randrange(1, max(2, (hi - lo) // 4)), t - rng.randrange(
            1, max(2, (hi - lo) // 4)), hi + 9 * 10**18 // 2, 0, (1 << 64) - 1, lo - 1,
            t + (hi - lo) * 1000])
        f.write_bytes(with_timestamp(data, at, value))
        return f"timestamp at {f.name}:{at} {t} -> {value % (1 << 64)}"
    # evt_field: a field of the event after a timestamp (its k-th integer) made huge
    rec = event_after(data, at)
    i = rec + 1
    for _ in range(rng.randrange(4)):
        if i >= len(data) or data[i] > 8 and data[i] != 0xFF:
            break
        _v, i = cint(data, i)
    if i >= len(data) or (data[i] > 8 and data[i] != 0xFF):
        return f"evt_field: nothing to change at {f.name}:{rec}"
    _v, stop = cint(data, i)
    value = rng.choice(HUGE)
    f.write_bytes(data[:i] + encode(value) + data[stop:])
    return f"event field at {f.name}:{i} = {value:#x}"
