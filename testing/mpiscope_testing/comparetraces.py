"""Two runs of one program built by construction, for compare mode: the same loop of
MPI_Allreduce on 2 ranks, each run lasting as long as asked (a run traced on a busy
machine can last several times as long as the other).

    long = build(tmp / "a", LONG_NS)
    short = build(tmp / "b", SHORT_NS)   # runs from 0 to SHORT_NS (ns since the trace start)
"""

from __future__ import annotations

from pathlib import Path

from mpiscope_testing.tracegen import TraceBuilder

US = 1000
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
