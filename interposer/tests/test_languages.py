"""Fortran (mpif.h, use mpi, use mpi_f08), C++ and mpi4py programs, traced unmodified.

Open MPI's Fortran bindings call PMPI_* directly, so these catch the classic hole of
C-only wrappers; mpi4py's lowercase `allreduce` is pickled point-to-point traffic while
uppercase `Allreduce` is the real collective.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from collections import Counter

import pytest

from mpiscope_testing import REPO, mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace

FORTRAN = ["f_mpifh.f90", "f_usempi.f90", "f_f08.f90"]
SIZES = [1, 2, 4]


def traced(programs, tmp_path_factory, cmd: list[str], np: int, name: str) -> Trace:
    out = tmp_path_factory.mktemp(name) / "trace"
    job = mpijobs.run(cmd, np=np, out=out)
    assert job.returncode == 0, job.stderr
    assert len(job.stdout.splitlines()) == np, job.stdout
    trace = tc.read_both(out)
    tc.check_well_formed(trace, np)
    return trace


@pytest.fixture(scope="module", params=[(f, n) for f in FORTRAN for n in SIZES],
                ids=lambda p: f"{p[0].split('.')[0]}-np{p[1]}")
def fortran(request, programs, tmp_path_factory) -> tuple[str, int, Trace]:
    source, np = request.param
    exe = programs[source]
    return source, np, traced(programs, tmp_path_factory, [str(exe)], np, exe.name)


def fortran_calls(np: int, r: int) -> Counter:
    want = Counter({"MPI_Init": 1, "MPI_Allreduce": 3, "MPI_Bcast": 1, "MPI_Irecv": 1,
                    "MPI_Isend": 1, "MPI_Waitall": 1, "MPI_Barrier": 1,
                    "MPI_Comm_split": 1, "MPI_Comm_free": 1, "MPI_Finalize": 1})
    if np > 1 and r == 0:
        want["MPI_Send"] = 1
    if np > 1 and r == 1:
        want["MPI_Recv"] = 1
    return want


def check_fortran_payloads(t: Trace, np: int) -> None:
    """MPI_ANY_SOURCE with MPI_STATUS(ES)_IGNORE and MPI_IN_PLACE from Fortran."""
    for r in range(np):
        left, right = (r + np - 1) % np, (r + 1) % np
        assert tc.p2p_of(t, r, "MpiIsend") == Counter({(right, 5, 8): 1})
        assert tc.p2p_of(t, r, "MpiIrecv") == Counter({(left, 5, 8): 1})
        assert tc.p2p_of(t, r, "MpiSend") == Counter({(1, 9, 8): 1} if np > 1 and r == 0 else {})
        assert tc.p2p_of(t, r, "MpiRecv") == Counter({(0, 9, 8): 1} if np > 1 and r == 1 else {})
        ends = t.of(r, "MpiCollectiveEnd")
        assert [(e["op"], e["sent"], e["received"]) for e in ends] == [
            ("ALLREDUCE", 8, 8), ("ALLREDUCE", 16, 16),
            ("BCAST", 8 if r == 0 else 0, 0 if r == 0 else 8), ("BARRIER", 0, 0),
            ("ALLREDUCE", 8, 8)]
        assert ends[1]["mpiscope:in_hash"] == tc.fnv1a(struct.pack("<4i", r, r, r, r))
        assert ends[1]["mpiscope:out_hash"] == tc.fnv1a(struct.pack("<4i", *[np - 1] * 4))
        split = ends[4]["comm"]
        assert t.comms[split].members == [q for q in range(np) if q % 2 == r % 2]


def test_fortran_calls_recorded_once(fortran) -> None:
    _, np, t = fortran
    for r in range(np):
        assert t.enters(r) == fortran_calls(np, r), r


def test_fortran_messages_and_sentinels(fortran) -> None:
    _, np, t = fortran
    check_fortran_payloads(t, np)


def check_fortran_call_sites(t, source: str, np: int) -> None:
    for r in range(np):
        assert tc.callsites(t, r, "MPI_Allreduce") == [
            mpijobs.callsite(source, m) for m in ("allreduce", "in_place", "allreduce_split")]
        assert tc.callsites(t, r, "MPI_Isend") == [mpijobs.callsite(source, "isend")]
        if np > 1 and r == 0:
            assert tc.callsites(t, r, "MPI_Send") == [mpijobs.callsite(source, "send")]


def test_fortran_call_sites(fortran) -> None:
    source, np, t = fortran
    check_fortran_call_sites(t, source, np)


def test_cxx(programs, tmp_path_factory) -> None:
    t = traced(programs, tmp_path_factory, [str(programs["hello.cpp"])], 2, "cxx")
    for r in range(2):
        assert t.enters(r) == Counter({"MPI_Init": 1, "MPI_Allreduce": 1, "MPI_Finalize": 1,
                                       ("MPI_Send" if r == 0 else "MPI_Recv"): 1})
        assert tc.callsites(t, r, "MPI_Allreduce") == [mpijobs.callsite("hello.cpp",
                                                                        "allreduce")]
    assert tc.callsites(t, 0, "MPI_Send") == [mpijobs.callsite("hello.cpp", "send")]
    assert tc.p2p_of(t, 1, "MpiRecv") == Counter({(0, 7, 32): 1})


def python(script: str) -> list[str]:
    return [sys.executable, str(mpijobs.PROGRAMS / script)]


@pytest.mark.parametrize("np", SIZES)
def test_mpi4py_uppercase_allreduce_is_the_collective(np, programs, tmp_path_factory) -> None:
    t = traced(programs, tmp_path_factory, python("py_allreduce_upper.py"), np, "upper")
    total = sum(range(1, np + 1))
    for r in range(np):
        assert t.enters(r) == Counter({"MPI_Init_thread": 1, "MPI_Allreduce": 3,
                                       "MPI_Finalize": 1})
        # README: mpi4py call sites are the Python line that called mpi4py (python.c,
        # CPython 3.11), else inside its extension module (a Cython function's name)
        sites = set(tc.callsites(t, r, "MPI_Allreduce"))
        if sys.version_info[:2] == (3, 11):
            assert sites == {mpijobs.callsite("py_allreduce_upper.py", "allreduce")}
        else:
            assert len(sites) == 1, sites
            assert re.fullmatch(r"(MPI\.[\w.-]*\.so|__pyx_\w*Allreduce)\+0x[0-9a-f]+:0",
                                sites.pop())
        for e in t.of(r, "MpiCollectiveEnd"):
            assert (e["op"], e["comm"], e["sent"], e["received"]) == ("ALLREDUCE", 0, 16, 16)
            assert e["mpiscope:in_hash"] == tc.fnv1a(struct.pack("<2d", r + 1, 2.0))
            assert e["mpiscope:out_hash"] == tc.fnv1a(struct.pack("<2d", total, 2.0 * np))


@pytest.mark.parametrize("np", SIZES)
def test_mpi4py_lowercase_allreduce_is_point_to_point(np, programs, tmp_path_factory) -> None:
    t = traced(programs, tmp_path_factory, python("py_allreduce_lower.py"), np, "lower")
    sends, recvs = tc.messages(t)
    assert sends == recvs
    for r in range(np):
        assert t.enters(r)["MPI_Allreduce"] == 0
        assert t.enters(r)["MPI_Init_thread"] == 1 and t.enters(r)["MPI_Finalize"] == 1
        assert all(e["op"] != "ALLREDUCE" for e in t.of(r, "MpiCollectiveEnd"))
    if np == 1:
        assert not sends
        return
    # every rank but the reduction's root sends its pickled value at least once per call
    senders = Counter(src for (src, _dst, _c, _tag, _b), k in sends.items() for _ in range(k))
    assert set(senders) >= set(range(1, np)) and all(senders[s] >= 3 for s in range(1, np))
    # ... on mpi4py's private duplicate of MPI_COMM_WORLD, not on the world itself
    comms = {comm for (_s, _d, comm, _t, _b) in sends}
    assert 0 not in comms
    for c in comms:
        assert t.comms[c].members == list(range(np)) and t.comms[c].parent == 0


@pytest.mark.mpich
def test_fortran_under_mpich(tmp_path) -> None:
    """MPICH's Fortran bindings call the C MPI_* symbols: each call is recorded once, by
    the C wrapper, with the Fortran caller as call site (noted by our forwarding doors)."""
    if not (mpijobs.have("mpif90.mpich") and mpijobs.have("mpiexec.mpich")):
        pytest.skip("MPICH is not installed (mpif90.mpich / mpiexec.mpich missing)")
    lib = REPO / "build" / "interposer" / "mpich" / "libmpiscope.so"
    if not lib.exists():
        subprocess.run(["make", "-C", str(REPO), "interposer-mpich"], check=True,
                       capture_output=True)
    compiler = ["mpif90.mpich", *mpijobs.COMPILERS[".f90"][1:]]
    exe = mpijobs.build("f_mpifh.f90", tmp_path, compiler)
    out = tmp_path / "trace"
    job = mpijobs.run([str(exe)], np=2, out=out, launcher=mpijobs.MPIEXEC_MPICH, mpi="mpich")
    assert job.returncode == 0, job.stderr
    t = tc.read_both(out)
    tc.check_well_formed(t, 2)
    for r in range(2):
        assert t.enters(r) == fortran_calls(2, r), r
    check_fortran_call_sites(t, "f_mpifh.f90", 2)
    check_fortran_payloads(t, 2)


@pytest.mark.parametrize("mpi", ["openmpi", pytest.param("mpich", marks=pytest.mark.mpich)])
def test_fortran_alltoallw(mpi, programs, tmp_path) -> None:
    """MPI_Alltoallw's Fortran door converts the per-peer datatype arrays (Open MPI), or
    forwards to the library's binding (MPICH): recorded once, with sizes and call site."""
    if mpi == "mpich":
        if not (mpijobs.have("mpif90.mpich") and mpijobs.have("mpiexec.mpich")):
            pytest.skip("MPICH is not installed (mpif90.mpich / mpiexec.mpich missing)")
        exe = mpijobs.build("f_alltoallw.f90", tmp_path,
                            ["mpif90.mpich", *mpijobs.COMPILERS[".f90"][1:]])
        job = mpijobs.run([str(exe)], np=2, out=tmp_path / "trace",
                          launcher=mpijobs.MPIEXEC_MPICH, mpi="mpich")
    else:
        exe = programs["f_alltoallw.f90"]
        job = mpijobs.run([str(exe)], np=2, out=tmp_path / "trace")
    assert job.returncode == 0, job.stderr
    # rank r receives 100 * q + r from every q: 0 + 100 + 2r
    assert sorted(job.stdout.split("\n")[:2]) == ["rank 0 got 100", "rank 1 got 102"]
    t = tc.read_both(tmp_path / "trace")
    tc.check_structure(t)
    for r in range(2):
        assert t.enters(r)["MPI_Alltoallw"] == 1
        assert tc.callsites(t, r, "MPI_Alltoallw") == [
            mpijobs.callsite("f_alltoallw.f90", "alltoallw")]
        (end,) = [e for e in t.of(r, "MpiCollectiveEnd") if e["op"] == "ALLTOALLW"]
        assert (end["sent"], end["received"]) == (8, 8)  # one INTEGER to/from each rank


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_fortran_matched_probe_nbc_idup(mpi, programs, tmp_path) -> None:
    """MPI_Mprobe/Mrecv, MPI_Ialltoall + Wait and MPI_Comm_idup from `use mpi`: results
    unchanged, the message matched on the probe's communicator, the collective completed
    in the Wait, the idup'd communicator defined."""
    if mpi == "mpich":
        if not (mpijobs.have("mpif90.mpich") and mpijobs.have("mpiexec.mpich")):
            pytest.skip("MPICH is not installed (mpif90.mpich / mpiexec.mpich missing)")
        exe = mpijobs.build("f_mprobe.f90", tmp_path,
                            ["mpif90.mpich", *mpijobs.COMPILERS[".f90"][1:]])
        job = mpijobs.run([str(exe)], np=2, out=tmp_path / "trace",
                          launcher=mpijobs.MPIEXEC_MPICH, mpi="mpich")
    else:
        exe = programs["f_mprobe.f90"]
        job = mpijobs.run([str(exe)], np=2, out=tmp_path / "trace")
    assert job.returncode == 0, job.stderr
    assert sorted(job.stdout.split("\n")[:2]) == ["rank 0 got 6 a2a 10 n 2",
                                                   "rank 1 got 3 a2a 12 n 2"]
    t = tc.read_both(tmp_path / "trace")
    tc.check_structure(t)
    tc.check_requests(t)
    sends, recvs = tc.messages(t)
    assert sends == recvs and sum(sends.values()) == 2
    for r in range(2):
        assert [(e["comm"], e["tag"], e["bytes"]) for e in t.of(r, "MpiRecv")] == [(0, 7, 12)]
        assert tc.callsites(t, r, "MPI_Mrecv") == [mpijobs.callsite("f_mprobe.f90", "mrecv")]
        (done,) = t.of(r, "NonBlockingCollectiveComplete")
        assert (done["op"], done["sent"], done["received"]) == ("ALLTOALL", 8, 8)
        (end,) = [e for e in t.of(r, "MpiCollectiveEnd") if e["op"] == "ALLREDUCE"]
        assert t.comms[end["comm"]].members == [0, 1] and end["comm"] >= 2
