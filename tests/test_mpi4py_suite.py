"""A third-party conformance suite: mpi4py's own unit tests (from the sdist of the
installed mpi4py), run untraced and traced, must end every test the same way.

mpi4py exercises MPI the way a library does, not the way we would: it frees a
nonblocking collective's count arrays as soon as the call is posted, runs every
collective on intercommunicators, fails calls on purpose (MPI_ERRORS_RETURN), polls.
The traced job once died with SIGSEGV in test_cco_nb_vec (2 ranks) and in
test_cco_vec_inter (3 ranks); this suite names the test a rank died in.

Modules: collectives (blocking, nonblocking, vector, on intercommunicators), p2p, RMA,
I/O and communicators; the rest of the suite (dynamic processes, threads, pickling,
datatype construction...) is left to bench time (spawn needs a launcher set-up of its own
here). Each rank writes each test id's outcome to a file of its own
(mpiscope_testing/mpi4py_suite.py). Then the trace passes otf2-print and
`mpiscope analyze` reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing.mpi4py_suite import outcomes, sdist_tests

WORLD = ["test_cco_nb_vec", "test_cco_vec", "test_cco_nb_buf",
         "test_p2p_buf", "test_rma", "test_comm", "test_io"]
INTER = ["test_cco_vec_inter", "test_cco_buf_inter", "test_comm_inter", "test_cco_nb_vec"]
# MPICH: the modules whose calls mpi4py makes with the large-count functions
MPICH = ["test_cco_nb_vec", "test_p2p_buf", "test_rma", "test_io"]
TIMEOUT = 900


@pytest.fixture(scope="module")
def testdir() -> Path:
    # fetched by scripts/setup-apps.sh; a machine without it fetches it here, and a test
    # that cannot get it fails (it is the point of this file)
    return sdist_tests()


def run_suite(testdir: Path, tmp: Path, mpi: str, np: int, modules: list[str],
              traced: bool) -> tuple[dict[int, dict[str, str]], subprocess.CompletedProcess]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(mpijobs.PROGRAMS.parents[2] / "testing"), env.get("PYTHONPATH", "")])
    env.pop("LD_PRELOAD", None)
    if mpi == "mpich":
        # the mpi4py wheel's MPICH module links libmpi.so.12, which Debian's MPICH calls
        # libmpich.so.12
        abi = tmp / "abi"
        abi.mkdir(exist_ok=True)
        link = abi / "libmpi.so.12"
        if not link.exists():
            link.symlink_to("/usr/lib/x86_64-linux-gnu/libmpich.so.12")
        env["LD_LIBRARY_PATH"] = str(abi)
        env["MPI4PY_MPIABI"] = "mpich"
        launcher = mpijobs.MPIEXEC_MPICH
    else:
        launcher = mpijobs.MPIRUN
    name = "traced" if traced else "untraced"
    if traced:
        env["LD_PRELOAD"] = mpijobs.interposer_lib(mpi)
        env["MPISCOPE_OUT"] = str(tmp / "trace")
    prefix = tmp / name
    cmd = [*launcher, "-np", str(np), "python3", "-m", "mpiscope_testing.mpi4py_suite",
           str(testdir), str(prefix), *modules]
    proc = mpijobs.run_job(cmd, env, TIMEOUT)
    per_rank: dict[int, dict[str, str]] = {}
    died = []
    for r in range(np):
        path = Path(f"{prefix}.{r}")
        done, current = outcomes(path) if path.exists() else ({}, "(before the first test)")
        per_rank[r] = done
        if current is not None:
            died.append(f"rank {r} in {current}")
    assert proc.returncode == 0 and not died, (
        f"{name} run of mpi4py's tests ({mpi}, {np} ranks) ended with exit code "
        f"{proc.returncode}; {'; '.join(died) or 'every rank finished'}\n{proc.stderr[-2000:]}")
    return per_rank, proc


def check(testdir: Path, tmp: Path, mpi: str, np: int, modules: list[str]) -> dict:
    bare, _ = run_suite(testdir, tmp, mpi, np, modules, traced=False)
    traced, _ = run_suite(testdir, tmp, mpi, np, modules, traced=True)
    for r in range(np):
        assert bare[r], f"rank {r} ran no test"
        differ = {t: (bare[r].get(t), traced[r].get(t))
                  for t in bare[r].keys() | traced[r].keys() if bare[r].get(t) != traced[r].get(t)}
        assert not differ, f"rank {r}: outcome untraced -> traced differs: {differ}"
        assert sum(o == "ok" for o in bare[r].values()) > 50
    trace = tmp / "trace"
    # millions of lines: read to the end, not kept
    p = subprocess.run(["otf2-print", str(trace / "traces.otf2")], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr[-2000:]
    out = tmp / "analysis.json"
    a = subprocess.run(["mpiscope", "analyze", str(trace), "--json", str(out)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert a.returncode == 0, a.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert len(doc["ranks"]) == np and doc["functions"]
    return doc


def test_open_mpi_two_ranks(testdir: Path, tmp_path: Path) -> None:
    doc = check(testdir, tmp_path, "openmpi", 2, WORLD)
    assert doc["messages"]["matched"] > 1000


def test_open_mpi_three_ranks_intercommunicators(testdir: Path, tmp_path: Path) -> None:
    check(testdir, tmp_path, "openmpi", 3, INTER)


def need_mpich() -> None:
    if not (mpijobs.have("mpiexec.mpich")
            and Path("/usr/lib/x86_64-linux-gnu/libmpich.so.12").exists()):
        pytest.skip("MPICH is not installed (mpiexec.mpich / libmpich.so.12 missing)")


@pytest.mark.mpich
def test_mpich_two_ranks(testdir: Path, tmp_path: Path) -> None:
    need_mpich()
    doc = check(testdir, tmp_path, "mpich", 2, MPICH)
    # mpi4py 4 on MPICH 4 calls the large-count functions (MPI_Send_c, MPI_Isend_c...):
    # their messages are matched as their int twins' (0 before they were interpreted)
    assert doc["messages"]["matched"] > 1000


@pytest.mark.mpich
def test_mpich_three_ranks_intercommunicators(testdir: Path, tmp_path: Path) -> None:
    """MPICH sizes an intercommunicator's per-peer arrays by the remote group too (the
    spec's mps_comm_peers): at 3 ranks the groups differ in size (test_cco_vec_inter's
    Alltoallw once read past the local group's arrays)."""
    need_mpich()
    check(testdir, tmp_path, "mpich", 3, INTER)


def test_a_hung_job_is_killed_whole(tmp_path: Path) -> None:
    """The guard above: a job past its timeout is killed with every rank (Open MPI starts
    each in a process group of its own), and the caller gets its exit code, not an
    exception."""
    marker = tmp_path / "hung"
    env = dict(os.environ)
    p = mpijobs.run_job([*mpijobs.MPIRUN, "-np", "2", "sh", "-c", f"sleep 300; : {marker}"],
                        env, timeout=3)
    assert p.returncode != 0 and "killed after 3 s" in p.stderr
    left = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True)
    assert left.stdout == "", f"ranks left running: {left.stdout}"
