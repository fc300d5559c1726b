"""A trace built by construction whose messages have known tags and communicators (the
web UI's search by tag and communicator: webui/tests/test_browser_navigation.py,
test_controller.py).

3 ranks. Rank 0 sends rank 1 eight messages on MPI_COMM_WORLD, tags 5 and 7 in turn
(blocking MPI_Recv at b.c:20); rank 2 sends rank 1 three messages with tag 5 on the
communicator "pair" (ranks 1 and 2), which rank 1 receives with MPI_Irecv (b.c:30) and
completes in MPI_Wait (b.c:31); rank 1 sends rank 0 two messages with tag 5 on
MPI_COMM_WORLD. So rank 1's tag-5 receives are four MPI_Recv and three MPI_Wait, and
other ranks and tags are there to be left out.
"""

from __future__ import annotations

from pathlib import Path

from mpiscope_testing.tracegen import TraceBuilder

US = 1000
WORLD_SENDS = [(100 * US + i * 40 * US, 5 if i % 2 == 0 else 7) for i in range(8)]  # (t, tag)
PAIR_SENDS = [120 * US, 240 * US, 320 * US]  # rank 2 -> rank 1, tag 5 (between the others)
BACK_SENDS = [470 * US, 490 * US]  # rank 1 -> rank 0, tag 5
END = 600 * US


def build(out: Path) -> Path:
    tb = TraceBuilder(3, hosts=["n0", "n0", "n1"])
    pair = tb.comm([1, 2], name="pair")
    for r in range(3):
        tb.call(r, 0, 10 * US, "MPI_Init")
    for t, tag in WORLD_SENDS:
        tb.send_call(0, t, t + 3 * US, dest=1, tag=tag, nbytes=100 * tag, callsite="b.c:10")
        tb.recv_call(1, t - 2 * US, t + 4 * US, src=0, tag=tag, nbytes=100 * tag,
                     callsite="b.c:20")
    for i, t in enumerate(PAIR_SENDS):
        tb.send_call(2, t, t + 2 * US, dest=1, tag=5, nbytes=64, comm=pair, callsite="b.c:40")
        tb.irecv_call(1, t - 10 * US, t - 9 * US, request=i + 1, callsite="b.c:30")
        tb.enter(1, t - 5 * US, "MPI_Wait", callsite="b.c:31")
        tb.irecv(1, t + 3 * US, src=2, tag=5, nbytes=64, request=i + 1, comm=pair)
        tb.leave(1, t + 3 * US, "MPI_Wait")
    for t in BACK_SENDS:
        tb.send_call(1, t, t + 2 * US, dest=0, tag=5, nbytes=8, callsite="b.c:50")
        tb.recv_call(0, t - 1 * US, t + 3 * US, src=1, tag=5, nbytes=8, callsite="b.c:60")
    for r in range(3):
        tb.call(r, END, END + 5 * US, "MPI_Finalize")
    return tb.write(out)
