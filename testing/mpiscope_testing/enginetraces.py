"""The traces the Dask engine's results are compared with the pandas engine's on: one of
each kind of trace the analyses must get right.

    traces = engine_traces(tmp_dir, scorep_trace)   # name -> trace directory

Real traced runs (Himeno XS on 4 ranks, the untrue-case programs: RMA fence,
non-blocking all-to-all, MPI-IO), a hand-made trace with two threads per rank, the
Score-P ping-pong and a synthetic trace; no pandas cache is left in them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from mpiscope.archive import cache
from mpiscope_testing import REPO, scenarios
from mpiscope_testing.tracegen import TraceBuilder

SYNTH = REPO / "build" / "native" / "mpiscope-synth"


def synth(out: Path, ranks: int, events: int) -> Path:
    subprocess.run([str(SYNTH), "--ranks", str(ranks), "--events", str(events),
                    "--out", str(out)], check=True, capture_output=True)
    return out


def threads_trace(out: Path) -> Path:
    """Two ranks of two threads; a request started on one thread, completed on the other."""
    tb = TraceBuilder(2, creator="Score-P", threads=2)
    for r in range(2):
        tb.call(r, 0, 10, "MPI_Init")
        tb.collective(r, 400, 420, "MPI_Allreduce", sent=8, received=8)
        tb.call(r, 500, 510, "MPI_Finalize")
    tb.send_call((0, 1), 100, 110, dest=1, tag=1, nbytes=4)
    tb.send_call((0, 0), 105, 120, dest=1, tag=2, nbytes=8)
    tb.recv_call((1, 1), 100, 130, src=0, tag=1, nbytes=4)
    tb.recv_call((1, 0), 102, 125, src=0, tag=2, nbytes=8)
    tb.isend_call((0, 1), 300, 305, dest=1, tag=9, nbytes=64, request=7)
    tb.enter((0, 0), 310, "MPI_Wait")
    tb.isend_complete((0, 0), 320, request=7)
    tb.leave((0, 0), 320, "MPI_Wait")
    tb.irecv_call((1, 1), 290, 295, request=9)
    tb.enter((1, 0), 300, "MPI_Wait")
    tb.irecv((1, 0), 330, src=0, tag=9, nbytes=64, request=9)
    tb.leave((1, 0), 330, "MPI_Wait")
    tb.send_call((1, 0), 340, 350, dest=0, tag=3, nbytes=4)  # never received: unmatched
    return tb.write(out)


def engine_traces(d: Path, scorep_trace: Path) -> dict[str, Path]:
    """The seven traces, made under `d`."""
    for sub in ("fence", "ialltoall", "io"):
        (d / sub).mkdir(exist_ok=True)
    out = {
        "himeno": scenarios.traced_himeno(4, ["--size", "XS", "--iterations", "20"], d),
        "fence": scenarios.traced_run("untrue", 3, ["fence"], d / "fence"),
        "ialltoall": scenarios.traced_run("untrue", 3, ["ialltoall"], d / "ialltoall"),
        "io": scenarios.traced_run("untrue", 2, ["io", str(d / "io.dat")], d / "io"),
        "threads": threads_trace(d / "threads"),
        "scorep": scorep_trace,
        "synth": synth(d / "synth", 8, 40000),
    }
    for p in out.values():  # the pandas engine's own cache is not what the tests compare
        shutil.rmtree(p / cache.CACHE_NAME, ignore_errors=True)
    return out
