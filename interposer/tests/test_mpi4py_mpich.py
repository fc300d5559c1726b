"""mpi4py on MPICH, traced with the MPICH interposer: mpi4py 4 calls MPICH 4's large-count
functions (comm.Send is MPI_Send_c, comm.Allreduce MPI_Allreduce_c, comm.Allgatherv
MPI_Allgatherv_c with MPI_Count counts and MPI_Aint displacements), and they are recorded
as the int ones are: messages matched, collectives with their bytes and payload hashes.

mpi4py's wheel chooses its MPI at run time: the MPICH interposer in LD_PRELOAD brings
MPICH's symbols into the process, so it loads its MPICH build (MPI4PY_MPIABI=mpich says so
explicitly), which needs `libmpi.so.12`, the soname MPICH has upstream; Debian's MPICH is
`libmpich.so.12`, so a directory on LD_LIBRARY_PATH holds that name for it.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import mpiscope
from mpiscope_testing import REPO, mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.scenarios import analyze_json

pytestmark = pytest.mark.mpich

PROG = "mpi4py_mpich.py"
NP = 3
N = 1000  # doubles per message and per reduction
PYTHON_311 = sys.version_info[:2] == (3, 11)  # the CPython whose frames python.c reads


def mpich_library(interposer: Path) -> Path:
    """The MPICH library the interposer forwards to (its own dependency)."""
    out = subprocess.run(["ldd", str(interposer)], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"^\s*libmpi(?:ch)?\.so\.12 => (\S+)", out, re.M)
    assert m, out
    return Path(m[1])


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[mpijobs.Job, dict, mpiscope.Trace]:
    mpi4py = pytest.importorskip("mpi4py")
    pytest.importorskip("numpy")
    if not (mpijobs.have("mpicc.mpich") and mpijobs.have("mpiexec.mpich")):
        pytest.skip("MPICH is not installed (mpicc.mpich / mpiexec.mpich missing)")
    if not list(Path(mpi4py.__file__).parent.glob("MPI.mpich.*")):
        pytest.skip("this mpi4py has no MPICH build (not the MPI-ABI wheel)")
    lib = REPO / "build" / "interposer" / "mpich" / "libmpiscope.so"
    if not lib.exists():
        subprocess.run(["make", "-C", str(REPO), "interposer-mpich"], check=True,
                       capture_output=True)
    tmp = tmp_path_factory.mktemp("mpi4py-mpich")
    libdir = tmp / "lib"
    libdir.mkdir()
    (libdir / "libmpi.so.12").symlink_to(mpich_library(lib))
    job = mpijobs.run([sys.executable, str(mpijobs.PROGRAMS / PROG)], np=NP,
                      out=tmp / "trace", mpi="mpich", launcher=mpijobs.MPIEXEC_MPICH,
                      env={"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(libdir)})
    assert job.returncode == 0, job.stderr
    _, analysis = analyze_json(tmp / "trace", tmp)
    return job, analysis, mpiscope.load(tmp / "trace")


def test_the_program_runs_on_mpich(run) -> None:
    job, analysis, _ = run
    # every rank's gathered integers: 0 + (0 + 1) + (0 + 1 + 2)
    assert sorted(re.findall(r"rank \d+: sum \d+ gathered 4", job.stdout)) == [
        f"rank {r}: sum {N * (N - 1) // 2 * NP + N * NP * (NP - 1) // 2} gathered 4"
        for r in range(NP)]
    assert analysis["meta"]["mpi_library"].startswith("MPICH")


def test_mpi4py_calls_the_c_functions_and_they_are_interpreted(run) -> None:
    _, analysis, _ = run
    called = {f["name"] for f in analysis["functions"]}
    assert {"MPI_Send_c", "MPI_Recv_c", "MPI_Isend_c", "MPI_Irecv_c", "MPI_Allreduce_c",
            "MPI_Allgatherv_c"} <= called
    assert not [u["name"] for u in analysis["uninterpreted"] if u["name"].endswith("_c")]


def test_messages_are_matched(run) -> None:
    _, analysis, trace = run
    # 0 -> 1 once (Send/Recv), then a ring of Isend/Irecv
    assert analysis["messages"] == {"matched": 1 + NP, "unmatched_sends": 0,
                                    "unmatched_receives": 0}
    pairs = {(c["send_rank"], c["recv_rank"]): (c["messages"], c["bytes"])
             for c in analysis["comm_matrix"]}
    want = {(r, (r + 1) % NP): (1, 8 * N) for r in range(NP)}
    want[(0, 1)] = (2, 16 * N)
    assert pairs == want
    m = trace.messages
    assert sorted(zip(m["send_rank"], m["recv_rank"], m["tag"], m["bytes"], strict=True)) == \
        sorted([(0, 1, 7, 8 * N)] + [(r, (r + 1) % NP, 8, 8 * N) for r in range(NP)])


def test_collectives_have_their_bytes_and_hashes(run) -> None:
    _, _, trace = run
    k = trace.collectives.assign(function=trace.collectives["function"].astype(str))
    allreduce = k[k["function"] == "MPI_Allreduce_c"]
    assert sorted(allreduce["rank"]) == list(range(NP))
    assert set(zip(allreduce["bytes_sent"], allreduce["bytes_recv"], strict=True)) == \
        {(8 * N, 8 * N)}
    gather = k[k["function"] == "MPI_Allgatherv_c"]
    block = [struct.pack(f"<{i + 1}d", *range(i + 1)) for i in range(NP)]
    assert sorted(zip(gather["rank"], gather["bytes_sent"], gather["bytes_recv"],
                      strict=True)) == [(r, len(block[r]), len(b"".join(block)))
                                        for r in range(NP)]
    # the result hashed from mpi4py's MPI_Count counts and MPI_Aint displacements
    assert set(gather["out_hash"]) == {tc.fnv1a(b"".join(block))}


@pytest.mark.skipif(not PYTHON_311, reason="python.c reads CPython 3.11's frames only")
def test_call_sites_are_the_python_lines(run) -> None:
    _, analysis, _ = run
    sites = {(c["function"], c["callsite"]) for c in analysis["callsites"]}
    for function, marker in (("MPI_Send_c", "send"), ("MPI_Recv_c", "recv"),
                             ("MPI_Allreduce_c", "allreduce")):
        assert (function, mpijobs.callsite(PROG, marker)) in sites
