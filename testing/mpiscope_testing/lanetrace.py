"""A small trace for the timeline's lanes, built by construction (tracegen, Score-P
flavour, two thread locations per rank): four ranks on two hosts, ranks 0 and 2 on
nodeA, 1 and 3 on nodeB, so the host order (0 2 1 3) differs from the rank order. Only
rank 1's worker thread (thread 1) calls MPI, an MPI_Ssend to rank 3 while its main thread
is done with its Recv; rank 3 waits 400 ns for a late sender (rank 2), the most waiting
rank; the worker then runs a user region (worker_loop). Times in ns from the first event."""

from __future__ import annotations

from pathlib import Path

from mpiscope_testing.tracegen import TraceBuilder

HOSTS = ["nodeA", "nodeB", "nodeA", "nodeB"]
WORKER_SEND = (1, 1), 120, 380  # (rank, thread), start, end of the worker's MPI_Ssend
WORKER_REGION = "worker_loop", 400, 800  # then a user region on the same thread


def build(directory: str | Path) -> Path:
    tb = TraceBuilder(4, hosts=HOSTS, creator="Score-P", threads=2)
    for r in range(4):
        tb.call(r, 0, 10, "MPI_Init")
        tb.call(r, 900, 910, "MPI_Finalize")
    tb.send_call(0, 100, 110, dest=1, tag=1, nbytes=8)
    tb.recv_call(1, 100, 200, src=0, tag=1, nbytes=8)
    tb.recv_call(3, 100, 520, src=2, tag=2, nbytes=8)
    tb.send_call(2, 500, 510, dest=3, tag=2, nbytes=8)
    rank, start, end = WORKER_SEND
    tb.send_call(rank, start, end, dest=3, tag=3, nbytes=8, function="MPI_Ssend")
    tb.recv_call(3, 600, 700, src=1, tag=3, nbytes=8)
    tb.enter((1, 1), WORKER_REGION[1], WORKER_REGION[0])  # a user region, no MPI inside
    tb.leave((1, 1), WORKER_REGION[2], WORKER_REGION[0])
    return tb.write(directory)
