"""The jobs a traced run spawned (MPI_Comm_spawn, mpi4py.futures, mpi4py.util.pool): each
has an MPI_COMM_WORLD of its own and writes its own run in DIR/spawn-N (N = 1, 2, ... in
the order their rank 0s claimed them, interposer/src/outdir.c), never into the parent's.

When such a job started within its parent's run: each archive's times are its rank 0's
CLOCK_MONOTONIC, and MPISCOPE::CLOCK names that clock (boot and time namespace,
interposer/src/clocksync.c). Two archives naming the same clock have times that line up;
otherwise (rank 0s on different hosts, an archive without the property) nobody knows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mpiscope.archive import native
from mpiscope.archive.outdir import SPAWN_PREFIX
from mpiscope.errors import UserError

CLOCK_PROPERTY = "MPISCOPE::CLOCK"


def _number(name: str) -> int | None:
    digits = name[len(SPAWN_PREFIX):]
    if name.startswith(SPAWN_PREFIX) and digits.isascii() and digits.isdigit():
        return int(digits)
    return None


def find(trace: Path) -> list[Path]:
    """The spawned jobs' directories of the run at `trace` (its directory, or its
    traces.otf2), in spawn order; also those without an anchor (a job that died: reading
    it recovers it, or says why not)."""
    trace = Path(trace)
    top = trace if trace.is_dir() else trace.parent
    try:
        entries = list(os.scandir(top))
    except OSError:  # unreadable: the run's own reading says why
        return []
    # never through a symbolic link: a trace directory's spawn-N is the tracer's own
    found = [(n, Path(e.path)) for e in entries
             if (n := _number(e.name)) is not None and e.is_dir(follow_symlinks=False)]
    return [p for _, p in sorted(found)]


@dataclass(frozen=True)
class Clock:
    """Which clock an archive's times are on, and its time 0 (its first event) on it."""

    name: str  # MPISCOPE::CLOCK; "" where the archive does not say
    origin_ns: int


def clock(trace: Path) -> Clock | None:
    """The clock of the archive at `trace` (directory or anchor); None where there is no
    readable anchor (a job that died before writing one)."""
    from mpiscope.archive import decode

    trace = Path(trace)
    anchor = trace / "traces.otf2" if trace.is_dir() else trace
    if not anchor.is_file():
        return None
    try:
        defs = decode.Definitions(anchor)
    except UserError:
        return None
    name = native.archive_properties(anchor).get(CLOCK_PROPERTY, "")
    return Clock(name, defs.offset * 1_000_000_000 // defs.resolution)


def start_offset_ns(parent: Clock | None, child: Clock | None) -> tuple[int | None, str]:
    """When `child` started in `parent`'s run, in ns, or None and why it is unknown."""
    if parent is None or child is None:
        return None, "no readable archive anchor to read the clock from"
    if not parent.name or not child.name:
        return None, ("the archive does not name its clock (written by another tool, an "
                      "older mpiscope, or recovered from a killed job's log)")
    if parent.name != child.name:
        return None, ("its rank 0 recorded on another clock than the parent's rank 0 "
                      "(another host or boot): the two runs' times do not line up")
    return child.origin_ns - parent.origin_ns, ""
