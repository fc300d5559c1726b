"""The traced job is the untraced job: same stdout, same exit code, whatever happens to
the trace. Plus the configuration switches (MPISCOPE_DISABLE, MPISCOPE_FILTER,
MPISCOPE_BUFFER_SIZE) and the documented outcomes of MPI_Abort and a missing
MPI_Finalize (interposer/README.md, "Outcomes")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import otf2_print, read_python

ABORT_TIMEOUT = 180  # a hang is a failure, not a stuck test run
# Open MPI SIGKILLs 1 s after its SIGTERM; on a loaded 2-core machine the stopped ranks
# may need longer to write their salvaged traces (README: "Jobs that die"; the grace
# and its cost: mpijobs.SALVAGE_GRACE_S)
PATIENT = mpijobs.PATIENT


def same_job(a: mpijobs.Job, b: mpijobs.Job) -> None:
    assert a.returncode == b.returncode
    assert mpijobs.sorted_lines(a.stdout) == mpijobs.sorted_lines(b.stdout)


def no_mpiscope_output(job: mpijobs.Job) -> None:
    assert "mpiscope" not in job.stderr and "mpiscope" not in job.stdout


def without_polls(stdout: str) -> str:
    return "\n".join(line.split(" POLL")[0] for line in stdout.splitlines())


@pytest.mark.parametrize("program,np", [("colls.c", 2), ("p2p.c", 4), ("exitcode.c", 2),
                                        ("f_usempi.f90", 2), ("py_allreduce_lower.py", 2)])
def test_stdout_and_exit_code_unchanged(program, np, programs, tmp_path) -> None:
    if program.endswith(".py"):
        exe = [sys.executable, str(mpijobs.PROGRAMS / program)]
    else:
        exe = [str(programs[program])]
    bare = mpijobs.run(exe, np=np, traced=False)
    traced = mpijobs.run(exe, np=np, out=tmp_path / "trace")
    if program == "p2p.c":  # its polling counts vary from run to run: compare the rest
        bare.stdout, traced.stdout = without_polls(bare.stdout), without_polls(traced.stdout)
    if program.endswith(".py"):
        # Open MPI's output forwarding sometimes joins two ranks' Python lines into one,
        # bare or traced alike (seen 5-6 times in 20 runs of each): compare the records
        bare.stdout, traced.stdout = (
            "\n".join(re.findall(r"rank \d+ sum \d+", job.stdout)) for job in (bare, traced))
    same_job(bare, traced)
    no_mpiscope_output(traced)
    assert (tmp_path / "trace" / "traces.otf2").is_file()
    if program == "exitcode.c":
        assert bare.returncode == 3


def test_disable_is_pure_pass_through(programs, tmp_path) -> None:
    exe = [str(programs["colls.c"])]
    bare = mpijobs.run(exe, np=2, traced=False)
    off = mpijobs.run(exe, np=2, out=tmp_path / "trace", env={"MPISCOPE_DISABLE": "1"})
    same_job(bare, off)
    no_mpiscope_output(off)
    assert not (tmp_path / "trace").exists()  # not even an empty directory


@pytest.mark.parametrize("where", ["existing-file", "below-a-file"])
def test_unwritable_output_warns_once_and_job_runs(where, programs, tmp_path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the trace directory should go\n")
    out = blocker if where == "existing-file" else blocker / "trace"
    exe = [str(programs["exitcode.c"])]
    bare = mpijobs.run(exe, np=2, traced=False)
    traced = mpijobs.run(exe, np=2, out=out)
    same_job(bare, traced)
    warnings = [line for line in traced.stderr.splitlines() if "mpiscope" in line]
    assert len(warnings) == 1, traced.stderr
    assert warnings[0].startswith("mpiscope: warning:") and str(out) in warnings[0]
    assert "continuing untraced" in warnings[0]
    assert blocker.read_text().startswith("a file where")


def test_preload_into_launcher_and_non_mpi_program_is_harmless(programs, tmp_path) -> None:
    """LD_PRELOAD reaches mpirun, its daemons and a program that never calls MPI_Init:
    none of them may print, write a file or change the exit code."""
    exe = str(programs["nompi.c"])
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    lib = mpijobs.interposer_lib()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPISCOPE")}
    for cmd in ([exe], [*mpijobs.MPIRUN, "-np", "2", exe], ["mpirun", "--version"]):
        bare = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=60)
        traced = subprocess.run(cmd, cwd=cwd, env={**env, "LD_PRELOAD": lib},
                                capture_output=True, text=True, timeout=60)
        assert (traced.returncode, traced.stdout) == (bare.returncode, bare.stdout), cmd
        for bad in ("mpiscope", "ld.so", "undefined symbol", "rror while loading"):
            assert bad not in traced.stderr, (cmd, traced.stderr)
        if "-np" not in cmd:  # Open MPI's own report of a non-zero exit varies run to run
            assert traced.stderr == bare.stderr, cmd
    assert bare.returncode == 0 and "Open MPI" in bare.stdout
    assert list(cwd.iterdir()) == []


def salvaged(out: Path, rank: int, nranks: int, source: str) -> Counter:
    """The single-rank archive DIR/rank<N>/traces.otf2 the README documents for jobs
    that never reach MPI_Finalize: readable, every rank defined, only rank N has events."""
    archive = out / f"rank{rank}"
    t = tc.read_both(archive)
    tc.check_definitions(t, nranks)
    tc.check_structure(t)
    assert all(not t.events[r] for r in range(nranks) if r != rank)
    creator = [line for line in otf2_print(archive, "-A").splitlines()
               if line.startswith("Creator")]
    assert creator and creator[0].endswith("(salvaged: no MPI_Finalize)")
    assert tc.callsites(t, rank, "MPI_Init")[0].startswith(f"{source}:")
    return t.enters(rank)


def test_mpi_abort_as_documented(programs, tmp_path) -> None:
    """README: exit code is MPI_Abort's; the aborting rank writes a salvaged archive of
    its own events; so does every rank the launcher then stops with SIGTERM, up to the
    call it was blocked in; no DIR/traces.otf2."""
    exe = [str(programs["abort.c"])]
    bare = mpijobs.run(exe, np=2, traced=False, launcher=PATIENT, timeout=ABORT_TIMEOUT)
    out = tmp_path / "trace"
    traced = mpijobs.run(exe, np=2, out=out, launcher=PATIENT, timeout=ABORT_TIMEOUT)
    assert bare.returncode == traced.returncode == 7
    assert "rank 1 aborting" in traced.stdout
    assert not (out / "traces.otf2").exists()
    assert salvaged(out, 1, 2, "abort.c") == Counter({"MPI_Init": 1, "MPI_Allreduce": 1,
                                           "MPI_Barrier": 1, "MPI_Abort": 1})
    # rank 0 was waiting in MPI_Recv when it was killed: entered, never left
    t = tc.read_both(out / "rank0")
    assert t.enters(0) == Counter({"MPI_Init": 1, "MPI_Allreduce": 1, "MPI_Barrier": 1,
                                   "MPI_Recv": 1})
    assert t.of(0, "Leave")[-1] != t.of(0, "Enter")[-1]


def test_ranks_stopped_by_a_signal_salvage_and_die_of_it(tmp_path) -> None:
    """One rank is killed (SIGKILL: nothing to save); mpirun stops the others with
    SIGTERM, and each writes its events up to the call it was blocked in, then dies of
    the signal as it would untraced. A handler of the program's own is left alone."""
    src = tmp_path / "die.c"
    src.write_text(r"""
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
static void mine(int s) { (void)s; printf("own handler\n"); fflush(stdout); _exit(5); }
int main(int argc, char **argv) {
    int rank, x = 1, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 2 && getenv("OWN_HANDLER")) signal(SIGTERM, mine);
    for (int i = 0; i < 5; i++) MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 1) raise(SIGKILL);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
""")
    exe = tmp_path / "die"
    subprocess.run(["mpicc", "-g", "-o", str(exe), str(src)], check=True, timeout=120)
    bare = mpijobs.run([str(exe)], np=3, traced=False, launcher=PATIENT,
                       timeout=ABORT_TIMEOUT)
    out = tmp_path / "trace"
    traced = mpijobs.run([str(exe)], np=3, out=out, launcher=PATIENT,
                         timeout=ABORT_TIMEOUT)
    assert traced.returncode == bare.returncode != 0
    assert sorted(p.name for p in out.glob("rank*")) == ["rank0", "rank2"]
    for rank in (0, 2):
        t = tc.read_both(out / f"rank{rank}")
        assert t.enters(rank) == Counter({"MPI_Init": 1, "MPI_Allreduce": 5,
                                          "MPI_Barrier": 1})
    out = tmp_path / "own"
    traced = mpijobs.run([str(exe)], np=3, out=out, launcher=PATIENT,
                         timeout=ABORT_TIMEOUT,
                         env={"OWN_HANDLER": "1"})
    assert "own handler" in traced.stdout
    assert sorted(p.name for p in out.glob("rank*")) == ["rank0"]


