"""Runs built by construction, for compare mode:

- `build`: the same loop of MPI_Allreduce on 2 ranks, each run lasting as long as asked
  (a run traced on a busy machine can last several times as long as the other);
- `halo_pair`: a halo exchange with and without an Allreduce (the "fix"), where the time
  the Allreduce cost provably moves to waiting in the exchange's Waitall;
- `compare_json`: `mpiscope compare A B --json` run as a user runs it.

    long = build(tmp / "a", LONG_NS)
    short = build(tmp / "b", SHORT_NS)   # runs from 0 to SHORT_NS (ns since the trace start)
    before, after = halo_pair(tmp)
    stdout, doc = compare_json(before, after, tmp)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mpiscope_testing.tracegen import TraceBuilder

MS, US = 1_000_000, 1000
ITERATIONS = 10  # of the halo programs
STEPS = 10  # allreduces per run, evenly spread over its loop
LONG_NS = 5_000 * US
SHORT_NS = 1_000 * US  # a fifth of the long run: more than twice as short


def build(out: Path, length_ns: int) -> Path:
    """A 2-rank run from t=0 (MPI_Init) to `length_ns` (MPI_Finalize's end)."""
    tb = TraceBuilder(2, hosts=["n0", "n0"])
    init, fin = 10 * US, 10 * US
    step = (length_ns - init - fin) // STEPS
    for r in range(2):
        tb.call(r, 0, init, "MPI_Init")
        for k in range(STEPS):
            t = init + k * step
            # rank 1 enters late: the loop has wait states, as a real one does
            tb.collective(r, t + (step // 4 if r else step // 8), t + step // 2,
                          "MPI_Allreduce", sent=8, received=8, callsite="loop.c:30")
        tb.call(r, length_ns - fin, length_ns, "MPI_Finalize")
    return tb.write(out)


def exchange(tb: TraceBuilder, r: int, t: int, leave: int, i: int) -> None:
    """Rank r's halo exchange of iteration i: Irecv (app.c:40) and Isend (app.c:41) to the
    other rank from `t`, then MPI_Waitall (app.c:50) from t + 20 µs until `leave`."""
    tb.irecv_call(r, t, t + 10 * US, request=2 * i + 1, callsite="app.c:40")
    tb.isend_call(r, t + 10 * US, t + 20 * US, dest=1 - r, tag=i, nbytes=800,
                  request=2 * i + 2, callsite="app.c:41")
    tb.enter(r, t + 20 * US, "MPI_Waitall", callsite="app.c:50")
    tb.isend_complete(r, leave, request=2 * i + 2)
    tb.irecv(r, leave, src=1 - r, tag=i, nbytes=800, request=2 * i + 1)
    tb.leave(r, leave, "MPI_Waitall")


def halo_program(allreduce: bool) -> TraceBuilder:
    """Two ranks, 10 iterations of: halo exchange (both ranks, 100 µs), compute (rank 0:
    2.1 ms, rank 1: 5.1 ms), then (`allreduce`) MPI_Allreduce at app.c:60, and 0.1 ms more
    compute.

    With the Allreduce rank 0 waits 3 ms in it every iteration, and the exchange finds
    both ranks together (period 5.3 ms). Without it (the "fix") rank 0 runs ahead into the
    next exchange and waits there instead: its Waitall enters 2.99 ms before rank 1's
    Isend (a late sender) in iterations 1-9; the period is 5.2 ms."""
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 1 * MS, "MPI_Init", callsite="app.c:10")
    period = (5300 if allreduce else 5200) * US
    start0 = 1 * MS  # rank 0's start of the iteration
    for i in range(ITERATIONS):
        t = 1 * MS + i * period  # rank 1's (the slow one's)
        exchange(tb, 1, t, t + 100 * US, i)
        exchange(tb, 0, start0, t + 100 * US, i)
        if allreduce:
            for r, enter in ((0, 2100), (1, 5100)):
                tb.collective(r, t + enter * US, t + 5200 * US, "MPI_Allreduce", sent=8,
                              received=8, in_hash=10 * i + r, out_hash=10 * i + 5,
                              callsite="app.c:60")
            start0 = t + 5300 * US
        else:
            start0 = t + 2200 * US
    end = 1 * MS + ITERATIONS * period
    tb.call(1, end, end + MS, "MPI_Finalize", callsite="app.c:80")
    tb.call(0, start0, start0 + MS, "MPI_Finalize", callsite="app.c:80")
    return tb


def halo_pair(out: Path) -> tuple[Path, Path]:
    """The halo program with the Allreduce (out/before) and without (out/after)."""
    return (halo_program(allreduce=True).write(out / "before"),
            halo_program(allreduce=False).write(out / "after"))


def compare_json(a: Path, b: Path, tmp: Path, *extra: str) -> tuple[str, dict]:
    """`mpiscope compare A B --json` as a user runs it: (stdout, the JSON)."""
    out = tmp / "compare.json"
    p = subprocess.run([sys.executable, "-m", "mpiscope", "compare", str(a), str(b),
                        "--json", str(out), *extra], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout, json.loads(out.read_text())
