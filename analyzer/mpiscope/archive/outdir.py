"""The trace directory rule, shared by `mpiscope run` and the interposer (interposer/README.md,
"Output directory"): an earlier run's files in DIR are moved together into the first free
sibling DIR.1, DIR.2, ... before a new run writes there; never deleted, never mixed with
the new run's. Only our files move: DIR may be the user's own directory.

The interposer keeps the same list (MPS_RUN_FILES in interposer/src/outdir.h; a test
checks they agree) and applies the rule itself under a bare LD_PRELOAD.
"""

from __future__ import annotations

import os
from pathlib import Path

from mpiscope.archive import fom

RUN_FILES = ("traces.otf2", "traces.def", "traces", ".mpiscope-live", ".mpiscope-cache",
             fom.OUTPUT_FILE)
RANK_PREFIX = "rank"  # rank<N>/: the per-rank archives of a job that died
SPAWN_PREFIX = "spawn-"  # spawn-<N>/: the run of a job this one spawned (MPI_Comm_spawn)
# set by `mpiscope run` for the interposer: this file in DIR is the new job's own
JOB_OUTPUT_ENV = "MPISCOPE_JOB_OUTPUT"


def is_run_file(name: str) -> bool:
    """Is `name`, an entry of a trace directory, something an mpiscope run leaves there?"""
    if name in RUN_FILES:
        return True
    for prefix in (RANK_PREFIX, SPAWN_PREFIX):
        digits = name[len(prefix):]
        if name.startswith(prefix) and digits.isascii() and digits.isdigit():
            return True
    return False


def move_earlier_run(out: Path) -> Path | None:
    """Move an earlier run's files out of `out` into the first free sibling `out.N`;
    returns where they went (None: nothing to move). Raises OSError when they cannot be
    moved (then nothing new may be written into `out`)."""
    if not out.is_dir():
        return None
    names = sorted(e.name for e in os.scandir(out) if is_run_file(e.name))
    if not names:
        return None
    real = out.resolve()  # the sibling of the directory itself, however it was spelled
    n = 1
    while True:
        to = real.with_name(f"{real.name}.{n}")
        try:
            to.mkdir()  # claimed atomically: two runs never share one
            break
        except FileExistsError:
            n += 1
    for i, name in enumerate(names):
        try:
            os.rename(real / name, to / name)
        except OSError:
            if i == 0:  # e.g. EXDEV (DIR is a mount point): leave no empty DIR.N behind
                to.rmdir()
            raise
    return to
