"""Stable colours: a function keeps its colour across traces, runs and sessions, and the
parts of the time breakdown have one colour each, in the reports and the web UI alike."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Iterable

# Colour-blind safe (after Okabe & Ito and Paul Tol): every colour here (parts, fixed and
# pool functions, the critical path) stays >= 10 CIELAB ΔE from every other also as
# protanopes, deuteranopes and tritanopes see them, >= 12 ΔE for normal vision, and none
# is the lanes' compute grey (tests/test_palette.py measures it). The
# parts of the time breakdown take four colours no function takes, so a strip or bar
# of "synchronization" never reads as MPI_Allreduce.
COMPUTE = "#ececec"  # lane background: time outside MPI
PART_COLOURS = {"compute": "#bbbbbb", "communication": "#332288", "synchronization": "#882255",
                "io": "#999933"}
# The functions users look at most get fixed colours of their own.
FIXED = {
    "MPI_Allreduce": "#ee6677", "MPI_Send": "#0077bb", "MPI_Recv": "#117733",
    "MPI_Wait": "#f0e442", "MPI_Waitall": "#ccbb44", "MPI_Isend": "#6699cc",
    "MPI_Irecv": "#99ddff", "MPI_Barrier": "#7f3c8d", "MPI_Sendrecv": "#cc79a7",
    "MPI_Bcast": "#33bbee", "MPI_Reduce": "#ee8866", "MPI_Init": "#ffcc77",
    "MPI_Finalize": "#aa3377",
}
# Every other function: a colour picked by its name from these (then the next free one,
# so that no two functions shown together share one).
# (Picked near the earlier pool's colours, each one apart from all the colours above.)
POOL = ("#d55e00", "#009e73", "#bb3333", "#bb2200", "#99cc00", "#99dd99", "#886699",
        "#dd2255", "#882211", "#0055aa", "#9977dd", "#6655dd")
PALETTE = (*FIXED.values(), *POOL)
# The critical path drawn over the timeline's function colours: apart from all of them.
CRITICAL = "#8822ff"
# Series that are neither a function nor a part (a study's variants, the bandwidth line of
# the message sizes) take greys no function or part takes, so that no line reads as
# MPI_Allreduce or MPI_Send; the first two are the most different.
NEUTRALS = ("#000000", "#888888", "#555555")


def _preferred(function: str) -> int:
    # crc32 (not hash()) so the colour survives interpreter restarts
    return zlib.crc32(function.encode()) % len(POOL)


def colour(function: str) -> str:
    """The function's colour when it is shown alone (see `colours` for several)."""
    return FIXED.get(function) or POOL[_preferred(function)]


def colours(functions: Iterable[str]) -> dict[str, str]:
    """A distinct colour for each of the functions shown together: the fixed ones keep
    theirs, the others their name's pool colour unless a function before them (in sorted
    order, so the same set always gets the same colours) took it, then the next free one;
    past the pool, lighter shades of it."""
    names = list(dict.fromkeys(functions))
    return dict(_assign(tuple(sorted(names))))  # a copy: the cached one stays as it is


@functools.lru_cache(maxsize=64)
def _assign(names: tuple[str, ...]) -> dict[str, str]:
    out = {n: FIXED[n] for n in names if n in FIXED}
    used = set(out.values())
    shade = 0
    for n in names:
        if n in out:
            continue
        k = _preferred(n)
        free = [POOL[(k + i) % len(POOL)] for i in range(len(POOL))
                if POOL[(k + i) % len(POOL)] not in used]
        if free:
            out[n] = free[0]
        else:  # more functions than colours: lighter shades, still distinct
            shade += 1
            out[n] = blend(POOL[(k + shade) % len(POOL)], "#ffffff",
                           0.35 + 0.15 * ((shade - 1) // len(POOL) % 3))
            while out[n] in used:
                out[n] = blend(out[n], "#000000", 0.05)
        used.add(out[n])
    return out


def blend(hex_colour: str, towards: str = COMPUTE, amount: float = 0.7) -> str:
    """`amount` of the way from hex_colour to `towards` (used for sparse summary cells)."""
    a = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(towards[i:i + 2], 16) for i in (1, 3, 5)]
    mix = [round(x + (y - x) * amount) for x, y in zip(a, b, strict=True)]
    return "#" + "".join(f"{v:02x}" for v in mix)