def test_exit_without_finalize_as_documented(programs, tmp_path) -> None:
    """README: every rank that reaches exit() writes its own salvaged archive."""
    exe = [str(programs["nofinalize.c"])]
    # Open MPI stops the job when the first rank exits without MPI_Finalize: the other
    # may still be writing its archive when the SIGKILL comes (seen once at load 8;
    # PATIENT's grace: mpijobs.SALVAGE_GRACE_S)
    bare = mpijobs.run(exe, np=2, traced=False, launcher=PATIENT, timeout=ABORT_TIMEOUT)
    out = tmp_path / "trace"
    traced = mpijobs.run(exe, np=2, out=out, launcher=PATIENT, timeout=ABORT_TIMEOUT)
    same_job(bare, traced)
    assert not (out / "traces.otf2").exists()
    for rank in (0, 1):
        assert salvaged(out, rank, 2, "nofinalize.c") == Counter({"MPI_Init": 1, "MPI_Allreduce": 1,
                                                  "MPI_Barrier": 1})


@pytest.mark.parametrize("spec,kept", [
    ("MPI_Allreduce,MPI_Barrier", {"MPI_Init", "MPI_Finalize", "MPI_Irecv", "MPI_Isend",
                                   "MPI_Waitall"}),
    ("+MPI_Allreduce", {"MPI_Init", "MPI_Finalize", "MPI_Allreduce"}),
])
def test_function_filter(spec, kept, programs, tmp_path) -> None:
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["loop.c"]), "20"], np=2, out=out,
                      env={"MPISCOPE_FILTER": spec})
    assert job.returncode == 0, job.stderr
    t = tc.read_both(out)
    tc.check_structure(t)
    full = Counter({"MPI_Init": 1, "MPI_Finalize": 1, "MPI_Irecv": 20, "MPI_Isend": 20,
                    "MPI_Waitall": 20, "MPI_Allreduce": 20, "MPI_Barrier": 2})
    for r in range(2):
        assert t.enters(r) == Counter({f: n for f, n in full.items() if f in kept})
        if "MPI_Allreduce" not in kept:
            assert not t.of(r, "MpiCollectiveBegin")


