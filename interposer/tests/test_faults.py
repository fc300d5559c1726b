"""The tracer never loses a trace silently and never breaks the job (issue 13, section 2).

Real faults, as users meet them: a full disk (a real 32 KiB tmpfs), a file-size limit
(`ulimit -f` on the ranks), a directory left by a job that died, a path with a quote and
a space, mistyped configuration. Each test checks what the user sees: the exit code and
stdout of the untraced job, the one mpiscope line on stderr, and which files exist.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from test_passthrough import ABORT_TIMEOUT, PATIENT

from mpiscope.archive import fom, outdir
from mpiscope_testing import REPO, mpijobs
from mpiscope_testing import tracechecks as tc

ARCHIVE = {"traces.otf2", "traces.def", "traces"}
# a rank's own ulimit: mpirun and its daemons keep theirs (PMIx's files exceed 16 KiB)
LIMITED = ["sh", "-c", 'ulimit -f 16; exec "$0" "$@"']
# Open MPI's shared-memory transport sizes a file far beyond 16 KiB: TCP keeps the untraced
# job alive under the limit, so there is an untraced exit code to compare with
NO_SHM = [*mpijobs.MPIRUN, "--mca", "btl", "self,tcp"]


def mpiscope_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("mpiscope")]


def entries(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def snapshot(d: Path) -> dict[str, bytes]:
    """Every file below d with its bytes: a moved run must arrive intact."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def mpiscope_run(out: Path, cmd: list[str], env: dict[str, str] | None = None,
                 timeout: float = mpijobs.TIMEOUT) -> mpijobs.Job:
    e = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MPISCOPE_OUT")}
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "run", "--out", str(out), "--",
                           *cmd], env={**e, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    return mpijobs.Job(proc.returncode, proc.stdout, proc.stderr, out)


def same_job(bare: mpijobs.Job, traced: mpijobs.Job) -> None:
    assert traced.returncode == bare.returncode, traced.stderr
    assert mpijobs.sorted_lines(traced.stdout) == mpijobs.sorted_lines(bare.stdout)


def analyzed_functions(trace: Path, tmp: Path) -> dict[str, int]:
    js = tmp / "analysis.json"
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(trace), "--json",
                           str(js)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return {f["name"]: f["calls"] for f in json.loads(js.read_text())["functions"]}


# ----------------------------------------------------------------- full disk

@pytest.fixture
def full_disk(tmp_path: Path):
    """A 32 KiB tmpfs, as in the issue: far too small for any trace."""
    yield from mpijobs.tmpfs(tmp_path / "T", "32k")


@pytest.fixture
def mount_point(tmp_path: Path):
    """A file system of its own: DIR.1 beside it is on another one."""
    yield from mpijobs.tmpfs(tmp_path / "M", "4m")


def test_full_disk_under_ld_preload_says_so_once_and_leaves_no_archive(programs, full_disk):
    """MPISCOPE_BUFFER_SIZE=16k: the disk fills in mid-run flushes, not only at Finalize."""
    cmd = [str(programs["loop.c"]), "300"]
    bare = mpijobs.run(cmd, np=2, traced=False)
    out = full_disk / "tr"
    traced = mpijobs.run(cmd, np=2, out=out, env={"MPISCOPE_BUFFER_SIZE": "16k"})
    same_job(bare, traced)
    assert mpiscope_lines(traced.stderr) == [
        f"mpiscope: warning: trace not written to {out}: No space left on device"]
    assert entries(out) == set()  # nothing half-written presented as a trace


def test_full_disk_under_mpiscope_run(programs, full_disk):
    cmd = [*mpijobs.MPIRUN, "-np", "2", str(programs["loop.c"]), "300"]
    bare = mpijobs.run(cmd, traced=False)
    out = full_disk / "tr"
    traced = mpiscope_run(out, cmd)
    same_job(bare, traced)  # the job's own exit code and stdout
    (line,) = mpiscope_lines(traced.stderr)
    assert line.startswith(f"mpiscope: warning: trace not written to {out}: "
                           "No space left on device"), traced.stderr
    assert "trace written" not in traced.stderr
    assert not entries(out) & ARCHIVE
    saved = out / "program-output.txt"
    if saved.exists():  # the copy beside the trace is whole, or absent and said so
        assert saved.read_text() == traced.stdout
    else:
        assert line.endswith(f"(the program's output was not saved to {saved}: "
                             "No space left on device)")


# ---------------------------------------------------------- file-size limit

@pytest.mark.parametrize("buffer", ["32M", "16k"])  # written at Finalize / in mid-run flushes
def test_file_size_limit_fails_the_trace_not_the_job(buffer, programs, tmp_path):
    cmd = [*LIMITED, str(programs["fsize.c"]), "2000"]
    bare = mpijobs.run(cmd, np=2, traced=False, launcher=NO_SHM)
    assert bare.returncode == 3, bare.stderr  # the untraced job lives with the limit
    out = tmp_path / "trace"
    traced = mpijobs.run(cmd, np=2, out=out, launcher=NO_SHM,
                         env={"MPISCOPE_BUFFER_SIZE": buffer})
    same_job(bare, traced)  # not SIGXFSZ (153)
    assert mpiscope_lines(traced.stderr) == [
        f"mpiscope: warning: trace not written to {out}: File too large"]
    assert entries(out) == set()


def test_the_programs_own_sigxfsz_is_left_alone(programs, tmp_path):
    """The guard around the tracer's writes must not outlive them: the program's own
    write past the limit still ends it by SIGXFSZ, as untraced."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cmd = [*LIMITED, str(programs["fsize.c"]), "2000", "100000"]
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MPISCOPE_OUT")}
    bare = subprocess.run([*NO_SHM, "-np", "2", *cmd], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=mpijobs.TIMEOUT)
    traced = subprocess.run([*NO_SHM, "-np", "2", *cmd], cwd=cwd, capture_output=True,
                            text=True, timeout=mpijobs.TIMEOUT,
                            env={**env, "LD_PRELOAD": mpijobs.interposer_lib(),
                                 "MPISCOPE_OUT": str(tmp_path / "trace"),
                                 "MPISCOPE_BUFFER_SIZE": "16k"})
    assert bare.returncode == traced.returncode != 3, traced.stderr
    assert "File size limit exceeded" in bare.stderr and "File size limit exceeded" in traced.stderr


# ------------------------------------------------- a directory used before

def test_retrace_into_a_died_jobs_directory_moves_it_aside(programs, tmp_path):
    out = tmp_path / "trace"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file\n")
    died = mpijobs.run([str(programs["abort.c"])], np=2, out=out, launcher=PATIENT,
                       timeout=ABORT_TIMEOUT)
    assert died.returncode == 7
    before = snapshot(out)
    assert {"rank0/traces.otf2", "rank1/traces.otf2"} <= set(before)
    del before["notes.txt"]

    # bare LD_PRELOAD: the interposer moves the earlier run into DIR.1, whole
    job = mpijobs.run([str(programs["loop.c"]), "25"], np=2, out=out)
    assert job.returncode == 0, job.stderr
    assert mpiscope_lines(job.stderr) == [
        f"mpiscope: the earlier run in {out} was moved to {out}.1"]
    assert snapshot(Path(f"{out}.1")) == before
    assert entries(out) == ARCHIVE | {"notes.txt"}  # the user's file stays where it was
    functions = analyzed_functions(out, tmp_path)
    assert functions["MPI_Allreduce"] == 2 * 25 and "MPI_Abort" not in functions

    # `mpiscope run`: moved before the job starts, so its program-output.txt is the new
    # job's; the interposer then finds a clean directory and says nothing
    second = snapshot(out)
    del second["notes.txt"]
    cmd = [*mpijobs.MPIRUN, "-np", "2", str(programs["loop.c"]), "5"]
    job = mpiscope_run(out, cmd)
    assert job.returncode == 0, job.stderr
    assert mpiscope_lines(job.stderr) == [
        f"mpiscope: the earlier run in {out} was moved to {out}.2",
        f"mpiscope: trace written to {out}/traces.otf2"]
    assert snapshot(Path(f"{out}.2")) == second
    assert snapshot(Path(f"{out}.1")) == before
    assert entries(out) == ARCHIVE | {"notes.txt", "program-output.txt"}
    assert (out / "program-output.txt").read_text() == job.stdout
    assert analyzed_functions(out, tmp_path)["MPI_Allreduce"] == 2 * 5


def test_an_earlier_run_that_cannot_be_moved_is_left_alone(programs, mount_point, tmp_path):
    """DIR is a mount point: rename() cannot take its files to DIR.1. Never deleted,
    never mixed: the job runs untraced, with one warning saying why."""
    out = mount_point
    job = mpijobs.run([str(programs["loop.c"]), "3"], np=2, out=out)
    assert job.returncode == 0, job.stderr
    before = snapshot(out)
    for run in ("bare", "mpiscope run"):
        if run == "bare":
            job = mpijobs.run([str(programs["exitcode.c"])], np=2, out=out)
        else:
            job = mpiscope_run(out, [*mpijobs.MPIRUN, "-np", "2", str(programs["exitcode.c"])])
        assert job.returncode == 3
        assert mpiscope_lines(job.stderr) == [
            f"mpiscope: warning: cannot move the earlier run in {out} aside (Invalid "
            "cross-device link); continuing untraced"], job.stderr
        assert snapshot(out) == before
        assert not Path(f"{out}.1").exists()


@pytest.mark.parametrize("name", ["it's a trace", 'a\nnew line, "$HOME" and `ls`'])
def test_a_quote_and_a_space_in_the_path(name, programs, tmp_path):
    """Twice by LD_PRELOAD, then by `mpiscope run`: every run is where it should be."""
    out = tmp_path / name
    for iterations in (7, 4):
        job = mpijobs.run([str(programs["loop.c"]), str(iterations)], np=2, out=out)
        assert job.returncode == 0, job.stderr
    t = tc.read_both(Path(f"{out}.1"))  # the first run, moved aside whole
    assert t.enters(0)["MPI_Allreduce"] == 7
    t = tc.read_both(out)
    tc.check_definitions(t, 2)
    assert t.enters(0)["MPI_Allreduce"] == 4
    job = mpiscope_run(out, [*mpijobs.MPIRUN, "-np", "2", str(programs["loop.c"]), "3"])
    assert job.returncode == 0, job.stderr
    assert tc.read_both(Path(f"{out}.2")).enters(1)["MPI_Allreduce"] == 4
    assert tc.read_both(out).enters(1)["MPI_Allreduce"] == 3


def test_a_path_longer_than_path_max_makes_no_directory(programs, untraced_loop, tmp_path):
    """A path no system call takes whole (ENAMETOOLONG) was cut to PATH_MAX and another
    directory created under it. Now: one line, no directory, the job as untraced; bare
    LD_PRELOAD and `mpiscope run` alike."""
    top = tmp_path / "long"
    out = top.joinpath(*["d" * 240] * 18)  # 4300+ bytes, each name within NAME_MAX
    assert len(str(out)) > 4096
    cmd = [str(programs["loop.c"]), "20"]
    for job in (mpijobs.run(cmd, np=2, out=out),
                mpiscope_run(out, [*mpijobs.MPIRUN, "-np", "2", *cmd])):
        same_job(untraced_loop, job)
        (line,) = mpiscope_lines(job.stderr)
        assert line.startswith(f"mpiscope: warning: cannot write trace directory {top}/")
        assert line.endswith(": File name too long; continuing untraced")
        assert not top.exists()


def test_a_tee_of_the_new_run_stays_beside_its_trace(programs, tmp_path):
    """README's `| tee DIR/program-output.txt` truncates that file for the new run before
    MPI_Init: the earlier run's trace moves aside, the new copy stays beside the new
    trace (the earlier copy is tee's to overwrite, as without mpiscope)."""
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["loop.c"]), "7"], np=2, out=out)
    assert job.returncode == 0, job.stderr
    (out / "program-output.txt").write_text("the earlier run's output\n")
    for p in out.iterdir():  # an earlier run: a minute ago
        os.utime(p, (p.stat().st_atime - 60, p.stat().st_mtime - 60))
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MPISCOPE_OUT")}
    tee = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "${@:2}" | tee "$1/program-output.txt"', "tee", str(out),
         *mpijobs.MPIRUN, "-np", "2", str(programs["loop.c"]), "4"],
        env={**env, "LD_PRELOAD": mpijobs.interposer_lib(), "MPISCOPE_OUT": str(out)},
        capture_output=True, text=True, timeout=mpijobs.TIMEOUT)
    assert tee.returncode == 0, tee.stderr
    assert (out / "program-output.txt").read_text() == tee.stdout
    assert entries(Path(f"{out}.1")) == ARCHIVE
    assert tc.read_both(out).enters(0)["MPI_Allreduce"] == 4
    assert tc.read_both(Path(f"{out}.1")).enters(0)["MPI_Allreduce"] == 7


