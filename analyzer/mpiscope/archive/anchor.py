"""The anchor file (`traces.otf2`) checked before libotf2 opens it.

libotf2 (3.0.2) trusts the anchor's property count: it allocates two pointers per claimed
property, reads strings until one is missing, then walks the whole array to free it. A
200-byte anchor claiming 2^30 properties made it reserve 21 GB and spin for about a
minute before `corrupt OTF2 definitions` (found by analyzer/native/fuzz/fuzz_reader.c;
under a memory limit it failed at once, so the fuzz campaign did not see it). Every
property is two NUL-terminated strings, a byte each at least: a count the rest of the
file cannot hold is refused here, in one line, before anything is allocated.

The layout, as libotf2 writes it: CHUNK_HEADER (0x03) and the byte order (0x42 little,
0x23 big), the magic string "OTF2", the anchor format (a byte), 38 bytes of fixed fields
(trace format, version, two chunk sizes, substrate, compression, location and
definition counts), three strings (machine, creator, description), then from anchor
format 2 on the property count (uint32) and the properties. Anything else that is wrong
with the file is libotf2's to report; it reads no more than its buffer holds.
"""

from __future__ import annotations

from pathlib import Path

from mpiscope.errors import UserError

CHUNK_HEADER = 0x03
BYTE_ORDER = {0x42: "little", 0x23: "big"}
MAGIC = b"OTF2"
FIXED = 38  # bytes after the anchor format byte, before the strings
READ_MAX = 1 << 20  # libotf2 writes anchors of 256 KiB at most; the count is far before


def check(anchor: Path) -> None:
    """Refuse an anchor whose property count its bytes cannot hold (UserError)."""
    try:
        size = anchor.stat().st_size
        with open(anchor, "rb") as f:
            data = f.read(min(size, READ_MAX))
    except OSError:
        return  # missing or unreadable: libotf2 and the caller say so
    claimed, at = _property_count(data)
    if claimed is None:
        return
    room = size - at
    if 2 * claimed > room:
        raise UserError(str(anchor), f"damaged anchor file: it claims {claimed:,} properties "
                                     f"in {room:,} bytes")


def _property_count(data: bytes) -> tuple[int | None, int]:
    """(the property count, the offset after it), or (None, 0) where the file has none or
    is not an anchor libotf2 would get that far in."""
    if len(data) < 2 or data[0] != CHUNK_HEADER or data[1] not in BYTE_ORDER:
        return None, 0
    order = BYTE_ORDER[data[1]]
    end = data.find(b"\0", 2)
    if end < 0 or data[2:end] != MAGIC or end + 1 >= len(data):
        return None, 0
    anchor_format = data[end + 1]
    at = end + 2 + FIXED
    for _ in range(3):  # machine, creator, description
        nul = data.find(b"\0", at)
        if nul < 0:
            return None, 0
        at = nul + 1
    if anchor_format < 2 or at + 4 > len(data):
        return None, 0
    return int.from_bytes(data[at:at + 4], order), at + 4