def test_buffer_flushes_are_recorded_and_lose_nothing(programs, tmp_path: Path) -> None:
    iters = 4000
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["loop.c"]), str(iters)], np=2, out=out,
                      env={"MPISCOPE_BUFFER_SIZE": "256k", "MPISCOPE_CHUNK_SIZE": "256k"})
    assert job.returncode == 0, job.stderr
    t = read_python(out)  # large: the Python reader alone
    for r in range(2):
        assert len(t.of(r, "BufferFlush")) >= 1
        assert t.enters(r) == Counter({"MPI_Init": 1, "MPI_Finalize": 1, "MPI_Irecv": iters,
                                       "MPI_Isend": iters, "MPI_Waitall": iters,
                                       "MPI_Allreduce": iters, "MPI_Barrier": iters // 10})
        assert len(t.of(r, "MpiIrecv")) == len(t.of(r, "MpiIsendComplete")) == iters


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 512 KiB tmpfs: the trace cannot fit (needs root and mount permission)."""
    yield from mpijobs.tmpfs(tmp_path / "tiny", "512k")


def test_disk_full_warns_and_job_runs_untraced(programs, tiny_disk: Path) -> None:
    """README: the rank whose write fails stops recording; at Finalize the ranks agree
    and rank 0 prints one warning naming the reason; what was written is removed, so no
    half-written archive looks like a trace. (32 KiB and mpiscope run: test_faults.py)"""
    cmd = [str(programs["loop.c"]), "40000"]  # enough events to overflow 512 KiB
    small = {"MPISCOPE_BUFFER_SIZE": "256k", "MPISCOPE_CHUNK_SIZE": "256k"}
    bare = mpijobs.run(cmd, np=2, traced=False)
    out = tiny_disk / "trace"
    traced = mpijobs.run(cmd, np=2, out=out, env=small)
    same_job(bare, traced)
    warnings = [line for line in traced.stderr.splitlines() if "mpiscope" in line]
    assert warnings == [f"mpiscope: warning: trace not written to {out}: "
                        "No space left on device"], traced.stderr
    assert list(out.iterdir()) == []


def test_oversized_buffer_is_capped_not_fatal(programs, tmp_path: Path) -> None:
    """The raw buffer is faulted in at Init: a buffer bigger than the node can give is
    capped (one warning from rank 0), and the job and its trace are as usual."""
    cmd = [str(programs["loop.c"]), "200"]
    bare = mpijobs.run(cmd, np=2, traced=False)
    traced = mpijobs.run(cmd, np=2, out=tmp_path / "trace",
                         env={"MPISCOPE_BUFFER_SIZE": "1000000G"})
    same_job(bare, traced)
    warnings = [line for line in traced.stderr.splitlines() if "mpiscope" in line]
    assert len(warnings) == 1, traced.stderr
    assert warnings[0].startswith("mpiscope: warning: MPISCOPE_BUFFER_SIZE=1024000000 MiB")
    t = read_python(tmp_path / "trace")
    for r in range(2):
        assert t.enters(r)["MPI_Allreduce"] == 200


def test_forked_child_leaves_the_trace_alone(programs, tmp_path: Path) -> None:
    """A child fork()ed by a traced rank runs the atexit hook too: it must not salvage
    (nor move away) its parent's events; the parent's trace is complete."""
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["forkexit.c"])], np=2, out=out)
    assert job.returncode == 0, job.stderr
    assert not list(out.glob("rank*"))  # no salvaged archive from a child
    t = read_python(out)
    for r in range(2):
        assert t.enters(r) == Counter({"MPI_Init": 1, "MPI_Allreduce": 2, "MPI_Finalize": 1})