def test_the_file_lists_of_interposer_and_mpiscope_run_agree():
    header = (REPO / "interposer" / "src" / "outdir.h").read_text()
    body = re.search(r"#define MPS_RUN_FILES\s*((?:[^\n]*\\\n)*[^\n]*)", header).group(1)
    assert tuple(re.findall(r'"([^"]+)"', body)) == outdir.RUN_FILES
    prefix = re.search(r'#define MPS_RUN_RANK_PREFIX "([^"]+)"', header).group(1)
    assert prefix == outdir.RANK_PREFIX
    output = re.search(r'#define MPS_RUN_OUTPUT "([^"]+)"', header).group(1)
    assert output == fom.OUTPUT_FILE and output in outdir.RUN_FILES


# ------------------------------------------------------- configuration

@pytest.fixture(scope="module")
def untraced_loop(programs) -> mpijobs.Job:
    return mpijobs.run([str(programs["loop.c"]), "20"], np=2, traced=False)


NOT_A_SIZE = ("is not a size (a whole number of bytes, optionally with a k, M or G suffix); "
              "using the default")


@pytest.mark.parametrize("value", ["abc", "-1", "0", "1T", "1e20", "12xyz"])
def test_a_bad_buffer_size_is_said_once_and_the_default_used(value, programs, untraced_loop,
                                                             tmp_path):
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["loop.c"]), "20"], np=2, out=out,
                      env={"MPISCOPE_BUFFER_SIZE": value})
    same_job(untraced_loop, job)
    expected = ("MPISCOPE_BUFFER_SIZE=0 is below 1; using the default 32M"
                if value == "0" else f"MPISCOPE_BUFFER_SIZE={value} {NOT_A_SIZE} 32M")
    assert mpiscope_lines(job.stderr) == [f"mpiscope: warning: {expected}"]  # rank 0 only
    t = tc.read_both(out)
    assert t.enters(1)["MPI_Allreduce"] == 20


