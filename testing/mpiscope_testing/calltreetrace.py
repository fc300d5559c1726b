"""A trace built by construction with call paths, as the interposer writes them (call
tree tests: analyzer/tests/test_calltree.py, webui/tests/test_calltree_tab.py).

2 ranks, STEPS steps: main() calls solve(), which calls halo() (rank 0 sends rank 1 800
bytes, 20 µs on each side) and then reduces through a communication layer,
comm_layer() -> comm_inner(): rank 0 enters each MPI_Allreduce 60 µs late, so rank 1
spends 100 µs in it (60 µs waiting) and rank 0 40 µs.
"""

from __future__ import annotations

from pathlib import Path

from mpiscope_testing.tracegen import TraceBuilder

US = 1000
STEPS = 4
MAIN, SOLVE = ("main.c:50", "main"), ("solver.c:20", "solve")
REDUCE = [("comm_inner.c:5", "comm_inner"), ("comm_layer.c:20", "comm_layer"),
          ("solver.c:31", "solve"), MAIN]
HALO = [("halo.c:12", "halo"), SOLVE, MAIN]
STEP = 1000 * US
FIRST = 100 * US  # the first step's start, after MPI_Init


def build(out: Path) -> Path:
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 10 * US, "MPI_Init", callsite="main.c:2")
    t = FIRST
    for _ in range(STEPS):
        tb.send_call(0, t, t + 20 * US, dest=1, tag=3, nbytes=800, callpath=HALO)
        tb.recv_call(1, t, t + 20 * US, src=0, tag=3, nbytes=800, callpath=HALO)
        tb.collective(0, t + 160 * US, t + 200 * US, "MPI_Allreduce", sent=8, received=8,
                      callpath=REDUCE)
        tb.collective(1, t + 100 * US, t + 200 * US, "MPI_Allreduce", sent=8, received=8,
                      callpath=REDUCE)
        t += STEP
    for r in (0, 1):
        tb.call(r, t, t + 10 * US, "MPI_Finalize", callsite="main.c:60")
    return tb.write(out)
