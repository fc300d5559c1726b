"""Shared fixtures for the analyzer tests: small synthetic OTF2 traces (see
mpiscope_testing.tracegen).

- `write_trace(builder, name="trace") -> Path`: write a TraceBuilder into a fresh temp dir.
- `two_rank_trace`: the hand-written 2-rank example of `two_rank_example()` (session-wide,
  read-only by convention: copy it before modifying files).
- `scorep_trace`: a private copy of the Score-P ping-pong test trace of ../shared/testdata
  (session-wide; tests never write into the shared data, and analyzing writes a cache).
- `synth_trace(ranks, events) -> Path`: a trace from the C generator `mpiscope-synth`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mpiscope_testing import REPO
from mpiscope_testing.scenarios import SCOREP_PING_PONG
from mpiscope_testing.tracegen import TraceBuilder, copy_trace

SYNTH = REPO / "build" / "native" / "mpiscope-synth"


def two_rank_example() -> TraceBuilder:
    """Two ranks on two hosts; every time below is ns since the trace start.

    rank 0: Init 0-10 | Isend(->1, tag 7, 800 B, req 1) 100-110 | Irecv(req 2) 112-115 |
            Waitall 120-250 (isend done 150, irecv from 1 tag 8 400 B at 240) |
            Allreduce 300-400 (8 B, hashes 1/3) | Barrier 450-500 | Finalize 600-700
    rank 1: Init 0-12 | Irecv(req 1) 100-105 | Isend(->0, tag 8, 400 B, req 2) 106-109 |
            Waitall 120-200 (irecv from 0 at 200, isend done 190) |
            Allreduce 350-401 (hashes 2/3) | Barrier 460-500 | Finalize 600-700
    The Allreduce comes from app.c:60, the Isends from app.c:42, the Waitalls app.c:50.
    """
    tb = TraceBuilder(ranks=2, hosts=["node0", "node1"])
    tb.call(0, 0, 10, "MPI_Init", callsite="app.c:10")
    tb.call(1, 0, 12, "MPI_Init", callsite="app.c:10")
    # rank 0
    tb.isend_call(0, 100, 110, dest=1, tag=7, nbytes=800, request=1, callsite="app.c:42")
    tb.irecv_call(0, 112, 115, request=2, callsite="app.c:44")
    tb.enter(0, 120, "MPI_Waitall", callsite="app.c:50")
    tb.isend_complete(0, 150, request=1)
    tb.irecv(0, 240, src=1, tag=8, nbytes=400, request=2)
    tb.leave(0, 250, "MPI_Waitall")
    # rank 1
    tb.irecv_call(1, 100, 105, request=1, callsite="app.c:44")
    tb.isend_call(1, 106, 109, dest=0, tag=8, nbytes=400, request=2, callsite="app.c:42")
    tb.enter(1, 120, "MPI_Waitall", callsite="app.c:50")
    tb.isend_complete(1, 190, request=2)
    tb.irecv(1, 200, src=0, tag=7, nbytes=800, request=1)
    tb.leave(1, 200, "MPI_Waitall")
    for rank, (start, end) in enumerate([(300, 400), (350, 401)]):
        tb.collective(rank, start, end, "MPI_Allreduce", sent=8, received=8,
                      in_hash=rank + 1, out_hash=3, callsite="app.c:60")
    for rank, start in enumerate([450, 460]):
        tb.collective(rank, start, 500, "MPI_Barrier", callsite="app.c:70")
    for rank in (0, 1):
        tb.call(rank, 600, 700, "MPI_Finalize", callsite="app.c:80")
    return tb


@pytest.fixture
def write_trace(tmp_path: Path) -> Callable[..., Path]:
    def write(builder: TraceBuilder, name: str = "trace") -> Path:
        return builder.write(tmp_path / name)
    return write


@pytest.fixture(scope="session")
def two_rank_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_rank_example().write(tmp_path_factory.mktemp("two_rank") / "trace")


@pytest.fixture(scope="session")
def scorep_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (SCOREP_PING_PONG / "traces.otf2").is_file():
        pytest.skip(f"{SCOREP_PING_PONG} not present")
    return copy_trace(SCOREP_PING_PONG, tmp_path_factory.mktemp("scorep") / SCOREP_PING_PONG.name)


@pytest.fixture(scope="session")
def synth_trace(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """Factory: `synth_trace(ranks=8, events=20000)` -> a generated trace dir (cached)."""
    made: dict[tuple[int, int], Path] = {}

    def make(ranks: int = 8, events: int = 20000) -> Path:
        if not SYNTH.is_file():
            pytest.fail(f"{SYNTH} not built (run `make build`)")
        if (ranks, events) not in made:
            out = tmp_path_factory.mktemp("synth") / f"r{ranks}-e{events}"
            subprocess.run([str(SYNTH), "--ranks", str(ranks), "--events", str(events),
                            "--out", str(out)], check=True, capture_output=True)
            made[(ranks, events)] = out
        return made[(ranks, events)]
    return make