def test_each_bad_setting_is_said_once_and_unknown_filter_names_ignored(programs,
                                                                         untraced_loop,
                                                                         tmp_path):
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["loop.c"]), "20"], np=2, out=out, env={
        "MPISCOPE_CHUNK_SIZE": "64k", "MPISCOPE_HASH_BYTES": "lots",
        "MPISCOPE_FILTER": "MPI_Barrier,MPI_Barier,MPI_Foo"})
    same_job(untraced_loop, job)
    assert sorted(mpiscope_lines(job.stderr)) == sorted([
        "mpiscope: warning: MPISCOPE_CHUNK_SIZE=64k is outside 256k..16M; using the "
        "default 1M",
        f"mpiscope: warning: MPISCOPE_HASH_BYTES=lots {NOT_A_SIZE} 64",
        "mpiscope: warning: MPISCOPE_FILTER: ignoring MPI_Barier, MPI_Foo: not MPI "
        "functions mpiscope traces"])
    t = tc.read_both(out)
    for r in range(2):  # the known name still applies
        assert t.enters(r) == Counter({"MPI_Init": 1, "MPI_Finalize": 1, "MPI_Irecv": 20,
                                       "MPI_Isend": 20, "MPI_Waitall": 20,
                                       "MPI_Allreduce": 20})


