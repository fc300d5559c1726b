"""A trace built by construction whose windows hold known calls (window statistics tests:
analyzer/tests/test_window.py, webui/tests/test_browser_window.py).

3 ranks on two hosts; phase A (until PHASE_B): rank 0 sends rank 1 ten messages (tag 5),
each receive posted 2 µs before its send (late senders); phase B: eight MPI_Allreduce on
every rank, rank 2 entering each 20 µs late; user regions `main` > `solve` around it all.
"""

from __future__ import annotations

from pathlib import Path

from mpiscope_testing.tracegen import TraceBuilder

US = 1000
# phase A: rank 0 sends rank 1 ten messages (tag 5); phase B: eight allreduces, rank 2 late
SENDS = [(100 * US + i * 50 * US, (3 + i) * US) for i in range(10)]  # (start, duration)
PHASE_B = 1_000 * US
ALLREDUCES = 8
END = 2_000 * US


def build(out: Path) -> Path:
    tb = TraceBuilder(3, hosts=["n0", "n0", "n1"])
    for r in range(3):
        tb.call(r, 0, 10 * US, "MPI_Init")
        tb.enter(r, 20 * US, "main")
        tb.enter(r, 30 * US, "solve")
    for i, (s, d) in enumerate(SENDS):
        tb.send_call(0, s, s + d, dest=1, tag=5, nbytes=1000 * (i + 1), callsite="a.c:10")
        tb.recv_call(1, s - 2 * US, s + d + US, src=0, tag=5, nbytes=1000 * (i + 1),
                     callsite="a.c:20")
    for k in range(ALLREDUCES):
        t = PHASE_B + k * 100 * US
        for r in range(3):
            late = 20 * US if r == 2 else 0
            tb.collective(r, t + late, t + 30 * US, "MPI_Allreduce", sent=8, received=8,
                          callsite="a.c:30")
    for r in range(3):
        tb.leave(r, END - 20 * US, "solve")
        tb.leave(r, END - 10 * US, "main")
        tb.call(r, END, END + 5 * US, "MPI_Finalize")
    return tb.write(out)
