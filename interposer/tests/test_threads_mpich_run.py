"""MPI_THREAD_MULTIPLE, the MPICH flavour, and `mpiscope run` as the front door."""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest

from mpiscope_testing import REPO, mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import archive_properties

ROUNDS = 50  # programs/threads.c: per thread


def test_thread_multiple_two_threads(programs, tmp_path) -> None:
    """Two threads per rank call MPI at once: nothing lost, nothing torn, each thread in
    its own location (programs/threads_tags.c checks tags and matching run after run)."""
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["threads.c"])], np=2, out=out)
    assert job.returncode == 0, job.stderr
    assert "threads done, total 2" in job.stdout
    t = tc.read_both(out)
    tc.check_definitions(t, 2)
    tc.check_structure(t)
    for r in range(2):
        main, *workers = t.threads(r)
        assert len(workers) == 2
        assert t.enters(main) == Counter({"MPI_Init_thread": 1, "MPI_Allreduce": 1,
                                          "MPI_Finalize": 1})
        for loc in workers:
            assert t.enters(loc) == Counter({
                "MPI_Irecv": ROUNDS, "MPI_Isend": ROUNDS, "MPI_Waitall": ROUNDS,
                "MPI_Sendrecv": ROUNDS})
        peer = 1 - r
        # each worker thread has one tag: (1, 11) or (2, 12)
        sent = [dict(tc.p2p_of(t, loc, "MpiIsend") + tc.p2p_of(t, loc, "MpiSend"))
                for loc in workers]
        assert sorted(sent, key=str) == [{(peer, tag, 4): ROUNDS, (peer, tag + 10, 4): ROUNDS}
                                         for tag in (1, 2)]
        for loc in workers:
            assert tc.p2p_of(t, loc, "MpiIrecv") == tc.p2p_of(t, loc, "MpiIsend")
            assert tc.p2p_of(t, loc, "MpiRecv") == tc.p2p_of(t, loc, "MpiSend")
        ids = [e["request"] for loc in workers
               for e in t.of(loc, "MpiIsend") + t.of(loc, "MpiIrecvRequest")]
        assert len(ids) == len(set(ids)) == 4 * ROUNDS  # the rank's ids, across threads
    tc.check_requests(t)
    sends, recvs = tc.messages(t)
    assert sends == recvs


@pytest.mark.mpich
def test_mpich_two_ranks(tmp_path) -> None:
    if not (mpijobs.have("mpicc.mpich") and mpijobs.have("mpiexec.mpich")):
        pytest.skip("MPICH is not installed (mpicc.mpich / mpiexec.mpich missing)")
    lib = REPO / "build" / "interposer" / "mpich" / "libmpiscope.so"
    if not lib.exists():
        subprocess.run(["make", "-C", str(REPO), "interposer-mpich"], check=True,
                       capture_output=True)
    exe = mpijobs.build("hello.cpp", tmp_path, ["mpicxx.mpich", "-g", "-O0"])
    bare = mpijobs.run([str(exe)], np=2, traced=False, launcher=mpijobs.MPIEXEC_MPICH)
    out = tmp_path / "trace"
    job = mpijobs.run([str(exe)], np=2, out=out, launcher=mpijobs.MPIEXEC_MPICH, mpi="mpich")
    assert job.returncode == bare.returncode == 0, job.stderr
    assert mpijobs.sorted_lines(job.stdout) == mpijobs.sorted_lines(bare.stdout)
    t = tc.read_both(out)
    tc.check_definitions(t, 2)
    tc.check_structure(t)
    assert archive_properties(out)["MPISCOPE::MPI_LIBRARY"].startswith("MPICH")
    for r in range(2):
        assert t.enters(r) == Counter({"MPI_Init": 1, "MPI_Allreduce": 1, "MPI_Finalize": 1,
                                       ("MPI_Send" if r == 0 else "MPI_Recv"): 1})
        assert tc.callsites(t, r, "MPI_Allreduce") == [mpijobs.callsite("hello.cpp",
                                                                        "allreduce")]
    assert tc.p2p_of(t, 0, "MpiSend") == Counter({(1, 7, 32): 1})
    assert tc.p2p_of(t, 1, "MpiRecv") == Counter({(0, 7, 32): 1})


def test_mpiscope_run_equals_ld_preload(programs, tmp_path) -> None:
    """`mpiscope run --out DIR -- mpirun ...` writes the trace LD_PRELOAD would."""
    exe = str(programs["colls.c"])
    direct = mpijobs.run([exe], np=2, out=tmp_path / "direct")
    cmd = ["mpiscope", "run", "--out", str(tmp_path / "run"), "--",
           *mpijobs.MPIRUN, "-np", "2", exe]
    via = mpijobs.run(cmd, traced=False)
    assert via.returncode == direct.returncode == 0, via.stderr
    assert mpijobs.sorted_lines(via.stdout) == mpijobs.sorted_lines(direct.stdout)
    a, b = tc.read_both(tmp_path / "direct"), tc.read_both(tmp_path / "run")
    assert a.comms == b.comms and a.regions == b.regions and a.hosts == b.hosts
    for r in range(2):  # identical apart from time stamps
        assert [(e.kind, e.recorded) for e in a.events[r]] == \
            [(e.kind, e.recorded) for e in b.events[r]]