def test_a_switch_with_a_value_it_does_not_know_is_said_once(programs, tmp_path):
    """`MPISCOPE_LIVE=off` (it knows 0 and 1) or a mistyped clock were taken silently:
    rank 0 alone says so (4 ranks, one line each), the default applies, the job is as
    untraced."""
    cmd = [str(programs["loop.c"]), "20"]
    bare = mpijobs.run(cmd, np=4, traced=False)
    out = tmp_path / "trace"
    job = mpijobs.run(cmd, np=4, out=out, env={"MPISCOPE_LIVE": "off",
                                               "MPISCOPE_CLOCK": "rdtsc"})
    same_job(bare, job)
    assert sorted(mpiscope_lines(job.stderr)) == [
        "mpiscope: warning: MPISCOPE_CLOCK=rdtsc is neither tsc nor monotonic; using the "
        "default (tsc where the kernel's clocksource is tsc)",
        "mpiscope: warning: MPISCOPE_LIVE=off is neither 0 nor 1; using the default "
        "(1: crash-safe live log on)"]
    assert entries(out) == ARCHIVE
    assert tc.read_both(out).enters(3)["MPI_Allreduce"] == 20
    # the values it knows are taken without a word
    again = mpijobs.run(cmd, np=4, out=tmp_path / "again",
                        env={"MPISCOPE_LIVE": "1", "MPISCOPE_CLOCK": "monotonic"})
    same_job(bare, again)
    assert mpiscope_lines(again.stderr) == []
