"""MPI-4's large-count functions (MPI_Send_c, MPI_Allgatherv_c, MPI_Put_c,
MPI_File_write_at_c, ...: MPI_Count counts, MPI_Aint displacements) are recorded exactly
as their int twins: programs/largecount.c built twice from one source, with the int
functions and with -DLARGE, gives the same records rank by rank (messages, requests,
collectives with their bytes, RMA and I/O operations), and the analysis matches the same
messages. mpi4py 4 on MPICH 4 calls only these. MPICH only: Open MPI 4.1 has none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc

pytestmark = pytest.mark.mpich
IGNORED = {"region", "callsite", "mpiscope:callpath"}  # the region is MPI_X_c in one


def records(out: Path, np: int) -> dict[int, list[tuple]]:
    t = tc.read_both(out)
    tc.check_well_formed(t, np)
    return {r: [(e.kind, tuple(sorted((k, v) for k, v in e.fields.items() if k not in IGNORED)))
                for e in t.events[r] if e.kind not in ("Enter", "Leave")]
            for r in range(np)}


def test_large_count_twins_record_what_their_int_twins_do(tmp_path: Path) -> None:
    runs = {}
    for variant, flags in (("int", []), ("large", ["-DLARGE"])):
        d = tmp_path / variant
        d.mkdir()
        job = mpijobs.run_mpich("largecount.c", d, 2, out=d / "trace",
                                args=[str(d / "file.dat")], flags=flags)
        assert job.returncode == 0, job.stderr[-3000:]
        runs[variant] = d / "trace"
    small, large = records(runs["int"], 2), records(runs["large"], 2)
    kinds = {k for r in small.values() for k, _ in r}
    assert {"MpiSend", "MpiRecv", "MpiIsend", "MpiIrecv", "MpiCollectiveEnd",
            "NonBlockingCollectiveComplete", "RmaPut", "IoOperationBegin"} <= kinds
    assert large == small
    calls = mpiscope.load(runs["large"]).calls
    names = set(calls["function"].astype(str))
    assert {"MPI_Send_c", "MPI_Allgatherv_c", "MPI_Put_c", "MPI_File_write_at_c"} <= names
    a, b = (mpiscope.analyze(runs[v]).message_counts for v in ("int", "large"))
    assert a == b and a["matched"] >= 7
